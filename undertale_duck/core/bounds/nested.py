"""Bound what strings nested in lists, structs and maps decode to before DuckDB reads a window.

A dictionary bomb can hide inside a nested column (``list<string>``, ``struct<s: string>``,
``map<string, string>``): one long dictionary entry referenced by every row. The per-value
filter of :mod:`decoded` sees only top-level values, and DuckDB copies nested strings while
it scans (a ``list<string>`` of one 256 KiB entry in 20,000 rows grew to the memory limit,
a ``struct<s: string>`` past 1.5 GiB with ``memory=64``), even to compute their lengths. So
before DuckDB reads a window of a dataset with nested string or binary values, two steps
bound what they decode to without decoding them:

1. The page headers of the window's row groups (cached per row group): a dictionary-encoded
   page decodes to at most its values times the longest entry of its dictionary page (the
   dictionary is read and its entry lengths scanned); a plain page to its own size.
2. Only when that bound passes the read limit (a bomb, or one long value among short ones),
   the exact bytes: pyarrow reads the window's nested byte-array leaves as dictionaries
   (indices and the dictionary, never the repeated values) and sums the entries' lengths;
   unless the values are too many to weigh within the limit: then the window is refused.

A window whose nested values pass the limit is refused with :class:`MemoryBudgetError`
naming the shard and the column.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ...common.sizes import MIB, format_size
from ...errors import MemoryBudgetError, SourceError
from ..parquet import footers
from ..source import Shard, Window, window_row_groups
from .weigh import (
    VALUE_BYTES,
    leaf_pages,
    nested_text,
    read_as_dictionaries,
    text_leaves,
    value_bytes,
)


class NestedBound:
    """The bound on a dataset's nested string and binary values for DuckDB window reads.

    Args:
        schema: The shards' Arrow schema.
        columns: The columns read.
    """

    def __init__(self, schema: pa.Schema, columns: Sequence[str]) -> None:
        names = set(schema.names)
        self.columns = [c for c in columns if c in names and nested_text(schema.field(c).type)]
        # (path, size, mtime, group) -> the page-header bound of that row group and its
        # nested byte-array values, or None
        self._bounds: dict[tuple[str, int, int, int], tuple[int, int] | None] = {}
        # the last shard's footer and leaves (windows are mostly read shard by shard)
        self._last: tuple[tuple[str, int, int], tuple[pq.FileMetaData, dict[int, str]] | None]
        self._last = (("", -1, -1), None)

    def __bool__(self) -> bool:
        return bool(self.columns)

    def check(self, local: Shard, window: Window, limit: int, what: str) -> None:
        """Refuse a window whose nested string and binary values pass ``limit``.

        Args:
            local: The window's local shard file (unchanged since opened).
            window: The window.
            limit: The read limit in bytes.
            what: What is read, for the message.

        Raises:
            MemoryBudgetError: If the window's nested values decode to more than ``limit``.
        """
        groups, skip = window_row_groups(local.row_groups, window)
        if not groups or not window.rows:
            return
        opened = self._open(local)
        if opened is None:
            return  # DuckDB reads the file and reports what it finds
        meta, leaves = opened
        bound = values = 0
        known = True
        for group in groups:
            key = (local.path, local.size, local.mtime_ns, group)
            if key not in self._bounds:
                self._bounds[key] = _group_bound(local.path, meta, group, leaves)
            one = self._bounds[key]
            if one is None:  # page headers not followed here: the footer's counts
                bound, known = limit + 1, False
                rg = meta.row_group(group)
                values += sum(rg.column(index).num_values for index in leaves)
            else:
                bound += one[0]
                values += one[1]
        if bound <= limit:
            return
        if values * VALUE_BYTES > limit:
            # weighing them would itself pass the budget (indices, offsets, levels), as
            # would DuckDB's read of the values' row groups
            size = f"up to {format_size(bound)}" if known else "more than the budget"
            raise MemoryBudgetError(
                f"reading {what} of shard {local.path} means decoding {values:,} nested "
                f"string and binary values of columns {self.columns} ({size} with their "
                f"dictionaries), more than the memory budget allows for one read "
                f"({limit / MIB:.4g} MiB): raise memory if the shard is trusted, or "
                "leave the columns out (columns=...)",
                local.path,
                (window.offset, window.end),
            )
        sizes = _exact(local.path, meta, groups, skip, window.rows, leaves)
        if sizes is None or sum(sizes.values()) <= limit:
            return
        column = max(sizes, key=lambda c: sizes[c])
        raise MemoryBudgetError(
            f"reading {what} of shard {local.path} decodes column {column!r} to "
            f"{format_size(sizes[column])} of nested string and binary values, more than the "
            f"memory budget allows for one read ({limit / MIB:.4g} MiB) and far more than its "
            "footer records (a dictionary bomb: a long value repeated by many rows): raise memory "
            "if the shard is trusted, or leave the column out (columns=...)",
            local.path,
            (window.offset, window.end),
        )

    def _open(self, local: Shard) -> tuple[pq.FileMetaData, dict[int, str]] | None:
        """The shard's footer and nested byte-array leaves, or None (none, or unreadable)."""
        key = (local.path, local.size, local.mtime_ns)
        if self._last[0] != key:
            opened = None
            try:
                # pyarrow aborts the process on encrypted columns: checked first, as at open
                meta = footers.checked_metadata(local.path, local.size, local.mtime_ns)
                leaves = text_leaves(meta, self.columns)
                if leaves:
                    opened = (meta, leaves)
            except (OSError, ValueError, pa.ArrowException, SourceError):
                opened = None
            self._last = (key, opened)
        return self._last[1]


def _group_bound(
    path: str, meta: pq.FileMetaData, group: int, leaves: dict[int, str]
) -> tuple[int, int] | None:
    """Most bytes the nested byte-array leaves of one row group decode to, and values, or None."""
    try:
        with open(path, "rb") as fh:
            walked = leaf_pages(fh, fh.seek(0, 2), meta.row_group(group), leaves)
    except (OSError, ValueError, IndexError, KeyError, struct.error, pa.ArrowException):
        return None
    if walked is None:
        return None
    pages = [page for leaf in walked for page in leaf]
    return sum(page.bound for page in pages), sum(page.values for page in pages)


def _exact(
    path: str,
    meta: pq.FileMetaData,
    groups: list[int],
    skip: int,
    rows: int,
    leaves: dict[int, str],
) -> dict[str, int] | None:
    """The exact bytes of each nested column's string and binary values in the window.

    pyarrow reads the byte-array leaves as dictionaries: the indices and the dictionary,
    never the repeated values, nor the columns' other leaves. None when pyarrow cannot read
    them (DuckDB reads the window, and reports).
    """
    try:
        table = read_as_dictionaries(path, meta, groups, list(leaves.values()))
        table = table.slice(skip, rows)
        return {
            name: sum(value_bytes(chunk) for chunk in table.column(name).chunks)
            for name in table.column_names
        }
    except (OSError, ValueError, KeyError, IndexError, TypeError, pa.ArrowException):
        return None


__all__ = ["NestedBound"]
