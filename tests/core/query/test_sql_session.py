"""Ad hoc SQL: read-only for files and catalog, confinement to the dataset, limits, streaming."""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck import (
    ArgumentError,
    CorruptShardError,
    ParquetDataset,
    QueryError,
    ReadOnlyError,
    SourceError,
)
from undertale_duck.core.query import readonly
from undertale_duck.core.query.session import QuerySession
from undertale_duck.core.runtime.sqlfiles import quote_literal
from undertale_duck.core.source.source import Source, duckdb_path

TOTAL = 40


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("session") / "data"
    datagen.write_shards(root, [25, 15], row_group_size=10)
    return root


@pytest.fixture(scope="module")
def shared(data: Path) -> ParquetDataset:
    return ParquetDataset(data)


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def intact(ds: ParquetDataset) -> None:
    """The `dataset` view is the one over the shards, in this and a fresh session."""
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": TOTAL}]
    assert ds.sql("SELECT max(id) AS m FROM dataset").to_pylist() == [
        {"m": f"row-{TOTAL - 1:08d}"}
    ]
    names = ds.sql("SELECT table_name FROM duckdb_tables()").num_rows
    assert names == 0


# --------------------------------------------------------------------------- read-only


def test_catalog_attacks_are_refused_and_leave_dataset_intact(data: Path, tmp_path: Path) -> None:
    csv = tmp_path / "bad.csv"
    csv.write_text("a\n1\nnot a number\n")
    ds = ParquetDataset(data)
    before = digests(data)
    c = quote_literal(str(csv))
    attacks = [
        f"SELECT * FROM read_csv({c}, store_rejects=true, rejects_table='dataset', "
        "columns={'a': 'INTEGER'})",
        f"SELECT * FROM read_csv({c}, rejects_table := 'dataset')",
        f"SELECT * FROM read_csv_auto({c}, rejects_scan = 'dataset', store_rejects = true)",
        f'SELECT * FROM read_csv({c}, "store_rejects" = true)',
        "UPDATE EXTENSIONS",
        "UPDATE EXTENSIONS (httpfs)",
        "CHECKPOINT",
        "FORCE CHECKPOINT",
        "SELECT * FROM checkpoint()",
        "SELECT * FROM histogram_values(dataset, label)",
        "SELECT * FROM histogram(dataset, label)",
        "SELECT * FROM query_table('dataset')",
        "SELECT * FROM system.main.query('SELECT 1')",
        "SELECT * FROM \"QUERY\"('SELECT 1')",
        "SET threads = 1",
        "RESET threads",
        "SET VARIABLE v = 1",
        "PRAGMA enable_profiling",
        "CALL pragma_version()",
        f"ATTACH {quote_literal(str(tmp_path / 'x.db'))} AS x",
        "DETACH memory",
        "USE system",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE TEMP TABLE dataset AS SELECT 1 AS x",
        "CREATE TEMP VIEW dataset AS SELECT 1 AS x",
        "CREATE TEMP MACRO m() AS 1",
        "CREATE SEQUENCE s",
        "CREATE TYPE t AS ENUM ('a')",
        f"COPY (SELECT 1) TO {quote_literal(str(tmp_path / 'out.csv'))}",
        f"EXPORT DATABASE {quote_literal(str(tmp_path / 'export'))}",
        "PIVOT dataset ON label",
        "PREPARE p AS SELECT 1",
        "BEGIN TRANSACTION",
        "VACUUM",
        "SELECT setseed(0.5)",
        "SELECT nextval('s')",
        "SELECT write_log('x')",
        "SELECT json_serialize_plan('SELECT 1')",
        "SELECT * FROM json_execute_serialized_sql('{}')",
        "SELECT * FROM enable_logging()",
        "SELECT * FROM arrow_scan(0, 0, 0)",
        "SELECT * FROM copy_database('memory', 'memory')",
        "SELECT * FROM add_parquet_key('k', '0123456789112345')",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        "EXPLAIN SELECT * FROM query_table('dataset')",
        "SELECT 1; CREATE TABLE t AS SELECT 1",
        "WITH x AS (SELECT setseed(0.1)) SELECT * FROM x",
        "SELECT (SELECT count(*) FROM query_table('dataset'))",
    ]
    for attack in attacks:
        with pytest.raises(ReadOnlyError, match="read-only"):
            ds.sql(attack)
        with pytest.raises(ReadOnlyError):
            ds.sql_batches(attack)
        intact(ds)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "x.db").exists()
    assert not (tmp_path / "export").exists()
    assert digests(data) == before


