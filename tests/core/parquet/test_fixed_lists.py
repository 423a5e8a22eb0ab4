"""Fixed-length list pages decoded without their levels: always pyarrow's values, or None."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck.core.parquet.fixed_lists import decode_chunk, full_levels, row_levels
from undertale_duck.core.parquet.pages import chunk_range

TYPES = {"int32": pa.int32(), "int64": pa.int64(), "uint32": pa.uint32(),
         "float32": pa.float32(), "float64": pa.float64()}


def values_of(dtype: str, index: np.ndarray, length: int, distinct: int) -> np.ndarray:
    """Values a function of the global row index and position (``distinct`` of them)."""
    grid = (index[:, None] * 31 + np.arange(length)[None, :]) % distinct
    return grid.astype(dtype)


def write(path: Path, rows: int, length: int, dtype: str, *, distinct: int, codec: str,
          dictionary: bool, page: int, group: int, checksums: bool = False) -> pa.Table:
    index = np.arange(rows)
    flat = values_of(dtype, index, length, distinct).reshape(-1)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * length)
    table = pa.table({
        "row": pa.array(index),
        "tokens": pa.ListArray.from_arrays(offsets, pa.array(flat, type=TYPES[dtype])),
    })
    pq.write_table(table, path, compression=codec, use_dictionary=dictionary,
                   data_page_size=page, row_group_size=group,
                   write_page_checksum=checksums)
    return table


def decode_group(
    path: Path, group: int, dtype: str, data: bytes | None = None,
) -> np.ndarray | None:
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(group).column(1)
    start, end = chunk_range(chunk)
    if data is None:
        data = path.read_bytes()[start:end]
    return decode_chunk(
        data, codec=chunk.compression, physical=chunk.physical_type, dtype=np.dtype(dtype),
        max_definition=meta.schema.column(1).max_definition_level,
        rows=meta.row_group(group).num_rows, values=chunk.num_values,
    )


def pyarrow_group(path: Path, group: int) -> np.ndarray:
    column = pq.ParquetFile(path).read_row_group(group, columns=["tokens"]).column(0)
    lists = column.combine_chunks()
    values: np.ndarray = lists.values.to_numpy(zero_copy_only=False)
    return values.reshape(len(lists), -1)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(1, 400),
    length=st.sampled_from([16, 24, 64, 512]),
    dtype=st.sampled_from(sorted(TYPES)),
    distinct=st.sampled_from([200, 50_000, 2**31 - 1]),
    codec=st.sampled_from(["NONE", "SNAPPY", "ZSTD", "GZIP", "LZ4"]),
    dictionary=st.booleans(),
    page=st.sampled_from([1 << 10, 1 << 14, 1 << 20]),
    group=st.integers(1, 400),
    checksums=st.booleans(),
)
def test_a_decoded_chunk_is_pyarrow_s_values_and_pyarrow_written_chunks_are_decoded(
    tmp_path: Path, rows: int, length: int, dtype: str, distinct: int, codec: str,
    dictionary: bool, page: int, group: int, checksums: bool,
) -> None:
    path = tmp_path / "part.parquet"
    write(path, rows, length, dtype, distinct=distinct, codec=codec, dictionary=dictionary,
          page=page, group=group, checksums=checksums)
    meta = pq.ParquetFile(path).metadata
    for g in range(meta.num_row_groups):
        got = decode_group(path, g, dtype)
        if codec == "LZ4":  # the Hadoop-framed codec: left to pyarrow
            assert got is None
            continue
        # the writer's own encodings are all decoded here (else the fast path is dead)
        assert got is not None, (g, meta.row_group(g).column(1))
        want = pyarrow_group(path, g)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        first = sum(meta.row_group(k).num_rows for k in range(g))
        index = np.arange(first, first + len(got))
        assert np.array_equal(got, values_of(dtype, index, length, distinct))


@pytest.mark.parametrize(
    "make", ["ragged", "uneven", "null list", "null element", "length 12", "empty lists"])
def test_lists_the_levels_say_more_about_are_left_to_pyarrow(tmp_path: Path, make: str) -> None:
    rows = 50
    length = 12 if make == "length 12" else 32
    lists = [list(range(r, r + length)) for r in range(rows)]
    if make == "ragged":
        lists[7] = lists[7][:-1]
    elif make == "uneven":  # as many values as full rows, in rows of 31 and 33
        lists[8].append(lists[7].pop())
    elif make == "empty lists":
        lists = [[] for _ in range(rows)]
    elif make == "null list":
        lists[7] = None  # type: ignore[call-overload]
    elif make == "null element":
        lists[7][3] = None  # type: ignore[call-overload]
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"row": list(range(rows)),
                             "tokens": pa.array(lists, pa.list_(pa.int32()))}), path)
    assert decode_group(path, 0, "int32") is None


def test_narrower_or_other_kinds_of_values_are_left_to_pyarrow(tmp_path: Path) -> None:
    path = tmp_path / "part.parquet"
    write(path, 40, 16, "int32", distinct=100, codec="SNAPPY", dictionary=True, page=1 << 20,
          group=40)
    assert decode_group(path, 0, "int32") is not None
    for other in ("int8", "int16", "float32", "int64", "bool"):
        assert decode_group(path, 0, other) is None


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), dictionary=st.booleans(), codec=st.sampled_from(["NONE", "SNAPPY"]),
       checksums=st.booleans())
def test_a_damaged_chunk_gives_pyarrow_s_values_or_none(
    tmp_path: Path, data: st.DataObject, dictionary: bool, codec: str, checksums: bool,
) -> None:
    path = tmp_path / "part.parquet"
    # pages of 2 KiB and of 16 KiB (dictionary indices then span full runs of 504)
    write(path, 60, 16, "int32", distinct=300, codec=codec, dictionary=dictionary,
          page=data.draw(st.sampled_from([1 << 11, 1 << 14])), group=60, checksums=checksums)
    raw = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start, end = chunk_range(chunk)
    at = data.draw(st.integers(start, end - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(bytes(raw))
    got = decode_group(damaged, 0, "int32")
    if got is None:
        return
    # what we decode, pyarrow decodes alike (a damaged value byte is a value to both)
    want = pyarrow_group(damaged, 0)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("checksums", [True, False])
def test_a_page_whose_checksum_fails_is_left_to_pyarrow(tmp_path: Path, checksums: bool) -> None:
    path = tmp_path / "part.parquet"
    write(path, 60, 16, "int32", distinct=1_000, codec="NONE", dictionary=False,
          page=1 << 20, group=60, checksums=checksums)
    raw = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    _, end = chunk_range(chunk)
    raw[end - 4] ^= 0x40  # a byte of the last value (PLAIN: the page's last bytes)
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(bytes(raw))
    got = decode_group(damaged, 0, "int32")
    if checksums:  # our reads verify page checksums: pyarrow then raises
        assert got is None
        with pytest.raises(OSError, match="CRC"):
            pq.ParquetFile(damaged, page_checksum_verification=True).read_row_group(0)
    else:  # no checksum to tell: the damaged value is a value to both readers
        assert got is not None and np.array_equal(got, pyarrow_group(damaged, 0))
        assert got[-1, -1] != values_of("int32", np.array([59]), 16, 1_000)[0, -1]


@pytest.mark.parametrize("value", [0x00, 0x01, 0x7E, 0x7D, 0xFF])
@pytest.mark.parametrize("which", ["first", "last"])
def test_a_run_header_that_is_not_the_writer_s_is_left_to_pyarrow(
    tmp_path: Path, value: int, which: str,
) -> None:
    import io

    from undertale_duck.core.parquet.pages import page_headers

    path = tmp_path / "part.parquet"
    write(path, 200, 16, "int32", distinct=300, codec="NONE", dictionary=True,
          page=1 << 14, group=200)
    raw = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start, end = chunk_range(chunk)
    assert decode_group(path, 0, "int32") is not None
    data = [p for p in page_headers(io.BytesIO(bytes(raw)), start, end) if p.kind == 0]
    page = data[0]
    count = page.fields[5][1]  # type: ignore[index]
    assert count > 504  # at least one full run, and a last shorter one
    at = page.body
    for _ in range(2):  # the repetition, then the definition levels
        at += 4 + int.from_bytes(raw[at:at + 4], "little")
    width = raw[at]
    header = at + 1 if which == "first" else at + 1 + count // 504 * (1 + 63 * width)
    if raw[header] == value:
        pytest.skip("the header already has that value")
    raw[header] = value
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(bytes(raw))
    assert decode_group(damaged, 0, "int32") is None


def test_the_level_encodings_are_the_writer_s() -> None:
    assert row_levels(512) == bytes.fromhex("03fef00701")
    assert row_levels(16) == bytes.fromhex("03fe1001")
    assert row_levels(8) is None and row_levels(20) is None
    assert full_levels(3, 493_568) == bytes.fromhex("80a03c03")


@settings(max_examples=200, deadline=None)
@given(width=st.integers(1, 32), groups=st.integers(1, 70), seed=st.integers(0, 2**32 - 1))
def test_bit_packed_values_of_any_width_unpack_to_their_values(
    width: int, groups: int, seed: int
) -> None:
    from undertale_duck.core.parquet.fixed_lists import _unpack

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 1 << width, size=groups * 8, dtype=np.uint64)
    values[: min(8, len(values))] = (1 << width) - 1  # the widest value, in every lane
    # Parquet's bit packing: each value's bits in order, least significant first
    bits = ((values[:, None] >> np.arange(width, dtype=np.uint64)) & 1).astype(np.uint8)
    packed = np.packbits(bits.reshape(-1), bitorder="little")
    assert len(packed) == groups * width
    got = _unpack(np.concatenate([packed, np.zeros(8, np.uint8)]), width, groups)
    assert got.dtype == np.uint32 and np.array_equal(got, values)


@pytest.mark.parametrize("packed", [(1 << 31) - 1, 1 << 24])
def test_a_page_that_claims_more_bytes_than_its_chunk_is_not_read(
    tmp_path: Path, packed: int
) -> None:
    # a dictionary page whose header claims `packed` bytes (past the chunk's end): None,
    # before a buffer of that size is allocated
    import io
    import tracemalloc

    from undertale_duck.core.parquet.fixed_lists import canonical
    from undertale_duck.core.parquet.pages import page_headers

    path = tmp_path / "part.parquet"
    write(path, 100, 16, "int32", distinct=300, codec="NONE", dictionary=True,
          page=1 << 14, group=100)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start, end = chunk_range(chunk)
    data = path.read_bytes()[start:end]
    first = next(page_headers(io.BytesIO(data), 0, len(data)))
    assert first.kind == 2  # the dictionary page
    header = canonical({**first.fields, 3: packed})
    assert header is not None
    hostile = header + data[first.body:]
    meta = pq.read_metadata(path)
    tracemalloc.start()
    try:
        got = decode_chunk(
            hostile, codec=chunk.compression, physical=chunk.physical_type,
            dtype=np.dtype("int32"), max_definition=meta.schema.column(1).max_definition_level,
            rows=100, values=chunk.num_values,
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got is None
    assert peak < 4 << 20


@pytest.mark.parametrize("kind", ["dictionary", "data"])
def test_a_page_that_claims_to_decompress_to_more_than_its_values_is_not_decompressed(
    tmp_path: Path, kind: str
) -> None:
    # a page header claiming 1 GiB decompressed (a decompression bomb's header): None before
    # a buffer of that size is asked of the pool
    import io

    from undertale_duck.core.parquet.fixed_lists import canonical
    from undertale_duck.core.parquet.pages import page_headers

    path = tmp_path / "part.parquet"
    write(path, 100, 16, "int32", distinct=300, codec="SNAPPY",
          dictionary=kind == "dictionary", page=1 << 20, group=100)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start, end = chunk_range(chunk)
    data = path.read_bytes()[start:end]
    first = next(page_headers(io.BytesIO(data), 0, len(data)))
    assert first.kind == (2 if kind == "dictionary" else 0)
    header = canonical({**first.fields, 2: 1 << 30})
    assert header is not None
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    meta = pq.read_metadata(path)
    got = decode_chunk(
        header + data[first.body:], codec=chunk.compression, physical=chunk.physical_type,
        dtype=np.dtype("int32"), max_definition=meta.schema.column(1).max_definition_level,
        rows=100, values=chunk.num_values, pool=pool,
    )
    assert got is None
    assert pool.max_memory() < 4 << 20


def test_the_value_types_decoded_are_those_stored_bit_for_bit() -> None:
    from undertale_duck.core.parquet.fixed_lists import value_dtype

    assert value_dtype(pa.int32(), "INT32") == np.dtype("<i4")
    assert value_dtype(pa.uint32(), "INT32") == np.dtype("<u4")
    assert value_dtype(pa.int64(), "INT64") == np.dtype("<i8")
    assert value_dtype(pa.float32(), "FLOAT") == np.dtype("<f4")
    assert value_dtype(pa.float64(), "DOUBLE") == np.dtype("<f8")
    # narrower than stored, another kind, another width, not a number
    assert value_dtype(pa.int8(), "INT32") is None
    assert value_dtype(pa.int16(), "INT32") is None
    assert value_dtype(pa.float32(), "INT32") is None
    assert value_dtype(pa.int32(), "FLOAT") is None
    assert value_dtype(pa.int64(), "INT32") is None
    assert value_dtype(pa.string(), "BYTE_ARRAY") is None
    assert value_dtype(pa.date32(), "INT32") is None
