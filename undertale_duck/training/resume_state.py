"""The one schema of a saved training position (a ChunkedSampler's and a DataModule's state).

A state is checked before anything in it is used: a state from a checkpoint may come from
another version, another run or a careless edit, and a malformed one must be refused with
one clear error, never resumed over other data nor failing with a foreign exception.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ArgumentError

#: The format written by :meth:`ChunkedSampler.state_dict` (the ``version`` key).
STATE_VERSION = 1


class SamplerState(BaseModel):
    """A ChunkedSampler's saved position and the settings its order depends on.

    Every key of the current version is required, in strict types (no numpy values, no
    tensors, no strings of numbers). Keys this version does not know are kept and ignored
    (a later version's state still resumes where it can). A state without ``version`` was
    saved before versions existed; it is accepted by one explicit rule: it must hold every
    key those versions wrote (``drop_last``, ``before`` and ``tail``, which they lacked, take
    the values their sampler used), so a state stripped to its position (``{"epoch",
    "consumed"}``) is refused rather than resumed over other data.
    """

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    version: int = Field(ge=1)
    epoch: int = Field(ge=0)
    consumed: int = Field(ge=0)
    length: int = Field(ge=0)
    batch: int = Field(ge=1)
    workers: int = Field(ge=1)
    ranks: int = Field(ge=1)
    shuffle: bool
    seed: int
    mix: int = Field(ge=1)
    chunk: int = Field(ge=1)
    data: str | None
    drop_last: bool
    #: Positions consumed under earlier topologies of this epoch (elastic resume).
    before: list[dict[str, Any]]
    #: Rows of the epoch this topology leaves out (its tail).
    tail: int = Field(ge=0)
    #: Hash of the shuffle units (the dataset's windows) of a shuffled sequence; None
    #: without shuffle, and in states saved before it was recorded (then not checked).
    units: str | None = None
    #: The rank that saved it: with ``drop_last=False`` its share may be a row smaller than
    #: rank 0's, and a count that ends it ends the epoch. None in states saved before it was
    #: recorded (read as rank 0's, the largest share).
    rank: int | None = Field(default=None, ge=0)
    #: Batches a trainer counted into this epoch before its first one (Lightning restored at
    #: the previous epoch's last batch; ``ChunkedSampler.carried``). 0 in states saved before
    #: it was recorded.
    carried: int = Field(default=0, ge=0)


#: What a state saved before versions existed lacks, and what its sampler then did: it
#: dropped the tail, and knew no earlier topology.
_BEFORE_VERSIONS = {"drop_last": True, "before": [], "tail": 0}


def check_sampler_state(state: object, what: str = "a ChunkedSampler state") -> dict[str, Any]:
    """Validate a saved sampler state (:class:`SamplerState`); return it as a plain dict.

    Args:
        state: The state as loaded from a checkpoint.
        what: How the error names it.

    Returns:
        The state, with ``version`` filled in for a state saved before versions existed.

    Raises:
        ArgumentError: If it is not a dict or does not match the schema, naming the keys.
    """
    if not isinstance(state, dict):
        raise ArgumentError(
            f"{what} must be a dict from state_dict(), got {type(state).__name__}"
        )
    if "version" not in state:  # saved before versions existed: its keys, then version 1's
        state = {**_BEFORE_VERSIONS, **state, "version": 1}
    try:
        checked = SamplerState.model_validate(state)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'state'}: {e['msg']}"
            for e in exc.errors()[:6]
        )
        raise ArgumentError(
            f"cannot resume: {what} does not match the saved-state schema (version "
            f"{STATE_VERSION}): {problems}; pass a state saved by state_dict()"
        ) from None
    if checked.version > STATE_VERSION:
        raise ArgumentError(
            f"cannot resume: {what} has version {checked.version}, newer than this "
            f"undertale_duck reads ({STATE_VERSION}); upgrade undertale_duck"
        )
    return checked.model_dump()


def check_module_state(state: object) -> dict[str, Any]:
    """Validate a DataModule's saved state (``{}`` or ``{"train": <sampler state>}``).

    Returns:
        The state with its sampler state checked.

    Raises:
        ArgumentError: If it is not a dict, its ``train`` entry is not a sampler state, it
            is a sampler's state itself (not under ``train``), or it has keys besides
            ``train``.
    """
    if not isinstance(state, dict):
        raise ArgumentError(
            f"a DataModule state must be a dict from state_dict(), got {type(state).__name__}"
        )
    train = state.get("train")
    if train is None and "train" in state:
        # no state_dict() writes it (before training it leaves 'train' out): read as {}, the
        # next fit would restart the epoch in silence
        raise ArgumentError(
            "the DataModule's 'train' state is None; DataModule.state_dict() gives "
            "{'train': <the training loader's state>} or {} (before training): pass one of those"
        )
    if train is None and {"epoch", "consumed"} & set(state):
        # a loader's or sampler's own state: ignored, training would restart from scratch
        raise ArgumentError(
            "a DataModule state is {'train': <the training loader's state>} (or {}), as "
            "DataModule.state_dict() returns it; this one has no 'train' key but holds a "
            f"loader's keys ({', '.join(sorted(map(str, state))[:6])}); pass "
            "{'train': state} instead"
        )
    unknown = sorted(map(str, set(state) - {"train"}))
    if unknown:
        # a state of another object (or a misspelt key) was read as {}: the resumed fit
        # restarted the epoch in silence and trained its first batches again
        raise ArgumentError(
            "a DataModule state holds only 'train' (DataModule.state_dict() gives "
            "{'train': <the training loader's state>} or {}); this one also has "
            f"{', '.join(repr(k) for k in unknown[:6])}: pass the dict state_dict() returned"
        )
    if train is None or (isinstance(train, dict) and not train):
        return {}
    return {**state, "train": check_sampler_state(train, "the DataModule's 'train' state")}


__all__ = ["STATE_VERSION", "SamplerState", "check_module_state", "check_sampler_state"]
