"""The byte ranges a window needs of a shard, and the sparse local file they are laid into."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["GAP", "chunk_ranges", "coalesce", "footer_length", "parse_footer", "write_sparse"]

#: Ranges closer than this are fetched as one request (the bytes between them are read too):
#: one request costs about as much as this many bytes from object storage.
GAP = 64 << 10


def footer_length(trailer: bytes) -> int:
    """The bytes of a Parquet footer and its 8-byte trailer, from the file's last 8 bytes."""
    return int(struct.unpack("<i", trailer[-8:-4])[0]) + 8


def parse_footer(tail: bytes) -> Any:
    """The ``pyarrow.parquet.FileMetaData`` of a footer with its trailer (``tail``)."""
    return pq.read_metadata(pa.BufferReader(tail))


def chunk_ranges(
    meta: Any, groups: Iterable[int], columns: Sequence[str] | None
) -> list[tuple[int, int]]:
    """The ``[start, end)`` byte ranges of the column chunks of some row groups.

    Args:
        meta: The shard's ``pyarrow.parquet.FileMetaData``.
        groups: Row group indices.
        columns: Top-level column names to read (their leaves: a list or struct column has
            several chunks), or None for every column.

    Returns:
        The ranges, sorted, each a column chunk (dictionary page included).
    """
    wanted = None if columns is None else set(columns)
    out = []
    for g in groups:
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if wanted is not None and chunk.path_in_schema.split(".")[0] not in wanted:
                continue
            start = chunk.data_page_offset
            dictionary = chunk.dictionary_page_offset
            if chunk.has_dictionary_page and dictionary is not None and 0 < dictionary < start:
                start = dictionary
            out.append((int(start), int(start) + int(chunk.total_compressed_size)))
    return sorted(out)


def coalesce(ranges: Sequence[tuple[int, int]], gap: int = GAP) -> list[tuple[int, int]]:
    """Merge sorted ranges that overlap or lie within ``gap`` bytes of each other."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def write_sparse(fd: int, size: int, pieces: Mapping[int, bytes]) -> None:
    """Lay byte pieces into an open file at their offsets, the file ``size`` bytes long.

    The holes between pieces read as zeros and take no disk space on file systems with
    sparse files; a Parquet reader asked only for the pieces' row groups never reads them.

    Args:
        fd: A file descriptor open for writing (an empty file).
        size: The file's length (the object's size).
        pieces: Offset -> bytes.
    """
    os.ftruncate(fd, size)
    for offset, data in pieces.items():
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written
