"""The windows a sequence of rows reads, worked out row by row (the tests' reference)."""

from __future__ import annotations

from collections.abc import Iterable

from undertale_duck import ParquetDataset


def first_use(ds: ParquetDataset, rows: Iterable[int]) -> list[int]:
    """The windows of ``rows`` in the order each is first read."""
    seen: list[int] = []
    for i in rows:
        if ds.window_of(i) not in seen:
            seen.append(ds.window_of(i))
    return seen
