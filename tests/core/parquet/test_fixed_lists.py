"""Fixed-length list pages decoded without their levels: always pyarrow's values, or None."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck.core.parquet import fixed_lists
from undertale_duck.core.parquet.fixed_lists import decode_chunk, full_levels, row_levels
from undertale_duck.core.parquet.pages import chunk_range

TYPES = {"int32": pa.int32(), "int64": pa.int64(), "uint32": pa.uint32(),
         "float32": pa.float32(), "float64": pa.float64(), "int8": pa.int8(),
         "int16": pa.int16(), "uint8": pa.uint8(), "uint16": pa.uint16()}
#: How values repeat along a row: not at all, an attention mask (the first ``index %
#: length + 1`` values 1, then 0), tokens padded with a run of zeros, a constant.
PATTERNS = ["cycle", "mask", "padded", "constant"]


def values_of(
    dtype: str, index: np.ndarray, length: int, distinct: int, pattern: str = "cycle",
) -> np.ndarray:
    """Values a function of the global row index and position (``distinct`` of them)."""
    position = np.arange(length)[None, :]
    grid = (index[:, None] * 31 + position) % distinct
    if pattern == "mask":
        grid = (position <= index[:, None] % length).astype(np.int64)
    elif pattern == "padded":  # a row's last (index * 7) % length values are padding
        grid = np.where(position < length - (index[:, None] * 7) % length, grid, 0)
    elif pattern == "constant":
        grid = np.full_like(grid, distinct - 1)
    return grid.astype(dtype)


def write(path: Path, rows: int, length: int, dtype: str, *, distinct: int, codec: str,
          dictionary: bool, page: int, group: int, checksums: bool = False,
          pattern: str = "cycle") -> pa.Table:
    index = np.arange(rows)
    flat = values_of(dtype, index, length, distinct, pattern).reshape(-1)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * length)
    table = pa.table({
        "row": pa.array(index),
        "tokens": pa.ListArray.from_arrays(offsets, pa.array(flat, type=TYPES[dtype])),
    })
    pq.write_table(table, path, compression=codec, use_dictionary=dictionary,
                   data_page_size=page, row_group_size=group,
                   write_page_checksum=checksums)
    return table


def chunk_args(path: Path, group: int, dtype: str) -> tuple[int, int, dict[str, Any]]:
    """Where the tokens' chunk of ``group`` lies, and the footer's arguments to decode it."""
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(group).column(1)
    start, end = chunk_range(chunk)
    return start, end, {
        "codec": chunk.compression, "physical": chunk.physical_type, "dtype": np.dtype(dtype),
        "max_definition": meta.schema.column(1).max_definition_level,
        "rows": meta.row_group(group).num_rows, "values": chunk.num_values,
    }


def decode_group(
    path: Path, group: int, dtype: str, data: bytes | None = None,
) -> np.ndarray | None:
    start, end, args = chunk_args(path, group, dtype)
    if data is None:
        data = path.read_bytes()[start:end]
    return decode_chunk(data, **args)


def pyarrow_group(path: Path, group: int) -> np.ndarray:
    column = pq.ParquetFile(path).read_row_group(group, columns=["tokens"]).column(0)
    lists = column.combine_chunks()
    values: np.ndarray = lists.values.to_numpy(zero_copy_only=False)
    return values.reshape(len(lists), -1)


@settings(max_examples=100, deadline=None,
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
    pattern=st.sampled_from(PATTERNS),
)
def test_a_decoded_chunk_is_pyarrow_s_values_and_pyarrow_written_chunks_are_decoded(
    tmp_path: Path, rows: int, length: int, dtype: str, distinct: int, codec: str,
    dictionary: bool, page: int, group: int, checksums: bool, pattern: str,
) -> None:
    path = tmp_path / "part.parquet"
    write(path, rows, length, dtype, distinct=distinct, codec=codec, dictionary=dictionary,
          page=page, group=group, checksums=checksums, pattern=pattern)
    meta = pq.ParquetFile(path).metadata
    for g in range(meta.num_row_groups):
        with pytest.MonkeyPatch.context() as patch:
            # pages of every density of runs (by default, dense ones are pyarrow's)
            patch.setattr(fixed_lists, "RUN_BITS", 64)
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
        assert np.array_equal(got, values_of(dtype, index, length, distinct, pattern))


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


@pytest.mark.parametrize("dictionary", [True, False])
def test_other_kinds_of_values_or_values_that_do_not_fit_are_left_to_pyarrow(
    tmp_path: Path, dictionary: bool,
) -> None:
    path = tmp_path / "part.parquet"
    write(path, 40, 16, "int32", distinct=200, codec="SNAPPY", dictionary=dictionary,
          page=1 << 20, group=40)
    assert decode_group(path, 0, "int32") is not None
    for other in ("float32", "int64", "bool"):
        assert decode_group(path, 0, other) is None
    # INT32 values read as a narrower integer (Parquet stores int8 and int16 so): each must
    # fit (values 0..199 fit int16 and uint8, not int8)
    assert decode_group(path, 0, "int8") is None
    for narrow in ("int16", "uint8"):
        got = decode_group(path, 0, narrow)
        assert got is not None and got.dtype == np.dtype(narrow)
        assert np.array_equal(got, values_of("int32", np.arange(40), 16, 200))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), dictionary=st.booleans(), codec=st.sampled_from(["NONE", "SNAPPY"]),
       checksums=st.booleans(), pattern=st.sampled_from(PATTERNS),
       dtype=st.sampled_from(["int32", "int8"]))
def test_a_damaged_chunk_gives_pyarrow_s_values_or_none(
    tmp_path: Path, data: st.DataObject, dictionary: bool, codec: str, checksums: bool,
    pattern: str, dtype: str,
) -> None:
    path = tmp_path / "part.parquet"
    # pages of 2 KiB and of 16 KiB (dictionary indices then span full runs of 504)
    write(path, 60, 16, dtype, distinct=300, codec=codec, dictionary=dictionary,
          page=data.draw(st.sampled_from([1 << 11, 1 << 14])), group=60, checksums=checksums,
          pattern=pattern)
    raw = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start, end = chunk_range(chunk)
    at = data.draw(st.integers(start, end - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(bytes(raw))
    got = decode_group(damaged, 0, dtype)
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


def test_the_value_types_decoded_are_those_stored_as_their_width_or_as_int32() -> None:
    from undertale_duck.core.parquet.fixed_lists import value_dtype

    assert value_dtype(pa.int32(), "INT32") == np.dtype("<i4")
    assert value_dtype(pa.uint32(), "INT32") == np.dtype("<u4")
    assert value_dtype(pa.int64(), "INT64") == np.dtype("<i8")
    assert value_dtype(pa.float32(), "FLOAT") == np.dtype("<f4")
    assert value_dtype(pa.float64(), "DOUBLE") == np.dtype("<f8")
    # 8- and 16-bit integers, which Parquet stores as INT32
    assert value_dtype(pa.int8(), "INT32") == np.dtype("i1")
    assert value_dtype(pa.uint16(), "INT32") == np.dtype("<u2")
    # narrower than stored otherwise, another kind, another width, not a number
    assert value_dtype(pa.int8(), "INT64") is None
    assert value_dtype(pa.int32(), "INT64") is None
    assert value_dtype(pa.float32(), "DOUBLE") is None
    assert value_dtype(pa.float32(), "INT32") is None
    assert value_dtype(pa.int32(), "FLOAT") is None
    assert value_dtype(pa.int64(), "INT32") is None
    assert value_dtype(pa.string(), "BYTE_ARRAY") is None
    assert value_dtype(pa.date32(), "INT32") is None


def _hybrid(width: int, runs: list[tuple[str, list[int]]]) -> tuple[bytes, list[int]]:
    """Parquet's RLE/bit-packed hybrid encoding of ``runs`` (written from the format's text)."""
    out = bytearray([width])
    values: list[int] = []
    for kind, run in runs:
        if kind == "rle":
            out += fixed_lists._varint(len(run) << 1) + run[0].to_bytes((width + 7) // 8, "little")
        else:
            groups = len(run) // 8
            out += fixed_lists._varint(groups << 1 | 1)
            bits = [(v >> b) & 1 for v in run for b in range(width)]
            out += np.packbits(np.array(bits, np.uint8), bitorder="little").tobytes()
        values += run
    return bytes(out), values


@st.composite
def hybrid_runs(draw: st.DrawFn) -> tuple[int, list[tuple[str, list[int]]]]:
    width = draw(st.integers(0, 20))
    value = st.integers(0, (1 << width) - 1)
    run = st.one_of(
        st.tuples(st.just("rle"), st.tuples(st.integers(8, 600), value).map(
            lambda nv: [nv[1]] * nv[0])),
        st.tuples(st.just("bp"), st.integers(1, 70).flatmap(
            lambda g: st.lists(value, min_size=8 * g, max_size=8 * g))),
    )
    return width, draw(st.lists(run, min_size=1, max_size=12))


def _runs(view: memoryview, pos: int, count: int, dictionary: np.ndarray,
          target: np.ndarray) -> bool:
    """``fixed_lists._runs`` for pages of any density of runs (the default leaves dense
    ones to pyarrow: a test below)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fixed_lists, "RUN_BITS", 64)
        return fixed_lists._runs(view, pos, count, dictionary, target)


