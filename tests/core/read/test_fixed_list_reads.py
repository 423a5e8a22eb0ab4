"""Windows whose fixed-length numeric lists core/parquet/fixed_lists.py decodes: DuckDB's
tables, the row function's values, and DuckDB's answer for damaged pages."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset, collate
from undertale_duck.core.parquet import fixed_lists, pages
from undertale_duck.core.read import direct as direct_module
from undertale_duck.core.source import window_row_groups
from undertale_duck.errors import CorruptShardError

VALUE_TYPES = {"i32": pa.int32(), "i64": pa.int64(), "u32": pa.uint32(),
               "f32": pa.float32(), "f64": pa.float64(), "i16": pa.int16(),
               "u16": pa.uint16()}


def tokens(kind: str, row: int, length: int) -> list[Any]:
    """Row ``row``'s list: a function of the global row index and the position."""
    values = [(row * 131 + k * 7) % 5003 for k in range(length)]
    if kind.startswith("f"):
        return [v / 4 for v in values]
    if kind == "i64":
        return [v - (1 << 40) for v in values]
    return values


def table(kind: str, start: int, stop: int, length: int) -> pa.Table:
    rows = range(start, stop)
    return pa.table({
        "id": pa.array(list(rows), pa.int64()),
        "tokens": pa.array([tokens(kind, r, length) for r in rows],
                           pa.list_(VALUE_TYPES[kind])),
        "mask": pa.array([[1] * (r % length + 1) + [0] * (length - r % length - 1)
                          for r in rows], pa.list_(pa.int8())),
    })


def both(root: Path, **kwargs: Any) -> tuple[ParquetDataset, ParquetDataset]:
    """The dataset as it reads by default, and the same read by DuckDB only."""
    fast = ParquetDataset(root, read_ahead=False, **kwargs)
    slow = ParquetDataset(root, read_ahead=False, **kwargs)
    slow.reader.direct = None
    return fast, slow


