"""Decode a window's row groups with pyarrow when ``pages.py`` allows it (DuckDB reads the rest)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import SourceError
from ..parquet import ShardPages, footers
from ..source import Shard, Window, window_row_groups

#: Most bytes a window read by pyarrow may decode when the dataset has no memory budget
#: (memory=0): larger windows go to DuckDB, whose ``memory_limit`` then applies.
UNBUDGETED_CAP = 1 << 30


class DirectReader:
    """Read plain windows of local shards with pyarrow, within the read limit.

    Args:
        columns: The dataset's columns, in order.
        schema: The dataset's Arrow schema.
        limit: The read limit in bytes (0: none, then :data:`UNBUDGETED_CAP`).
        threads: Whether pyarrow may decode columns in parallel.
    """

    def __init__(
        self, columns: Sequence[str], schema: pa.Schema, limit: int, *, threads: bool
    ) -> None:
        self.columns = list(columns)
        self.schema = schema
        self.cap = limit or UNBUDGETED_CAP
        self.threads = threads
        self._shards: dict[str, ShardPages | None] = {}
        # DuckDB refuses strings that are not UTF-8; pyarrow checks them only when asked
        self._text = [
            name for name in self.columns
            if name in schema.names and _has_text(schema.field(name).type)
        ]
        #: Windows read by pyarrow, and windows that fell back to DuckDB after trying.
        self.stats = {"direct": 0, "fallback": 0}

    def _pages(self, shard: Shard) -> ShardPages | None:
        key = shard.path
        if key not in self._shards:
            pages = None
            try:
                # the file may have been replaced since it was opened: its columns' metadata
                # is touched only once the footer is known to hold no encrypted column and
                # no unknown codec or type (pyarrow aborts the process on those), as at open
                meta = footers.checked_metadata(shard.path, shard.size, shard.mtime_ns)
                same = meta.num_row_groups == len(shard.row_groups) and all(
                    meta.row_group(g).num_rows == rows
                    for g, (rows, _) in enumerate(shard.row_groups)
                )
                if same:
                    pages = ShardPages(shard.path, meta, self.columns, self.schema)
            except (OSError, ValueError, pa.ArrowException, SourceError):
                pages = None
            self._shards[key] = pages
        return self._shards[key]

    def spans(self, shard: Shard, window: Window) -> tuple[int, int] | None:
        """The shard-local rows a pyarrow read of ``window`` decodes, or None (DuckDB reads it).

        A read decodes every row of the row groups the window overlaps; a window cut from a
        large row group shares them with the other windows cut from it.
        """
        found = self._groups(shard, window)
        if found is None:
            return None
        _, _, first, rows = found
        return first, first + rows

    def _groups(
        self, shard: Shard, window: Window
    ) -> tuple[ShardPages, list[int], int, int] | None:
        """What a pyarrow read of ``window`` decodes, or None (not on the allow-list).

        Returns:
            The shard's pages, the row groups, the shard-local first row of the first group
            and the groups' rows.
        """
        pages = self._pages(shard)
        if pages is None or pages.leaves is None or not window.rows:
            return None
        groups, skip = window_row_groups(shard.row_groups, window)
        return pages, groups, window.start - skip, sum(shard.row_groups[g][0] for g in groups)

    def batches(
        self, shard: Shard, window: Window, spare: Spare | None = None
    ) -> Iterator[pa.RecordBatch] | None:
        """The window's rows as record batches decoded by pyarrow, or None (DuckDB reads it).

        The caller checks that the shard is unchanged before and after, counts the batches
        against the read limit, and falls back to DuckDB on any exception.

        Args:
            shard: The window's (local, unchanged) shard.
            window: The window.
            spare: Where rows of other windows that the read decodes anyway are kept.

        Returns:
            An iterator of batches holding exactly the window's rows (if the file is as its
            pages say), or None when the window is not on the allow-list or its bound
            exceeds the read limit.
        """
        found = self._groups(shard, window)
        if found is None:
            return None
        pages, groups, first, expected = found
        total = 0
        for group in groups:
            bound = pages.bound(group)
            if bound is None:
                return None
            total += bound
        if not groups or total > self.cap:
            return None
        return self._iterate(pages, groups, window, first, expected, spare)

    def _iterate(
        self, pages: ShardPages, groups: list[int], window: Window, first: int, expected: int,
        spare: Spare | None,
    ) -> Iterator[pa.RecordBatch]:
        with pq.ParquetFile(
            pages.path, metadata=pages.meta, buffer_size=1 << 16, pre_buffer=False
        ) as parquet:
            stream = parquet.iter_batches(
                batch_size=window.rows, row_groups=groups, columns=self.columns,
                use_threads=self.threads,
            )
            at = first  # the shard-local row of the batch's first row
            for batch in stream:
                # Every row of the row groups is decoded and checked, those outside the
                # window too: DuckDB checks the whole pages it decodes, so a window this read
                # accepts must be one DuckDB accepts (else DuckDB reads it, and reports)
                for name in self._text:
                    batch.column(name).validate(full=True)
                n = batch.num_rows
                if spare is not None:
                    spare.offer(batch, at)
                a, b = max(window.start, at), min(window.stop, at + n)
                if a < b:
                    yield batch if b - a == n else batch.slice(a - at, b - a)
                at += n
            if at - first != expected:
                raise ValueError(f"pyarrow decoded {at - first} rows of row groups of {expected}")


class Spare:
    """Rows of other windows that one window's read decodes anyway, kept within a cap.

    A window cut from a large row group is read by decoding the whole group; the other
    windows cut from it are collected here, so that the group is decoded once rather than
    once per window. Past ``cap`` bytes (the batches the kept rows hold on to) everything
    collected is dropped and the windows are read again when needed: the cap is room made
    in the cache beforehand.

    Args:
        ranges: For each window position wanted, its shard-local ``(start, stop)`` rows.
        cap: Most bytes to hold.
    """

    def __init__(self, ranges: dict[int, tuple[int, int]], cap: int) -> None:
        self.ranges = ranges
        self.cap = cap
        self.parts: dict[int, list[pa.RecordBatch]] = {p: [] for p in ranges}
        self.held = 0

    def offer(self, batch: pa.RecordBatch, at: int) -> None:
        """Keep the rows of ``batch`` (whose first row is shard-local row ``at``) wanted."""
        if not self.parts:
            return
        n = batch.num_rows
        counted = False
        for position, (start, stop) in self.ranges.items():
            a, b = max(start, at), min(stop, at + n)
            if a < b:
                if not counted:  # a slice keeps its whole batch alive: count the batch
                    counted = True
                    self.held += batch.get_total_buffer_size()
                    if self.held > self.cap:
                        self.parts.clear()
                        return
                self.parts[position].append(batch if b - a == n else batch.slice(a - at, b - a))

    def tables(self) -> dict[int, pa.Table]:
        """The windows collected whole, as tables (none once past the cap)."""
        out: dict[int, pa.Table] = {}
        for position, parts in self.parts.items():
            start, stop = self.ranges[position]
            if parts and sum(p.num_rows for p in parts) == stop - start:
                out[position] = pa.Table.from_batches(parts)
        return out


def _has_text(typ: pa.DataType) -> bool:
    if pa.types.is_dictionary(typ) or pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ = typ.value_type
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ))


__all__ = ["DirectReader", "Spare"]
