"""Unusual types and layouts across shards: drift, case, wide decimals, INT96, special files."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import hostile_files as hf

from undertale_duck import (
    ColumnError,
    CorruptShardError,
    OutOfRangeError,
    ParquetDataset,
    SourceError,
    UnsupportedShardError,
)

FORMATS = ("python", "numpy", "torch")
ROOT = Path(__file__).resolve().parents[3]


def _count(ds: ParquetDataset) -> int:
    return int(ds.sql("SELECT count(*) AS n FROM dataset").column("n")[0].as_py())


def _kind(value: Any) -> str:
    return f"{type(value).__name__}:{getattr(value, 'dtype', '')}"


def _shards(root: Path, *tables: pa.Table) -> Path:
    root.mkdir()
    for i, table in enumerate(tables):
        pq.write_table(table, root / f"{i}.parquet")
    return root


@pytest.mark.parametrize("fmt", FORMATS)
def test_column_spelled_in_another_case_by_a_later_shard(tmp_path: Path, fmt: str) -> None:
    # DuckDB binds "id" to a later shard's "ID": rows keep the dataset's own name
    root = _shards(
        tmp_path / "d",
        pa.table({"id": pa.array(range(3), pa.int64())}),
        pa.table({"ID": pa.array(range(3, 5), pa.int64())}),
    )
    ds = ParquetDataset(root, format=fmt, window_bytes=1, read_ahead=False)
    assert len(ds) == 5 == _count(ds)
    rows = [ds[i] for i in range(5)]
    assert [set(r) for r in rows] == [{"id"}] * 5
    assert [int(r["id"]) for r in rows] == list(range(5))
    batch = list(ds.__getitems__([4, 0, 3]))
    assert [set(r) for r in batch] == [{"id"}] * 3
    assert {_kind(r["id"]) for r in [*rows, *batch]} == {_kind(rows[0]["id"])}


#: A later shard's timestamps cast to the first shard's dates: the time of day is lost.
TIME_OF_DAY_DROPPED = (
    pa.array([dt.date(2020, 1, 1), dt.date(2020, 1, 2)], pa.date32()),
    pa.array([dt.datetime(2020, 1, 2, 13, 45, 7), None], pa.timestamp("us")),
    "13, 45, 7|13:45:07",
)
#: A zone-less shard after a zoned one: Arrow's cast would read its wall times as UTC.
ZONE_GUESSED = (
    pa.array([None, dt.datetime(2020, 1, 1)], pa.timestamp("us", "UTC")),
    pa.array([dt.datetime(2020, 1, 2, 12), None], pa.timestamp("us")),
    "time zone",
)


def _refuses_the_second_shard(ds: ParquetDataset, root: Path, culprit: str) -> None:
    """Rows of shard 1 are refused as schema drift naming it, the column and the culprit."""
    for index in (2, -2):
        with pytest.raises(SourceError, match="schema drift") as info:
            ds[index]
        assert info.value.path == str(root / "1.parquet")
        # the value as the reader that refused it writes it (Arrow's repr, DuckDB's text)
        text = str(info.value)
        assert "'v'" in text and any(c in text for c in culprit.split("|"))
        assert not isinstance(info.value, CorruptShardError)
    with pytest.raises(SourceError, match="schema drift"):
        ds.__getitems__([0, 2])


@pytest.mark.parametrize(
    ("first", "second", "culprit"),
    [
        (pa.array([1, 2], pa.int32()), pa.array([1 << 40, 3], pa.int64()), "1099511627776"),
        (pa.array([1 << 63, 2], pa.uint64()), pa.array([-1, 3], pa.int64()), "-1"),
        (pa.array([1, 2], pa.int64()), pa.array(["x", "y"]), "x"),
        # losses Arrow's safe cast lets through: rounding, overflow to inf, a dropped time
        (pa.array([0.5, 1], pa.float32()), pa.array([1 / 3, 0.25], pa.float64()), "0.333333"),
        (pa.array([0.5, 1], pa.float32()), pa.array([1e300, 0.25], pa.float64()), "1e+300"),
        (
            pa.array([[0.5], []], pa.list_(pa.float32())),
            pa.array([[0.25, float("nan"), 0.1], None], pa.list_(pa.float64())),
            "0.1",
        ),
        (
            pa.array([{"f": 0.5}, {"f": 1.0}], pa.struct([("f", pa.float32())])),
            pa.array([{"f": 2.0**-149 / 4}, {"f": 1.0}], pa.struct([("f", pa.float64())])),
            "e-46",
        ),
        TIME_OF_DAY_DROPPED,
        # a zone given or taken away: every value survives the cast back, yet a local wall
        # time would be served as a UTC instant (and the other way round)
        ZONE_GUESSED,
        (
            pa.array([None, [dt.datetime(2020, 1, 1)]], pa.list_(pa.timestamp("ms"))),
            pa.array([[dt.datetime(2020, 1, 2, 12)], None],
                     pa.list_(pa.timestamp("ms", "America/New_York"))),
            "time zone",
        ),
    ],
)
def test_drifting_column_whose_values_do_not_fit_is_refused(
    tmp_path: Path, first: pa.Array, second: pa.Array, culprit: str
) -> None:
    root = _shards(tmp_path / "d", pa.table({"v": first}), pa.table({"v": second}))
    before = hf.sha256s(root)
    for fmt in FORMATS:
        ds = ParquetDataset(root, format=fmt, window_bytes=1, read_ahead=False)
        if fmt != "torch" or first.type != pa.uint64():
            assert ds[1]["v"] is not None
        _refuses_the_second_shard(ds, root, culprit)
    assert hf.sha256s(root) == before


@pytest.mark.parametrize(
    ("first", "second", "culprit"),
    [
        (pa.array([0.5, 1], pa.float32()), pa.array([0.1, 0.25], pa.float64()), "0.1"),
        (
            pa.array([[0.5], []], pa.list_(pa.float32())),
            pa.array([[0.25, 0.1], None], pa.list_(pa.float64())),
            "0.1",
        ),
        TIME_OF_DAY_DROPPED,
        ZONE_GUESSED,
    ],
)
@pytest.mark.parametrize("view", [{"where": "true"}, {"query": "SELECT v, 1 AS k FROM dataset"}])
def test_a_view_over_drifting_shards_refuses_a_cast_that_changes_values(
    tmp_path: Path, first: pa.Array, second: pa.Array, culprit: str, view: dict[str, str]
) -> None:
    # a view takes DuckDB's types for its first shard; a later shard's values cast to them
    # were served rounded, without their time of day or with a guessed zone
    root = _shards(tmp_path / "d", pa.table({"v": first}), pa.table({"v": second}))
    for fmt in FORMATS:
        ds = ParquetDataset(root, format=fmt, window_bytes=1, read_ahead=False, **view)
        assert ds[1]["v"] is not None
        _refuses_the_second_shard(ds, root, culprit)


def test_a_view_over_drifting_shards_refuses_values_no_cast_holds(tmp_path: Path) -> None:
    # no cast to the first shard's type fits: as the plain dataset does, the view refuses
    # the shard rather than serve one column in two types; its filter sees the values as
    # the dataset serves them, so the indexing pass stops on it (it filtered the raw int64)
    root = _shards(
        tmp_path / "d",
        pa.table({"v": pa.array([1, 2], pa.int32())}),
        pa.table({"v": pa.array([1 << 40, 3], pa.int64())}),
    )
    wanted = r"1.parquet: column 'v' is int64 there but int32 in the dataset.*1099511627776"
    with pytest.raises(SourceError, match=wanted) as info:
        ParquetDataset(root, where="v > 0", window_bytes=1, read_ahead=False)
    assert info.value.path == str(root / "1.parquet")
    ds = ParquetDataset(root, query="SELECT v FROM dataset", window_bytes=1, read_ahead=False)
    assert [ds[i]["v"] for i in range(2)] == [1, 2]
    with pytest.raises(SourceError, match=wanted):
        ds[2]


@pytest.mark.parametrize("fmt", FORMATS)
def test_drifting_column_whose_values_fit_keeps_one_type(tmp_path: Path, fmt: str) -> None:
    root = _shards(
        tmp_path / "d",
        pa.table({"v": pa.array([1, 2], pa.int32()), "s": pa.array(["a", "b"])}),
        pa.table({"v": pa.array([3, 4], pa.int64()), "s": pa.array(["c", "d"], pa.large_string())}),
    )
    ds = ParquetDataset(root, format=fmt, window_bytes=1, read_ahead=False)
    rows = [ds[i] for i in range(4)] + list(ds.__getitems__([3, 0]))
    assert [int(r["v"]) for r in rows] == [1, 2, 3, 4, 4, 1]
    assert [r["s"] for r in rows] == ["a", "b", "c", "d", "d", "a"]
    assert len({_kind(r["v"]) for r in rows}) == 1
    if fmt == "numpy":
        assert rows[2]["v"].dtype == np.int32
    assert _count(ds) == 4


@pytest.mark.parametrize("fmt", FORMATS)
def test_drifting_floats_and_dates_that_survive_the_cast_are_served(
    tmp_path: Path, fmt: str
) -> None:
    # every value of the later shard is held exactly by the dataset's type: no refusal
    nan, inf = float("nan"), float("inf")
    root = _shards(
        tmp_path / "d",
        pa.table({"f": pa.array([0.5], pa.float32()),
                  "l": pa.array([[1.5]], pa.list_(pa.float32())),
                  "d": pa.array([dt.date(2020, 1, 1)], pa.date32())}),
        pa.table({"f": pa.array([0.25, nan, -inf, None], pa.float64()),
                  "l": pa.array([[nan, 2.0**-10], None, [], [inf]], pa.list_(pa.float64())),
                  "d": pa.array([dt.datetime(2020, 1, 2), None, dt.datetime(1969, 12, 31),
                                 dt.datetime(2000, 2, 29)], pa.timestamp("ms"))}),
    )
    ds = ParquetDataset(root, format=fmt, window_bytes=1, read_ahead=False)
    rows = [ds[i] for i in range(5)]
    half = _shards(  # float16 has no compute kernels: compared as float64
        tmp_path / "h",
        pa.table({"h": pa.array([0.5], pa.float32())}),
        pa.table({"h": pa.array(np.array([1.5, np.nan, -2.0], np.float16))}),
    )
    served = [ParquetDataset(half, format=fmt, window_bytes=1)[i]["h"] for i in range(4)]
    assert str([float(v) for v in served]) == "[0.5, 1.5, nan, -2.0]"

    def plain(value: Any) -> Any:
        value = value.tolist() if hasattr(value, "tolist") else value
        return "nan" if isinstance(value, float) and value != value else value

    assert [plain(r["f"]) for r in rows] == [0.5, 0.25, "nan", -inf, None]
    lists = [r["l"] if r["l"] is None else [plain(v) for v in plain(r["l"])] for r in rows]
    assert lists == [[1.5], ["nan", 2.0**-10], None, [], [inf]]
    assert [r["d"] for r in rows] == [dt.date(2020, 1, 1), dt.date(2020, 1, 2), None,
                                      dt.date(1969, 12, 31), dt.date(2000, 2, 29)]


def _int96(path: Path, seconds: list[int]) -> None:
    table = pa.table({"t": pa.array(seconds, pa.timestamp("s"))})
    pq.write_table(table, path, use_deprecated_int96_timestamps=True)


def test_int96_timestamp_out_of_range_is_not_corruption(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    _int96(root / "a.parquet", [-(10**17), 0])
    ds = ParquetDataset(root, read_ahead=False)
    assert len(ds) == 2
    with pytest.raises(OutOfRangeError, match="out of range") as info:
        ds[1]
    assert info.value.path == str(root / "a.parquet")
    with pytest.raises(OutOfRangeError):
        ds.sql("SELECT * FROM dataset")
    fine = tmp_path / "fine.parquet"
    _int96(fine, [0, 86400])
    assert [r["t"] for r in ParquetDataset(fine)] == [  # type: ignore[attr-defined]
        dt.datetime(1970, 1, 1), dt.datetime(1970, 1, 2)
    ]


@pytest.mark.parametrize("precision", [39, 76])
def test_decimals_wider_than_duckdb_holds_are_refused_not_rounded(
    tmp_path: Path, precision: int
) -> None:
    path = tmp_path / "w.parquet"
    big = decimal.Decimal("9" * precision)
    table = pa.table(
        {
            "id": [1, 2],
            "d": pa.array([big, decimal.Decimal(1)], pa.decimal256(precision, 0)),
            "n": pa.array([[big], []], pa.list_(pa.decimal256(precision, 0))),
        }
    )
    pq.write_table(table, path)
    with pytest.raises(UnsupportedShardError, match=f"'d' holds decimal256\\({precision}, 0\\)"):
        ParquetDataset(path)
    with pytest.raises(UnsupportedShardError, match="'n'"):
        ParquetDataset(path, columns=["id", "n"])
    ds = ParquetDataset(path, columns=["id"])
    assert [ds[0], ds[1]] == [{"id": 1}, {"id": 2}] and _count(ds) == 2


def test_decimal_of_38_digits_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    values = [decimal.Decimal("9" * 38), decimal.Decimal("-" + "1" * 38), None]
    pq.write_table(pa.table({"d": pa.array(values, pa.decimal128(38, 0))}), path)
    ds = ParquetDataset(path)
    assert [ds[i]["d"] for i in range(3)] == values
    assert ds.sql("SELECT d FROM dataset").column("d").to_pylist() == values


def _special(root: Path, kind: str) -> None:
    target = root / "b.parquet"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target.symlink_to("/dev/zero")
    elif kind == "dangling":
        target.symlink_to(root / "gone.parquet")
    elif kind == "loop":
        target.symlink_to(target)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "device", "dangling", "loop"])
def test_special_file_named_like_a_shard_is_refused_without_hanging(
    tmp_path: Path, kind: str
) -> None:
    root = tmp_path / "d"
    root.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), root / "a.parquet")
    _special(root, kind)
    shard = str(root / "b.parquet")
    for source in (root, shard, str(root / "*.parquet"), [root / "a.parquet", shard]):
        with pytest.raises(SourceError) as info:
            ParquetDataset(source)  # type: ignore[arg-type]
        assert info.value.path == shard and shard in str(info.value)
    if kind != "fifo":
        return
    for args in (["describe", str(root)], ["head", str(root)], ["sql", str(root), "SELECT 1"]):
        done = subprocess.run(
            [sys.executable, "-m", "undertale_duck", *args],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and shard in done.stderr


def test_directory_named_like_a_shard_is_not_a_shard(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), root / "a.parquet")
    (root / "x.parquet").mkdir()
    assert len(ParquetDataset(root)) == 2


def test_duplicate_column_names_in_one_shard_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.parquet"
    ids = pa.array([1, 2])
    pq.write_table(pa.Table.from_arrays([ids, ids, ids], names=["a", "a", "b"]), path)
    with pytest.raises(ColumnError, match="two columns named 'a' and 'a'") as info:
        ParquetDataset(path)
    assert info.value.path == str(path)
    assert [ParquetDataset(path, columns=["b"])[i] for i in range(2)] == [{"b": 1}, {"b": 2}]


_READ_ALL = """
import sys
from undertale_duck import ParquetDataset, UndertaleDuckError
try:
    ds = ParquetDataset(sys.argv[1], read_ahead=False)
    print(len(ds))
    ds[0]