def whole_windows(ds: ParquetDataset) -> int:
    """The windows that are exactly their row groups' rows."""
    count = 0
    for window in ds.windows:
        shard = ds.source.shards[window.shard]
        groups, skip = window_row_groups(shard.row_groups, window)
        rows = sum(shard.row_groups[g][0] for g in groups)
        count += bool(window.rows) and skip == 0 and window.rows == rows
    return count


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(VALUE_TYPES)),
    length=st.sampled_from([16, 24, 64, 512]),
    sizes=st.lists(st.integers(1, 150), min_size=1, max_size=3),
    group=st.integers(5, 150),
    window=st.sampled_from([3_000, 40_000, None]),
    codec=st.sampled_from(["none", "snappy", "zstd", "gzip"]),
    dictionary=st.booleans(),
    page=st.sampled_from([1 << 10, 1 << 20]),
    checksums=st.booleans(),
)
def test_windows_of_fixed_length_lists_read_as_duckdb_reads_them(
    kind: str, length: int, sizes: list[int], group: int, window: int | None, codec: str,
    dictionary: bool, page: int, checksums: bool, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("fixed")
    start = 0
    for k, size in enumerate(sizes):
        pq.write_table(table(kind, start, start + size, length), root / f"part-{k}.parquet",
                       row_group_size=group, compression=codec, use_dictionary=dictionary,
                       data_page_size=page, write_page_checksum=checksums)
        start += size
    fast, slow = both(root, window_bytes=window)
    with pytest.MonkeyPatch.context() as patch:
        # runs of any density decoded (by default a mask of 16 values a row, two bits a
        # value, is pyarrow's)
        patch.setattr(fixed_lists, "RUN_BITS", 64)
        for position in range(len(fast.windows)):
            a, b = fast.reader.read(position), slow.reader.read(position)
            assert a.equals(b), position
    direct = fast.reader.direct
    assert direct is not None
    # every window that is its row groups has its tokens and its mask (int8 stored as
    # INT32, in runs of repeated values) decoded by the fast path (the id, not a list, by
    # pyarrow); the windows cut from groups have them decoded page by page, the two
    # columns of each decode of the groups begun, none handed to pyarrow part-way
    whole = whole_windows(fast)
    assert direct.stats["fixed_lists"] == 2 * whole
    assert direct.stats["streamed_lists"] == 2 * (direct.stats["streams"] - whole)
    assert direct.stats["streamed_lists"] > 0 or whole == len(fast.windows)
    assert direct.stats["lists_declined"] == 0
    assert direct.stats["fallback"] == 0
    want = table(kind, 0, start, length).to_pylist()
    assert fast.__getitems__(list(range(start))) == want
    assert [fast[i] for i in reversed(range(start))] == want[::-1]


def test_the_fast_path_serves_the_dataset_s_rows_and_tensors(tmp_path: Path) -> None:
    # an undertale-like shard: 512 int32 tokens a row in dictionary pages, groups of 1,000
    import torch

    pq.write_table(table("i32", 0, 3_000, 512), tmp_path / "part-0.parquet",
                   row_group_size=1_000)
    ds = ParquetDataset(tmp_path, format="torch", read_ahead=False)
    assert len(ds.windows) >= 1 and whole_windows(ds) == len(ds.windows)
    rows = list(range(2_990, 3_000)) + list(range(10))
    batch = collate(ds.__getitems__(rows))
    assert torch.equal(batch["tokens"], torch.tensor([tokens("i32", r, 512) for r in rows],
                                                     dtype=torch.int32))
    assert batch["id"].tolist() == rows
    direct = ds.reader.direct
    assert direct is not None and direct.stats["fixed_lists"] >= 1
    # a writable copy: a batch written to leaves the dataset's rows as they are
    batch["tokens"][0, 0] = -1
    assert collate(ds.__getitems__([2_990]))["tokens"][0, 0] == tokens("i32", 2_990, 512)[0]


@pytest.mark.parametrize("make", ["ragged", "null list", "null value", "length 20"])
def test_lists_the_fast_path_does_not_take_are_pyarrow_s(tmp_path: Path, make: str) -> None:
    rows = 200

    def row(r: int) -> list[int | None] | None:
        length = {"ragged": 16 + r % 3 * 8, "length 20": 20}.get(make, 16)
        values: list[int | None] | None = list(range(r, r + length))
        if make == "null list" and r % 7 == 3:
            values = None
        if make == "null value" and r % 7 == 3 and values is not None:
            values[5] = None
        return values

    data = pa.table({"tokens": pa.array([row(r) for r in range(rows)], pa.list_(pa.int32()))})
    pq.write_table(data, tmp_path / "part-0.parquet", row_group_size=50)
    fast, slow = both(tmp_path)
    for position in range(len(fast.windows)):
        assert fast.reader.read(position).equals(slow.reader.read(position))
    assert [fast[i]["tokens"] for i in range(rows)] == [row(r) for r in range(rows)]
    direct = fast.reader.direct
    assert direct is not None and direct.stats["direct"] > 0
    assert direct.stats["fixed_lists"] == 0


@pytest.mark.parametrize("make", ["null value", "long row", "longer group", "int64"])
@pytest.mark.parametrize("window_bytes", [3_000, 20_000])
def test_windows_cut_from_a_group_hand_its_lists_to_pyarrow_from_a_page_not_decoded(
    tmp_path: Path, make: str, window_bytes: int,
) -> None:
    # the lists of a row group cut into windows are decoded page by page; from the first
    # page the module declines (a null inside a row; a row of 24 values and one of 8, so
    # that the group still counts 16 a row; a second group of rows of 24), pyarrow decodes
    # the column, from the row after those already handed out; int64 values in plain
    # pages are decoded to the end
    rows = 400

    def row(r: int) -> list[int | None]:
        values: list[int | None] = [(r * 31 + k) % 1000 for k in range(16)]
        if make == "null value" and r == 230:
            values[5] = None
        if make == "long row" and r == 230:
            values += [7] * 8
        if make == "long row" and r == 231:
            values = values[:8]  # the group's values stay 16 a row
        if make == "longer group" and r >= 300:  # the second group: 24 values a row
            values += [r % 5] * 8
        return values

    kind = pa.int64() if make == "int64" else pa.int32()
    data = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "tokens": pa.array([row(r) for r in range(rows)], pa.list_(kind)),
    })
    # two groups; pages of a few rows, so that windows cut pages anywhere
    pq.write_table(data, tmp_path / "part-0.parquet", row_group_size=300,
                   data_page_size=512, use_dictionary=make != "int64")
    fast, slow = both(tmp_path, window_bytes=window_bytes)
    assert whole_windows(fast) < len(fast.windows)  # windows cut from a group
    for position in range(len(fast.windows)):
        assert fast.reader.read(position).equals(slow.reader.read(position)), position
    direct = fast.reader.direct
    assert direct is not None and direct.stats["fallback"] == 0
    assert direct.stats["streamed_lists"] >= 1
    # (a window of the second group streams it alone, judged by its own rows; one that
    # spans both groups takes the second from pyarrow)
    if make != "longer group":
        assert (direct.stats["lists_declined"] >= 1) == (make != "int64")
    assert [fast[i]["tokens"] for i in range(rows)] == [row(r) for r in range(rows)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.integers(1, 90), min_size=1, max_size=8),
    batch_rows=st.integers(1, 200),
    bad=st.sampled_from([None, 0, 77, 299, 300, 450]),
    second=st.sampled_from([32, 40, 16]),
)
def test_a_streamed_list_column_hands_out_each_row_once_in_pieces_of_any_size(
    pieces: list[int], batch_rows: int, bad: int | None, second: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # two row groups of rows of 32 values taken in pieces that cut pages and groups
    # anywhere; from a row with a null inside (``bad``), or from a second group of rows of
    # another length (longer, or shorter: its pages would fill more rows than asked),
    # pyarrow's reader of the column (in batches of its own size) hands out the rest, past
    # the rows handed out
    from undertale_duck.core.parquet import ShardPages

    root = tmp_path_factory.mktemp("streamed")
    rows = 500

    def row(r: int) -> list[int | None]:
        values: list[int | None] = [(r * 17 + k) % 999 for k in range(32 if r < 300 else second)]
        if r == bad:
            values[3] = None
        return values

    data = pa.table({"tokens": pa.array([row(r) for r in range(rows)], pa.list_(pa.int32()))})
    path = root / "a.parquet"
    pq.write_table(data, path, row_group_size=300, data_page_size=700)
    meta = pq.read_metadata(path)
    shard = ShardPages(str(path), meta, ["tokens"], data.schema)
    field = data.schema.field("tokens")
    column = direct_module._StreamedList(
        shard, [0, 1], 0, field, np.dtype(np.int32), 32, batch_rows=batch_rows, threads=False,
    )
    got: list[Any] = []
    at, k = 0, 0
    try:
        while at < rows:
            n = min(pieces[k % len(pieces)], rows - at)
            k += 1
            part = column.take(n)
            assert len(part) == n and part.type == field.type
            got.extend(part.to_pylist())
            at += n
        assert column.declined == (second != 32 or bad is not None)
    finally:
        column.close()
    assert got == [row(r) for r in range(rows)]


@settings(max_examples=30, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 1 << 30),
    flips=st.integers(1, 4),
    codec=st.sampled_from(["none", "snappy", "zstd"]),
    dictionary=st.booleans(),
    checksums=st.booleans(),
    cut=st.booleans(),
)
def test_damaged_list_pages_read_as_without_the_fast_path(
    seed: int, flips: int, codec: str, dictionary: bool, checksums: bool, cut: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # bits flipped inside the tokens' and the mask's column chunks: the read gives the
    # table pyarrow's decode of every column gives, or fails with the same class of error.
    # (Not DuckDB's table: without checksums, pyarrow and DuckDB already read some damaged
    # pages to different values, and word a few errors differently, with or without this
    # path.)
    root = tmp_path_factory.mktemp("fixed-damaged")
    path = root / "a.parquet"
    pq.write_table(table("i32", 0, 240, 16), path, row_group_size=80, compression=codec,
                   data_page_size=512, use_dictionary=dictionary,
                   write_page_checksum=checksums)
    # windows that are their row groups (the lists decoded whole), or cut from them (page
    # by page, a window's rows at a time)
    window = {"window_bytes": 2_500} if cut else {}
    with pytest.MonkeyPatch.context() as dense:
        dense.setattr(fixed_lists, "RUN_BITS", 64)  # the mask's runs decoded at any density
        undamaged = ParquetDataset(root, read_ahead=False, **window)
        undamaged.reader.read(0)
        assert undamaged.reader.direct is not None
        # the path under test: the tokens and the mask
        stats = undamaged.reader.direct.stats
        assert stats["streamed_lists" if cut else "fixed_lists"] == 2
        assert len(undamaged.windows) > (6 if cut else 0)
        undamaged.close()
        meta = pq.read_metadata(path)
        raw = bytearray(path.read_bytes())
        rng = random.Random(seed)
        for _ in range(flips):
            group = rng.randrange(meta.num_row_groups)
            column = rng.choice([1, 2])  # the tokens or the mask
            start, end = pages.chunk_range(meta.row_group(group).column(column))
            raw[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(raw))
        fast = ParquetDataset(root, read_ahead=False, **window)
        got = [_outcome(fast, position) for position in range(len(fast.windows))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(direct_module, "FIXED_LISTS", False)
        before = ParquetDataset(root, read_ahead=False, **window)
        want = [_outcome(before, position) for position in range(len(before.windows))]
    assert before.reader.direct is not None
    assert before.reader.direct.stats["fixed_lists"] == 0
    assert before.reader.direct.stats["streamed_lists"] == 0
    for (kind, value), (kind_want, value_want) in zip(got, want, strict=True):
        assert kind == kind_want, (value, value_want)
        if kind == "ok":
            assert value.equals(value_want)


def _outcome(ds: ParquetDataset, position: int) -> tuple[str, Any]:
    try:
        return "ok", ds.reader.read(position)
    except Exception as exc:  # the class is what is compared
        return type(exc).__name__, str(exc)


def test_a_list_page_whose_checksum_fails_is_named(tmp_path: Path) -> None:
    path = tmp_path / "part-0.parquet"
    pq.write_table(table("i32", 0, 300, 16), path, row_group_size=100, compression="NONE",
                   use_dictionary=False, write_page_checksum=True, data_page_size=1024)
    meta = pq.read_metadata(path)
    _, end = pages.chunk_range(meta.row_group(2).column(1))
    raw = bytearray(path.read_bytes())
    raw[end - 1] ^= 0x10  # a value byte of the last page: only its CRC tells
    path.write_bytes(bytes(raw))
    ds = ParquetDataset(tmp_path, read_ahead=False, window_bytes=20_000)
    want = table("i32", 0, 200, 16).to_pylist()
    assert ds.__getitems__(list(range(200))) == want
    direct = ds.reader.direct
    assert direct is not None and direct.stats["fixed_lists"] >= 1
    named = r"column 'tokens.list.element' in row group 2 .*CRC-32"
    with pytest.raises(CorruptShardError, match=named):
        ds[299]


@pytest.mark.parametrize("window_bytes", [20_000, 60_000, 200_000])
def test_a_window_holds_its_lists_in_memory_it_owns(tmp_path: Path, window_bytes: int) -> None:
    # windows cut from row groups of 100 rows, windows of one group, and of three: the
    # fast path decodes a window's lists into memory of its own rows only (a buffer of the
    # whole group behind several windows would outlive the cache's eviction of some)
    pq.write_table(table("i64", 0, 400, 64), tmp_path / "part-0.parquet", row_group_size=100)
    ds = ParquetDataset(tmp_path, read_ahead=False, window_bytes=window_bytes)
    for position, window in enumerate(ds.windows):
        got = ds.reader.read(position).column("tokens")
        held = sum(c.values.buffers()[1].size for c in got.chunks)
        assert held <= window.rows * 64 * 8, (position, held)
        assert np.array_equal(
            np.concatenate([c.flatten().to_numpy() for c in got.chunks]).reshape(-1, 64),
            np.array([tokens("i64", r, 64) for r in range(window.start, window.stop)]))
    direct = ds.reader.direct
    assert direct is not None
    # (the tokens and the mask of each window that is its row groups)
    assert direct.stats["fixed_lists"] == 2 * whole_windows(ds) and direct.stats["fallback"] == 0


@pytest.mark.parametrize("claim", [1 << 25, 6_000])
def test_a_footer_that_overstates_the_lists_allocates_nothing_for_them(
    tmp_path: Path, claim: int
) -> None:
    # the footer claims `claim` rows of 16 values (2 GiB of int32 for 2**25) where the pages
    # hold 3,000: the fast path must not size its buffer by the claim, and the read gives
    # DuckDB's error as before
    from support import footer

    from undertale_duck.core.runtime import read_pool

    src = tmp_path / "src.parquet"
    pq.write_table(table("i32", 0, 3_000, 16), src, row_group_size=3_000)
    root = tmp_path / "lying"
    root.mkdir()

    def edit(meta: footer.Struct) -> None:
        footer.put(meta, 3, claim)
        for group in footer.row_groups(meta):
            footer.put(group, 3, claim)
            for leaf, chunk in enumerate(footer.column_meta(group)):
                footer.put(chunk, 5, claim * (1 if leaf == 0 else 16))

    footer.rewrite(src, root / "part-0.parquet", edit)
    ds = ParquetDataset(root, read_ahead=False, window_bytes=1 << 40, memory=4096)
    assert len(ds) == claim and len(ds.windows) == 1
    before = read_pool().max_memory()
    fast = _outcome(ds, 0)
    assert read_pool().max_memory() - before < 64 << 20
    slow = ParquetDataset(root, read_ahead=False, window_bytes=1 << 40, memory=4096)
    slow.reader.direct = None
    assert fast[0] != "ok" and fast == _outcome(slow, 0)


@pytest.mark.parametrize("required", ["list", "element", "both"])
def test_lists_declared_required_read_alike(tmp_path: Path, required: str) -> None:
    # a required list or element changes the maximum definition level (2 or 1): the
    # levels the pages hold are checked against it
    element = pa.field("element", pa.int64(), nullable=required == "list")
    field = pa.field("tokens", pa.list_(element), nullable=required == "element")
    rows = 300
    data = pa.table({"tokens": pa.array([tokens("i64", r, 32) for r in range(rows)],
                                        field.type)}, schema=pa.schema([field]))
    pq.write_table(data, tmp_path / "part-0.parquet", row_group_size=100)
    level = pq.read_metadata(tmp_path / "part-0.parquet").schema.column(0).max_definition_level
    assert level == {"list": 2, "element": 2, "both": 1}[required]
    # against pyarrow's read of every column (DuckDB's differs for required lists with or
    # without this path: a nullable field, its child named "l")
    fast = ParquetDataset(tmp_path, read_ahead=False)
    got = [fast.reader.read(position) for position in range(len(fast.windows))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(direct_module, "FIXED_LISTS", False)
        before = ParquetDataset(tmp_path, read_ahead=False)
        want = [before.reader.read(position) for position in range(len(before.windows))]
    assert all(a.equals(b) for a, b in zip(got, want, strict=True))
    direct = fast.reader.direct
    assert direct is not None and direct.stats["fixed_lists"] == whole_windows(fast) > 0
    assert [fast[i]["tokens"] for i in range(rows)] == [tokens("i64", r, 32) for r in range(rows)]
