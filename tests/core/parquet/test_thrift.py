"""The bounded Thrift reader's structs against an independent codec (tests/support/footer.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import footer as codec
from undertale_duck.core.parquet import pages
from undertale_duck.core.parquet.thrift import _MAX_DEPTH, Thrift

INT_RANGES = {
    codec.I8: (-128, 127),
    codec.I16: (-(1 << 15), (1 << 15) - 1),
    codec.I32: (-(1 << 31), (1 << 31) - 1),
    codec.I64: (-(1 << 63), (1 << 63) - 1),
}


def _scalar(kind: int) -> st.SearchStrategy[Any]:
    if kind in (codec.TRUE, codec.FALSE):
        return st.booleans()
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return st.integers(low, high)
    if kind == codec.DOUBLE:
        return st.floats(allow_nan=False)
    return st.binary(max_size=40)  # BINARY


SCALARS = [codec.TRUE, codec.I8, codec.I16, codec.I32, codec.I64, codec.DOUBLE, codec.BINARY]


@st.composite
def values(draw: st.DrawFn, depth: int) -> tuple[int, Any]:
    """A ``(compact type, value)`` in the support codec's form, nested up to ``depth``."""
    kinds = SCALARS + ([codec.LIST, codec.MAP, codec.STRUCT] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == codec.LIST:
        elem = draw(st.sampled_from(SCALARS + ([codec.STRUCT] if depth > 1 else [])))
        if elem == codec.STRUCT:
            items = draw(st.lists(structs(depth - 1), max_size=3))
        else:
            items = draw(st.lists(_scalar(elem), max_size=20))  # 15 and over: a long head
        return kind, [elem, items]
    if kind == codec.MAP:
        pairs = draw(st.lists(st.tuples(st.integers(0, 99), st.binary(max_size=5)), max_size=3))
        return kind, [codec.I32, codec.BINARY, pairs]
    if kind == codec.STRUCT:
        return kind, draw(structs(depth - 1))
    return kind, draw(_scalar(kind))


@st.composite
def structs(draw: st.DrawFn, depth: int = 3) -> codec.Struct:
    """A struct: fields in any order (ids far apart or descending take a long header)."""
    fids = draw(st.lists(st.integers(-40, 300), max_size=8))
    out: codec.Struct = []
    for fid in fids:
        kind, value = draw(values(depth))
        out.append([fid, kind, value])
    return out


def expected(fields: codec.Struct) -> dict[int, object]:
    """What :meth:`Thrift.struct` gives for ``fields``: the last copy of a field counts."""
    out: dict[int, object] = {}
    for fid, kind, value in fields:
        out[fid] = _expected_value(kind, value)
    return out


def _expected_value(kind: int, value: Any) -> object:
    if kind in (codec.TRUE, codec.FALSE):
        return bool(value)
    if kind == codec.I8:
        return value & 0xFF  # a byte is read unsigned
    if kind in INT_RANGES:
        return value
    if kind in (codec.DOUBLE, codec.MAP):
        return None  # read past, not kept
    if kind == codec.BINARY:
        return bytes(value)
    if kind in (codec.LIST, codec.SET):
        elem, items = value
        return [_expected_value(elem, item) for item in items]
    return expected(value)


@settings(max_examples=300, deadline=None)
@given(fields=structs(), tail=st.binary(max_size=4))
def test_struct_reads_what_an_independent_codec_wrote(fields: codec.Struct, tail: bytes) -> None:
    data = codec.encode(fields)
    parser = Thrift(data + tail)
    assert parser.struct(0) == expected(fields)
    assert parser.pos == len(data)  # stops at the struct's end, whatever follows


@settings(max_examples=300, deadline=None)
@given(fields=structs(), cut=st.integers(0, 10_000), flip=st.integers(0, 255))
def test_damaged_structs_parse_as_the_codec_reads_them_or_are_refused(
    fields: codec.Struct, cut: int, flip: int
) -> None:
    """A truncated or altered encoding: refused (IndexError, ValueError), or read as the
    independent codec reads the same bytes; never another exception, never other values."""
    data = bytearray(codec.encode(fields))
    if len(data) > 1:
        data[cut % len(data)] ^= flip
    damaged = bytes(data[: max(1, len(data) - cut % 3)])
    try:
        got = Thrift(damaged).struct(0)
    except (IndexError, ValueError):
        return
    # the codec has no limits: whatever the bounded reader accepts, it reads alike
    assert got == expected(codec.decode(damaged))


def test_nesting_is_bounded() -> None:
    inner: codec.Struct = []
    for _ in range(_MAX_DEPTH):
        inner = [[1, codec.STRUCT, inner]]
    assert Thrift(codec.encode(inner)).struct(0)  # the deepest allowed
    with pytest.raises(ValueError, match="too deep"):
        Thrift(codec.encode([[1, codec.STRUCT, inner]])).struct(0)


@pytest.mark.parametrize(
    "data",
    [
        b"\x15" + b"\x80" * 11 + b"\x01\x00",  # an i32 varint longer than any value
        b"\x05" + b"\xff" * 12,  # a long field id that never ends
        b"\x18\x05abc",  # a binary past the end
        b"\x1c\x15\x02",  # a nested struct cut short
        b"\x16",  # nothing after the header
    ],
)
def test_malformed_structs_are_refused(data: bytes) -> None:
    with pytest.raises((IndexError, ValueError)):
        Thrift(data).struct(0)


def test_page_headers_of_a_real_file(tmp_path: Path) -> None:
    """Every page header of a written file: sizes that tile each chunk, values that add up."""
    rows = 5000
    index = np.arange(rows)
    table = pa.table({
        "row": pa.array(index, pa.int64()),
        "id": pa.array([f"row-{i:07d}" for i in index.tolist()], pa.string()),
        "tokens": pa.array([[i % 97] * (i % 7) for i in index.tolist()], pa.list_(pa.int32())),
    })
    path = tmp_path / "part.parquet"
    pq.write_table(table, path, row_group_size=2000, data_page_size=1024,
                   use_dictionary=["id"], write_statistics=True, compression="zstd")
    meta = pq.read_metadata(path)
    counted = 0
    with open(path, "rb") as fh:
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(g).column(c)
                start, end = pages.chunk_range(chunk)
                headers = list(pages.page_headers(fh, start, end))
                data = [h for h in headers if h.kind in (0, 3)]
                counted += len(data)
                assert sum(pages.header_int(h.fields.get(5), 1) for h in data) == (
                    chunk.num_values
                )
                assert sum(h.raw for h in headers) <= chunk.total_uncompressed_size
    assert counted > 2 * meta.num_row_groups * meta.num_columns  # small pages: many a chunk