except UndertaleDuckError as exc:
    print(type(exc).__name__, exc)
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_unknown_codec_is_our_error_not_an_abort(tmp_path: Path) -> None:
    # pyarrow's column metadata accessors abort the process on a codec id they do not know
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"id": list(range(20)), "s": ["x"] * 20}), src, row_group_size=5)
    root = tmp_path / "d"
    root.mkdir()
    hf.chunk_codec(src, root / "a.parquet", 99)
    before = hf.sha256s(root)
    done = _run("-c", _READ_ALL, str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("20\nCorruptShardError") and str(root) in done.stdout
    lzo = tmp_path / "lzo.parquet"
    hf.chunk_codec(src, lzo, 3)  # LZO: a real codec DuckDB does not read
    with pytest.raises(UnsupportedShardError, match="LZO"):
        ParquetDataset(lzo)[0]
    assert hf.sha256s(root) == before


def test_malformed_statistics_do_not_abort_describe(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"id": list(range(20))}), src)
    root = tmp_path / "d"
    root.mkdir()
    hf.short_statistics(src, root / "a.parquet")
    pq.write_table(pa.table({"id": [7]}), root / "b.parquet")
    done = _run("-m", "undertale_duck", "describe", str(root))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "statistics of column 'id'" in done.stdout + done.stderr
    assert str(root / "a.parquet") in done.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_uuid_and_view_types_are_served_as_pyarrow_reads_them(tmp_path: Path, fmt: str) -> None:
    import uuid

    path = tmp_path / "u.parquet"
    ids = [uuid.UUID(int=i * 7919) for i in range(5)]
    table = pa.table(
        {
            "u": pa.array([None if i == 3 else u.bytes for i, u in enumerate(ids)], pa.uuid()),
            "s": pa.array([str(i) for i in range(5)], pa.string_view()),
            "b": pa.array([bytes([i]) for i in range(5)], pa.binary_view()),
        }
    )
    pq.write_table(table, path)
    want = pq.read_table(path).to_pylist()
    assert isinstance(want[0]["u"], uuid.UUID)
    ds = ParquetDataset(path, format=fmt, window_bytes=1)
    assert [ds[i] for i in range(5)] == want
    assert list(ds.__getitems__([4, 0, 3])) == [want[4], want[0], want[3]]


