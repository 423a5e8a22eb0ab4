"""The decode bound of a row group from its page headers: never below what pyarrow decodes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck.core.parquet import ShardPages
from undertale_duck.core.parquet import pages as page_scan


def write(path: Path, table: pa.Table, **kw: object) -> ShardPages:
    pq.write_table(table, path, **kw)  # type: ignore[arg-type]
    meta = pq.read_metadata(path)
    return ShardPages(str(path), meta, table.column_names, table.schema)


def decoded(path: Path, group: int) -> int:
    return int(pq.ParquetFile(path).read_row_group(group).get_total_buffer_size())


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 3000),
    width=st.integers(0, 40),
    distinct=st.integers(1, 50),
    tokens=st.integers(0, 64),
    compression=st.sampled_from(["snappy", "zstd", "none"]),
)
def test_bound_covers_the_decode(
    rows: int, width: int, distinct: int, tokens: int, compression: str
) -> None:
    index = np.arange(rows)
    table = pa.table({
        "id": pa.array([f"{i % distinct:0{width}d}" for i in index.tolist()], pa.string()),
        "tokens": pa.array([[i % 100] * tokens for i in index.tolist()], pa.list_(pa.int32())),
        "label": pa.array(index, pa.int64()),
    })
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part.parquet"
        pages = write(path, table, compression=compression, row_group_size=1000)
        for group in range(pq.read_metadata(path).num_row_groups):
            bound = pages.bound(group)
            assert bound is not None
            assert bound >= decoded(path, group)
            # not weighing the dictionary's strings: looser, never tighter
            loose = pages.bound(group, weigh=False)
            assert loose is not None and loose >= bound
            assert pages.bound(group) == bound  # the weighed bound, kept


def test_distinct_strings_are_weighed_by_their_longest_value(tmp_path: Path) -> None:
    rows = 10_000
    table = pa.table({"id": pa.array([f"row-{i:09d}" for i in range(rows)], pa.string())})
    path = tmp_path / "ids.parquet"
    pages = write(path, table, row_group_size=rows)
    meta = pq.read_metadata(path)
    assert "RLE_DICTIONARY" in meta.row_group(0).column(0).encodings
    bound = pages.bound(0)
    assert bound is not None and bound >= decoded(path, 0)
    # each value as long as the longest (13 bytes) plus its offsets, not the whole dictionary
    # page (about 170 KB) per value
    assert bound < 100 * rows


def _walk(data: bytes, entries: int) -> int | None:
    """The specification: walk the length prefixes one value after another."""
    pos, longest = 0, 0
    for _ in range(entries):
        if pos + 4 > len(data):
            return None
        length = int.from_bytes(data[pos:pos + 4], "little")
        pos += 4 + length
        longest = max(longest, length)
    return longest if pos == len(data) else None


def _plain(values: list[bytes]) -> bytes:
    return b"".join(len(v).to_bytes(4, "little") + v for v in values)


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(0, 12),
    count=st.integers(0, 40),
    odd=st.lists(st.tuples(st.integers(0, 39), st.binary(max_size=14)), max_size=3),
    entries_off=st.integers(-2, 2),
    tail=st.binary(max_size=6),
    cut=st.integers(0, 6),
    seed=st.integers(0, 255),
)
def test_longest_plain_value_is_the_walk(
    width: int, count: int, odd: list[tuple[int, bytes]], entries_off: int, tail: bytes,
    cut: int, seed: int,
) -> None:
    # values of one length (the numpy pass), some replaced by others (the walk), and pages
    # whose header miscounts, or whose bytes run short or over
    values = [bytes((seed + i + j) % 256 for j in range(width)) for i in range(count)]
    for place, value in odd:
        if place < len(values):
            values[place] = value
    data = _plain(values)
    for page in (data, data + tail, data[:len(data) - cut] if cut <= len(data) else data):
        for entries in {count, max(0, count + entries_off)}:
            assert page_scan.longest_plain_value(page, entries) == _walk(page, entries)


def test_longest_plain_value_of_equal_lengths_checks_every_prefix() -> None:
    # 4 values of 4 bytes fill 32 bytes; a value whose bytes look like a prefix does not
    # fool it: the third value's prefix says 0, so the walk ends elsewhere
    values = [b"abcd", b"efgh", b"ijkl", b"mnop"]
    data = bytearray(_plain(values))
    assert page_scan.longest_plain_value(bytes(data), 4) == 4
    data[16:20] = (0).to_bytes(4, "little")
    assert page_scan.longest_plain_value(bytes(data), 4) == _walk(bytes(data), 4)
    assert page_scan.longest_plain_value(bytes(data), 4) != 4
    assert page_scan.longest_plain_value(b"", 0) == 0
    assert page_scan.longest_plain_value(b"\x00\x00\x00\x00", 1) == 0
    assert page_scan.longest_plain_value(b"\x00\x00\x00\x00" * 3, 3) == 0
    assert page_scan.longest_plain_value(b"\x05\x00\x00\x00ab", 1) is None