def test_reading_statements_still_run(data: Path) -> None:
    ds = ParquetDataset(data)
    assert ds.sql("DESCRIBE dataset").num_rows == len(ds.columns)
    assert ds.sql("SUMMARIZE dataset").num_rows == len(ds.columns)
    assert ds.sql("SHOW TABLES").to_pylist() == [{"name": "dataset"}]
    assert ds.sql("EXPLAIN ANALYZE SELECT count(*) FROM dataset").num_rows >= 1
    assert ds.sql("FROM dataset SELECT count(*) AS n").to_pylist() == [{"n": TOTAL}]
    assert ds.sql("UNPIVOT (SELECT label AS a, label AS b FROM dataset LIMIT 1) ON a, b"
                  ).num_rows == 2
    got = ds.sql("SELECT histogram(label) AS h FROM dataset WHERE label < 2").to_pylist()
    assert got == [{"h": [(0, 6), (1, 6)]}]
    assert ds.sql("SELECT * FROM range($n)", {"n": 3}).num_rows == 3
    assert ds.sql("SELECT ? AS a, ? AS b", [1, "x"]).to_pylist() == [{"a": 1, "b": "x"}]
    # names that merely look like refused functions
    got = ds.sql("SELECT 'query_table(' AS query, label AS checkpoint FROM dataset WHERE id = $i",
                 {"i": "row-00000003"})
    assert got.to_pylist() == [{"query": "query_table(", "checkpoint": 3}]


def test_one_statement_at_a_time_and_bad_queries(data: Path) -> None:
    ds = ParquetDataset(data)
    with pytest.raises(QueryError, match="2 statements"):
        ds.sql("SELECT 1; SELECT 2")
    for bad in [None, 3, b"SELECT 1"]:
        with pytest.raises(ArgumentError, match="SQL text"):
            ds.sql(bad)  # type: ignore[arg-type]
    for bad in ["", "  -- nothing", "SELEC 1", "SELECT nope FROM dataset"]:
        with pytest.raises(QueryError) as info:
            ds.sql(bad)
        assert not isinstance(info.value, ReadOnlyError)
    with pytest.raises(ArgumentError, match="batch_rows"):
        ds.sql_batches("SELECT 1", batch_rows=0)
    with pytest.raises(ArgumentError, match="max_bytes"):
        ds.sql("SELECT 1", max_bytes=-1)
    with pytest.raises(ArgumentError, match="sql_files"):
        ParquetDataset(data, sql_files="all")  # type: ignore[arg-type]
    intact(ds)


