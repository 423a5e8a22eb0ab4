"""Weigh string and binary values without decoding them: the one mechanism of every bound.

A dictionary bomb (one long dictionary entry referenced by many rows) is bounded the same
way wherever it could be decoded, top-level or nested, by a window read or by a query's
result vectors, in two steps:

1. **Page headers** (:func:`leaf_pages`): each byte-array leaf's data pages say what they
   decode to at most (a dictionary page: its values times the longest entry; a plain page:
   its size), without decompressing a data page.
2. **Exact weights** (:func:`read_as_dictionaries`, :func:`value_bytes`), only where the
   bound passes the budget: pyarrow reads the leaves as dictionaries (the indices and the
   entries, never the repeated values) and the entries' lengths are summed.

:mod:`.nested` applies them to a window's nested columns, :mod:`.vectors` to the 2048-row
vectors of ad hoc SQL; :mod:`.decoded` bounds top-level values inside DuckDB's own read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..parquet import Page, child_types, chunk_pages, column_leaves, footers
from ..source import Shard, remote_metadata
from .decoded import length_function

__all__ = [
    "VALUE_BYTES", "leaf_pages", "nested_text", "opened", "read_as_dictionaries", "text_leaves",
    "value_bytes",
]

#: What weighing one value takes at most besides its string (a dictionary index, list
#: offsets, levels, validity), rounded up: more values than the budget / this are refused
#: rather than weighed.
VALUE_BYTES = 16


def nested_text(typ: pa.DataType) -> bool:
    """Whether a nested Arrow type holds string or binary values at some depth."""
    if pa.types.is_dictionary(typ):
        return nested_text(typ.value_type)
    return any(_text(child) for child in child_types(typ))


def _text(typ: pa.DataType) -> bool:
    """Whether a type is string or binary (as the top-level bound sees them), or nests them."""
    return length_function(typ) is not None or nested_text(typ)


def text_leaves(meta: pq.FileMetaData, columns: Iterable[str]) -> dict[int, str]:
    """Leaf index -> dotted path of the byte-array leaves of ``columns`` (any spelling)."""
    owners = column_leaves(meta)
    parquet = meta.schema
    return {
        i: parquet.column(i).path
        for column in columns
        for i in owners.get(column.lower(), [])
        if parquet.column(i).physical_type == "BYTE_ARRAY"
    }


@contextlib.contextmanager
def opened(shard: Shard) -> Iterator[tuple[str | BinaryIO, BinaryIO, pq.FileMetaData]]:
    """The shard for pyarrow, a file to read page headers from, and its checked footer.

    The footer is checked before pyarrow's accessors touch it (they abort the process on
    encrypted columns or unknown codecs). A shard in object storage is read by ranges
    through its store's filesystem (not downloaded); its footer is the one kept since the
    dataset opened.
    """
    store = getattr(shard, "store", None)
    if store is None:
        meta = footers.checked_metadata(shard.path, shard.size, shard.mtime_ns)
        with open(shard.path, "rb") as fh:
            yield shard.path, fh, meta
        return
    meta = remote_metadata(shard)  # type: ignore[arg-type]
    with store.fs.open(shard.path, "rb") as fh:
        yield fh, fh, meta


def leaf_pages(
    fh: BinaryIO,
    size: int,
    group: pq.RowGroupMetaData,
    leaves: Iterable[int],
    *,
    scan: bool = True,
) -> list[list[Page]] | None:
    """The data pages of each leaf's chunk in one row group, or None if one is not followed.

    Args:
        fh: The shard file, open for reading.
        size: The file's size.
        group: The row group's footer entry.
        leaves: Leaf indices (:func:`text_leaves`).
        scan: Whether to scan dictionary pages for their longest entry (else the whole
            page counts as the longest entry).

    Returns:
        Per leaf, its pages in file order (:func:`.parquet.chunk_pages`).
    """
    walked = []
    for index in leaves:
        pages = chunk_pages(fh, size, group.column(index), scan=scan)
        if pages is None:
            return None
        walked.append(pages)
    return walked


def read_as_dictionaries(
    source: str | BinaryIO, meta: pq.FileMetaData, groups: Sequence[int], paths: Sequence[str]
) -> pa.Table:
    """Read byte-array leaves of some row groups as dictionaries: indices and entries only.

    Args:
        source: The shard's path, or a file open on it.
        meta: Its checked footer.
        groups: Row group indices.
        paths: Dotted leaf paths (:func:`text_leaves`' values).

    Returns:
        The leaves' columns, dictionary-encoded at every string and binary leaf.
    """
    with pq.ParquetFile(source, metadata=meta, read_dictionary=list(paths),
                        pre_buffer=False) as f:
        return f.read_row_groups(list(groups), columns=list(paths), use_threads=False)


def value_bytes(array: pa.Array) -> int:
    """Bytes of the string and binary values of ``array`` at any depth, without decoding."""
    typ = array.type
    if pa.types.is_dictionary(typ):
        if not _text(typ.value_type):
            return 0
        lengths = pc.binary_length(array.dictionary)
        return int(pc.sum(pc.take(lengths, array.indices)).as_py() or 0)
    if _text(typ) and not nested_text(typ):
        return int(pc.sum(pc.binary_length(array)).as_py() or 0)
    if isinstance(array, pa.StructArray):
        return sum(value_bytes(child) for child in array.flatten())
    if isinstance(array, pa.FixedSizeListArray):
        return value_bytes(array.flatten())
    if isinstance(array, (pa.ListArray, pa.LargeListArray)):  # a map too: key-value structs
        if not len(array):
            return 0
        first, last = array.offsets[0].as_py(), array.offsets[-1].as_py()
        return value_bytes(array.values.slice(first, last - first))
    return 0