#: Short runs enough for the runs after them to be found by the table (``_chain``).
SHORT = [("rle", [0] * 8)] * (fixed_lists.RUN_PROBE + 1)


@settings(max_examples=300, deadline=None)
@given(drawn=hybrid_runs(), pad=st.integers(0, 7), dtype=st.sampled_from(["<i4", "i1", "<f8"]),
       short=st.booleans())
def test_runs_of_both_kinds_decode_to_their_values_through_the_dictionary(
    drawn: tuple[int, list[tuple[str, list[int]]]], pad: int, dtype: str, short: bool,
) -> None:

    width, runs = drawn
    if short:  # the runs drawn found by the table, not header by header
        runs = SHORT + runs
    encoded, values = _hybrid(width, runs)
    if runs[-1][0] == "rle":
        pad = 0  # only a bit-packed run is padded
    count = len(values) - pad
    dictionary = ((np.arange(max(values) + 1) * 7) % 100).astype(dtype)
    target = np.full(count, 99, dtype=dtype)
    assert _runs(memoryview(encoded), 0, count, dictionary, target)
    want = dictionary[np.array(values[:count], dtype=np.int64)]
    assert np.array_equal(target, want)
    # the next-run table computed in blocks of a few positions: the same
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fixed_lists, "RUN_BLOCK", 5)
        again = np.zeros(count, dtype=dtype)
        assert _runs(memoryview(encoded), 0, count, dictionary, again)
        assert np.array_equal(again, want)

    def refused(data: bytes, n: int, entries: np.ndarray) -> bool:
        return not _runs(memoryview(data), 0, n, entries, np.zeros(n, dtype=dtype))

    # what does not hold count values exactly as the writer ends them is refused
    assert refused(encoded, count + pad + 1, dictionary)
    if runs[-1][0] == "rle" or pad == 7:
        assert refused(encoded, count - 1, dictionary)
    # a byte more or less at the end, an index past the dictionary
    assert refused(encoded + b"\x00", count, dictionary)
    assert refused(encoded[:-1], count, dictionary)
    if max(values):
        assert refused(encoded, count, dictionary[:max(values)])


