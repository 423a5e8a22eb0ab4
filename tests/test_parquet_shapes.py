"""Every value served equals pyarrow's own read, for Parquet shapes and writers beyond
pyarrow's defaults: nested nulls, float16, decimal256, fixed-size lists, every time unit,
DuckDB's and polars' writers, zero-row shards, windows split inside row groups."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import hostile_files as hf

from undertale_duck import ParquetDataset, QueryError, SourceError, UnsupportedShardError


def test_a_split_encoded_fixed_length_column_duckdb_cannot_read_is_named(
    tmp_path: Path,
) -> None:
    # pyarrow writes BYTE_STREAM_SPLIT for FIXED_LEN_BYTE_ARRAY (float16, decimals, fixed
    # binary); DuckDB decodes it only for FLOAT, DOUBLE, INT32 and INT64, and its error names
    # no column, so the advice "leave the column out" left the user to guess which
    n = 12
    path = tmp_path / "split.parquet"
    table = pa.table({
        "i": pa.array(range(n), pa.int64()),
        "half": pa.array(np.arange(n, dtype=np.float16) / 4, pa.float16()),
        "f": pa.array([k / 2 for k in range(n)], pa.float32()),
    })
    pq.write_table(table, path, use_dictionary=False, row_group_size=5,
                   column_encoding={"half": "BYTE_STREAM_SPLIT", "f": "BYTE_STREAM_SPLIT"})
    with pytest.raises(UnsupportedShardError, match=r"column 'half'") as info:
        ParquetDataset(path)[0]
    assert "'f'" not in str(info.value) and info.value.path == str(path)
    with pytest.raises(UnsupportedShardError, match=r"column 'half'"):
        ParquetDataset(path).sql("SELECT * FROM dataset")
    ds = ParquetDataset(path, columns=["i", "f"])  # the advice works
    assert [ds[k] for k in range(n)] == table.select(["i", "f"]).to_pylist()
    # a view: the same shard error when its rows are read, not a QueryError that blamed
    # the query ("view query cannot run over the dataset"); opening it reads only what its
    # filter needs (decision 0040), so it opens, and the column is named at the read
    view = ParquetDataset(path, where="i > 3")
    assert len(view) == n - 4
    with pytest.raises(UnsupportedShardError, match=r"column 'half'") as info:
        view[0]
    assert info.value.path == str(path)
    # a filter that reads the column: the indexing pass fails on the shard, the shard's error
    with pytest.raises(UnsupportedShardError) as info:
        ParquetDataset(path, where="half > 1")
    assert info.value.path == str(path)


def test_a_view_over_a_first_shard_duckdb_cannot_read_blames_the_shard(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"id": list(range(20)), "s": ["x"] * 20}), src, row_group_size=5)
    lzo = tmp_path / "lzo.parquet"
    hf.chunk_codec(src, lzo, 3)  # LZO: a real codec DuckDB does not read
    for view in ({"where": "id > 3"}, {"query": "SELECT id + 1 AS j FROM dataset"}):
        # the indexing pass (a filter) or the first read (no filter: every row kept) fails
        # on the shard: the shard's error, naming the codec, never the query's
        with pytest.raises(UnsupportedShardError, match="LZO") as info:
            ParquetDataset(lzo, **view)[0]
        assert info.value.path == str(lzo)
    with pytest.raises(QueryError, match="nope"):  # the query's own mistakes stay its own
        ParquetDataset(src, where="nope > 3")



@pytest.mark.parametrize("fmt", ["python", "torch"])
def test_uuid_columns_other_writers_annotate_are_uuids(tmp_path: Path, fmt: str) -> None:
    # A UUID column written without pyarrow's ARROW:schema (DuckDB, Spark) reads in pyarrow
    # as uuid.UUID; the dataset took FIXED_LEN_BYTE_ARRAY(16) from the footer and served
    # DuckDB's text, a str, which no cast to 16 bytes turned back
    import uuid

    import duckdb

    path = tmp_path / "u.parquet"
    duckdb.sql(
        "SELECT i, CASE WHEN i % 4 = 3 THEN NULL ELSE ('00000000-0000-0000-0000-' || "
        "lpad((i * 7919)::VARCHAR, 12, '0'))::UUID END AS u, "
        "FROM range(10) t(i)"
    ).write_parquet(str(path))
    want = pq.read_table(path).to_pylist()
    assert isinstance(want[0]["u"], uuid.UUID)
    schema = pq.read_schema(path)
    for options in ({}, {"memory": 1, "window_bytes": 1}):
        ds = ParquetDataset(path, format=fmt, **options)
        assert ds.schema.field("u").type == pa.uuid()
        for i in range(10):
            _check_row(ds[i], want[i], schema, f"ds[{i}]")
        for i, row in zip([9, 0, 3], ds.__getitems__([9, 0, 3]), strict=True):
            _check_row(row, want[i], schema, f"__getitems__ {i}")

def test_uuids_inside_lists_structs_and_maps_are_uuids(tmp_path: Path) -> None:
    # a UUID nested in a list, struct or map was served as DuckDB's text (str) while the
    # dataset's schema, and pyarrow's read, say uuid: from DuckDB's writer and pyarrow's
    import uuid

    import duckdb

    n = 13
    theirs = tmp_path / "duckdb.parquet"
    con = duckdb.connect()  # its own database: the macro is not left in the default one
    con.sql(
        "CREATE MACRO u(k) AS ('00000000-0000-0000-0000-' || lpad(k::VARCHAR, 12, '0'))::UUID"
    )
    con.sql(
        "SELECT i, CASE WHEN i % 5 = 2 THEN NULL ELSE [CASE WHEN (i + k) % 3 = 0 THEN NULL "
        "  ELSE u(i * 10 + k) END FOR k IN range(i % 4)] END AS lu, "
        "CASE WHEN i % 6 = 4 THEN NULL ELSE {'a': CASE WHEN i % 4 = 1 THEN NULL ELSE u(i) "
        "  END, 'b': i} END AS su, "
        "CASE WHEN i % 7 = 5 THEN NULL ELSE MAP([u(i)], [CASE WHEN i % 2 = 1 THEN NULL "
        "  ELSE u(1000 - i) END]) END AS mu, "
        "[{'x': CASE WHEN i % 3 = 0 THEN NULL ELSE [u(i + 500)] END}] AS lsu "
        "FROM range(13) t(i) ORDER BY i"
    ).write_parquet(str(theirs))
    con.close()
    want = pq.read_table(theirs).to_pylist()
    assert isinstance(want[0]["su"]["a"], uuid.UUID)
    assert isinstance(want[1]["lu"][0], uuid.UUID)
    mine = tmp_path / "pyarrow.parquet"
    pq.write_table(pq.read_table(theirs), mine, row_group_size=4)
    assert pq.read_table(mine).to_pylist() == want
    for path in (theirs, mine):
        for options in ({}, {"memory": 1, "window_bytes": 300}):
            ds = ParquetDataset(path, **options)
            assert ds.schema.field("lu").type == pa.list_(pa.uuid())
            assert [ds[i] for i in range(n)] == want, (path.name, options)
            assert ds.__getitems__([12, 0, 5, 4]) == [want[12], want[0], want[5], want[4]]


# ------------------------------------------------------------------ differential checks
UTC = dt.UTC


def _value(name: str, i: int) -> Any:
    """Column ``name`` of global row ``i``: nulls at the top level and inside nested values."""
    return {
        "i": i,
        "li": None if i % 7 == 3 else [
            None if (i + k) % 4 == 0 else i * 10 + k for k in range(i % 5)
        ],
        "lli": None if i % 9 == 4 else [i * 3 + k for k in range(i % 4)],
        "fsl": None if i % 6 == 5 else [i, None if i % 4 == 0 else -i, i * 2],
        "fsl_f": [float(i), i / 2],
        "nested": None if i % 8 == 1 else (
            [[i, None], None, []] if i % 3 == 0 else [[i + k for k in range(i % 3)]]
        ),
        "lstruct": None if i % 10 == 2 else (
            [{"a": i, "b": None if i % 2 else f"s{i}"}, None][: i % 3]
        ),
        "st": None if i % 5 == 1 else {
            "x": None if i % 3 == 0 else i, "y": f"y{i}", "z": {"w": None if i % 4 else float(i)},
        },
        "mp": None if i % 11 == 0 else [(f"k{k}", None if k == 1 else i + k) for k in range(i % 3)],
        "dct": None if i % 13 == 0 else ("red", "green", "blue")[i % 3],
        "lstr": None if i % 4 == 2 else "long" * (i % 5) + str(i),
        "bin": None if i % 6 == 0 else bytes((i + k) % 256 for k in range(i % 7)),
        "fsb": None if i % 5 == 0 else bytes((i + k) % 256 for k in range(4)),
        "d128": None if i % 7 == 0 else decimal.Decimal(i * 1234567 - 5000000).scaleb(-4),
        "d256": None if i % 7 == 1 else decimal.Decimal(i * 10**30 + 17).scaleb(-5),
        "f16": None if i % 9 == 0 else (
            math.nan if i % 9 == 3 else math.inf if i % 9 == 6 else i / 8
        ),
        "f32": None if i % 10 == 0 else (math.nan if i % 10 == 5 else i * 0.25),
        "f64": math.nan if i % 4 == 1 else (None if i % 4 == 3 else -i * 0.1),
        "lf": [math.nan if k == 1 else i + k / 2 for k in range(i % 4)],
        "ts_ms_tz": dt.datetime(2021, 6, 1, tzinfo=UTC) + dt.timedelta(milliseconds=i * 1000003),
        "ts_us_ny": None if i % 3 == 0 else (
            dt.datetime(2022, 3, 13, tzinfo=UTC) + dt.timedelta(microseconds=i * 3_600_000_001)
        ),
        "date": dt.date(1969, 12, 25) + dt.timedelta(days=i),
        "t32ms": dt.time(i % 24, i % 60, (i * 7) % 60, (i * 1000) % 1000000),
        "t64us": dt.time(i % 24, i % 60, i % 60, i * 7 % 1000000),
        "dur_s": dt.timedelta(seconds=i - 20),
        "dur_us": None if i % 5 == 0 else dt.timedelta(microseconds=i * 123457),
        "lb": None if i % 12 == 7 else [
            None if k == 2 else bool((i + k) % 2) for k in range(i % 4)
        ],
        "u16": i * 7 % 65536,
        "i8": i % 256 - 128,
        "b": None if i % 7 == 0 else i % 2 == 0,
    }[name]


TYPES: dict[str, pa.DataType] = {
    "i": pa.int64(), "li": pa.list_(pa.int32()), "lli": pa.large_list(pa.int64()),
    "fsl": pa.list_(pa.int16(), 3), "fsl_f": pa.list_(pa.float32(), 2),
    "nested": pa.list_(pa.list_(pa.int64())),
    "lstruct": pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])),
    "st": pa.struct(
        [("x", pa.int64()), ("y", pa.string()), ("z", pa.struct([("w", pa.float64())]))]
    ),
    "mp": pa.map_(pa.string(), pa.int64()), "dct": pa.dictionary(pa.int32(), pa.string()),
    "lstr": pa.large_string(), "bin": pa.binary(), "fsb": pa.binary(4),
    "d128": pa.decimal128(18, 4), "d256": pa.decimal256(38, 5), "f16": pa.float16(),
    "f32": pa.float32(), "f64": pa.float64(), "lf": pa.list_(pa.float64()),
    "ts_ms_tz": pa.timestamp("ms", tz="UTC"), "ts_us_ny": pa.timestamp("us", tz="America/New_York"),
    "date": pa.date32(), "t32ms": pa.time32("ms"), "t64us": pa.time64("us"),
    "dur_s": pa.duration("s"), "dur_us": pa.duration("us"),
    "lb": pa.list_(pa.bool_()), "u16": pa.uint16(), "i8": pa.int8(), "b": pa.bool_(),
}


def _table(start: int, stop: int, names: list[str] | None = None) -> pa.Table:
    names = names or list(TYPES)
    arrays = []
    for name in names:
        values = [_value(name, i) for i in range(start, stop)]
        typ = TYPES[name]
        if pa.types.is_dictionary(typ):
            arrays.append(pa.array(values, pa.string()).dictionary_encode())
        elif typ == pa.float16():
            missing = np.array([v is None for v in values], dtype=bool)
            half = np.array([0 if v is None else v for v in values], dtype=np.float16)
            arrays.append(pa.array(half, typ, mask=missing))
        else:
            arrays.append(pa.array(values, typ))
    return pa.table(arrays, names=names)


def _same(got: Any, want: Any, where: str) -> None:
    """Equal values of equal Python types; NaN equals NaN."""
    if isinstance(got, float) and isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), where
        return
    assert type(got) is type(want), (where, got, want)
    if isinstance(want, dict):
        assert list(got) == list(want), where
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), (where, got, want)
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            _same(a, b, f"{where}[{k}]")
    elif isinstance(want, dt.datetime):
        assert got == want and str(got.tzinfo) == str(want.tzinfo), (where, got, want)
    else:
        assert got == want, (where, got, want)


def _plain_item(typ: pa.DataType) -> pa.DataType:
    """The type of a list's numbers (of nested lists too), or ``typ`` itself."""
    while pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        typ = typ.value_type
    return typ