KEYWORDS = sorted(
    k for (k,) in duckdb.connect().execute("SELECT keyword_name FROM duckdb_keywords()").fetchall()
)
EXTRA_WORDS = ["dataset", "(", ")", ",", ";", "*", "'x'", "1", "=", "t", "query_table", "read_csv",
               "store_rejects", "checkpoint", "EXTENSIONS"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(
        st.one_of(
            st.sampled_from(KEYWORDS),
            st.sampled_from(EXTRA_WORDS),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_unknown_statements_are_refused_cleanly(shared: ParquetDataset, words: list[str]) -> None:
    """Whatever the words, the answer is a result or our QueryError, never a raw error."""
    ds = shared
    text = " ".join(words)
    with contextlib.suppress(QueryError):
        ds.sql(text)
    intact(ds)


def test_the_catalog_check_undoes_what_slips_past_the_guard(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the named-argument rule switched off, the second line of defence still holds."""
    monkeypatch.setattr(readonly, "REFUSED_NAMED_ARGUMENTS", frozenset())
    csv = tmp_path / "bad.csv"
    csv.write_text("a\n1\nnot a number\n")
    ds = ParquetDataset(data)
    attack = (f"SELECT * FROM read_csv({quote_literal(str(csv))}, store_rejects=true, "
              "rejects_table='dataset', columns={'a': 'INTEGER'})")
    with pytest.raises(ReadOnlyError, match="changed the database"):
        ds.sql(attack)
    intact(ds)
    with pytest.raises(ReadOnlyError, match="changed the database"):
        list(ds.sql_batches(attack))
    intact(ds)


# --------------------------------------------------------------------------- confinement


def test_confined_sql_reads_only_the_dataset(tmp_path: Path) -> None:
    root = tmp_path / "we[ir]d 'dir'"
    paths = datagen.write_shards(root, [7, 5], prefix="x*y")
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n42\n")
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), other)
    free = ParquetDataset(root)
    assert free.sql(f"SELECT a FROM read_csv({quote_literal(str(secret))})").to_pylist() == [
        {"a": 42}
    ]
    ds = ParquetDataset(root, sql_files="dataset")
    assert ds.sql_files == "dataset"
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 12}]
    assert ds.sql("SUMMARIZE dataset").num_rows == len(ds.columns)
    shard = duckdb_path(str(paths[0]))
    assert ds.sql("SELECT count(*) AS n FROM read_parquet($p)", {"p": shard}).to_pylist() == [
        {"n": 7}
    ]
    assert [ds[i]["id"] for i in range(12)] == [f"row-{i:08d}" for i in range(12)]
    refused = [
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT * FROM read_blob('/proc/self/environ')",
        f"SELECT * FROM read_csv({quote_literal(str(secret))})",
        f"SELECT * FROM {quote_literal(str(secret))}",
        f"SELECT * FROM read_parquet({quote_literal(str(other))})",
        f"SELECT * FROM glob({quote_literal(str(tmp_path / '*'))})",
        f"SELECT * FROM read_parquet({quote_literal(str(paths[0].parent) + '/*.parquet')})",
    ]
    for query in refused:
        with pytest.raises(QueryError, match="confined to the dataset's own files"):
            ds.sql(query)
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 12}]


# --------------------------------------------------------------------------- memory and streams


def test_whole_results_have_a_byte_limit(data: Path) -> None:
    ds = ParquetDataset(data, memory=1)  # 1 MiB budget: results up to the 64 MiB floor
    with pytest.raises(QueryError, match="sql_batches") as info:
        ds.sql("SELECT * FROM range(100000000)")
    assert "64.0 MiB" in str(info.value)
    assert ds.sql("SELECT * FROM range(1000)").num_rows == 1000
    with pytest.raises(QueryError, match="larger than 1,000 bytes"):
        ds.sql("SELECT * FROM range(1000)", max_bytes=1000)
    assert ds.sql("SELECT * FROM range(10)", max_bytes=1000).num_rows == 10
    empty = ds.sql("SELECT id FROM dataset WHERE false")
    assert empty.num_rows == 0 and empty.schema.names == ["id"]
    intact(ds)


def test_duckdb_memory_limit_follows_the_budget(data: Path) -> None:
    def limit(ds: ParquetDataset) -> int:
        query = "SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'"
        value = ds.sql(query).column(0)[0].as_py()
        number, unit = value.split()
        return int(float(number) * {"MiB": 1 << 20, "GiB": 1 << 30}[unit])

    assert limit(ParquetDataset(data, memory=1024)) == 1024 << 20
    assert limit(ParquetDataset(data, memory=1)) == 256 << 20
    assert limit(ParquetDataset(data, duckdb_config={"memory_limit": "300MiB"})) == 300 << 20


def test_streamed_results(data: Path) -> None:
    ds = ParquetDataset(data)
    reader = ds.sql_batches("SELECT id, label FROM dataset ORDER BY id", batch_rows=7)
    assert isinstance(reader, pa.RecordBatchReader)
    batches = list(reader)
    assert max(b.num_rows for b in batches) <= 7
    assert pa.Table.from_batches(batches).column("id").to_pylist() == [
        f"row-{i:08d}" for i in range(TOTAL)
    ]
    # leaving a stream early stops it; nested and following queries still run
    with ds.sql_batches("SELECT * FROM range(10000000000)", batch_rows=1000) as big:
        assert big.read_next_batch().num_rows == 1000
        assert ds.sql("SELECT 1 AS x").to_pylist() == [{"x": 1}]
        inner = ds.sql_batches("SELECT count(*) AS n FROM dataset").read_all()
        assert inner.to_pylist() == [{"n": TOTAL}]
        assert big.read_next_batch().column(0)[0].as_py() == 1000
    # an error while streaming is ours
    failing = ds.sql_batches(
        "SELECT CASE WHEN range = 50000 THEN error('boom') ELSE range END AS v "
        "FROM range(100000)",
        batch_rows=1000,
    )
    with pytest.raises(QueryError, match="boom"):
        failing.read_all()
    intact(ds)


@pytest.mark.heavy
def test_streaming_uses_bounded_memory(data: Path) -> None:
    """300 million rows (2.4 GB as one table) stream through a process that stays small."""
    script = textwrap.dedent(
        f"""
        import resource, sys
        from undertale_duck import ParquetDataset
        ds = ParquetDataset({str(data)!r}, memory=64)
        rows = sum(b.num_rows for b in ds.sql_batches("SELECT * FROM range(300000000)"))
        assert rows == 300000000, rows
        # VmHWM, not ru_maxrss: ru_maxrss survives exec (it would count pytest's own size)
        print(int(next(l.split()[1] for l in open("/proc/self/status")
                       if l.startswith("VmHWM:"))) // 1024)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 1200  # MiB; collecting it whole takes 2.4 GB more


def test_deeply_nested_values_are_a_query_error(tmp_path: Path) -> None:
    deep = pa.array([1, 2])
    for _ in range(64):
        deep = pa.StructArray.from_arrays([deep], names=["f"])
    pq.write_table(pa.table({"id": [1, 2], "deep": deep}), tmp_path / "deep.parquet")
    ds = ParquetDataset(tmp_path / "deep.parquet", columns=["id"])
    with pytest.raises(QueryError, match="Arrow"):
        ds.sql("SELECT * FROM read_parquet($p)", {"p": str(tmp_path / "deep.parquet")})
    assert ds.sql("SELECT id FROM dataset").to_pylist() == [{"id": 1}, {"id": 2}]


def test_sessions_close_and_survive_pickling(data: Path) -> None:
    ds = ParquetDataset(data)
    assert ds.sql("SELECT 1 AS x").num_rows == 1
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": TOTAL}]
    ds.close()
    intact(ds)
    session = QuerySession(Source(data, ["id"]))
    assert session.table("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": TOTAL}]
    session.close()


# --------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_interrupts_a_running_query(data: Path) -> None:
    """SIGINT to a process inside ds.sql: KeyboardInterrupt at once, the dataset still works."""
    script = textwrap.dedent(
        f"""
        import sys
        from undertale_duck import ParquetDataset
        ds = ParquetDataset({str(data)!r})
        print("ready", flush=True)
        try:
            ds.sql("SELECT sum(hash(range)) FROM range(1000000000000)")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        print(ds.sql("SELECT count(*) AS n FROM dataset").to_pylist(), flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        _wait_for_cpu(proc.pid)
        proc.send_signal(2)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out.split("\n")[:2] == ["interrupted", f"[{{'n': {TOTAL}}}]"]


def _default_sigint() -> None:
    # a test runner started in the background ignores SIGINT, and children inherit that
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_cpu(pid: int, seconds: float = 1.0) -> None:
    """Wait until a process has used some CPU time beyond now: its query is running."""
    process = psutil.Process(pid)
    start = sum(process.cpu_times()[:2])
    for _ in range(2400):
        if sum(process.cpu_times()[:2]) - start >= seconds:
            return
        time.sleep(0.05)
    raise AssertionError("the query never started")


def test_settings_duckdb_refuses_are_our_error(data: Path) -> None:
    for config in [{"memory_limit": "lots"}, {"nonsense_setting": 1}, {"threads": 0}]:
        with pytest.raises(ArgumentError, match="duckdb_config"):
            ParquetDataset(data, duckdb_config=config)
        session = QuerySession(Source(data), config)
        with pytest.raises(QueryError, match="cannot open the database for ad hoc SQL"):
            session.table("SELECT 1")
    locked = ParquetDataset(data, duckdb_config={"lock_configuration": True})
    assert locked.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": TOTAL}]


def test_a_confined_view_keeps_its_side_tables(data: Path, tmp_path: Path) -> None:
    names = tmp_path / "names.csv"
    names.write_text("label,name\n" + "".join(f"{k},n{k}\n" for k in range(7)))
    other = tmp_path / "other.csv"
    other.write_text("a\n1\n")
    ds = ParquetDataset(
        data,
        query="SELECT d.id, n.name FROM dataset d JOIN names n ON d.label = n.label",
        tables={"names": str(names)},
        sql_files="dataset",
    )
    assert len(ds) == TOTAL and ds[8] == {"id": "row-00000008", "name": "n1"}
    assert ds.sql("SELECT count(*) AS n FROM dataset_view").to_pylist() == [{"n": TOTAL}]
    assert ds.sql("SELECT count(*) AS n FROM names").to_pylist() == [{"n": 7}]
    with pytest.raises(QueryError, match="confined"):
        ds.sql(f"SELECT * FROM read_csv({quote_literal(str(other))})")


def test_nan_beside_finite_values_in_a_row_group_is_seen(tmp_path: Path) -> None:
    """Writers leave NaN out of a row group's min/max; DuckDB's optimizers trusted those and
    ad hoc SQL found no NaN (isnan, or > which NaN passes in DuckDB) in such groups."""
    ids = list(range(40))
    values = [float("nan") if i % 4 == 1 else float(i % 5) - 1 for i in ids]
    pq.write_table(pa.table({"id": ids, "f": values}), tmp_path / "a.parquet", row_group_size=6)
    nan = [i for i in ids if i % 4 == 1]
    ds = ParquetDataset(tmp_path)
    got = ds.sql("SELECT list(id ORDER BY id) AS ids FROM dataset WHERE isnan(f)").to_pylist()
    assert got == [{"ids": nan}]
    above = ds.sql("SELECT count(*) AS n FROM dataset WHERE f > 2").to_pylist()
    assert above == [{"n": len(nan) + sum(1 for v in values if v > 2)}]
    counted = ds.sql("SELECT count_if(isnan(f)) AS n FROM dataset").to_pylist()
    assert counted == [{"n": len(nan)}]
    ds.close()


@pytest.mark.parametrize(
    ("second", "column", "own", "wanted"),
    [
        # text where the first shard has numbers (types named as the plain dataset names them)
        ({"label": pa.array([f"x{i}" for i in range(4, 8)])}, "label", "string", "int64"),
        # a hostile column name, in a first shard written empty from Python lists (type null)
        ({'we"ird': pa.array([f"v{i}" for i in range(4, 8)])}, 'we"ird', "string", "null"),
    ],
)
def test_a_shard_whose_column_does_not_cast_names_shard_and_column(
    tmp_path: Path, second: dict[str, pa.Array], column: str, own: str, wanted: str
) -> None:
    # the view reads every shard with the first one's types; a cast that fails was DuckDB's
    # raw "Conversion Error" text in a QueryError (and an exit status of 1 from the CLI)
    first: dict[str, pa.Array] = {"i": pa.array(range(4), pa.int64())}
    first.update(
        {"label": pa.array([i % 3 for i in range(4)], pa.int64())}
        if column == "label"
        else {column: pa.array([None] * 4, pa.null())}
    )
    second = {"i": pa.array(range(4, 8), pa.int64()), **second}
    for error in _second_shard_errors(tmp_path, first, second, "SELECT * FROM dataset"):
        text = str(error)
        assert "Conversion Error" not in text
        assert f"column {column!r} is {own} there but {wanted} in the dataset" in text
        assert "schema drift between shards" in text


def _second_shard_errors(
    tmp_path: Path, first: dict[str, Any], second: dict[str, Any], query: str
) -> list[SourceError]:
    """The errors ``ds.sql`` and ``ds.sql_batches`` raise over two shards, each naming the
    second; ``i`` is 0..3 in the first and 4..7 in the second (a query of it alone works)."""
    data = tmp_path / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table(first), data / "part-0.parquet")
    pq.write_table(pa.table(second), data / "part-1.parquet")
    ds = ParquetDataset(data)
    assert ds.sql("SELECT sum(i) AS s FROM dataset").column("s").to_pylist() == [28]
    errors = []
    for run in (lambda: ds.sql(query), lambda: ds.sql_batches(query).read_all()):
        with pytest.raises(SourceError) as caught:
            run()
        assert caught.value.path == str(data / "part-1.parquet"), str(caught.value)
        errors.append(caught.value)
    return errors


@pytest.mark.parametrize("second", [["i"], ["i", "other"]], ids=["missing", "renamed"])
def test_a_shard_without_a_column_is_named_not_the_first_shard_as_corrupt(
    tmp_path: Path, second: list[str]
) -> None:
    # DuckDB's "Failed to read file B: schema mismatch ... column "label" was read from the
    # original file A, but could not be found in file B" named A first: the good first shard
    # was blamed, and called corrupt
    first = {"i": pa.array(range(4)), "label": pa.array([i % 3 for i in range(4)])}
    columns = {"i": pa.array(range(4, 8)), "other": pa.array(range(4))}
    kept = {name: columns[name] for name in second}
    for place, query in (("all", "SELECT * FROM dataset"), ("one", "SELECT label FROM dataset")):
        for error in _second_shard_errors(tmp_path / place, first, kept, query):
            assert not isinstance(error, CorruptShardError)
            text = str(error)
            assert "'label'" in text and "schema drift between shards" in text


def test_a_query_past_duckdbs_memory_limit_says_how_to_raise_it(data: Path) -> None:
    # "query failed: Out of Memory Error: failed to allocate ..." said nothing of memory=
    ds = ParquetDataset(data, memory=64)
    with pytest.raises(QueryError) as info:
        ds.sql("SELECT length(list(i)) AS n FROM range(100000000) t(i)")
    text = str(info.value)
    assert "Out of Memory" in text and "memory=" in text and "256MiB" in text, text


def test_params_that_duckdb_would_misread_are_refused(shared: ParquetDataset) -> None:
    # a string is a sequence to DuckDB: "3" bound ? to "3", "fn-000001" failed with "excess
    # parameters: 2, 3, ..."; a set gave ? its values in no set order
    query = "SELECT count(*) AS n FROM dataset WHERE id = ?"
    assert shared.sql(query, ["row-00000003"]).column("n").to_pylist() == [1]
    assert shared.sql(query, ("row-00000003",)).column("n").to_pylist() == [1]
    for bad in ("row-00000003", b"row-00000003", {"row-00000003"}, 3):
        with pytest.raises(ArgumentError, match="params must be a mapping"):
            shared.sql(query, bad)  # type: ignore[arg-type]
        with pytest.raises(ArgumentError, match="params must be a mapping"):
            shared.sql_batches(query, bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="names of \\$name placeholders are strings"):
        shared.sql("SELECT $1 AS x", {1: 5})  # type: ignore[dict-item]
    assert shared.sql("SELECT $1 AS x", {"1": 5}).column("x").to_pylist() == [5]


def test_numpy_numbers_bind_as_their_python_values(shared: ParquetDataset) -> None:
    # DuckDB cannot bind a numpy scalar: an id taken from an array failed with DuckDB's
    # "Unable to transform python value of type numpy.int64"
    query = "SELECT id FROM dataset WHERE label = $label AND score > $low AND $keep ORDER BY id"
    expected = [datagen.row(i)["id"] for i in range(TOTAL)
                if i % 7 == 3 and datagen.row(i)["score"] is not None
                and datagen.row(i)["score"] > 1.5]
    for label, low, keep in ((np.int64(3), np.float32(1.5), np.bool_(True)),
                             (np.uint8(3), np.float64(1.5), True), (3, 1.5, True)):
        params = {"label": label, "low": low, "keep": keep}
        assert shared.sql(query, params).column("id").to_pylist() == expected
        with shared.sql_batches(query, params) as reader:
            assert reader.read_all().column("id").to_pylist() == expected
    positional = "SELECT ? AS a, ? AS b, ? AS c"
    row = shared.sql(positional, (np.int16(-2), np.float16(0.5), np.bool_(False))).to_pylist()
    assert row == [{"a": -2, "b": 0.5, "c": False}]


def test_tensors_and_lists_of_numpy_numbers_bind_as_python_values(
    shared: ParquetDataset,
) -> None:
    # a list of numpy scalars ([ids[0], ids[1]]) and torch tensors (a label from a batch)
    # failed with DuckDB's "Unable to transform python value"
    import torch

    query = "SELECT count(*) AS n FROM dataset WHERE label = $label"
    expected = sum(1 for i in range(TOTAL) if i % 7 == 3)
    for label in (torch.tensor(3), torch.tensor(3, dtype=torch.uint8), np.array(3)):
        assert shared.sql(query, {"label": label}).column("n").to_pylist() == [expected]
    within = "SELECT count(*) AS n FROM dataset WHERE list_contains($labels, label)"
    pair = sum(1 for i in range(TOTAL) if i % 7 in (2, 5))
    for labels in ([np.int64(2), np.int64(5)], (np.int32(2), 5), torch.tensor([2, 5]),
                   np.array([2, 5]), [torch.tensor(2), np.uint16(5)]):
        got = shared.sql(within, {"labels": labels}).column("n").to_pylist()
        assert got == [pair], labels
    nested = shared.sql("SELECT ? AS a, ? AS b", [[[np.int8(1)], [np.int8(2)]],
                                                  {"k": np.float32(0.5)}]).to_pylist()
    assert nested == [{"a": [[1], [2]], "b": {"k": 0.5}}]
    grid = shared.sql("SELECT ? AS g", [torch.arange(4).reshape(2, 2)]).to_pylist()
    assert grid == [{"g": [[0, 1], [2, 3]]}]


def test_a_param_value_duckdb_cannot_bind_is_an_argument_error(shared: ParquetDataset) -> None:
    # was QueryError "query failed: Not implemented Error: Unable to transform python value"
    for params in ([object()], {"v": pa.scalar(1)}, [[1, object()]]):
        query = "SELECT ? AS v" if isinstance(params, list) else "SELECT $v AS v"
        with pytest.raises(ArgumentError, match=r"^params: DuckDB cannot bind a value of type"):
            shared.sql(query, params)
        with pytest.raises(ArgumentError, match=r"^params: DuckDB cannot bind"):
            shared.sql_batches(query, params)
    assert shared.sql("SELECT ? AS v", [1]).to_pylist() == [{"v": 1}]  # the session goes on


def test_sql_errors_no_shard_caused_get_no_advice_about_damaged_shards(
    shared: ParquetDataset,
) -> None:
    # each ended with "if a shard may be damaged, undertale-duck describe SOURCE --scan"
    for query, params, said in (
        ("SELECT $x", None, r"parameters: x; pass params as a dict with a value for each "
                            r"\$name placeholder$"),
        ("SELECT ?", {"x": 1}, r"parameters: 1; \? placeholders take their values in order: "
                               r"pass params as a list or tuple"),
        ("SELECT error('boom')", None, r"^query failed: Invalid Input Error: boom$"),
    ):
        with pytest.raises(QueryError, match=said) as info:
            shared.sql(query, params)
        assert "--scan" not in str(info.value) and "shard" not in str(info.value)
    assert shared.sql("SELECT ? AS v", [1]).to_pylist() == [{"v": 1}]


def test_numpy_numbers_inside_list_and_struct_params_bind_too(shared: ParquetDataset) -> None:
    # `list(ids_array)` holds numpy scalars: ANY($ids) failed with DuckDB's "Unable to
    # transform python value of type numpy.int64", as a bare np.int64 did
    query = "SELECT id FROM dataset WHERE label = ANY($labels) ORDER BY id"
    expected = [datagen.row(i)["id"] for i in range(TOTAL) if i % 7 in (2, 5)]
    for labels in (list(np.array([2, 5])), (np.int8(2), np.int8(5)), [2, 5]):
        assert shared.sql(query, {"labels": labels}).column("id").to_pylist() == expected
        with shared.sql_batches(query, {"labels": labels}) as reader:
            assert reader.read_all().column("id").to_pylist() == expected
    nested = {"a": np.float32(0.5), "b": [[np.uint16(7)], []], "c": (np.bool_(True),)}
    assert shared.sql("SELECT ? AS s", [nested]).to_pylist() == [
        {"s": {"a": 0.5, "b": [[7], []], "c": [True]}}
    ]


def test_a_dropped_stream_stops_its_query(data: Path) -> None:
    # docs/sql.md: dropping the reader (or ds.close()) stops the query; pyarrow's close()
    # of a reader of Python batches does not, which the page now says
    ds = ParquetDataset(data, memory=64)
    session = ds.sql_session
    reader = ds.sql_batches("SELECT id FROM dataset", batch_rows=7)
    assert reader.read_next_batch().num_rows == 7
    assert len(session._streams) == 1
    del reader
    assert len(session._streams) == 0
    kept = ds.sql_batches("SELECT id FROM dataset", batch_rows=7)
    assert kept.read_next_batch().num_rows == 7
    ds.close()
    with pytest.raises(QueryError, match="closed before it was read to the end"):
        kept.read_next_batch()


#: Filters of the test below, and which rows each keeps.
_KEEPS = {
    "": lambda i: True, " WHERE i % 3 = 0": lambda i: i % 3 == 0, " WHERE i < 0": lambda i: False,
}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    groups=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    rows=st.lists(st.integers(0, 300), min_size=1, max_size=3),
    batch_rows=st.integers(1, 700),
    where=st.sampled_from(sorted(_KEEPS)),
    order=st.sampled_from(["", " ORDER BY i"]),
)
def test_sql_batches_hold_batch_rows_rows_over_tiny_row_groups(
    tmp_path_factory: pytest.TempPathFactory, groups: list[int], rows: list[int],
    batch_rows: int, where: str, order: str,
) -> None:
    # DuckDB hands over one batch per small row group (7-row groups: batches of 7 rows);
    # every batch but the last now holds batch_rows rows, the rows in order and each once
    root = tmp_path_factory.mktemp("tiny")
    start = 0
    for k, n in enumerate(rows):
        pq.write_table(pa.table({"i": pa.array(range(start, start + n), pa.int64()),
                                 "s": pa.array([f"v{i}" for i in range(start, start + n)],
                                               pa.string())}),
                       root / f"part-{k}.parquet", row_group_size=groups[k % len(groups)])
        start += n
    ds = ParquetDataset(root)
    batches = list(ds.sql_batches(f"SELECT i, s FROM dataset{where}{order}",
                                  batch_rows=batch_rows))
    want = [i for i in range(start) if _KEEPS[where](i)]
    got = [i for b in batches for i in b.column("i").to_pylist()]
    assert got == want  # insertion order is kept without ORDER BY (DuckDB's default)
    assert [s for b in batches for s in b.column("s").to_pylist()] == [f"v{i}" for i in want]
    sizes = [len(b) for b in batches]
    assert all(n == batch_rows for n in sizes[:-1]) and all(0 < n <= batch_rows for n in sizes)
    ds.close()