def test_pages_of_runs_shorter_than_the_writer_s_or_with_long_headers_are_refused() -> None:
    dictionary = np.arange(4, dtype="<i4")
    # 64 runs of one value: more runs than 64 values allow (at most one per 8)
    single, values = _hybrid(2, [("rle", [k % 4]) for k in range(64)])
    target = np.zeros(64, dtype="<i4")
    assert not _runs(memoryview(single), 0, 64, dictionary, target)
    # the same values in runs of 8: decoded
    eights, values = _hybrid(2, [("rle", [k % 4] * 8) for k in range(8)])
    assert _runs(memoryview(eights), 0, 64, dictionary, target)
    assert np.array_equal(target, np.repeat(np.arange(8) % 4, 8))
    # a header of five bytes (a run of 2**28 values or more): refused, not allocated
    huge = bytes([2]) + fixed_lists._varint(1 << 29) + b"\x01"
    assert not _runs(memoryview(huge), 0, 1 << 28, dictionary, np.zeros(1, dtype="<i4"))
    # ... whose first four bytes alone would read as a run of 8 ones, then a run follows
    five = bytes([2, 0x90, 0x80, 0x80, 0x80, 0x01, 0x10, 0x01])
    assert not _runs(memoryview(five), 0, 16, dictionary, np.zeros(16, dtype="<i4"))
    # a header of four bytes: a run of 2**21 values
    long = bytes([2]) + fixed_lists._varint(1 << 22) + b"\x03"
    assert len(long) == 6
    target = np.zeros(1 << 21, dtype="<i4")
    assert _runs(memoryview(long), 0, 1 << 21, dictionary, target)
    assert (target == 3).all()
    target = np.zeros(64, dtype="<i4")
    # a width past 32 bits, an empty run
    assert not _runs(memoryview(bytes([33]) + eights[1:]), 0, 64, dictionary, target)
    assert not _runs(memoryview(bytes([2, 0, 1]) + eights[1:]), 0, 64, dictionary, target)
    # the same after short runs (found by the table): the five-byte header, the empty run
    short, _ = _hybrid(2, SHORT)
    n = 8 * len(SHORT)
    # a five-byte header whose fifth byte adds nothing (it would read as a run of 8)
    zero_fifth = bytes([2, 0x90, 0x80, 0x80, 0x80, 0x00, 0x01])
    assert not _runs(memoryview(zero_fifth), 0, 8, dictionary, np.zeros(8, dtype="<i4"))
    tails = ((five[1:], 16, False), (zero_fifth[1:], 8, False),
             (bytes([0, 1]) + eights[1:], 64, False), (eights[1:], 64, True),
             (long[1:], 1 << 21, True))
    for tail, values, good in tails:
        target = np.zeros(n + values, dtype="<i4")
        assert _runs(memoryview(short + tail), 0, n + values, dictionary, target) == good
        if good:
            assert np.array_equal(target[n:], np.repeat(np.arange(8) % 4, 8) if values == 64
                                  else np.full(values, 3))
    # runs long enough to be read header by header, then more runs than the values allow
    # (64 bit-packed runs of 17 bytes, then 64 runs of a single value: 128 runs of 576)
    mixed, _ = _hybrid(16, [("bp", list(range(8)))] * 64 + [("rle", [1])] * 64)
    target = np.zeros(576, dtype="<i4")
    assert not _runs(memoryview(mixed), 0, 576, np.arange(8, dtype="<i4"), target)


