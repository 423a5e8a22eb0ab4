"""describe: footer statistics, --scan, schema drift, Spark-style and corrupt directories."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support import datagen

from undertale_duck import ArgumentError
from undertale_duck.cli.render_describe import to_text
from undertale_duck.core.describe import footers as describe

SIZES = [40, 0, 23, 9]
TOTAL = sum(SIZES)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "undertale_duck", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards as Spark writes them: _SUCCESS, .crc files, a _temporary directory."""
    root = tmp_path_factory.mktemp("describe") / "spark"
    datagen.write_shards(root, SIZES, row_group_size=[16, 1, 5, 9])
    (root / "_SUCCESS").write_text("")
    for p in list(root.glob("*.parquet")):
        (root / f".{p.name}.crc").write_bytes(b"crc")
    (root / "_temporary").mkdir()
    (root / "_temporary" / "junk.parquet").write_bytes(b"PAR1 half written")
    return root


@pytest.fixture(scope="module")
def drifting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three shards: the reference, one with a changed type, a missing and an extra column."""
    root = tmp_path_factory.mktemp("drift") / "data"
    root.mkdir()
    pq.write_table(datagen.table(0, 10), root / "a.parquet")
    changed = datagen.table(10, 15)
    changed = changed.set_column(
        changed.schema.get_field_index("label"),
        "label",
        pc.cast(changed.column("label"), pa.string()),
    )
    changed = changed.drop_columns(["blob"]).append_column("extra", pa.array([1.5] * 5))
    pq.write_table(changed, root / "b.parquet")
    pq.write_table(datagen.table(15, 20), root / "c.parquet")
    return root


def expected_nulls(column: str) -> int:
    return sum(datagen.row(i)[column] is None for i in range(TOTAL))


def test_footer_statistics_match_the_data(spark: Path) -> None:
    d = describe.describe(spark)
    assert [Path(s.path).name for s in d.shards] == [
        f"part-{k:05d}.parquet" for k in range(len(SIZES))
    ]
    assert [s.rows for s in d.shards] == SIZES
    assert d.rows == TOTAL
    assert d.bytes == sum(os.path.getsize(s.path) for s in d.shards)
    assert [s.row_groups for s in d.shards] == [
        pq.ParquetFile(s.path).metadata.num_row_groups for s in d.shards
    ]
    assert all(s.created_by.startswith("parquet-cpp-arrow") for s in d.shards)
    cols = {c.name: c for c in d.columns}
    assert list(cols) == datagen.schema().names
    assert cols["label"].type == "BIGINT" and cols["tokens"].type == "INTEGER[]"
    assert cols["when"].type == "TIMESTAMP" and cols["category"].type == "VARCHAR"
    assert cols["score"].null_count == expected_nulls("score") > 0
    assert (cols["label"].min, cols["label"].max) == (0, 6)
    assert (cols["id"].min, cols["id"].max) == ("row-00000000", f"row-{TOTAL - 1:08d}")
    assert cols["when"].max == datagen.row(TOTAL - 1)["when"]
    scores = [datagen.row(i)["score"] for i in range(TOTAL)]
    assert cols["score"].max == max(s for s in scores if s is not None)
    # nested columns have no whole-value footer statistics: unknown, never made up
    assert cols["point"].null_count is None and cols["point"].min is None
    assert d.drift == [] and d.errors == []


def test_scan_gives_exact_values_and_list_lengths(spark: Path) -> None:
    labels: list[str] = []
    d = describe.describe(spark, scan=True, progress=labels.append)
    assert labels == [Path(s.path).name for s in d.shards]  # one call per shard, by file name
    cols = {c.name: c for c in d.columns}
    assert d.scanned
    assert cols["point"].null_count == 0
    lengths = [len(datagen.row(i)["tokens"]) for i in range(TOTAL)]
    assert (cols["tokens"].min_length, cols["tokens"].max_length) == (min(lengths), max(lengths))
    assert cols["score"].null_count == expected_nulls("score")
    assert (cols["blob"].min, cols["blob"].max) == (
        min(datagen.row(i)["blob"] for i in range(TOTAL)),
        max(datagen.row(i)["blob"] for i in range(TOTAL)),
    )


def test_describe_takes_a_list_of_shards_and_memory_as_parquetdataset_does(spark: Path) -> None:
    shards = sorted(spark.glob("part-*.parquet"))
    d = describe.describe(shards[2:], scan=True, memory="1GiB")  # a list, a size string
    assert d.rows == SIZES[2] + SIZES[3] and [Path(s.path) for s in d.shards] == shards[2:]
    assert d.source == f"{shards[2]}, {shards[3]}"
    assert f"dataset {shards[2]}, {shards[3]}" in to_text(d)
    with pytest.raises(ArgumentError, match="memory must be a finite size >= 0"):
        describe.describe(spark, memory=-1)
    with pytest.raises(ArgumentError, match="memory must be a size such as"):
        describe.describe(spark, memory="lots")


def test_describe_cli_text_and_json_on_spark_dir(spark: Path) -> None:
    text = run_cli("describe", str(spark))
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert f"{len(SIZES)} shards, {TOTAL} rows" in out
    assert "_SUCCESS" not in out and ".crc" not in out and "junk" not in out
    score = next(line for line in out.splitlines() if line.split()[:1] == ["score"])
    assert score.split()[:3] == ["score", "DOUBLE", str(expected_nulls("score"))]
    assert "schema drift: none" in out
    js = run_cli("describe", str(spark), "--format", "json", "--scan")
    assert js.returncode == 0, js.stderr
    data = json.loads(js.stdout)
    assert data["totals"] == {
        "shards": len(SIZES),
        "rows": TOTAL,
        "row_groups": sum(s["row_groups"] for s in data["shards"]),
        "bytes": sum(s["bytes"] for s in data["shards"]),
    }
    assert data["statistics"] == "scan"
    when = next(c for c in data["columns"] if c["name"] == "when")
    assert when["max"] == datagen.row(TOTAL - 1)["when"].isoformat()
    assert js.stderr == ""  # no progress bar when stderr is not a terminal


def test_drift_is_reported_and_describe_still_works(drifting: Path) -> None:
    d = describe.describe(drifting)
    assert d.rows == 20 and d.errors == []
    assert len(d.drift) == 1
    drift = d.drift[0]
    assert Path(drift.path).name == "b.parquet"
    assert drift.missing == ["blob"] and drift.extra == ["extra"]
    assert drift.changed == [("label", "BIGINT", "VARCHAR")]  # (column, reference, shard)
    cols = {c.name: c for c in d.columns}
    assert cols["blob"].shards == 2 and cols["extra"].shards == 1 and cols["extra"].type == "DOUBLE"
    assert cols["label"].min is None  # mixed types: no min/max pretends to cover every shard
    assert cols["id"].max == "row-00000019"
    result = run_cli("describe", str(drifting), "--format", "json")
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)["drift"]
    assert got == [
        {
            "path": str(drifting / "b.parquet"),
            "missing": ["blob"],
            "extra": ["extra"],
            "changed": [{"column": "label", "type": "VARCHAR", "expected": "BIGINT"}],
        }
    ]
    text = to_text(d)
    assert "b.parquet: missing blob; extra extra; label is VARCHAR (expected BIGINT)" in text
    assert "schema drift: 1 shard differs from the layout most shards share" in text
    assert "DOUBLE (in 1 of 3 shards)" in text


def test_corrupt_shard_is_reported_and_the_rest_described(spark: Path, tmp_path: Path) -> None:
    root = tmp_path / "broken"
    root.mkdir()
    good = spark / "part-00000.parquet"
    (root / "a.parquet").write_bytes(good.read_bytes())
    data = good.read_bytes()
    (root / "b.parquet").write_bytes(data[: len(data) // 2] + b"PAR1")  # footer gone
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    d = describe.describe(root)
    assert [s.error is None for s in d.shards] == [True, False]
    assert d.rows == SIZES[0]
    result = run_cli("describe", str(root))
    assert result.returncode == 2
    assert "a.parquet" in result.stdout and "UNREADABLE" in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "b.parquet" in lines[0] and "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in root.iterdir()} == before


def test_missing_source_is_an_input_error(tmp_path: Path) -> None:
    result = run_cli("describe", str(tmp_path / "nothing"))
    assert result.returncode == 2
    assert result.stdout == "" and "does not exist" in result.stderr


@pytest.mark.parametrize("scan", [False, True])
def test_columns_duckdb_would_rename_are_not_described_under_its_names(
    tmp_path: Path, scan: bool
) -> None:
    # DuckDB reads "A" beside "a" as "A_1", a second "a" as "a_1", and "" as "column1":
    # describe listed those names (with their statistics), which no shard has
    root = tmp_path / "data"
    root.mkdir()
    names = {"a": ["a", "b"], "b": ["a", "A"], "c": ["a", "a"], "d": ["a", ""]}
    for k, (shard, columns) in enumerate(names.items()):
        rows = range(3 * k, 3 * k + 3)  # row i: i, then 10 * i
        arrays = [pa.array(rows), pa.array([10 * i for i in rows])]
        pq.write_table(pa.Table.from_arrays(arrays, names=columns), root / f"{shard}.parquet")
    d = describe.describe(root, scan=scan)
    assert [c.name for c in d.columns] == ["a", "b"]
    assert [(c.min, c.max) for c in d.columns] == [(0, 2), (0, 20)]
    errors = {os.path.basename(s.path): s.error for s in d.shards if s.error}
    assert sorted(errors) == ["b.parquet", "c.parquet", "d.parquet"]
    assert "'a' and 'A', which differ at most in case" in str(errors["b.parquet"])
    assert "two columns named 'a' and 'a'" in str(errors["c.parquet"])
    assert "a column with an empty name" in str(errors["d.parquet"])
    result = run_cli("describe", str(root), *(["--scan"] if scan else []))
    assert result.returncode == 2 and "_1" not in result.stdout and "column1" not in result.stdout


def test_float16_footer_statistics_are_numbers(tmp_path: Path) -> None:
    # pyarrow gives a float16 column's footer min/max as two raw bytes; describe showed
    # b'\x00\x80' and b'U=' (and took the bytes' order for the numbers')
    values = [(i - 5) / 3 for i in range(12)]
    table = pa.table({"h": pa.array(values, pa.float32()).cast(pa.float16())})
    pq.write_table(table, tmp_path / "half.parquet", row_group_size=5)
    d = describe.describe(tmp_path / "half.parquet")
    (col,) = d.columns
    halves = [float(v) for v in table.column("h").to_pylist()]
    assert (col.min, col.max) == (min(halves), max(halves))
    assert isinstance(col.min, float) and col.null_count == 0
    scanned = describe.describe(tmp_path / "half.parquet", scan=True).columns[0]
    assert (scanned.min, scanned.max) == (col.min, col.max)


def test_footer_min_of_a_float_zero_is_not_shown_as_negative_zero(tmp_path: Path) -> None:
    # Parquet writers store a zero minimum as -0.0 (the format's rule, so that readers skip
    # no group holding -0.0); the data holds +0.0 only, and describe showed "-0.0"
    root = tmp_path / "zeros"
    root.mkdir()
    values = [i * 0.5 for i in range(10)]  # 0.0 .. 4.5, no negative zero
    pq.write_table(pa.table({"f": values, "h": pa.array(values, pa.float16())}),
                   root / "part-0.parquet")
    for scan in (False, True):
        cols = {c.name: c for c in describe.describe(root, scan=scan).columns}
        for name in ("f", "h"):
            assert (cols[name].min, cols[name].max) == (0.0, 4.5)
            assert str(cols[name].min) == "0.0", (scan, name, cols[name].min)
    line = next(x for x in to_text(describe.describe(root)).splitlines() if x.split()[:1] == ["f"])
    assert line.split()[3:] == ["0.0", "4.5"], line


def test_scan_min_max_see_nan_beside_numbers_in_a_row_group(tmp_path: Path) -> None:
    # a full scan is exact: DuckDB's statistics propagation took max from the footer, which
    # Parquet writers compute without NaN (docs/decisions/0021), and gave 4.5 instead of NaN
    root = tmp_path / "nan"
    root.mkdir()
    values = [math.nan if i == 3 else i * 0.5 for i in range(10)]
    pq.write_table(pa.table({"f": values}), root / "part-0.parquet", row_group_size=5)
    cols = {c.name: c for c in describe.describe(root, scan=True).columns}
    assert cols["f"].null_count == 0 and cols["f"].min == 0.0
    assert math.isnan(cols["f"].max)  # DuckDB sorts NaN above every number, as ds.sql does


def test_a_scan_shows_a_list_column_without_values_as_none_not_unknown(tmp_path: Path) -> None:
    # a scan is exact: no lengths means no values ("-"), never "?" (unknown), which the
    # footer view explains in a legend that a scan does not print
    root = tmp_path / "nulls"
    root.mkdir()
    pq.write_table(pa.table({"l": pa.array([None] * 5, pa.list_(pa.int64())),
                             "i": pa.array(range(5), pa.int64())}), root / "part-0.parquet")
    for text in (to_text(describe.describe(root, scan=True)),
                 run_cli("describe", str(root), "--scan", "--where", "i > 10").stdout):
        lines = [x.split() for x in text.splitlines() if x.split()[:1] == ["l"]]
        assert lines and all(line[3:] == ["-", "-"] for line in lines), text
        assert "  1 shard, 5 rows, 1 row group, " in text  # not "1 row groups"


def test_scan_reads_values_not_footer_statistics_that_lie(tmp_path: Path) -> None:
    # DuckDB answers count/min/max from footer statistics marked exact without reading a
    # page: --scan repeated a lying footer as a "full scan" and passed a damaged shard
    import struct

    from support import footer

    rows = list(range(100))
    src = tmp_path / "src.parquet"
    table = pa.table({"idx": rows, "val": [-i for i in rows], "text": [f"t-{i}" for i in rows]})
    pq.write_table(table, src, row_group_size=50, use_dictionary=False)

    def lie(meta: footer.Struct) -> None:  # val is -99..0; claim 0..5, exactly
        for group in footer.row_groups(meta):
            footer.put(footer.column_meta(group)[1], 12, [
                [3, footer.I64, 0], [5, footer.BINARY, struct.pack("<q", 5)],
                [6, footer.BINARY, struct.pack("<q", 0)], [7, footer.TRUE, True],
                [8, footer.TRUE, True],
            ], footer.STRUCT)

    lying = tmp_path / "lying" / "part-0.parquet"
    lying.parent.mkdir()
    footer.rewrite(src, lying, lie)
    val = {c.name: c for c in describe.describe(lying.parent, scan=True).columns}["val"]
    assert (val.min, val.max, val.null_count) == (-99, 0, 0)
    assert {c.name: c for c in describe.describe(lying.parent).columns}["val"].max == 5

    # a garbled page header past the first row group: the scan must read it and fail
    damaged = tmp_path / "damaged" / "part-0.parquet"
    damaged.parent.mkdir()
    data = bytearray(src.read_bytes())
    chunk = pq.ParquetFile(src).metadata.row_group(1).column(2)
    for k in range(chunk.data_page_offset, chunk.data_page_offset + 6):
        data[k] ^= 0x5A
    damaged.write_bytes(bytes(data))
    scanned = describe.describe(damaged.parent, scan=True)
    assert [s.path for s in scanned.errors] == [str(damaged)]


@pytest.mark.parametrize("scan", [False, True])
def test_a_shard_without_columns_is_listed_as_holding_nothing(tmp_path: Path, scan: bool) -> None:
    # pyarrow's file for pa.table({}): the dataset leaves it out; describe called it
    # unreadable ("Need at least one non-root column") and the command exited 2
    pq.write_table(pa.table({"i": pa.array([1, 2, 3], pa.int64())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({}), tmp_path / "b.parquet")
    d = describe.describe(tmp_path, scan=scan)
    assert not d.errors and not d.drift
    assert [(os.path.basename(s.path), s.rows, s.error) for s in d.shards] == [
        ("a.parquet", 3, None), ("b.parquet", 0, None)]
    assert [(c.name, c.shards) for c in d.columns] == [("i", 1)]
    if scan:
        assert (d.columns[0].min, d.columns[0].max) == (1, 3)
    assert "UNREADABLE" not in to_text(d)
    done = run_cli("describe", str(tmp_path))
    assert done.returncode == 0 and "b.parquet" in done.stdout, done.stderr
