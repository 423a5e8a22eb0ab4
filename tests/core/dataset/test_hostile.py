"""Hostile names: paths and column names that look like SQL, globs, quotes or unicode."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen

from undertale_duck import (
    ColumnError,
    ParquetDataset,
    QueryError,
    ReadOnlyError,
    SourceError,
)
from undertale_duck.core.runtime.sqlfiles import quote_identifier, quote_literal

HOSTILE = [
    "it's \"quoted\"",
    "sp ace",
    "ünïcødé 🦆",
    "per%cent",
    "star*",
    "question?",
    "br[1]",
    "open[",
    "close]",
    "new\nline",
    "'; DROP TABLE x; --",
    "x\n']); DROP VIEW dataset; --",
    "{a,b}",
]


def _check_rows(ds: ParquetDataset, total: int) -> None:
    want = datagen.expected(total)
    assert len(ds) == total
    assert [ds[i] for i in range(total)] == want
    assert ds.__getitems__(list(range(total - 1, -1, -1))) == want[::-1]
    got = ds.sql("SELECT id FROM dataset").column("id").to_pylist()
    assert sorted(got) == [r["id"] for r in want]  # every row exactly once through the view


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_directory_and_file_names(tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    paths = datagen.write_shards(root, [7, 5], row_group_size=3, prefix=name)
    ds = ParquetDataset(root, memory=1, window_bytes=1)
    assert ds.shards == [str(p) for p in paths]
    _check_rows(ds, 12)
    assert ds.locate(8) == (str(paths[1]), 1)
    # a list of files and a single file work the same way
    _check_rows(ParquetDataset([str(p) for p in paths]), 12)
    single = ParquetDataset(paths[0])
    assert [single[i] for i in range(7)] == datagen.expected(7)


@pytest.mark.parametrize(
    ("literal", "decoy"),
    [
        ("a[1].parquet", "a1.parquet"),
        ("x*.parquet", "xy.parquet"),
        ("q?.parquet", "qz.parquet"),
        ("[ab].parquet", "a.parquet"),
    ],
)
def test_glob_characters_in_file_names_read_only_that_file(
    tmp_path: Path, literal: str, decoy: str
) -> None:
    # The decoy is what DuckDB's glob would match if the name were not escaped.
    pq.write_table(datagen.table(0, 6), tmp_path / literal, row_group_size=2)
    pq.write_table(datagen.table(100, 109), tmp_path / decoy, row_group_size=2)
    ds = ParquetDataset([tmp_path / literal], memory=1, window_bytes=1)
    assert len(ds) == 6
    assert [ds[i] for i in range(6)] == datagen.expected(6)
    got = ds.sql("SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM dataset")
    assert got.to_pylist() == [{"n": 6, "lo": "row-00000000", "hi": "row-00000005"}]
    both = ParquetDataset(tmp_path)  # a directory: both files, each once
    assert len(both) == 15
    assert both.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 15}]
    assert sorted(both[i]["id"] for i in range(15)) == sorted(
        [f"row-{i:08d}" for i in range(6)] + [f"row-{i:08d}" for i in range(100, 109)]
    )


def test_glob_characters_in_directory_names(tmp_path: Path) -> None:
    # "d[1]" would glob to "d1", "s*x" to "sax": decoys with other rows sit there
    for real, decoy in (("d[1]", "d1"), ("s*x", "sax"), ("q?", "qq")):
        datagen.write_shards(tmp_path / decoy, [4], prefix="part")
        pq.write_table(datagen.table(50, 53), tmp_path / decoy / "part-00001.parquet")
        datagen.write_shards(tmp_path / real, [4], prefix="part")
        ds = ParquetDataset(tmp_path / real)
        assert [ds[i] for i in range(4)] == datagen.expected(4)
        assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 4}]


def test_backslash_with_glob_character_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "e\\[1].parquet"
    pq.write_table(datagen.table(0, 3), bad)
    with pytest.raises(SourceError, match="backslash") as info:
        ParquetDataset([bad])
    assert str(bad) in str(info.value) or repr(str(bad)) in str(info.value)
    # a backslash alone is fine
    fine = tmp_path / "e\\1.parquet"
    pq.write_table(datagen.table(0, 3), fine)
    assert [ParquetDataset([fine])[i] for i in range(3)] == datagen.expected(3)


HOSTILE_COLUMNS = [
    "'; DROP TABLE x; --",
    'x"y',
    "sp ace",
    "ünï 🦆",
    "%*?[]",
    "new\nline",
    "select",
    "dataset",
    "filename",
]


def _hostile_column_table(start: int, stop: int) -> pa.Table:
    return pa.table(
        {name: [f"{k}:{i}" for i in range(start, stop)] for k, name in enumerate(HOSTILE_COLUMNS)}
        | {"n": list(range(start, stop))}
    )


def test_hostile_column_names(tmp_path: Path) -> None:
    pq.write_table(_hostile_column_table(0, 10), tmp_path / "a.parquet", row_group_size=3)
    pq.write_table(_hostile_column_table(10, 15), tmp_path / "b.parquet", row_group_size=3)
    ds = ParquetDataset(tmp_path, window_bytes=1)
    assert ds.columns == [*HOSTILE_COLUMNS, "n"]
    want = _hostile_column_table(0, 15).to_pylist()
    assert [ds[i] for i in range(15)] == want
    # a projection onto a few hostile columns, in another order
    picked = ["new\nline", "'; DROP TABLE x; --", "n"]
    sub = ParquetDataset(tmp_path, columns=picked, window_bytes=1)
    assert [sub[i] for i in range(15)] == [{c: r[c] for c in picked} for r in want]
    # SQL over the view with quoted identifiers, values bound as parameters
    col = quote_identifier("'; DROP TABLE x; --")
    got = ds.sql(f"SELECT {col} AS v FROM dataset WHERE n = $n", params={"n": 12})
    assert got.to_pylist() == [{"v": "0:12"}]


def test_sql_fragments_as_values_are_never_executed(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [20])
    ds = ParquetDataset(tmp_path)
    evil = "'; DROP VIEW dataset; --"
    assert ds.sql("SELECT count(*) AS n FROM dataset WHERE id = $v", {"v": evil}).to_pylist() == [
        {"n": 0}
    ]
    assert ds.sql("SELECT count(*) AS n FROM dataset WHERE id = ?", [evil]).to_pylist() == [
        {"n": 0}
    ]
    with pytest.raises(ReadOnlyError):
        ds.sql("SELECT 1; DROP VIEW dataset")
    with pytest.raises(QueryError):
        ds.sql(evil)
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 20}]
    assert ds[19] == datagen.expected(20)[19]


def test_columns_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "case.parquet"
    pq.write_table(pa.table({"A": [1, 2], "a": [3, 4], "b": [5, 6]}), path)
    with pytest.raises(ColumnError, match="differ at most in case") as info:
        ParquetDataset(path)
    assert str(path) in str(info.value)
    with pytest.raises(ColumnError, match="differ at most in case"):
        ParquetDataset(path, columns=["a"])
    # leaving both out is fine
    ok = ParquetDataset(path, columns=["b"])
    assert [ok[0], ok[1]] == [{"b": 5}, {"b": 6}]


def test_column_named_file_row_number_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "frn.parquet"
    pq.write_table(pa.table({"File_Row_Number": [1, 2], "v": [3, 4]}), path)
    with pytest.raises(ColumnError, match=r"file_row_number|File_Row_Number") as info:
        ParquetDataset(path)
    assert str(path) in str(info.value)


def test_statements_that_would_write_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    datagen.write_shards(data, [10])
    ds = ParquetDataset(data)
    evil = tmp_path / "evil"
    target = quote_literal(str(evil / "out.parquet"))
    logs = quote_literal(str(evil))
    attempts = [
        f"COPY (SELECT 1 AS x) TO {target}",
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO {target}",
        f"/* hidden */ explain analyse (FORMAT json) COPY dataset TO {target}",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        f"CALL enable_logging(storage = 'file', storage_path = {logs})",
        f"SELECT * FROM main.\"Enable_Logging\"/* x */(storage = 'file', storage_path = {logs})",
        "SELECT * FROM query('SELECT * FROM ' || 'enable_' || 'logging(storage=''file'', "
        f"storage_path={logs.replace(chr(39), chr(39) * 2)})')",
        "SELECT * FROM json_execute_serialized_sql('{}')",
        "CALL checkpoint()",
        "SELECT 1; CREATE TABLE t AS SELECT 1",
    ]
    evil.mkdir()
    for attempt in attempts:
        with pytest.raises(ReadOnlyError):
            ds.sql(attempt)
    assert list(evil.iterdir()) == []
    with pytest.raises(QueryError):
        ds.sql("SELECT * FROM t")  # no table was created
    # reading and explaining stay possible; names that merely look like those functions too
    assert ds.sql("EXPLAIN ANALYZE SELECT count(*) FROM dataset").num_rows >= 1
    assert ds.sql("EXPLAIN (FORMAT json) SELECT 1").num_rows >= 1
    got = ds.sql("SELECT 'query(' AS query, label AS checkpoint FROM dataset WHERE id = $i",
                 {"i": "row-00000003"})
    assert got.to_pylist() == [{"query": "query(", "checkpoint": 3}]