def test_a_large_page_of_runs_is_decoded_in_memory_bounded_by_its_size() -> None:
    # 2 MiB of 16-bit indices in bit-packed runs of 504 and runs of 8 repeats between them:
    # the next-run table is 4 bytes a byte of the page, its temporaries a block's: about
    # 22 MiB in all here (the table computed at once: 112 MiB; the bit-packed bytes
    # gathered by an index of 8 bytes a byte: 46 MiB)
    import tracemalloc

    rng = np.random.default_rng(7)
    cycles = 2_000
    payload = rng.integers(0, 256, size=(cycles, 1 + 1008 + 3), dtype=np.uint8)
    payload[:, 0] = 0x7F  # 63 groups of 8 values, 16 bits each
    payload[:, 1009] = 0x10  # then 8 repeats of the index in the next two bytes
    encoded = bytes([16]) + payload.tobytes()
    count = cycles * 512
    dictionary = (np.arange(1 << 16) % 251).astype("i1")
    target = np.zeros(count, dtype="i1")
    tracemalloc.start()
    try:
        assert _runs(memoryview(encoded), 0, count, dictionary, target)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak
    packed = payload[:, 1:1009].copy().view("<u2")
    repeated = payload[:, 1010:1012].copy().view("<u2")
    indices = np.concatenate([packed, np.repeat(repeated, 8, axis=1)], axis=1).reshape(-1)
    assert np.array_equal(target, dictionary[indices])


