"""SELECT statements that write: DuckDB 2 runs ``WITH x AS (COPY ... TO 'file') SELECT ...``.

A SELECT statement's tree may hold COPY, INSERT, UPDATE and DELETE query nodes; the read-only
check refuses every query node that only reads not. Each attack runs the real command line
(or ``ds.sql``) and compares the sha256 of every dataset file before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import datagen
from support import hostile_files as hf

from undertale_duck import ParquetDataset
from undertale_duck.errors import ReadOnlyError

ROOT = Path(__file__).resolve().parents[3]
MAIN = hf.CLI_MAIN


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, [12, 9])
    return root


def cli(*args: str, stdin: str | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", MAIN, *args], input=stdin, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


def overwrite(shard: Path) -> str:
    """A SELECT that overwrites a shard in place (no temporary file that confinement sees)."""
    return (
        f"WITH x AS (COPY (SELECT 'pwned' AS id) TO '{shard}' (FORMAT parquet, "
        "USE_TMP_FILE false)) SELECT 1"
    )


@pytest.mark.parametrize("files", ["dataset", "any"])
def test_a_copy_in_a_with_clause_never_overwrites_a_shard(
    data: Path, tmp_path: Path, files: str
) -> None:
    before = hf.sha256s(data)
    shard = sorted(data.glob("*.parquet"))[0]
    elsewhere = tmp_path / "elsewhere.csv"
    for query in (
        overwrite(shard),
        f"WITH x AS (COPY (SELECT * FROM dataset) TO '{elsewhere}') SELECT * FROM x",
        f"EXPLAIN WITH x AS (COPY (SELECT 1) TO '{elsewhere}') SELECT 1",
        f"DESCRIBE WITH x AS (COPY (SELECT 1) TO '{elsewhere}') SELECT 1",
        f"SUMMARIZE WITH x AS (COPY (SELECT 1) TO '{elsewhere}') SELECT 1",
    ):
        status, shown = cli("sql", str(data), query, "--sql-files", files)
        assert status == 1 and "COPY inside a query" in shown, (query, shown)
    status, shown = cli("shell", str(data), "--sql-files", files, stdin=overwrite(shard) + ";\n")
    assert "COPY inside a query" in shown, shown
    assert hf.sha256s(data) == before and not elsewhere.exists()


def test_data_modifying_with_clauses_are_refused_and_reads_still_run(data: Path) -> None:
    ds = ParquetDataset(data, sql_files="any")
    for query in (
        "WITH x AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM x",
        "WITH x AS (UPDATE t SET a = 5 RETURNING *) SELECT * FROM x",
        "SELECT (WITH y AS (DELETE FROM t RETURNING *) SELECT count(*) FROM y)",
        "SELECT * FROM dataset WHERE label IN "
        "(WITH y AS (INSERT OR REPLACE INTO t VALUES (1) RETURNING a) SELECT a FROM y)",
    ):
        with pytest.raises(ReadOnlyError, match="inside a query"):
            ds.sql(query)
    reads = {
        "WITH RECURSIVE r AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM r WHERE x < 3) "
        "SELECT count(*) AS n FROM r": 3,
        "WITH a AS MATERIALIZED (SELECT label FROM dataset) SELECT count(*) AS n FROM a": 21,
        "SELECT count(*) AS n FROM (SELECT 1 UNION ALL SELECT 2)": 2,
    }
    for query, n in reads.items():
        assert ds.sql(query).column("n")[0].as_py() == n
