"""One-line errors for keyword arguments we do not take, torch- and Lightning-style names first."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Iterable
from typing import ParamSpec, TypeVar

from ..errors import ArgumentError

P = ParamSpec("P")
R = TypeVar("R")

#: DataLoader spellings and what this library calls them (None: the loader's business).
TORCH_STYLE: dict[str, str | None] = {
    "num_workers": "workers",
    "batch_size": "batch",
    "collate_fn": "collator",
    "sampler": None,
    "batch_sampler": None,
    "drop_last": None,
}

_LOADER = (
    "the loader's: load(path, schema, collator, batch, workers=...) or "
    "DataLoader(dataset, batch_size=..., num_workers=...)"
)


def refuse_unknown(where: str, given: Iterable[str], accepted: Collection[str]) -> None:
    """Raise for the first keyword in ``given`` that ``accepted`` lacks, naming the fix.

    Args:
        where: What was called, as the user wrote it (``"load()"``).
        given: The keyword names passed.
        accepted: The keyword names it takes.

    Raises:
        ArgumentError: One line: the name, and ours when it is a torch-style spelling.
    """
    for name in given:
        if name in accepted:
            continue
        ours = TORCH_STYLE.get(name, "")
        if ours and ours in accepted:
            raise ArgumentError(f"{where} takes {ours}=, not {name}= (the DataLoader's spelling)")
        if name in TORCH_STYLE:
            raise ArgumentError(f"{where} takes no {name}=: batches and workers are {_LOADER}")
        raise ArgumentError(
            f"{where} got an unknown keyword {name}=; it takes {', '.join(sorted(accepted))}"
        )


def guard(where: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so an unknown keyword raises :func:`refuse_unknown`'s error.

    The wrapper keeps the function's signature (``inspect.signature`` follows it).

    Args:
        where: The name the user called, as in the message (``"ParquetDataset()"``).

    Returns:
        The decorator.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        parameters = inspect.signature(function).parameters
        accepted = frozenset(
            name
            for name, p in parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name != "self"
        )

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if not accepted.issuperset(kwargs):
                refuse_unknown(where, kwargs, accepted)
            return function(*args, **kwargs)

        return wrapper

    return decorate
