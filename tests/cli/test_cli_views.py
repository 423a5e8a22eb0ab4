"""``sql``, ``shell`` and ``describe`` on a view (--query/--where/--table), against plain DuckDB."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen

from undertale_duck.cli import app
from undertale_duck.cli.wording import shell_word

SIZES = [30, 0, 25, 17]
TOTAL = sum(SIZES)

#: Views as the command line takes them: (options, the view's query in plain SQL).
VIEWS = {
    "where": (["--where", "label <> 3 AND len(tokens) > 0"],
              "SELECT * FROM dataset WHERE label <> 3 AND len(tokens) > 0"),
    "computed": (["--query", "SELECT id, tokens[1:2] AS head, len(tokens) AS n, score * 2 AS s, "
                  "point.x AS x, blob FROM dataset WHERE label IN (1, 2, 6)"],
                 "SELECT id, tokens[1:2] AS head, len(tokens) AS n, score * 2 AS s, "
                 "point.x AS x, blob FROM dataset WHERE label IN (1, 2, 6)"),
    "side table": (["--query", "SELECT d.id, d.label, n.name, d.when FROM dataset d "
                    "JOIN names n ON d.label = n.label", "--table", "names={labels}"],
                   "SELECT d.id, d.label, n.name, d.when FROM dataset d "
                   "JOIN names n ON d.label = n.label"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("views") / "train"
    datagen.write_shards(root, SIZES, row_group_size=[7, 1, 10, 4])
    return root


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("side") / "labels.csv"
    path.write_text("label,name\n0,zero\n1,one\n2,two\n4,four\n5,five\n")
    return path


def _run(*args: str, stdin: str = "") -> tuple[int, str, str]:
    """``undertale-duck`` through its main() with piped standard streams."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = app.main(list(args))
            except SystemExit as exc:  # argparse's usage errors
                status = int(exc.code or 0)
    finally:
        sys.stdin = saved
    return status, out.getvalue(), err.getvalue()


def _plain(data: Path, view: str, query: str, labels: Path | None = None) -> pa.Table:
    """``query`` in plain DuckDB, with ``dataset`` every shard and ``dataset_view`` the view."""
    files = sorted(str(p) for p in data.glob("*.parquet"))
    con = duckdb.connect()
    try:
        con.execute(f"CREATE VIEW dataset AS SELECT * FROM read_parquet({files!r})")
        if labels is not None:
            con.execute(f"CREATE VIEW names AS SELECT * FROM read_csv('{labels}')")
        con.execute(f"CREATE VIEW dataset_view AS {view}")
        return con.sql(query).to_arrow_table()
    finally:
        con.close()


def _view(name: str, labels: Path) -> tuple[list[str], str]:
    options, sql = VIEWS[name]
    return [o.format(labels=labels) for o in options], sql


def test_the_reference_order_by_id_is_shard_and_row_order(data: Path) -> None:
    # the comparisons below order by id: it is the order of shards and rows in them
    files = sorted(str(p) for p in data.glob("*.parquet"))
    con = duckdb.connect()
    rows = con.execute(f"SELECT id FROM read_parquet({files!r}, filename = true, "
                       "file_row_number = true) ORDER BY filename, file_row_number").fetchall()
    con.close()
    assert [r[0] for r in rows] == [datagen.row(i)["id"] for i in range(TOTAL)]


@pytest.mark.parametrize("name", list(VIEWS))
def test_sql_on_a_view_matches_plain_duckdb(data: Path, labels: Path, tmp_path: Path,
                                            name: str) -> None:
    options, view = _view(name, labels)
    side = labels if "--table" in options else None
    every = "SELECT * FROM dataset_view ORDER BY id"
    target = tmp_path / "out.parquet"
    status, _, err = _run("sql", str(data), every, *options, "--output", str(target))
    assert status == 0, err
    got = pq.read_table(target)
    want = _plain(data, view, every, side)
    assert got.column_names == want.column_names
    assert got.to_pylist() == want.to_pylist()  # every value, typed
    assert 0 < got.num_rows < TOTAL
    # aggregates over the view, and `dataset` is still every row of every shard
    both = ("SELECT (SELECT count(*) FROM dataset) AS every, count(*) AS kept, "
            "count(DISTINCT id) AS ids FROM dataset_view")
    status, out, err = _run("sql", str(data), both, *options, "-f", "json")
    assert status == 0, err
    assert json.loads(out) == _plain(data, view, both, side).to_pylist()
    assert json.loads(out)[0]["every"] == TOTAL