def _torch_dtype(typ: pa.DataType) -> str:
    name = np.dtype(_plain_item(typ).to_pandas_dtype()).name
    return "int64" if name in ("uint16", "uint32", "uint64") else name


def _check_row(got: Any, want: dict[str, Any], schema: pa.Schema, where: str) -> None:
    got = dict(got)
    assert list(got) == list(want), where
    for name, value in want.items():
        served = got[name]
        if hasattr(served, "dtype") and hasattr(served, "tolist"):  # format numpy or torch
            typ = schema.field(name).type
            dtype = (
                f"torch.{_torch_dtype(typ)}" if type(served).__module__.startswith("torch")
                else np.dtype(_plain_item(typ).to_pandas_dtype()).name
            )
            assert str(served.dtype) == dtype, (where, name, served.dtype)
            plain = served.tolist()
            kind = type(value[0]) if isinstance(value, list) and value else type(value)
            served = [kind(v) for v in plain] if isinstance(plain, list) else kind(plain)
        _same(served, value, f"{where} {name}")


def _plain(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def _check_dataset(paths: list[Path], **options: Any) -> None:
    tables = [pq.read_table(p, columns=options.get("columns")) for p in paths]
    # pyarrow's own read; a later shard's column in another type (another writer's: a large
    # string as a string, a time zone as UTC) has the first shard's type, as docs say
    schema = pa.schema([pa.field(f.name, _plain(f.type)) for f in tables[0].schema])
    want = [row for t in tables for row in t.cast(schema).to_pylist()]
    ds = ParquetDataset(paths, **options)
    assert len(ds) == len(want)
    for i in range(len(want)):
        _check_row(ds[i], want[i], schema, f"ds[{i}]")
    order = [(i * 7919) % len(want) for i in range(len(want))] + [len(want) - 1, 0, 0]
    for i, row in zip(order, ds.__getitems__(order), strict=True):
        _check_row(row, want[i], schema, f"__getitems__ {i}")
    ds.close()


WRITERS: dict[str, dict[str, Any]] = {
    "v2-none-plain": dict(data_page_version="2.0", compression="none", use_dictionary=False),
    "zstd-groups-of-1": dict(compression="zstd", row_group_size=1),
    "gzip-tiny-pages": dict(compression="gzip", row_group_size=7, data_page_size=64),
    "lz4-v2-no-statistics": dict(compression="lz4", data_page_version="2.0",
                                 write_statistics=False, row_group_size=13),
    "brotli-no-arrow-schema": dict(compression="brotli", store_schema=False, row_group_size=9),
    "delta-encodings": dict(
        use_dictionary=False, row_group_size=11, store_decimal_as_integer=True,
        column_encoding={
            "i": "DELTA_BINARY_PACKED", "li.list.element": "DELTA_BINARY_PACKED",
            "d128": "DELTA_BINARY_PACKED", "lstr": "DELTA_LENGTH_BYTE_ARRAY",
            "bin": "DELTA_BYTE_ARRAY", "st.y": "DELTA_LENGTH_BYTE_ARRAY",
            "f64": "BYTE_STREAM_SPLIT", "lf.list.element": "BYTE_STREAM_SPLIT",
        },
    ),
    "legacy-nested-int96": dict(
        use_compliant_nested_type=False, use_deprecated_int96_timestamps=True, row_group_size=6
    ),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_value_equals_pyarrows_read(tmp_path: Path, writer: str) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(_table(0, 24), path, **WRITERS[writer])
    fmt = ("python", "torch")[sorted(WRITERS).index(writer) % 2]
    _check_dataset([path], format=fmt)
    # a tiny budget and windows of a few hundred bytes: windows split inside row groups
    _check_dataset([path], format=fmt, memory=1, window_bytes=300)


def test_shards_of_other_writers_and_zero_rows_equal_pyarrows_read(tmp_path: Path) -> None:
    import duckdb

    # DuckDB takes no float16, decimal256 or duration from Arrow, and writes a NULL fixed-size
    # list that pyarrow cannot read (duckdb/duckdb#24731): those stay with pyarrow's shards
    names = [n for n in TYPES if n not in ("f16", "d256", "dur_s", "dur_us", "fsl")]
    paths = [tmp_path / f"part-{k}.parquet" for k in range(5)]
    pq.write_table(_table(0, 9, names), paths[0], row_group_size=4)
    pq.write_table(_table(9, 9, names), paths[1])
    con = duckdb.connect()
    for k, (start, stop, options) in enumerate(
        [(9, 30, "ROW_GROUP_SIZE 5, COMPRESSION zstd"), (30, 30, "COMPRESSION gzip")], start=2
    ):
        part = _table(start, stop, names)
        con.register("part", part)
        con.execute(f"COPY (SELECT * FROM part) TO '{paths[k]}' (FORMAT parquet, {options})")
    con.close()
    with pq.ParquetWriter(paths[4], _table(0, 0, names).schema) as writer:
        writer.write_table(_table(30, 36, names), row_group_size=4)
        writer.write_table(_table(36, 36, names))  # a row group of no rows
        writer.write_table(_table(36, 41, names), row_group_size=2)
    _check_dataset(paths, format="python", memory=1, window_bytes=200)
    _check_dataset(paths, format="numpy")
    assert len(ParquetDataset(tmp_path)) == 41  # the directory: its shards by name


def test_a_shard_without_columns_is_read_as_one_without_rows(tmp_path: Path) -> None:
    # pyarrow writes pa.table({}) as a file of no columns, which DuckDB refuses to read:
    # sql blamed it as unsupported (advising columns=) and a view's SQL was "SELECT , ..."
    pq.write_table(pa.table({"i": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"i": [3]}), tmp_path / "c.parquet")
    ds = ParquetDataset(tmp_path)
    assert list(ds) == [{"i": 1}, {"i": 2}, {"i": 3}]
    assert ds.sql("SELECT sum(i) AS s, count(*) AS n FROM dataset").to_pylist() == [
        {"s": 6, "n": 3}]
    for view in (ParquetDataset(tmp_path, where="i <> 2"),
                 ParquetDataset(tmp_path, query="SELECT i FROM dataset WHERE i <> 2")):
        assert list(view) == [{"i": 1}, {"i": 3}]
    # first in the list, it does not make the dataset's schema one without columns
    first = ParquetDataset([tmp_path / "b.parquet", tmp_path / "c.parquet"], where="1=1")
    assert list(first) == [{"i": 3}]
    # alone, nothing can be read: said, naming the file
    with pytest.raises(SourceError, match=r"^shard .*b\.parquet has no columns \(pyarrow "
                                          r"writes such a file .*write the data with its"):
        ParquetDataset(tmp_path / "b.parquet", where="1=1")


def test_polars_shards_equal_pyarrows_read(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    names = [n for n in TYPES if n != "d256"]  # polars has no decimal256
    frame = pl.from_arrow(_table(0, 30, names))
    path = tmp_path / "polars.parquet"
    frame.write_parquet(path, row_group_size=7, compression="zstd")
    _check_dataset([path], format="python", memory=1, window_bytes=300)
    _check_dataset([path], format="torch")


def test_a_dataloader_with_workers_serves_pyarrows_values(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    from undertale_duck import ChunkedSampler

    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "c.parquet"]
    pq.write_table(_table(0, 17), paths[0], row_group_size=5, data_page_size=64)
    pq.write_table(_table(17, 17), paths[1])
    pq.write_table(_table(17, 40), paths[2], row_group_size=3, compression="zstd")
    want = [r for p in paths for r in pq.read_table(p).to_pylist()]
    schema = pq.read_schema(paths[0])
    ds = ParquetDataset(paths, memory=1, window_bytes=300, format="torch")
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=list,
                        sampler=ChunkedSampler(ds, 4, workers=2, shuffle=True, drop_last=False))
    rows = [row for batch in loader for row in batch]
    assert sorted(int(r["i"]) for r in rows) == list(range(40))
    for row in rows:
        _check_row(row, want[int(row["i"])], schema, f"loader row {int(row['i'])}")
