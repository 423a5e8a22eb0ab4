"""Saved training positions that no state_dict() writes: refused, never resumed elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import datagen

from undertale_duck import ArgumentError, load

ROWS = 120
BATCH = 8


def ids(rows: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"][4:]) for r in rows]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("probe_resume")
    datagen.write_shards(root, [50, 70], row_group_size=[10, 16])
    return root


def _state_after(data: Path, steps: int, **options: Any) -> dict[str, Any]:
    loader = load(data, None, ids, BATCH, shuffle=True, seed=2, **options)
    batches = iter(loader)
    for _ in range(steps):
        next(batches)
    return loader.state_dict()


def _rest(data: Path, state: dict[str, Any], **options: Any) -> tuple[int, list[int]]:
    loader = load(data, None, ids, BATCH, shuffle=True, seed=2, **options)
    loader.load_state_dict(state)
    return loader.sampler.epoch, [i for batch in loader for i in batch]


@pytest.mark.parametrize("consumed", [ROWS + 1, 10**9])
def test_a_count_beyond_the_share_is_refused_not_read_as_the_epochs_end(
    data: Path, consumed: int
) -> None:
    state = _state_after(data, 3)
    # the share's own count is a state saved at the epoch's end: the next epoch, whole
    epoch, rest = _rest(data, {**state, "consumed": ROWS})
    assert epoch == 1 and sorted(rest) == list(range(ROWS))
    # beyond it no state_dict() writes: it once skipped the epoch's rest in silence
    with pytest.raises(ArgumentError, match=f"{consumed} samples of epoch 0 .* more than the "
                                            f"{ROWS} of rank 0's share"):
        _rest(data, {**state, "consumed": consumed})


def test_a_count_beyond_a_rank_share_of_two_ranks_is_refused(data: Path) -> None:
    state = _state_after(data, 2, ranks=2, rank=1, workers=2)
    assert state["consumed"] == 2 * BATCH and state["rank"] == 1
    with pytest.raises(ArgumentError, match="more than the 60 of rank 1's share"):
        _rest(data, {**state, "consumed": 61}, ranks=2, rank=1, workers=2)


def test_an_earlier_topologys_count_beyond_its_share_is_refused(data: Path) -> None:
    # saved on two ranks after 16 samples each, resumed on one: 'before' records the two ranks
    two = _state_after(data, 2, ranks=2, rank=0)
    one = load(data, None, ids, BATCH, shuffle=True, seed=2)
    one.load_state_dict(two)
    state = one.state_dict()
    assert state["before"] == [{"ranks": 2, "workers": 1, "batch": BATCH, "drop_last": True,
                                "consumed": 2 * BATCH}]
    _, rest = _rest(data, state)
    assert len(rest) == ROWS - 4 * BATCH
    part = state["before"][0]
    with pytest.raises(ArgumentError, match="'before' entry says 61 samples"):
        _rest(data, {**state, "before": [{**part, "consumed": 61}]})


@pytest.mark.parametrize(
    ("part", "words"),
    [
        ({"consumed": 16}, "lacks ranks, workers, batch"),
        ({"consumed": 16, "ranks": 2, "workers": 1}, "lacks batch"),
        ({"ranks": 2, "workers": 1, "batch": 8}, "lacks consumed"),
        ({"consumed": 16, "ranks": 2, "workers": 1, "batch": 8, "drop_last": "no"},
         "drop_last='no'"),
    ],
)
def test_an_earlier_topology_missing_its_settings_is_refused(
    data: Path, part: dict[str, Any], words: str
) -> None:
    state = _state_after(data, 1)
    # a KeyError from the sampler, or drop_last="no" read as True, before
    with pytest.raises(ArgumentError, match=words):
        _rest(data, {**state, "before": [part]})


def test_a_module_state_whose_train_entry_is_none_is_refused(data: Path) -> None:
    # it was read as {} (nothing saved): the resumed fit restarted the epoch in silence
    from undertale_duck import DataModule

    module = DataModule(data, None, None, ids, BATCH, seed=2)
    with pytest.raises(ArgumentError, match="'train' state is None"):
        module.load_state_dict({"train": None})
    module.load_state_dict({})  # before training: nothing to restore
    assert module.state_dict() == {}


@pytest.mark.parametrize("extra", [{"training": None}, {"val": 1}, {3: "x"}, {"Train": None}])
@pytest.mark.parametrize("with_train", [False, True])
def test_a_module_state_with_keys_besides_train_is_refused(
    data: Path, extra: dict[Any, Any], with_train: bool
) -> None:
    # a misspelt key or another object's state was read as {}: the resumed fit restarted
    # the epoch in silence and trained its first batches again
    from undertale_duck import DataModule

    module = DataModule(data, None, None, ids, BATCH, seed=2)
    state = {**extra}
    if with_train:
        state["train"] = _state_after(data, 1)
    with pytest.raises(ArgumentError, match=r"holds only 'train'.*also has") as caught:
        module.load_state_dict(state)
    assert repr(next(iter(extra))) in str(caught.value)
    assert module.state_dict() == {}  # nothing was taken from it
    if with_train:  # the same state without the extra key is taken
        module.load_state_dict({"train": state["train"]})
        assert module.state_dict() == {"train": state["train"]}


@pytest.mark.parametrize("make", ["sampler", "load"])
def test_ranks_without_rank_outside_torch_distributed_is_said(data: Path, make: str) -> None:
    # every process took rank 0 of 2 in silence: the same share trained twice, the other
    # never; rank 0 stays (undertale's original dataset module), with a warning
    from undertale_duck import ChunkedSampler

    with pytest.warns(UserWarning, match="ranks=2 without rank=.*rank 0's share"):
        if make == "sampler":
            got = list(ChunkedSampler(range(ROWS), BATCH, 0, ranks=2))
        else:
            got = [i for batch in load(data, None, ids, BATCH, ranks=2) for i in batch]
    assert got == list(ChunkedSampler(range(ROWS), BATCH, 0, ranks=2, rank=0))
    # one rank, or a rank given, as before
    assert len(ChunkedSampler(range(ROWS), BATCH, 0, ranks=1)) == ROWS
    halves = [list(ChunkedSampler(range(ROWS), BATCH, 0, ranks=2, rank=r)) for r in (0, 1)]
    assert sorted(halves[0] + halves[1]) == list(range(ROWS))


class _WithEpochSize:
    """A dataset of the user's that names something of its own ``epoch_size``."""

    epoch_size = 40

    def __len__(self) -> int:
        return ROWS

    def __getitem__(self, index: int) -> int:
        return index


def test_a_datasets_own_epoch_size_does_not_set_the_samplers_length() -> None:
    # it was read as a Mixture's epoch: 40 of the 120 rows served, the rest never
    from undertale_duck import ChunkedSampler

    sampler = ChunkedSampler(_WithEpochSize(), BATCH, 0)
    assert len(sampler) == ROWS and sorted(sampler) == list(range(ROWS))


def test_a_given_count_beyond_the_epoch_is_refused_not_saved_as_its_end() -> None:
    # a count over all epochs (global step x batch) was cut to the share: the state said
    # the epoch had ended, and the resumed run skipped its rest in silence
    from undertale_duck import ChunkedSampler

    sampler = ChunkedSampler(range(ROWS), BATCH, 2, shuffle=True, seed=1, chunk=16)
    sampler.set_epoch(2)
    assert sampler.state_dict(consumed=ROWS)["consumed"] == ROWS  # the epoch's end: allowed
    with pytest.raises(ArgumentError, match=f"consumed={2 * ROWS + 8} is more than the {ROWS} "
                                            "samples this rank has in epoch 2"):
        sampler.state_dict(consumed=2 * ROWS + 8)
