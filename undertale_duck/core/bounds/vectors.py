"""Bound what DuckDB's result vectors of ad hoc SQL take before the query runs (dictionary bombs).

DuckDB hands a result to Arrow a vector (2048 rows) at a time, per thread plus one
buffered, and builds each vector whole whatever the batch size: a string repeated by every
row of a tiny file's dictionary page is copied 2048 times per vector (a 256 KiB string:
1.5 GiB on 2 cores). Neither DuckDB's ``memory_limit`` nor the result's byte count sees it
before it is built. So before a query over ``dataset`` runs, the string and binary columns
that can reach its result are weighed per shard, without decoding them:

1. The page headers of each row group (:mod:`.weigh`): any 2048 consecutive
   values of a top-level column decode to at most the pages they touch allow (a dictionary
   page: those values times its longest entry; a plain page: its size). A nested column's
   vector may hold every value of its row group, so it counts them all.
2. Only for row groups over their share of the budget, the exact bytes of each vector:
   pyarrow reads the column as dictionary indices and entries (never the repeated values)
   and sums each 2048-row block's lengths.

A query whose ``(threads + 1)`` vectors of the columns it may return pass the budget is
refused with :class:`MemoryBudgetError` naming the shard and the column. A top-level column
counts only when the result holds string or binary values (``strlen(col)`` is computed
without copying the strings); a nested one whenever the query names it (DuckDB copies nested
strings as it scans them). Shards in object storage are weighed by range reads, never
downloaded.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...common.arrays import numpy_of
from ...common.sizes import MIB, format_size
from ...errors import MemoryBudgetError, SourceError
from ..parquet import Page
from ..source import Shard
from . import weights
from .decoded import VECTOR_ROWS, length_function
from .weigh import (
    VALUE_BYTES,
    leaf_pages,
    nested_text,
    opened,
    read_as_dictionaries,
    text_leaves,
    value_bytes,
)

#: Column bounds under this are not refined to exact bytes (the bound is cheap and close).
REFINE_FROM = 1 * MIB
#: The smallest budget checked (as the smallest result ``ds.sql`` collects): a tiny
#: ``memory`` still answers queries over ordinary strings.
MIN_BUDGET = 64 * MIB
#: What a vector counts as when it cannot be weighed within the budget (over any budget).
UNKNOWN = 1 << 62


class VectorBound:
    """What one DuckDB vector of each string and binary column of a dataset's shards takes.

    Computed per shard and column on first need and kept (keyed by the shard's size and
    modification time).

    Args:
        schema: The shards' Arrow schema.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.top = {c.lower(): c for c in schema.names if length_function(schema.field(c).type)}
        self.nested = {c.lower(): c for c in schema.names if nested_text(schema.field(c).type)}
        # (path, size, mtime, column) -> its walked pages (a bound for any vector size)
        self._pages: dict[tuple[str, int, int, str], GroupPages] = {}
        # (path, size, mtime, column) -> exact bytes of its largest vector, or None
        self._exact: dict[tuple[str, int, int, str], int | None] = {}

    def columns(self, names: frozenset[str] | None, text: bool) -> list[str]:
        """The columns a query may copy into its result vectors.

        Args:
            names: What :func:`.query_shape.referenced` found (None: every column).
            text: Whether the result can hold string or binary values
                (:func:`.query_shape.text_result`).

        Returns:
            The nested string columns it names, and the top-level ones if ``text``.
        """
        kinds = [self.nested, self.top] if text else [self.nested]
        return [c for kind in kinds for low, c in kind.items() if names is None or low in names]

    def check(
        self,
        shards: Sequence[Shard],
        columns: Sequence[str],
        limit: int,
        threads: int,
        rows: int = VECTOR_ROWS,
        *,
        what: str = "the query may return",
        hint: str = "",
        repeated: bool = False,
    ) -> None:
        """Refuse a query whose result vectors of ``columns`` would pass ``limit``.

        Args:
            shards: The shards the query reads (local, or in object storage).
            columns: The columns the query may copy (:meth:`columns`).
            limit: The memory budget in bytes (0: no check; at least :data:`MIN_BUDGET`).
            threads: DuckDB's threads for the query.
            rows: The most rows of a result vector (:func:`.query_shape.result_rows`).
            what: How the message starts, before the column's name.
            hint: What to do, ending the message (by default: raise the budget, lower the
                threads, or leave the column out of the query).
            repeated: Any one value may fill every row of a vector (a side table's, which
                a join repeats): its largest value (bounded by the largest vector) counts
                ``rows`` times.

        Raises:
            MemoryBudgetError: Naming the shard and column whose vectors pass the budget.
        """
        if not columns or limit <= 0:
            return
        limit = max(limit, MIN_BUDGET)
        copies = max(1, threads) + 1
        scan = 1 if repeated else rows  # the bound of one value, then repeated
        times = rows if repeated else 1
        for shard in shards:
            sizes = {c: times * self._bound(shard, c, scan) for c in columns}
            if copies * sum(sizes.values()) <= limit:
                continue
            exact = {}
            for c, size in sizes.items():
                unknown = size >= UNKNOWN
                # the exact weight of the largest aligned 2048-row block also bounds a
                # shorter vector (a LIMIT's: a slice of one scan vector)
                weigh = unknown or size > REFINE_FROM
                refined = self._refine(shard, c, limit) if weigh else None
                exact[c] = refined is not None
                if refined is not None:
                    sizes[c] = times * min(refined, size // times if repeated else refined)
                elif unknown:
                    # neither the page headers nor pyarrow can read it: DuckDB reads the
                    # shard and reports what it finds
                    sizes[c] = 0
            need = copies * sum(sizes.values())
            if need > limit:
                top = set(self.top.values())
                raise _refusal(shard, sizes, exact, (copies, need, limit, rows), top, (what, hint))

    # ---------------------------------------------------------------- bounds
    def _key(self, shard: Shard, column: str) -> tuple[str, int, int, str]:
        return (shard.path, shard.size, shard.mtime_ns, column)

    def _bounds(self, shard: Shard, column: str, rows: int) -> list[int | None]:
        """Per row group, the page-header bound of one vector (None: pages not followed)."""
        key = self._key(shard, column)
        if key not in self._pages:
            self._pages[key] = _group_pages(shard, column)
        return _group_bounds(self._pages[key], column in self.top.values(), rows)

    def _bound(self, shard: Shard, column: str, rows: int = VECTOR_ROWS) -> int:
        """The page-header bound of one vector of ``column`` in ``shard`` (its worst row group)."""
        bounds = self._bounds(shard, column, rows)
        if not bounds:
            return 0
        # a row group whose pages cannot be followed counts as over any budget until weighed
        return max(b if b is not None else UNKNOWN for b in bounds)

    def _refine(self, shard: Shard, column: str, limit: int) -> int | None:
        """The exact bytes of the column's largest vector, or None (the bound stands).

        :data:`UNKNOWN` when its values are too many to weigh within ``limit``; None (also
        kept as such) when pyarrow cannot read them.
        """
        key = self._key(shard, column)
        if key not in self._exact:
            found = weights.load(shard, column)
            if found is None:
                found = _exact(shard, column, self._bounds(shard, column, VECTOR_ROWS), limit)
                if found is not None and found < UNKNOWN:
                    weights.save(shard, column, found)
            self._exact[key] = found
        return self._exact[key]


def _refusal(
    shard: Shard,
    sizes: dict[str, int],
    exact: dict[str, bool],
    counts: tuple[int, int, int, int],
    top: set[str],
    words: tuple[str, str],
) -> MemoryBudgetError:
    copies, need, limit, rows = counts
    what, hint = words
    column = max(sizes, key=lambda c: sizes[c])
    how = "measured" if exact[column] else "bounded by its page headers"
    size = format_size(sizes[column])
    total = format_size(need)
    if sizes[column] >= UNKNOWN:
        size, how, total = "more than the budget", "too many values to weigh within it", "more"
    if not hint:
        leave = (
            "select its lengths (strlen) rather than its values, or leave it out"
            if column in top
            else "leave it out of the query"
        )
        hint = f"Raise memory if the shard is trusted, lower DuckDB's threads, or {leave}"
    return MemoryBudgetError(
        f"{what} column {column!r} of shard {shard.path}, a dictionary bomb (a long value "
        f"repeated by many rows) or very long values: one DuckDB vector of {rows} rows "
        f"of it takes {size} ({how}), and DuckDB builds {copies} vectors at once "
        f"({copies - 1} threads and one buffered): {total}, more than the memory budget "
        f"({format_size(limit)}). {hint}",
        shard.path,
    )


#: A shard column's walked pages: per row group, each leaf's data pages (None: not followed).
GroupPages = list[list[list[Page]] | None]


def _group_pages(shard: Shard, column: str) -> GroupPages:
    """Per row group, the data pages of each of ``column``'s byte-array leaves."""
    try:
        with opened(shard) as (_, fh, meta):
            leaves = text_leaves(meta, [column])
            if not leaves:
                return []
            out: GroupPages = []
            for group in range(meta.num_row_groups):
                rg = meta.row_group(group)
                # a row group without rows holds no vector at all
                out.append(leaf_pages(fh, shard.size, rg, leaves, scan=False) if rg.num_rows
                           else [])
            return out
    except (OSError, ValueError, IndexError, KeyError, struct.error, pa.ArrowException,
            SourceError):
        return [None]  # weighed exactly, or DuckDB reports what it finds


def _group_bounds(groups: GroupPages, top: bool, rows: int) -> list[int | None]:
    """Per row group: the most bytes one vector of ``rows`` rows decodes to, or None."""
    return [
        None if leaves is None
        else sum(_window(pages, rows) if top else sum(p.bound for p in pages) for pages in leaves)
        for leaves in groups
    ]


def _window(pages: Sequence[Page], rows: int = VECTOR_ROWS) -> int:
    """Most bytes any ``rows`` consecutive values of these pages decode to."""
    worst = 0
    for first, page in enumerate(pages):
        # a vector starting in this page (on its last value, to reach furthest) runs on
        # into the next pages until it holds VECTOR_ROWS values
        total, after = _most(page, rows), 1
        for nxt in pages[first + 1:]:
            if after >= rows:
                break
            total += _most(nxt, rows)
            after += nxt.values
        worst = max(worst, total)
    return worst


def _most(page: Page, rows: int) -> int:
    """Most bytes a vector's share of one page decodes to."""
    return min(page.bound, min(page.values, rows) * page.each)


def _exact(shard: Shard, column: str, bounds: Sequence[int | None], limit: int) -> int | None:
    """The most bytes one 2048-row block of ``column`` takes, summed from lengths; or None.

    Row groups whose bound is under :data:`REFINE_FROM` keep their bound. None when pyarrow
    cannot read the column; :data:`UNKNOWN` when reading its indices would itself pass the
    budget.
    """
    try:
        with opened(shard) as (source, _, meta):
            return _exact_groups(source, meta, column, bounds, limit)
    except (OSError, ValueError, KeyError, IndexError, TypeError, struct.error,
            pa.ArrowException, SourceError):
        return None


def _exact_groups(
    source: str | BinaryIO,
    meta: pq.FileMetaData,
    column: str,
    bounds: Sequence[int | None],
    limit: int,
) -> int:
    """:func:`_exact` on an opened shard (``source``: its path, or a file open on it)."""
    leaves = text_leaves(meta, [column])
    if not leaves:
        return 0
    worst = 0
    for group in range(meta.num_row_groups):
        bound = bounds[group] if len(bounds) == meta.num_row_groups else None
        if bound is not None and bound <= REFINE_FROM:
            worst = max(worst, bound)
            continue
        rg = meta.row_group(group)
        weight = sum(rg.column(i).num_values for i in leaves) + rg.num_rows
        if weight * VALUE_BYTES > limit:
            return UNKNOWN  # the indices alone would pass the budget
        table = read_as_dictionaries(source, meta, [group], list(leaves.values()))
        worst = max(worst, _blocks(table))
    return worst


def _blocks(table: pa.Table) -> int:
    """Most bytes of string and binary values in one aligned block of VECTOR_ROWS rows."""
    rows = table.num_rows
    if not rows:
        return 0
    sums = np.zeros((rows + VECTOR_ROWS - 1) // VECTOR_ROWS, dtype=np.int64)
    for column in table.columns:
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        lengths = _row_lengths(array)
        if lengths is not None:
            starts = np.arange(0, rows, VECTOR_ROWS)
            sums += np.add.reduceat(lengths, starts)
        else:
            for block, start in enumerate(range(0, rows, VECTOR_ROWS)):
                sums[block] += value_bytes(array.slice(start, VECTOR_ROWS))
    return int(sums.max())


def _row_lengths(array: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]] | None:
    """Each row's bytes of a top-level string or binary array, or None (nested)."""
    typ = array.type
    if isinstance(array, pa.DictionaryArray):
        if nested_text(typ.value_type) or length_function(typ.value_type) is None:
            return None
        lengths = pc.take(pc.binary_length(array.dictionary), array.indices)
    elif length_function(typ) is not None:
        lengths = pc.binary_length(array)
    else:
        return None
    return np.asarray(numpy_of(lengths.cast(pa.int64()), zero_nulls=True), dtype=np.int64)




__all__ = ["VectorBound"]