def test_a_source_of_only_a_file_without_columns_is_named_not_corrupt(tmp_path: Path) -> None:
    # DuckDB refuses such a file ("Need at least one non-root column"): it holds nothing, so a
    # source of it alone is a clear error naming it, never a corrupt shard
    path = tmp_path / "none.parquet"
    pq.write_table(pa.table({"x": pa.array([], pa.int64())}).drop(["x"]), path)
    with pytest.raises(SourceError, match="has no columns") as info:
        ParquetDataset(path)
    assert not isinstance(info.value, CorruptShardError)
    assert str(path) in str(info.value)


def test_fixed_len_interval_is_read_with_a_memory_budget(tmp_path: Path) -> None:
    # FIXED_LEN_BYTE_ARRAY(12) annotated INTERVAL: pyarrow sees 12 bytes, DuckDB an INTERVAL;
    # the value bound once applied octet_length to it and every read failed
    src = tmp_path / "src.parquet"
    raw = bytes([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0])
    pq.write_table(pa.table({"id": [1, 2], "iv": pa.array([raw, None], pa.binary(12))}), src)
    path = tmp_path / "iv.parquet"
    hf.interval_column(src, path, "iv")
    for memory in (64, 0):
        ds = ParquetDataset(path, memory=memory, read_ahead=False)
        rows = [ds[0], ds[1]]
        assert [r["id"] for r in rows] == [1, 2] and rows[1]["iv"] is None
        assert type(rows[0]["iv"]) is type(ds.__getitems__([1, 0])[1]["iv"])
        assert _count(ds) == 2


