"""Read and rewrite a Parquet file's Thrift footer, to make real files with lying footers.

A minimal Thrift compact-protocol codec: a struct is a list of ``[field id, type, value]``
entries (kept in file order, unknown fields preserved), a list is ``[element type, values]``.
:func:`rewrite` parses a file's ``FileMetaData``, lets a callback change it, and writes the
data pages unchanged followed by the new footer (the footer is last, so no page offset moves).

Field ids (parquet.thrift): FileMetaData 3 num_rows, 4 row_groups; RowGroup 1 columns,
2 total_byte_size, 3 num_rows, 6 total_compressed_size; ColumnChunk 3 meta_data;
ColumnMetaData 1 type, 2 encodings, 4 codec, 5 num_values, 6 total_uncompressed_size,
7 total_compressed_size, 9 data_page_offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP, TRUE, FALSE, I8, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
INTS = (I8, I16, I32, I64)

Struct = list[list[Any]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int) -> Any:
        if kind in (TRUE, FALSE):
            return self.byte() == TRUE  # inside a list: one byte per element
        if kind in INTS:
            return self.zigzag() if kind != I8 else struct.unpack("b", bytes([self.byte()]))[0]
        if kind == DOUBLE:
            self.pos += 8
            return struct.unpack("<d", self.data[self.pos - 8 : self.pos])[0]
        if kind == BINARY:
            n = self.varint()
            self.pos += n
            return self.data[self.pos - n : self.pos]
        if kind in (LIST, SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return [elem, [self.value(elem) for _ in range(size)]]
        if kind == MAP:
            size = self.varint()
            if not size:
                return [0, 0, []]
            types = self.byte()
            k, v = types >> 4, types & 0x0F
            return [k, v, [(self.value(k), self.value(v)) for _ in range(size)]]
        if kind == STRUCT:
            return self.struct()
        raise ValueError(f"unknown Thrift compact type {kind}")

    def struct(self) -> Struct:
        fields: Struct = []
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == STOP:
                return fields
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            value = kind == TRUE if kind in (TRUE, FALSE) else self.value(kind)
            fields.append([fid, kind, value])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _value(kind: int, value: Any) -> bytes:
    if kind in (TRUE, FALSE):
        return bytes([TRUE if value else FALSE])
    if kind == I8:
        return struct.pack("b", value)
    if kind in INTS:
        return _zigzag(value)
    if kind == DOUBLE:
        return struct.pack("<d", value)
    if kind == BINARY:
        return _varint(len(value)) + bytes(value)
    if kind in (LIST, SET):
        elem, items = value
        head = bytes([(len(items) << 4) | elem]) if len(items) < 15 else bytes(
            [0xF0 | elem]
        ) + _varint(len(items))
        return head + b"".join(_value(elem, v) for v in items)
    if kind == MAP:
        k, v, items = value
        if not items:
            return b"\x00"
        return _varint(len(items)) + bytes([(k << 4) | v]) + b"".join(
            _value(k, a) + _value(v, b) for a, b in items
        )
    if kind == STRUCT:
        return encode(value)
    raise ValueError(f"unknown Thrift compact type {kind}")


def encode(fields: Struct) -> bytes:
    """Serialize a struct in the Thrift compact protocol."""
    out = bytearray()
    last = 0
    for fid, kind, value in fields:
        wire = (TRUE if value else FALSE) if kind in (TRUE, FALSE) else kind
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | wire)
        else:
            out.append(wire)
            out += _zigzag(fid)
        last = fid
        if kind not in (TRUE, FALSE):
            out += _value(kind, value)
    out.append(STOP)
    return bytes(out)


def decode(data: bytes) -> Struct:
    """Parse a Thrift compact struct."""
    return _Reader(data).struct()


def get(fields: Struct, fid: int) -> Any:
    """The value of field ``fid`` (None if absent)."""
    for f, _, value in fields:
        if f == fid:
            return value
    return None


def put(fields: Struct, fid: int, value: Any, kind: int = I64) -> None:
    """Set field ``fid`` (added, in id order, if absent)."""
    for entry in fields:
        if entry[0] == fid:
            entry[2] = value
            return
    fields.append([fid, kind, value])
    fields.sort(key=lambda e: e[0])


def row_groups(meta: Struct) -> list[Struct]:
    """The ``RowGroup`` structs of a ``FileMetaData``."""
    return list(get(meta, 4)[1])


def column_meta(group: Struct) -> list[Struct]:
    """The ``ColumnMetaData`` of each column chunk of a ``RowGroup``."""
    return [get(chunk, 3) for chunk in get(group, 1)[1]]


def read(path: str | Path) -> Struct:
    """Parse a Parquet file's ``FileMetaData``."""
    data = Path(path).read_bytes()
    assert data[-4:] == b"PAR1", "not a plain-footer Parquet file"
    length = struct.unpack("<I", data[-8:-4])[0]
    return decode(data[-8 - length : -8])


def rewrite(src: str | Path, dst: str | Path, edit: Callable[[Struct], None]) -> None:
    """Copy ``src`` to ``dst`` with its ``FileMetaData`` changed in place by ``edit``."""
    data = Path(src).read_bytes()
    length = struct.unpack("<I", data[-8:-4])[0]
    body, meta = data[: -8 - length], decode(data[-8 - length : -8])
    edit(meta)
    footer = encode(meta)
    Path(dst).write_bytes(body + footer + struct.pack("<I", len(footer)) + b"PAR1")


def merge_row_groups(meta: Struct) -> None:
    """Make one row group of a single-column file's row groups (an ``edit`` for :func:`rewrite`).

    A single column's chunks lie back to back in the file, so one chunk spanning them all,
    with the summed counts and sizes, describes the same pages: a valid file with one large
    row group, written without holding that row group in memory.
    """
    groups = row_groups(meta)
    chunks = [column_meta(g) for g in groups]
    assert all(len(c) == 1 for c in chunks), "only single-column files"
    first = groups[0]
    cmeta = chunks[0][0]
    for fid in (5, 6, 7):  # num_values, total_uncompressed_size, total_compressed_size
        put(cmeta, fid, sum(get(c[0], fid) for c in chunks))
    for fid in (2, 3, 6):  # total_byte_size, num_rows, total_compressed_size
        if get(first, fid) is not None:
            put(first, fid, sum(get(g, fid) for g in groups))
    get(meta, 4)[1][:] = [first]