def test_sql_view_query_from_a_file_and_the_ad_hoc_query_from_stdin(
    data: Path, tmp_path: Path
) -> None:
    view = "SELECT id, label * 10 AS l FROM dataset WHERE label < 2"
    (tmp_path / "view.sql").write_text(view + ";\n")
    adhoc = "SELECT l, count(*) AS n FROM dataset_view GROUP BY l ORDER BY l"
    status, out, err = _run("sql", str(data), "-", "--query", f"@{tmp_path / 'view.sql'}",
                            "-f", "csv", stdin=adhoc)
    assert status == 0, err
    want = _plain(data, view, adhoc).to_pylist()
    assert [{k: int(v) for k, v in r.items()} for r in csv.DictReader(io.StringIO(out))] == want
    status, _, err = _run("sql", str(data), "-", "--query", "-", stdin=adhoc)
    assert status == 2 and "standard input" in err


REFUSED = {
    "SELECT DISTINCT label FROM dataset": "DISTINCT",
    "SELECT label, count(*) FROM dataset GROUP BY label": "GROUP BY",
    "SELECT * FROM dataset ORDER BY id": "ORDER BY",
    "SELECT id, random() AS r FROM dataset": "random",
    "SELECT * FROM dataset LIMIT 3": "LIMIT",
    "SELECT * FROM dataset UNION ALL SELECT * FROM dataset": "UNION",
}


@pytest.mark.parametrize(("view", "construct"), list(REFUSED.items()))
@pytest.mark.parametrize("command", ["sql", "shell", "describe"])
def test_a_view_that_is_not_row_by_row_is_refused_in_one_line(
    data: Path, tmp_path: Path, command: str, view: str, construct: str
) -> None:
    extra = {"sql": ["SELECT 1", "--output", str(tmp_path / "x.csv")], "shell": [],
             "describe": []}[command]
    status, out, err = _run(command, str(data), *extra, "--query", view,
                            stdin="SELECT 1;\n")
    assert status == 1, err
    assert err.startswith("undertale-duck: error: view query uses") and construct in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == "" and not (tmp_path / "x.csv").exists()