def test_the_schema_gives_interval_columns_the_type_served(tmp_path: Path) -> None:
    # INTERVAL leaves (DuckDB's writer, and a pyarrow file annotated by hand) are served as
    # month_day_nano_interval; ds.schema said fixed_size_binary[12], at every level
    root = tmp_path / "duck"
    root.mkdir()
    duckdb.sql(
        "COPY (SELECT i, to_months(i) + to_days(2 * i) AS iv, [to_days(i), NULL] AS ivs, "
        "{'a': to_months(3 * i)} AS st, map([1], [to_days(i)]) AS m FROM range(3000) t(i)) "
        f"TO '{root / 'a.parquet'}' (ROW_GROUP_SIZE 1000)"
    )
    ds = ParquetDataset(root, memory=64)
    interval = pa.month_day_nano_interval()
    types = {f.name: f.type for f in ds.schema}
    assert types["iv"] == interval
    assert types["ivs"].value_type == interval
    assert types["st"].field("a").type == interval
    assert types["m"].item_type == interval and types["m"].key_type == pa.int32()
    for i in (0, 1234, 2999):
        row = ds[i]
        assert (row["iv"].months, row["iv"].days, row["iv"].nanoseconds) == (i, 2 * i, 0)
        assert row["ivs"][0].days == i and row["ivs"][1] is None
        assert row["st"]["a"].months == 3 * i
    table = ds.sql("SELECT iv, ivs, st FROM dataset LIMIT 1")
    assert [f.type for f in table.schema] == [types["iv"], table.schema.field("ivs").type,
                                              table.schema.field("st").type]
    assert table.schema.field("ivs").type.value_type == interval

    src = tmp_path / "src.parquet"
    raw = [bytes([i, 0, 0, 0, 2 * i, 0, 0, 0, 0, 0, 0, 0]) for i in range(3)]
    pq.write_table(pa.table({"id": [0, 1, 2], "iv": pa.array(raw, pa.binary(12))}), src)
    path = tmp_path / "iv.parquet"
    hf.interval_column(src, path, "iv")
    ds = ParquetDataset(path)
    assert ds.schema.field("iv").type == interval
    assert [(r["iv"].months, r["iv"].days) for r in ds.__getitems__([2, 0])] == [(2, 4), (0, 0)]