def test_pages_mostly_bit_packed_between_runs_are_left_to_pyarrow(tmp_path: Path) -> None:
    # tokens padded with zeros take about 8 bits a value (numpy's passes over them cost what
    # pyarrow's decoding does, and hold the GIL): pyarrow's; their mask, 0.1 bit: decoded
    rows, length = 2_000, 512
    index = np.arange(rows)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * length)
    mask = values_of("int8", index, length, 2, "mask")
    tokens = values_of("int32", index, length, 50_000, "padded")
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({
        "mask": pa.ListArray.from_arrays(offsets, pa.array(mask.reshape(-1))),
        "tokens": pa.ListArray.from_arrays(offsets, pa.array(tokens.reshape(-1))),
    }), path)
    meta = pq.ParquetFile(path).metadata

    def decoded(column: int, dtype: str) -> np.ndarray | None:
        chunk = meta.row_group(0).column(column)
        start, end = chunk_range(chunk)
        return decode_chunk(
            path.read_bytes()[start:end], codec=chunk.compression,
            physical=chunk.physical_type, dtype=np.dtype(dtype),
            max_definition=meta.schema.column(column).max_definition_level, rows=rows,
            values=chunk.num_values)

    got = decoded(0, "int8")
    assert got is not None and np.array_equal(got, mask)
    assert decoded(1, "int32") is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fixed_lists, "RUN_BITS", 64)
        dense = decoded(1, "int32")
    assert dense is not None and np.array_equal(dense, tokens)


def _stream(path: Path, group: int, dtype: str) -> fixed_lists.ChunkStream:

    start, end, args = chunk_args(path, group, dtype)
    return fixed_lists.ChunkStream(io.BytesIO(path.read_bytes()), start, end, **args)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(1, 300),
    length=st.sampled_from([16, 64, 512]),
    dtype=st.sampled_from(["int32", "int8", "float64"]),
    pattern=st.sampled_from(PATTERNS),
    dictionary=st.booleans(),
    codec=st.sampled_from(["NONE", "SNAPPY"]),
    page=st.sampled_from([256, 4096, 1 << 20]),
    pieces=st.lists(st.integers(1, 120), min_size=1, max_size=12),
)
def test_a_chunk_taken_in_pieces_of_any_size_is_the_whole_decode(
    tmp_path: Path, rows: int, length: int, dtype: str, pattern: str, dictionary: bool,
    codec: str, page: int, pieces: list[int],
) -> None:
    # the windows cut from a row group take its rows in pieces that cut pages anywhere: the
    # rows come in order, each once, as decoding the chunk whole gives them
    path = tmp_path / f"pieces-{rows}-{length}-{dtype}-{pattern}-{dictionary}-{codec}-{page}.pq"
    write(path, rows, length, dtype, distinct=97, codec=codec, dictionary=dictionary,
          page=page, group=rows, pattern=pattern)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fixed_lists, "RUN_BITS", 64)  # runs of any density decoded
        whole = decode_group(path, 0, dtype)
        stream = _stream(path, 0, dtype)
        got, at, k = [], 0, 0
        while at < rows:
            n = min(pieces[k % len(pieces)], rows - at)
            k += 1
            out = np.full((n, length), 99, dtype=dtype)
            filled = stream.fill(out.reshape(-1))
            if whole is None:  # a page the module declines: the rows before it stand
                assert filled <= n
                if filled < n:
                    assert stream.declined and not stream.ended()
                    assert np.array_equal(np.concatenate([*got, out[:filled]]),
                                          pyarrow_group(path, 0)[:at + filled])
                    return
            assert filled == n
            got.append(out)
            at += n
    assert whole is not None
    assert np.array_equal(np.concatenate(got), whole)
    assert np.array_equal(whole, pyarrow_group(path, 0))
    assert stream.ended() and stream.fill(np.empty(length, dtype=dtype)) == 0