def test_refused_view_as_a_user_sees_it_no_traceback(data: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "sql", str(data), "SELECT 1",
         "--query", "SELECT label, sum(score) FROM dataset GROUP BY label"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "GROUP BY" in result.stderr and result.stdout == ""


def test_sql_output_on_a_view_still_goes_through_the_guard(data: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in data.iterdir())
    inside = data / "result.csv"
    status, _, err = _run("sql", str(data), "SELECT * FROM dataset_view", "--where",
                          "label = 1", "--output", str(inside))
    assert status == 2 and "dataset" in err and not inside.exists()
    shard = data / "part-00000.parquet"
    status, _, err = _run("sql", str(data), "SELECT * FROM dataset_view", "--where",
                          "label = 1", "--output", str(shard), "--force")
    assert status == 2 and pq.read_table(shard).num_rows == SIZES[0]
    assert sorted(p.name for p in data.iterdir()) == before
    target = tmp_path / "ok.csv"
    target.write_text("precious\n")
    status, _, err = _run("sql", str(data), "SELECT id FROM dataset_view", "--where",
                          "label = 1", "--output", str(target))
    assert status == 2 and "--force" in err and target.read_text() == "precious\n"


def test_table_option_errors(data: Path, labels: Path) -> None:
    for args, words in [
        (["--table", "names"], "NAME=FILE"),
        (["--table", f"names={labels}"], "--query"),
        (["--query", "SELECT * FROM dataset", "--table", f"dataset={labels}"], "dataset"),
        (["--query", "SELECT * FROM dataset", "--table", f"a={labels}", "--table",
          f"a={labels}"], "twice"),
    ]:
        status, _, err = _run("sql", str(data), "SELECT 1", *args)
        assert status == 2 and words in err and "Traceback" not in err, (args, err)


def test_side_table_in_parquet_for_sql(data: Path, tmp_path: Path) -> None:
    side = tmp_path / "names.parquet"
    pq.write_table(pa.table({"label": [6, 0], "tag": ["six", "nought"]}), side)
    view = "SELECT d.id, s.tag FROM dataset d JOIN s ON d.label = s.label"
    adhoc = "SELECT * FROM dataset_view ORDER BY id"
    status, out, err = _run("sql", str(data), adhoc, "--query", view, "--table", f"s={side}",
                            "-f", "jsonl")
    assert status == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    want = [{"id": r["id"], "tag": {6: "six", 0: "nought"}[r["label"]]}
            for r in datagen.expected(TOTAL) if r["label"] in (0, 6)]
    assert got == want


# ---------------------------------------------------------------------------- shell
def test_shell_sees_the_view_as_dataset_view(data: Path, labels: Path) -> None:
    options, view = _view("side table", labels)
    statements = [
        "SELECT count(*) AS n FROM dataset_view",
        "SELECT count(*) AS n FROM dataset",
        "SELECT id, name, \"when\" FROM dataset_view ORDER BY id",
    ]
    status, out, err = _run("shell", str(data), *options, "--format", "csv",
                            stdin="".join(s + ";\n" for s in statements))
    assert status == 0, err
    # each statement's csv (header and rows) follows the previous one
    lines = out.splitlines()
    want: list[str] = []
    for s in statements:
        table = _plain(data, view, s, labels)
        want.append(",".join(table.column_names))
        for r in table.to_pylist():
            want.append(",".join(v.isoformat() if hasattr(v, "isoformat") else str(v)
                                 for v in r.values()))
    assert lines == want
    assert int(lines[1]) == sum(1 for r in datagen.expected(TOTAL) if r["label"] in (0, 1, 2, 4, 5))
    assert int(lines[3]) == TOTAL


def test_shell_refuses_a_view_query_from_stdin(data: Path) -> None:
    status, _, err = _run("shell", str(data), "--query", "-", stdin="SELECT 1;\n")
    assert status == 2 and "standard input" in err


# ---------------------------------------------------------------------------- describe
def _describe(data: Path, *args: str) -> dict[str, Any]:
    status, out, err = _run("describe", str(data), "-f", "json", *args)
    assert status == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize("name", list(VIEWS))
def test_describe_a_view_types_and_exact_rows(data: Path, labels: Path, name: str) -> None:
    options, view = _view(name, labels)
    side = labels if "--table" in options else None
    got = _describe(data, *options)
    assert got["totals"]["rows"] == TOTAL  # the source's summary is still there
    types = _plain(data, view, "SELECT column_name, column_type FROM (DESCRIBE dataset_view)",
                   side).to_pylist()
    assert got["view"]["columns"] == [{"name": r["column_name"], "type": r["column_type"]}
                                      for r in types]
    count = _plain(data, view, "SELECT count(*) AS n FROM dataset_view", side)
    assert got["view"]["rows"] == count.to_pylist()[0]["n"]
    assert got["view"]["statistics"] is None
    assert got["view"]["query"] == view
    status, text, _ = _run("describe", str(data), *options)
    assert status == 0
    assert f"{got['view']['rows']:,} rows (exact" in text and "view columns" in text


def test_describe_scan_scans_the_views_rows(data: Path) -> None:
    options, view = VIEWS["computed"]
    got = _describe(data, *options, "--scan")
    assert got["statistics"] == "scan" and got["view"]["statistics"] == "scan"
    columns = {c["name"]: c for c in got["view"]["columns"]}
    for name, column in columns.items():
        q = f'"{name}"'
        plain = _plain(data, view, f"SELECT count(*) - count({q}) AS nulls, "
                       + (f"min(len({q})) AS lo, max(len({q})) AS hi"
                          if column["type"].endswith("[]") else f"min({q}) AS lo, max({q}) AS hi")
                       + " FROM dataset_view").to_pylist()[0]
        assert column["null_count"] == plain["nulls"], name
        if column["type"].endswith("[]"):
            assert (column["min_length"], column["max_length"]) == (plain["lo"], plain["hi"])
        elif column["type"] == "BLOB":
            assert column["min"] is not None  # bytes are base64 in JSON
        else:
            assert (column["min"], column["max"]) == (plain["lo"], plain["hi"]), name
    assert columns["s"]["null_count"] > 0  # score is NULL every 11th row


def test_describe_without_a_view_has_no_view_key(data: Path) -> None:
    assert "view" not in _describe(data)
    status, text, _ = _run("describe", str(data))
    assert status == 0 and "view columns" not in text


def test_help_says_which_query_is_which() -> None:
    status, out, _ = _run("sql", "--help")
    assert status == 0
    flat = " ".join(out.split())
    assert "--query VIEW_SQL" in flat and "not the SQL to run" in flat
    assert "dataset_view" in flat


class _Typed(io.StringIO):
    """Standard input that says it is a terminal (the shell then prompts and greets)."""

    def isatty(self) -> bool:
        return True


def test_interactive_shell_greets_with_the_view(data: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from undertale_duck.cli import shell

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(sys, "stdin", _Typed("SELECT count(*) AS n FROM dataset_view;\n"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = shell.main(str(data), fmt="csv", view={"where": "label = 4"})
    assert status == 0, err.getvalue()
    kept = sum(1 for r in datagen.expected(TOTAL) if r["label"] == 4)
    text = out.getvalue()
    assert f"`dataset_view` is the view given with --query/--where ({kept:,} rows" in text
    assert f"n\n{kept}\n" in text


def test_describe_scan_refuses_a_view_whose_side_table_changed(data: Path,
                                                                tmp_path: Path) -> None:
    from undertale_duck import ParquetDataset
    from undertale_duck.core.describe.view import describe_view
    from undertale_duck.errors import ShardChangedError

    side = tmp_path / "names.csv"
    side.write_text("label,name\n1,one\n")
    ds = ParquetDataset(data, query="SELECT d.id, n.name FROM dataset d JOIN names n "
                        "ON d.label = n.label", tables={"names": str(side)})
    try:
        assert describe_view(ds, scan=True).rows == len(ds)
        side.write_text("label,name\n1,one\n2,two\n")  # more rows join now
        with pytest.raises(ShardChangedError, match="a side table changed"):
            describe_view(ds, scan=True)
    finally:
        ds.close()


@pytest.mark.parametrize("command", ["sql", "validate"])
def test_output_never_replaces_a_side_table(data: Path, tmp_path: Path, command: str) -> None:
    import hashlib

    side = tmp_path / "names.csv"
    side.write_text("label,name\n0,zero\n1,one\n")
    before = hashlib.sha256(side.read_bytes()).hexdigest()
    view = ["--query", "SELECT d.id, n.name FROM dataset d JOIN names n ON d.label = n.label",
            "--table", f"names={side}"]
    schema = tmp_path / "schema.py"
    schema.write_text("from pydantic import BaseModel\n\nclass Row(BaseModel):\n    id: str\n")
    head = (["sql", str(data), "SELECT * FROM dataset_view"] if command == "sql"
            else ["validate", str(data), "--schema", f"{schema}:Row"])
    for target in (side, tmp_path / "link.csv"):
        if target.name == "link.csv":
            target.symlink_to(side)
        status, _, err = _run(*head, *view, "--output", str(target), "--force")
        assert status == 2 and "Traceback" not in err, err
        assert "side table" in err or "link" in err, err
        assert hashlib.sha256(side.read_bytes()).hexdigest() == before
    # the side table's directory stays writable: only the file itself is an input
    status, _, err = _run(*head, *view, "--output", str(tmp_path / "out.txt"))
    assert status in (0, 1) and (tmp_path / "out.txt").exists(), err


@pytest.mark.parametrize("command", ["head", "describe", "batch"])
@pytest.mark.parametrize(("where", "said"), [
    ("label >", "cannot be used: syntax error"),
    ("nope = 1", 'cannot run over the dataset: .*"nope" not found'),
    ("count(*) > 1", "uses the aggregate function"),
    ("label = 'a' AND nope = \"b\" ", 'cannot run over the dataset: .*"nope" not found'),
    ("id LIKE 'a\\_b' AND nope", "cannot run over the dataset"),
    ("nope\n> 1", 'cannot run over the dataset: .*"nope" not found'),
])
def test_a_failing_where_names_the_flag_and_the_condition(
    data: Path, command: str, where: str, said: str
) -> None:
    extra = {"head": [], "describe": [], "batch": ["--step", "0", "--batch", "4"]}[command]
    status, out, err = _run(command, str(data), *extra, "--where", where)
    assert status == 1, err
    prefix = "undertale-duck: error: --where "
    assert err.startswith(prefix), err
    # the condition as one shell word that pastes back as the text typed
    word = shell_word(where)
    assert err[len(prefix):].startswith(word + " "), err
    if where.isprintable():
        assert shlex.split(word) == [where]
    assert re.search(said, err) and "view query" not in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""
