"""Ad hoc SQL is refused before DuckDB builds result vectors that pass the memory budget."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from support import hostile_files as hf

from undertale_duck import MemoryBudgetError, ParquetDataset
from undertale_duck.core.bounds import vectors
from undertale_duck.core.parquet.text_pages import Page
from undertale_duck.core.query import shape as query_shape

KIB = 1 << 10


def _bomb(
    path: Path, rows: int, length: int, *, binary: bool = False, group: int = 1 << 20
) -> None:
    """``id`` = the row index and ``s``: every row the one ``length``-byte dictionary entry."""
    hf.dictionary_bomb(path, rows, length, row_group_rows=group, ids=True, binary=binary,
                       store_schema=False)


def test_dictionary_bomb_in_ad_hoc_sql_is_refused_naming_shard_and_column(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bomb.parquet"
    _bomb(path, 50_000, 64 * KIB)  # 3 GiB decoded from a file of a few KB
    assert path.stat().st_size < 256 * KIB
    before = hf.sha256s(tmp_path)
    ds = ParquetDataset(path, memory=64)
    for query in (
        "SELECT * FROM dataset",
        "SELECT s FROM dataset WHERE id % 2 = 0",
        "SELECT upper(s) AS u FROM dataset",
        "SELECT id, s || 'z' FROM dataset",
    ):
        with pytest.raises(MemoryBudgetError, match="dictionary bomb") as info:
            ds.sql(query)
        assert info.value.path == str(path)
        assert "column 's'" in str(info.value) and "128.0 MiB" in str(info.value)
    with pytest.raises(MemoryBudgetError):  # one row per batch still builds whole vectors
        ds.sql_batches("SELECT s FROM dataset", batch_rows=1)
    # what never copies the strings into a result runs
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 50_000}]
    assert ds.sql("SELECT max(strlen(s)) AS m FROM dataset").to_pylist() == [{"m": 64 * KIB}]
    assert ds.sql("SELECT sum(id) AS t FROM dataset WHERE s LIKE 'x%y'").to_pylist() == [
        {"t": sum(range(50_000))}
    ]
    assert ds.sql("DESCRIBE dataset").num_rows == 2
    # a constant LIMIT bounds the rows of a result vector: a peek at the rows runs
    value = "x" * (64 * KIB - 1) + "y"
    assert ds.sql("SELECT s FROM dataset LIMIT 3").column("s").to_pylist() == [value] * 3
    assert ds.sql("SELECT * FROM dataset ORDER BY id DESC LIMIT 2").to_pylist() == [
        {"id": 49_999, "s": value}, {"id": 49_998, "s": value}
    ]
    for query in ("SELECT s FROM dataset LIMIT 5000", "SELECT s FROM dataset LIMIT $n",
                  "SELECT * FROM (SELECT s FROM dataset LIMIT 3) UNION ALL SELECT s FROM dataset"):
        with pytest.raises(MemoryBudgetError):
            ds.sql(query, {"n": 3} if "$n" in query else None)
    # a budget that holds the vectors lets the query run (the bytes are real)
    big = ParquetDataset(path, memory=1024, duckdb_config={"threads": 1})
    assert big.sql("SELECT s FROM dataset WHERE id < 4000").column("s").to_pylist() == [
        value
    ] * 4000
    assert hf.sha256s(tmp_path) == before


def test_binary_bomb_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "blob.parquet"
    _bomb(path, 10_000, 64 * KIB, binary=True)
    with pytest.raises(MemoryBudgetError, match="column 's'"):
        ParquetDataset(path, memory=64).sql("SELECT s FROM dataset")
    assert ParquetDataset(path, memory=64).sql("SELECT octet_length(s) AS n FROM dataset "
                                                "LIMIT 1").to_pylist() == [{"n": 64 * KIB}]


@pytest.mark.parametrize("threads, refused", [(1, False), (2, False), (4, True)])
def test_vectors_counted_per_thread_plus_one(tmp_path: Path, threads: int, refused: bool) -> None:
    # 2048 rows of 8 KiB: 16 MiB per vector; 64 MiB holds 2 or 3 of them, not 5
    path = tmp_path / "mid.parquet"
    _bomb(path, 4096, 8 * KIB)
    ds = ParquetDataset(path, memory=64, duckdb_config={"threads": threads})
    if refused:
        with pytest.raises(MemoryBudgetError, match=f"builds {threads + 1} vectors"):
            ds.sql("SELECT s FROM dataset")
    else:
        assert ds.sql("SELECT s FROM dataset").num_rows == 4096


def test_memory_zero_turns_the_check_off(tmp_path: Path) -> None:
    path = tmp_path / "mid.parquet"
    _bomb(path, 2048, 16 * KIB)  # 32 MiB per vector
    with pytest.raises(MemoryBudgetError):
        ParquetDataset(path, memory=64).sql("SELECT s FROM dataset")
    assert ParquetDataset(path, memory=0).sql("SELECT s FROM dataset").num_rows == 2048


@pytest.mark.parametrize("kind", hf.NESTED_KINDS)
def test_nested_bomb_is_refused_whenever_the_query_names_it(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "nested.parquet"
    hf.nested_dictionary_bomb(path, kind, 4000, 64 * KIB)
    before = hf.sha256s(tmp_path)
    ds = ParquetDataset(path, memory=64)
    for query in ("SELECT * FROM dataset", "SELECT c FROM dataset",
                  "SELECT c IS NULL FROM dataset"):
        # DuckDB copies nested strings as it scans them, whatever the result holds
        with pytest.raises(MemoryBudgetError, match="column 'c'") as info:
            ds.sql(query)
        assert info.value.path == str(path)
    assert ds.sql("SELECT sum(id) AS t FROM dataset").to_pylist() == [{"t": sum(range(4000))}]
    with pytest.raises(MemoryBudgetError):  # copied as scanned: a LIMIT does not help
        ds.sql("SELECT c FROM dataset LIMIT 1")
    assert hf.sha256s(tmp_path) == before


@pytest.mark.parametrize(
    "query",
    [
        "SELECT d FROM dataset d",  # the whole row as a struct
        "SELECT dataset FROM dataset",
        'SELECT "S" FROM dataset',  # any spelling of the name
        "SELECT COLUMNS('^s$') FROM dataset",
        "SELECT #2 FROM dataset",
        "SELECT x FROM (SELECT s AS x FROM dataset)",
        "WITH t AS (SELECT * FROM dataset) SELECT t.s FROM t",
        "SELECT s FROM dataset UNION ALL SELECT 'a'",
        "SELECT list_transform([s], lambda v: v) FROM dataset",
        "SELECT dataset.s FROM dataset",
        "FROM dataset",
        "SUMMARIZE dataset",
        "SELECT * FROM read_parquet($p)",
    ],
)
def test_every_way_to_return_the_column_is_seen(tmp_path: Path, query: str) -> None:
    path = tmp_path / "bomb.parquet"
    _bomb(path, 20_000, 64 * KIB)
    ds = ParquetDataset(path, memory=64)
    params = {"p": str(path)} if "$p" in query else None
    with pytest.raises(MemoryBudgetError, match="column 's'"):
        ds.sql(query, params)


def test_bomb_in_one_shard_of_many_names_that_shard(tmp_path: Path) -> None:
    rows = 3000
    for n in range(3):
        pq.write_table(
            pa.table({"id": np.arange(n * rows, (n + 1) * rows),
                      "s": [f"v{i}" for i in range(n * rows, (n + 1) * rows)]}),
            tmp_path / f"part-{n}.parquet",
        )
    bomb = tmp_path / "part-3.parquet"
    _bomb(bomb, rows, 128 * KIB)
    table = pq.read_table(bomb)
    pq.write_table(table.set_column(0, "id", pa.array(np.arange(3 * rows, 4 * rows))), bomb)
    ds = ParquetDataset(tmp_path, memory=64)
    with pytest.raises(MemoryBudgetError) as info:
        ds.sql("SELECT s FROM dataset WHERE id < 10")
    assert info.value.path == str(bomb)
    assert ds.sql("SELECT sum(id) AS t FROM dataset").to_pylist() == [{"t": sum(range(4 * rows))}]


def test_long_values_among_short_ones_are_returned(tmp_path: Path) -> None:
    # the page headers' bound passes the budget (a 300 KiB dictionary entry); the exact
    # weighing finds one long value per vector at most: the query runs
    rows = 20_000
    texts = [f"row {i}" for i in range(rows)]
    for i in (5, 12_345, 19_999):
        texts[i] = "L" * (300 * KIB) + str(i)
    path = tmp_path / "outliers.parquet"
    pq.write_table(pa.table({"id": np.arange(rows), "s": texts}), path)
    ds = ParquetDataset(path, memory=64)
    got = ds.sql("SELECT id, s FROM dataset ORDER BY id").to_pydict()
    assert got == {"id": list(range(rows)), "s": texts}


def test_plain_long_values_count_as_what_they_are(tmp_path: Path) -> None:
    # 4000 distinct 40 KiB values, no dictionary: 80 MiB per vector of real data
    rows = 4000
    texts = [f"{i:06d}" + "z" * (40 * KIB) for i in range(rows)]
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"s": texts}), path, use_dictionary=False)
    with pytest.raises(MemoryBudgetError, match="very long values"):
        ParquetDataset(path, memory=64).sql("SELECT s FROM dataset")
    ds = ParquetDataset(path, memory=512)
    assert ds.sql("SELECT s FROM dataset").column("s").to_pylist() == texts


def test_ordinary_strings_are_never_refused(tmp_path: Path) -> None:
    from support import datagen

    datagen.write_shards(tmp_path / "d", [2000, 1500, 1500])
    ds = ParquetDataset(tmp_path / "d", memory=64)
    got = ds.sql("SELECT * FROM dataset").to_pylist()
    assert [datagen.plain(r) for r in got] == [datagen.plain(r) for r in datagen.expected(5000)]


# --------------------------------------------------------------------------- invariants
def _brute(pages: list[Page]) -> int:
    """Most bytes any VECTOR_ROWS consecutive values can take, value by value."""
    owner = [i for i, page in enumerate(pages) for _ in range(page.values)]
    worst = 0
    for start in range(max(1, len(owner))):
        taken: dict[int, int] = {}
        for i in owner[start:start + vectors.VECTOR_ROWS]:
            taken[i] = taken.get(i, 0) + 1
        worst = max(worst, sum(min(pages[i].bound, n * pages[i].each) for i, n in taken.items()))
    return worst


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3000), st.integers(0, 1 << 20), st.integers(0, 1 << 12)),
        min_size=1,
        max_size=6,
    )
)
def test_window_bound_covers_every_vector(spec: list[tuple[int, int, int]]) -> None:
    pages = [Page(values, bound, each) for values, bound, each in spec]
    assert vectors._window(pages) >= _brute(pages)
    assert vectors._window(pages, 1) == max(min(p.bound, p.each) for p in pages)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("sS\"'`;\n-/*() ,.x")), max_size=20))
def test_referenced_names_hold_every_quoted_spelling(name: str) -> None:
    con = duckdb.connect()
    ident = '"' + name.replace('"', '""') + '"'
    text = con.execute("SELECT json_serialize_sql($q)", {"q": f"SELECT {ident} FROM dataset"})
    import json

    tree = json.loads(text.fetchone()[0])  # type: ignore[index]
    if tree.get("error"):
        return
    names = query_shape.referenced(tree, f"SELECT {ident} FROM dataset")
    assert names is not None and name.lower() in names


def test_text_result_sees_strings_at_any_depth() -> None:
    con = duckdb.connect()
    for sql, text in [
        ("SELECT 1, 2.5, DATE '2024-01-01'", False),
        ("SELECT 'a'", True),
        ("SELECT 'a'::BLOB", True),
        ("SELECT [[{'k': 'v'}]]", True),
        ("SELECT MAP {1: 'a'}", True),
        ("SELECT {'a': 1, 'b': [2]}", False),
        ("SELECT union_value(t := 'x')", True),
    ]:
        assert query_shape.text_result(con.sql(sql).types) is text, sql


# --------------------------------------------------------------------------- RSS and CLI
_PEAK = textwrap.dedent(
    """
    import sys, warnings
    warnings.simplefilter("ignore")
    from undertale_duck import MemoryBudgetError, ParquetDataset  # imports torch
    def hwm():
        return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    ds = ParquetDataset(sys.argv[1], memory=64)
    ds.sql("SELECT 1")  # the fixed footprint of a first query
    before = hwm()
    try:
        ds.sql(sys.argv[2])
        print("RAN")
    except MemoryBudgetError as exc:
        print("MemoryBudgetError:", exc)
    print("GREW_KIB", hwm() - before)
    """
)


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["top", "struct"])
def test_bomb_query_stops_before_rss_grows(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "bomb.parquet"
    if kind == "top":
        _bomb(path, 100_000, 256 * KIB)  # 25 GiB decoded
    else:
        hf.nested_dictionary_bomb(path, kind, 20_000, 256 * KIB)
    done = hf.run_python("-c", _PEAK, str(path), "SELECT * FROM dataset")
    assert done.returncode == 0, done.stderr
    assert "MemoryBudgetError:" in done.stdout and str(path) in done.stdout, done.stdout
    grew = int(done.stdout.split("GREW_KIB")[1].split()[0]) << 10
    # before the check: 1.5 GiB (top-level and struct alike) on 2 cores
    assert grew < 2 * (64 << 20), f"peak RSS grew by {grew >> 20} MiB"


def test_cli_sql_refuses_the_bomb_without_a_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _bomb(data / "bomb.parquet", 20_000, 64 * KIB)
    before = hf.sha256s(data)
    out = tmp_path / "out.csv"
    cmd = [sys.executable, "-m", "undertale_duck", "sql", str(data), "SELECT * FROM dataset",
           "--memory", "64", "--output", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "bomb.parquet" in done.stderr, done.stderr
    assert "memory budget" in done.stderr
    assert not out.exists()
    ok = [sys.executable, "-m", "undertale_duck", "sql", str(data),
          "SELECT count(*) AS n FROM dataset", "--memory", "64"]
    done = subprocess.run(ok, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "20000" in done.stdout
    assert hf.sha256s(data) == before


# --------------------------------------------------------------------------- describe, validate
def _bomb_beside_good_shard(root: Path) -> tuple[Path, Path]:
    """``good.parquet`` (ids 0..999, ``s`` = "v<id>") and ``bomb.parquet`` (64 KiB strings)."""
    root.mkdir()
    good = root / "good.parquet"
    pq.write_table(pa.table({"id": np.arange(1000), "s": [f"v{i}" for i in range(1000)]}), good)
    bomb = root / "bomb.parquet"
    _bomb(bomb, 20_000, 64 * KIB)
    return good, bomb


def test_describe_scan_reports_the_bomb_shard_instead_of_scanning_it(tmp_path: Path) -> None:
    from undertale_duck.core.describe.footers import describe

    good, bomb = _bomb_beside_good_shard(tmp_path / "d")
    before = hf.sha256s(tmp_path / "d")
    found = describe(tmp_path / "d", scan=True, memory=64)
    errors = {s.path: s.error for s in found.shards}
    assert errors[str(good)] is None
    assert errors[str(bomb)] is not None and "dictionary bomb" in errors[str(bomb)]
    assert "column 's'" in errors[str(bomb)]
    scanned = describe(tmp_path / "d", scan=True, memory=1024)  # within a larger budget
    assert all(s.error is None for s in scanned.shards)
    assert describe(tmp_path / "d", scan=False, memory=64).errors == []  # footers only
    cmd = [sys.executable, "-m", "undertale_duck", "describe", str(tmp_path / "d"), "--scan",
           "--memory", "64"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "bomb.parquet" in done.stderr and "dictionary bomb" in done.stderr
    assert hf.sha256s(tmp_path / "d") == before


def test_validate_reports_the_bomb_shard_and_checks_the_others(tmp_path: Path) -> None:
    from undertale_duck.validation import runner

    class Short(BaseModel):
        id: int
        s: str = Field(max_length=3)

    class Typed(BaseModel):
        id: int
        s: str

    good, bomb = _bomb_beside_good_shard(tmp_path / "d")
    before = hf.sha256s(tmp_path / "d")
    for report in (
        ParquetDataset(tmp_path / "d", memory=64).report(Short),
        runner.report_for(tmp_path / "d", Short, memory=64),
    ):
        checks = {c.check: c for c in report.checks}
        assert not checks["readable"].passed
        assert [e.shard for e in checks["readable"].examples] == [str(bomb)]
        assert "dictionary bomb" in str(checks["readable"].examples[0].value)
        # the good shard is still checked: "v100" .. "v999" are longer than 3
        assert checks["length"].violations == 900
    # type and null checks read no values: the bomb passes them
    assert ParquetDataset(tmp_path / "d", memory=64).report(Typed).passed
    # a budget that holds the vectors checks the bomb's values too (all 64 KiB long)
    wide = runner.report_for(tmp_path / "d", Short, memory=2048,
                             duckdb_config={"threads": 1})
    assert {c.check: c for c in wide.checks}["length"].violations == 900 + 20_000
    assert hf.sha256s(tmp_path / "d") == before


def test_a_view_renaming_the_bomb_column_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "bomb.parquet"
    _bomb(path, 20_000, 64 * KIB)
    ds = ParquetDataset(path, memory=64, query="SELECT id, s AS t FROM dataset WHERE id < 9000")
    with pytest.raises(MemoryBudgetError, match="column 's'"):
        ds.sql("SELECT t FROM dataset_view")
    with pytest.raises(MemoryBudgetError, match="column 's'"):
        ds.sql("WITH v AS (SELECT s AS u FROM dataset) SELECT u FROM v")
    assert ds.sql("SELECT count(*) AS n FROM dataset_view").to_pylist() == [{"n": 9000}]


def test_values_too_many_to_weigh_are_refused(tmp_path: Path) -> None:
    # one row group of 5 million references to one 64 KiB entry: weighing its indices alone
    # would pass 64 MiB
    path = tmp_path / "many.parquet"
    _bomb(path, 5_000_000, 64 * KIB, group=5_000_000)
    assert path.stat().st_size < 16 << 20  # mostly its ids
    with pytest.raises(MemoryBudgetError, match="too many values to weigh"):
        ParquetDataset(path, memory=64).sql("SELECT s FROM dataset")


def test_shell_refuses_the_bomb_and_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _bomb(data / "bomb.parquet", 20_000, 64 * KIB)
    before = hf.sha256s(data)
    statements = "SELECT * FROM dataset;\nSELECT count(*) AS n FROM dataset;\n"
    cmd = [sys.executable, "-m", "undertale_duck", "shell", str(data), "--memory", "64",
           "--format", "csv"]
    done = subprocess.run(cmd, input=statements, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1  # a statement failed; the next one still ran
    assert "Traceback" not in done.stderr and "bomb.parquet" in done.stderr, done.stderr
    assert "memory budget" in done.stderr
    assert "20000" in done.stdout
    # --memory 0: no budget, the (small) peek runs
    peek = [sys.executable, "-m", "undertale_duck", "sql", str(data),
            "SELECT strlen(s) AS n FROM dataset WHERE id = 7", "--memory", "0"]
    done = subprocess.run(peek, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and str(64 * KIB) in done.stdout, done.stderr
    assert hf.sha256s(data) == before


def test_bomb_in_object_storage_is_weighed_by_range_reads(tmp_path: Path) -> None:
    from support.storage_server import S3Server, cached_files

    from undertale_duck.validation import runner

    data = tmp_path / "data"
    good, bomb = _bomb_beside_good_shard(data)
    server = S3Server()
    try:
        server.bucket("data")
        url = server.upload(data, "s3://data/bombs")
        cache = tmp_path / "cache"
        ds = ParquetDataset(url, memory=64, storage_options=server.options(), cache_dir=cache)
        with pytest.raises(MemoryBudgetError, match="dictionary bomb") as info:
            ds.sql("SELECT s FROM dataset")
        assert info.value.path is not None and info.value.path.endswith("/bomb.parquet")
        assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 21_000}]
        assert ds.sql("SELECT s FROM dataset WHERE id < 3 ORDER BY s LIMIT 3").num_rows == 3
        assert list(cached_files(cache)) == []  # weighed by ranges, nothing downloaded

        class Short(BaseModel):
            id: int
            s: str = Field(max_length=3)

        report = runner.report_for(url, Short, memory=64, storage_options=server.options())
        readable = {c.check: c for c in report.checks}["readable"]
        assert [e.shard for e in readable.examples] == [url.rstrip("/") + "/bomb.parquet"]
        from undertale_duck.core.describe.footers import describe

        found = describe(url, scan=True, memory=64, storage_options=server.options())
        errors = {s.path.rsplit("/", 1)[-1]: s.error for s in found.shards}
        assert errors["good.parquet"] is None
        assert "dictionary bomb" in str(errors["bomb.parquet"])
    finally:
        server.close()


def test_a_dotted_column_name_hides_nothing(tmp_path: Path) -> None:
    # leaves are found from the columns' types, not by splitting their dotted paths
    rows = 20_000
    dictionary = pa.array(["x" * (64 * KIB)], pa.string())
    leaf = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), dictionary)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32))
    table = pa.table({"id": np.arange(rows), "s.x": leaf,
                      "c.d": pa.ListArray.from_arrays(offsets, leaf)})
    path = tmp_path / "dotted.parquet"
    pq.write_table(table, path, store_schema=False)
    ds = ParquetDataset(path, memory=64)
    for query in ('SELECT "s.x" FROM dataset', 'SELECT "c.d" FROM dataset'):
        with pytest.raises(MemoryBudgetError, match="dictionary bomb"):
            ds.sql(query)
    with pytest.raises(MemoryBudgetError, match=r"column 'c\.d'"):  # a window read
        ParquetDataset(path, memory=64, columns=["id", "c.d"])[3]
    assert ParquetDataset(path, memory=64, columns=["id"])[3] == {"id": 3}


def test_exact_weights_are_kept_for_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from undertale_duck.core.bounds import weights

    cache = tmp_path / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(cache))
    data = tmp_path / "data"
    data.mkdir()
    path = data / "bomb.parquet"
    _bomb(path, 20_000, 64 * KIB)
    before = dict(weights.STATS)
    with pytest.raises(MemoryBudgetError, match="measured"):
        ParquetDataset(data, memory=64).sql("SELECT s FROM dataset")
    assert weights.STATS["weighed"] == before["weighed"] + 1
    with pytest.raises(MemoryBudgetError, match=r"128\.0 MiB"):  # a new dataset: kept
        ParquetDataset(data, memory=64).sql("SELECT s FROM dataset")
    assert weights.STATS["weighed"] == before["weighed"] + 1
    assert weights.STATS["loaded"] == before["loaded"] + 1
    assert [p.name for p in data.iterdir()] == ["bomb.parquet"]  # nothing beside the data
    kept = list((cache / "vectors").glob("*.json"))  # beside our CACHEDIR.TAG
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o077 == 0
    # the shard replaced by shorter strings: weighed again, and now it runs
    _bomb(path, 20_000, 1 * KIB)
    assert ParquetDataset(data, memory=64).sql("SELECT s FROM dataset").num_rows == 20_000