def test_cli_writes_timestamps_beyond_python_as_text(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    far = pa.array([253402300800_000000 * 3, 0], pa.timestamp("us"))
    pq.write_table(pa.table({"id": [0, 1], "t": far}), path)
    with pytest.raises(OutOfRangeError, match="'t'"):
        ParquetDataset(path)[0]
    for fmt, want in (("csv", "0,26059-12-31 00:00:00.000000"), ("jsonl", '"26059-12-31')):
        done = _run("-m", "undertale_duck", "sql", str(path), "SELECT * FROM dataset", "-f", fmt)
        assert done.returncode == 0, done.stderr
        assert want in done.stdout and "1970-01-01" in done.stdout


def test_the_drift_check_compares_float16_values_and_nans() -> None:
    from undertale_duck.core.source.readable import _lost

    half = pa.chunked_array([pa.array(np.array([1.5, np.nan, -2.0], np.float16)), pa.array(
        np.array([np.inf], np.float16))])
    assert _lost(half, half.cast(pa.float32())) == ""  # every value survives, NaN included
    wide = pa.chunked_array([pa.array([0.5, float("nan"), 1 / 3])])
    assert "0.333" in _lost(wide, wide.cast(pa.float16()))


@pytest.mark.parametrize("fmt", FORMATS)
def test_drifting_columns_of_many_chunks_are_served_whole(tmp_path: Path, fmt: str) -> None:
    # DuckDB hands a window over in 2,048-row pieces, and a cast may join them
    n = 5000
    root = _shards(
        tmp_path / "d",
        pa.table({"v": pa.array(range(n), pa.int32()), "f": pa.array([0.5] * n, pa.float32())}),
        pa.table({"v": pa.array(range(n, 2 * n), pa.int64()),
                  "f": pa.array([k / 4 for k in range(n)], pa.float64())}),
    )
    pq.write_table(pa.table({"v": pa.array(range(n, 2 * n), pa.int64()),
                             "f": pa.array([k / 4 for k in range(n)], pa.float64())}),
                   root / "1.parquet", row_group_size=700)
    ds = ParquetDataset(root, format=fmt)
    rows = ds.__getitems__(list(range(n - 3, 2 * n)))
    assert [int(r["v"]) for r in rows] == list(range(n - 3, 2 * n))
    assert [float(r["f"]) for r in rows] == [0.5] * 3 + [k / 4 for k in range(n)]
