"""pyarrow's window reads (core/direct.py, gated by core/pages.py) against DuckDB's: equal
tables for random layouts, types, nulls, encodings, codecs, row groups and windows; the same
errors for hostile, corrupt and unsupported files."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import datagen
from support import hostile_files as hf

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import pages
from undertale_duck.core.read import window_read
from undertale_duck.core.source import window_row_groups
from undertale_duck.errors import CorruptShardError

DAY0 = dt.date(2020, 1, 1)


def _value(kind: str, i: int) -> Any:
    return {
        "i8": (i * 37) % 256 - 128,
        "i16": (i * 7919) % 65536 - 32768,
        "i32": i * 104729 - (1 << 30),
        "i64": i * 1_000_000_007 - (1 << 40),
        "u8": (i * 13) % 256,
        "u32": (i * 2654435761) % (1 << 32),
        "u64": (1 << 64) - 1 - i,
        "f32": i / 8,
        "f64": i * 0.1 - 3.5,
        "bool": i % 3 == 0,
        "str": f"s{i % 17}" * (i % 4),
        "lstr": f"long-{i}",
        "bin": bytes([(i + k) % 256 for k in range(i % 5)]),
        "date": DAY0 + dt.timedelta(days=i % 4000),
        "li32": [(i * 31 + k) % 1000 for k in range(i % 6)],
        "lstr_list": [f"t{i % 3}"] * (i % 3),
        "dict": ("alpha", "beta", "gamma")[i % 3],
    }[kind]


TYPES: dict[str, pa.DataType] = {
    "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
    "u8": pa.uint8(), "u32": pa.uint32(), "u64": pa.uint64(),
    "f32": pa.float32(), "f64": pa.float64(), "bool": pa.bool_(), "str": pa.string(),
    "lstr": pa.large_string(), "bin": pa.binary(), "date": pa.date32(),
    "li32": pa.list_(pa.int32()), "lstr_list": pa.list_(pa.string()),
    "dict": pa.dictionary(pa.int32(), pa.string()),
}
#: Encodings pyarrow can write without a dictionary, per kind (besides PLAIN).
ENCODINGS: dict[str, list[str]] = {
    "i32": ["DELTA_BINARY_PACKED"], "i64": ["DELTA_BINARY_PACKED"],
    "u32": ["DELTA_BINARY_PACKED"], "u64": ["DELTA_BINARY_PACKED"],
    "f32": ["BYTE_STREAM_SPLIT"], "f64": ["BYTE_STREAM_SPLIT"],
    "str": ["DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"],
    "bin": ["DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"],
}


def _table(kinds: list[str], start: int, stop: int, nulls: int) -> pa.Table:
    arrays = []
    for c, kind in enumerate(kinds):
        values = [
            None if nulls and (i + c) % nulls == 0 else _value(kind, i)
            for i in range(start, stop)
        ]
        typ = TYPES[kind]
        if pa.types.is_dictionary(typ):
            arrays.append(pa.array(values, pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(values, typ))
    return pa.table(arrays, names=[f"c{c}_{k}" for c, k in enumerate(kinds)])


def _both(root: Path, **kwargs: Any) -> tuple[ParquetDataset, ParquetDataset]:
    """The dataset as it reads by default, and the same read by DuckDB only."""
    fast = ParquetDataset(root, read_ahead=False, **kwargs)
    slow = ParquetDataset(root, read_ahead=False, **kwargs)
    slow.reader.direct = None
    return fast, slow


def _outcome(attempt: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", attempt()
    except Exception as exc:  # the class and message are what is compared
        return type(exc).__name__, str(exc)


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=4),
    sizes=st.lists(st.integers(0, 120), min_size=1, max_size=3),
    group=st.integers(1, 50),
    window=st.integers(100, 5000),
    nulls=st.sampled_from([0, 2, 5]),
    dictionary=st.booleans(),
    encoding=st.integers(0, 3),
    compression=st.sampled_from(["none", "snappy", "gzip", "zstd", "brotli", "lz4"]),
    version=st.sampled_from(["1.0", "2.0"]),
    page=st.sampled_from([64, 1 << 20]),
)
def test_pyarrow_and_duckdb_reads_are_equal(
    kinds: list[str], sizes: list[int], group: int, window: int, nulls: int,
    dictionary: bool, encoding: int, compression: str, version: str, page: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("direct")
    start = 0
    columns = _table(kinds, 0, 0, nulls).column_names
    encodings = {
        name: ENCODINGS[kind][encoding % len(ENCODINGS[kind])]
        for name, kind in zip(columns, kinds, strict=True)
        if kind in ENCODINGS and encoding and not dictionary
    }
    for k, size in enumerate(sizes):
        pq.write_table(
            _table(kinds, start, start + size, nulls), root / f"part-{k}.parquet",
            row_group_size=group, compression=compression, use_dictionary=dictionary,
            column_encoding=encodings or None, data_page_version=version,
            data_page_size=page,
        )
        start += size
    fast, slow = _both(root, window_bytes=window)
    for position in range(len(fast.windows)):
        a, b = fast.reader.read(position), slow.reader.read(position)
        assert a.equals(b), (position, a.schema, b.schema)
        # one buffer per column, or pyarrow's batches kept as decoded (alike in every column)
        assert len({tuple(len(ch) for ch in c.chunks) for c in a.columns}) == 1
        assert all(1 <= c.num_chunks <= window_read.MAX_KEPT_CHUNKS for c in a.columns)
    # on the allow-list: these codecs, and booleans only PLAIN (v1; v2 writes them RLE)
    plain = compression in ("none", "snappy", "gzip", "zstd") and not (
        version == "2.0" and "bool" in kinds
    )
    if plain and fast.windows and any(w.rows for w in fast.windows):
        assert fast.reader.direct is not None and fast.reader.direct.stats["direct"] > 0
    if compression in ("brotli", "lz4"):
        assert fast.reader.direct is not None and fast.reader.direct.stats["direct"] == 0
    want = _table(kinds, 0, start, nulls).to_pylist()
    assert fast.__getitems__(list(range(len(fast)))) == want
    backwards = list(range(len(fast)))[::-1]  # rows out of order, from windows kept or not
    assert fast.__getitems__(backwards) == want[::-1]
    assert fast.sql("SELECT * FROM dataset").to_pylist() == [
        {k: v for k, v in row.items()} for row in slow.__getitems__(list(range(len(slow))))
    ]


@settings(max_examples=40, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 1 << 30),
    flips=st.integers(1, 8),
    compression=st.sampled_from(["none", "snappy", "zstd"]),
    dictionary=st.booleans(),
    delta=st.booleans(),
    version=st.sampled_from(["1.0", "2.0"]),
)
def test_corrupt_data_pages_give_duckdbs_answer(
    seed: int, flips: int, compression: str, dictionary: bool, delta: bool, version: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Flipped bits anywhere before the footer: pyarrow's read must give DuckDB's table, or
    # fail and leave the window to DuckDB (its error, class and message)
    root = tmp_path_factory.mktemp("direct-corrupt")
    path = root / "a.parquet"
    kinds = ["i64", "str", "li32", "f64", "bin", "bool"]
    table = _table(kinds, 0, 300, 5)
    encodings = None
    if delta and not dictionary:
        encodings = {"c0_i64": "DELTA_BINARY_PACKED", "c1_str": "DELTA_BYTE_ARRAY",
                     "c3_f64": "BYTE_STREAM_SPLIT", "c4_bin": "DELTA_LENGTH_BYTE_ARRAY"}
    pq.write_table(table, path, row_group_size=100, compression=compression,
                   data_page_size=256, use_dictionary=dictionary, column_encoding=encodings,
                   data_page_version=version)
    meta = pq.read_metadata(path)
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    data_end = path.stat().st_size - 8 - meta.serialized_size
    for _ in range(flips):
        at = rng.randrange(4, max(5, data_end))
        data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    fast, slow = _both(root, window_bytes=2000)
    for position in range(len(fast.windows)):
        got, want = (
            _outcome(lambda ds=ds, p=position: ds.reader.read(p)) for ds in (fast, slow)
        )
        assert got[0] == want[0], (got, want)
        if got[0] == "ok":
            assert got[1].equals(want[1])
        elif "cannot be decompressed" in got[1]:
            # a page pyarrow's codec refuses is reported by pyarrow's read itself (DuckDB's
            # decompressor fails on it too, in its own words)
            assert "is corrupt: rows" in got[1] and "is corrupt" in want[1], (got, want)
        else:
            assert got[1] == want[1]


def _hostile(root: Path) -> dict[str, Path]:
    """Every hostile file of hostile_files.py that opens, in its own directory."""
    made: dict[str, Path] = {}

    def place(name: str) -> Path:
        folder = root / name
        folder.mkdir()
        made[name] = folder
        return folder / f"{name}.parquet"

    hf.repeated_no_annotation(place("repeated"))
    src = root / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    hf.claim_rows(src, place("claim1000"), 1000)
    hf.claim_rows(src, place("claim2_38"), 1 << 38)
    hf.claim_rows(src, place("claim2_38_nobytes"), 1 << 38, group_bytes=0)
    hf.map_without_values(place("map"))
    hf.invalid_geoparquet(place("geo"))
    hf.bomb(place("bomb_under"), 80, understate=True)
    hf.bomb(place("bomb"), 80, understate=False)
    hf.dictionary_bomb(place("dictionary_bomb"), 4096, 32 << 10)  # 128 MiB decoded
    values = pa.array([bytes([i]) * 4 for i in range(10)], pa.binary(4))
    pq.write_table(pa.table({"x": values}), place("bss_flba"), use_dictionary=False,
                   column_encoding={"x": "BYTE_STREAM_SPLIT"})
    ints = pa.table({"x": pa.array(range(10), pa.int32())})
    pq.write_table(ints, place("bss_int"), use_dictionary=False,
                   column_encoding={"x": "BYTE_STREAM_SPLIT"})
    pq.write_table(pa.table({"x": pa.array([1, 2], pa.timestamp("ns"))}), place("int96"),
                   use_deprecated_int96_timestamps=True)
    return made


@pytest.mark.parametrize("window", [1, None])  # the smallest windows, and the default
def test_hostile_files_give_the_same_errors_as_duckdb(tmp_path: Path, window: int | None) -> None:
    for name, folder in _hostile(tmp_path).items():
        fast, slow = _both(folder, memory=64, window_bytes=window)
        rows = min(len(fast), 3)
        for attempt in ("item", "batch"):
            got, want = (
                _outcome(
                    (lambda ds=ds, n=rows: [ds[i] for i in range(n)])
                    if attempt == "item"
                    else (lambda ds=ds, n=rows: ds.__getitems__(list(range(n))))
                )
                for ds in (fast, slow)
            )
            assert got == want, (name, attempt)
        # none of these is decoded by pyarrow: the gate refuses them, or pyarrow's read
        # fails (a footer claiming more rows than the pages hold) and DuckDB reads it
        direct = fast.reader.direct
        assert direct is not None and direct.stats["direct"] == 0, name


def test_the_gate_sees_pages_that_understate_their_size(tmp_path: Path) -> None:
    path = tmp_path / "bomb.parquet"
    hf.bomb(path, 80, understate=True)  # the footer records 4 KiB for 80 MiB of pages
    ds = ParquetDataset(path, memory=256)
    shard = ds.source.shards[0]
    assert shard.row_groups[0][1] == 4096
    gate = pages.ShardPages(shard.path, pq.read_metadata(path), ["s"], ds.source.schema)
    bound = gate.bound(0)
    assert bound is not None and bound >= 80 << 20
    assert len(ds[79]["s"]) == 1 << 20  # within a budget that holds it, read by pyarrow
    assert ds.reader.direct is not None and ds.reader.direct.stats["direct"] >= 1


def test_views_and_other_types_go_through_duckdb(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [30, 20], row_group_size=7)
    view = ParquetDataset(tmp_path, where="label > 2")
    assert view.reader.direct is None
    everything = ParquetDataset(tmp_path, window_bytes=300, read_ahead=False)  # struct, time
    want = datagen.expected(50)
    assert [everything[i] for i in range(50)] == want
    assert everything.reader.direct is not None
    assert everything.reader.direct.stats["direct"] == 0
    plain = ParquetDataset(tmp_path, columns=["label", "tokens", "id", "category"],
                           window_bytes=300, read_ahead=False)
    assert [plain[i] for i in range(50)] == [
        {k: r[k] for k in ("label", "tokens", "id", "category")} for r in want
    ]
    assert plain.reader.direct is not None and plain.reader.direct.stats["direct"] > 0


def test_window_row_groups() -> None:
    from undertale_duck.core.source.source import Shard
    from undertale_duck.core.source.windows import Window

    shard = Shard("x", 25, ((10, 1), (0, 0), (10, 1), (5, 1)), 1, 0, pa.schema([]), "")
    assert window_row_groups(shard.row_groups, Window(0, 0, 10, 0)) == ([0], 0)
    assert window_row_groups(shard.row_groups, Window(0, 5, 15, 5)) == ([0, 2], 5)
    assert window_row_groups(shard.row_groups, Window(0, 12, 25, 12)) == ([2, 3], 2)
    assert window_row_groups(shard.row_groups, Window(0, 10, 20, 10)) == ([2], 0)


def test_a_shard_replaced_by_one_with_encrypted_columns_is_not_touched(tmp_path: Path) -> None:
    # pyarrow aborts the process on a column chunk's key metadata: the gate checks the
    # footer it reads again as the open did, and leaves such a file to DuckDB's errors
    from undertale_duck.core.read.direct import DirectReader

    good = tmp_path / "good.parquet"
    pq.write_table(datagen.table(0, 6), good)
    ds = ParquetDataset(good, columns=["label"])
    shard = ds.source.shards[0]
    hf.column_key_crypto_metadata(good, tmp_path / "crafted.parquet")
    (tmp_path / "crafted.parquet").replace(good)
    reader = DirectReader(["label"], ds.source.schema, 64 << 20, threads=False)
    assert reader.batches(shard, ds.windows[0]) is None


def test_files_written_by_duckdb_are_read_by_pyarrow_alike(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [130, 70], row_group_size=32, writer="duckdb",
                         compression="zstd")
    cols = ["label", "tokens", "id", "score", "blob", "category"]
    fast, slow = _both(tmp_path, columns=cols, window_bytes=2000)
    for position in range(len(fast.windows)):
        assert fast.reader.read(position).equals(slow.reader.read(position)), position
    assert fast.reader.direct is not None
    assert fast.reader.direct.stats["direct"] == len(fast.windows)
    want = [{k: r[k] for k in cols} for r in datagen.expected(200)]
    assert fast.__getitems__(list(range(200))) == want


def test_a_wide_shard_reads_right(tmp_path: Path) -> None:
    # DirectReader once listed the schema's names once per column (quadratic in the width)
    n = 1500
    rows = 3
    table = pa.table({
        f"c{i}": pa.array([f"{r}-{i}" for r in range(rows)]) if i % 2
        else pa.array([r * n + i for r in range(rows)], pa.int64())
        for i in range(n)
    })
    pq.write_table(table, tmp_path / "wide.parquet")
    ds = ParquetDataset(tmp_path, read_ahead=False)
    for r in range(rows):
        row = ds[r]
        assert list(row) == table.column_names
        assert row == {f"c{i}": f"{r}-{i}" if i % 2 else r * n + i for i in range(n)}
    assert ds.reader.direct is not None and ds.reader.direct.stats["direct"] > 0


def test_the_verdicts_of_many_shards_are_bounded(tmp_path: Path) -> None:
    # DirectReader kept every shard's verdict, and with it the shard's footer, for the life of
    # the dataset: a pass over 100,000 shards held all their footers
    from undertale_duck.core.read.direct import MAX_SHARD_PAGES

    shards = MAX_SHARD_PAGES + 6
    datagen.write_shards(tmp_path, [3] * shards, row_group_size=2)
    ds = ParquetDataset(tmp_path, read_ahead=False, columns=["id", "label"])
    direct = ds.reader.direct
    assert direct is not None
    n = 3 * shards
    want = [{"id": r["id"], "label": r["label"]} for r in datagen.expected(n)]
    order = list(range(n)) + list(range(n - 1, -1, -1))  # every shard twice, both ways
    got = [ds[i] for i in order]
    assert got == [want[i] for i in order]
    assert len(direct._shards) == MAX_SHARD_PAGES
    assert direct.stats["fallback"] == 0 and direct.stats["direct"] >= shards


def test_checksummed_files_and_sparks_metadata_are_read_by_pyarrow(tmp_path: Path) -> None:
    # files that record page CRC-32s (parquet-mr and Spark by default) and carry Spark's
    # metadata keys went to DuckDB only; pyarrow now reads them and verifies each page
    cols = ["label", "tokens", "id", "score", "blob", "category"]  # types pyarrow may read
    table = datagen.table(0, 300).select(cols)
    spark = {
        b"org.apache.spark.version": b"3.5.1", b"writer.model.name": b"spark",
        b"org.apache.spark.sql.parquet.row.metadata": b'{"type":"struct","fields":[]}',
    }
    good = tmp_path / "good"
    good.mkdir()
    pq.write_table(table.replace_schema_metadata(spark), good / "part-0.parquet",
                   write_page_checksum=True, row_group_size=100, data_page_size=512,
                   compression="NONE", use_dictionary=False, store_schema=False)
    fast, slow = _both(good, window_bytes=4000, columns=cols)
    assert len(fast.windows) > 3
    for position in range(len(fast.windows)):
        assert fast.reader.read(position).equals(slow.reader.read(position)), position
    assert fast.reader.direct is not None
    assert fast.reader.direct.stats["direct"] == len(fast.windows)
    want = [{k: r[k] for k in cols} for r in datagen.expected(300)]
    assert fast.__getitems__(list(range(300))) == want

    # a byte flipped in the last page of a column: pyarrow's read of that window fails its
    # check, and DuckDB's path names the page; the windows before it are still pyarrow's
    meta = pq.read_metadata(good / "part-0.parquet")
    chunk = meta.row_group(2).column(meta.schema.names.index("label"))
    start, end = pages.chunk_range(chunk)
    raw = bytearray((good / "part-0.parquet").read_bytes())
    raw[end - 1] ^= 0x10
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "part-0.parquet").write_bytes(bytes(raw))
    ds = ParquetDataset(bad, window_bytes=4000, read_ahead=False, columns=cols)
    assert ds.__getitems__(list(range(200))) == want[:200]
    assert ds.reader.direct is not None and ds.reader.direct.stats["direct"] > 0
    with pytest.raises(CorruptShardError, match=r"column 'label' in row group 2 .*CRC-32"):
        ds[299]
    assert ds.reader.direct.stats["fallback"] >= 1