def test_pages_past_a_chunks_values_end_it_whenever_asked(tmp_path: Path) -> None:
    # a byte range running on into the next column's chunk: its values all handed out, the
    # pages do not end there, and asking again (the streamed column asks twice) must not
    # read on until they seem to
    table = pa.table({
        "row": pa.array(range(100)),
        "tokens": pa.array([[r] * 16 for r in range(100)], pa.list_(pa.int32())),
        "after": pa.array(range(100), pa.int64()),
    })
    path = tmp_path / "runs-on.parquet"
    pq.write_table(table, path, row_group_size=100, use_dictionary=False)
    start, _, args = chunk_args(path, 0, "int32")
    _, end = chunk_range(pq.ParquetFile(path).metadata.row_group(0).column(2))
    for stop in (end, chunk_args(path, 0, "int32")[1]):
        stream = fixed_lists.ChunkStream(io.BytesIO(path.read_bytes()), start, stop, **args)
        out = np.zeros((100, 16), dtype=np.int32)
        assert stream.fill(out.reshape(-1)) == 100
        assert out.tolist() == [[r] * 16 for r in range(100)]
        verdicts = [stream.ended() for _ in range(3)]
        assert verdicts == [stop != end] * 3


def test_a_stream_declines_at_the_first_page_it_cannot_decode(tmp_path: Path) -> None:
    # rows of 16 values, one of 24 in the middle: the pages before it are handed out, the
    # page holding it is declined, and nothing after it
    rows = [list(range(r, r + (24 if r == 150 else 16))) for r in range(300)]
    table = pa.table({"row": pa.array(range(300)), "tokens": pa.array(rows, pa.list_(pa.int32()))})
    path = tmp_path / "ragged.parquet"
    pq.write_table(table, path, data_page_size=512, row_group_size=300, use_dictionary=False)
    meta = pq.ParquetFile(path).metadata
    # the footer counts 8 values more than 300 rows of 16: not a chunk of one length
    assert meta.row_group(0).column(1).num_values == 300 * 16 + 8
    assert _stream(path, 0, "int32").length is None
    # the same rows with a null list instead: 300 x 16 values with the null counted as one
    rows[150] = None  # type: ignore[call-overload]
    rows[151] = list(range(151, 151 + 31))  # 16 + 15 more: the footer's count is 300 x 16
    table = pa.table({"row": pa.array(range(300)), "tokens": pa.array(rows, pa.list_(pa.int32()))})
    pq.write_table(table, path, data_page_size=512, row_group_size=300, use_dictionary=False)
    assert pq.ParquetFile(path).metadata.row_group(0).column(1).num_values == 300 * 16
    stream = _stream(path, 0, "int32")
    assert stream.length == 16
    out = np.zeros((300, 16), dtype=np.int32)
    filled = stream.fill(out.reshape(-1))
    assert 0 < filled <= 150 and stream.declined and not stream.ended()
    assert out[:filled].tolist() == [list(range(r, r + 16)) for r in range(filled)]
    assert stream.fill(out.reshape(-1)) == 0  # declined: nothing more
