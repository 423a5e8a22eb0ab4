"""The undertale-duck command line (sql, head, row), run as a subprocess like a user would."""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck.cli import app as cli
from undertale_duck.cli import writers
from undertale_duck.common.jsonvalue import jsonable

SIZES = [30, 0, 25, 5]
TOTAL = sum(SIZES)


def run_cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m undertale_duck`` as a user would (from a pipe)."""
    return subprocess.run(
        [sys.executable, "-m", "undertale_duck", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def invoke(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``cli.main`` in this process with piped standard streams (a fast stand-in for
    ``run_cli``, which the end-to-end cases use: starting Python with torch costs seconds)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main(list(args))
            except SystemExit as exc:  # argparse's usage errors and --help
                status = int(exc.code or 0)
    finally:
        sys.stdin = saved
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Spark-style directory: shards (one empty) plus _SUCCESS and .crc clutter."""
    root = tmp_path_factory.mktemp("cli") / "train"
    datagen.write_shards(root, SIZES, row_group_size=[8, 1, 10, 2])
    (root / "_SUCCESS").write_text("")
    (root / ".part-00000.parquet.crc").write_bytes(b"crc")
    return root


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# ------------------------------------------------------------------------------------- sql


def test_sql_known_answer_as_csv_when_piped(data: Path) -> None:
    result = run_cli(
        "sql", str(data), "SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label"
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["label", "n"]
    expected = Counter(datagen.row(i)["label"] for i in range(TOTAL))
    assert {int(a): int(b) for a, b in rows[1:]} == dict(expected)
    assert result.stderr == ""


QUERY = 'SELECT id, label, score, blob, "when", tokens, point, category FROM dataset ORDER BY id'


def expected_json_rows() -> list[dict[str, Any]]:
    rows = []
    for i in range(TOTAL):
        r = datagen.row(i)
        rows.append(
            {
                "id": r["id"],
                "label": r["label"],
                "score": r["score"],
                "blob": base64.b64encode(r["blob"]).decode(),
                "when": r["when"].isoformat(),
                "tokens": r["tokens"],
                "point": r["point"],
                "category": r["category"],
            }
        )
    return rows


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "parquet"])
def test_sql_every_format_parses_back(data: Path, tmp_path: Path, fmt: str) -> None:
    expected = expected_json_rows()
    if fmt == "parquet":
        target = tmp_path / "result.parquet"
        result = invoke("sql", str(data), QUERY, "--output", str(target))  # format from suffix
        assert result.returncode == 0, result.stderr
        assert result.stdout == ""
        table = pq.read_table(target)
        assert table.to_pylist() == [
            {k: v for k, v in datagen.row(i).items() if k in table.column_names}
            for i in range(TOTAL)
        ]
        assert not [p for p in tmp_path.iterdir() if p.name != "result.parquet"]  # no temp left
        return
    runner = run_cli if fmt == "json" else invoke
    result = runner("sql", str(data), QUERY, "--format", fmt)
    assert result.returncode == 0, result.stderr
    if fmt == "json":
        got = json.loads(result.stdout)
    elif fmt == "jsonl":
        got = [json.loads(line) for line in result.stdout.splitlines()]
    else:
        reader = csv.DictReader(io.StringIO(result.stdout))
        got = list(reader)
        expected = [
            {
                k: ""
                if v is None
                else v
                if isinstance(v, str)
                else json.dumps(v)
                if isinstance(v, list | dict)
                else str(v)
                for k, v in row.items()
            }
            for row in expected
        ]
        for row in got:  # JSON text inside CSV fields parses back to the same value
            row["tokens"] = json.dumps(json.loads(row["tokens"]))
            row["point"] = json.dumps(json.loads(row["point"]))
    assert got == expected


def test_sql_table_on_request_aligned_truncated_with_count(data: Path) -> None:
    long = "x" * 100
    result = invoke(
        "sql",
        str(data),
        f"SELECT id, label, '{long}' AS long FROM dataset ORDER BY id",
        "-f",
        "table",
        "--limit",
        "3",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "label", "long"]
    body = [line for line in lines[2:] if line.startswith("row-")]
    assert [line.split()[0] for line in body] == ["row-00000000", "row-00000001", "row-00000002"]
    assert [int(line.split()[1]) for line in body] == [0, 1, 2]
    assert long not in result.stdout and "x" * 39 + "…" in result.stdout
    assert lines[-1] == "(3 rows)"
    # aligned: the long column starts at the same offset on every line, under its header
    assert {line.index("xxx") for line in body} == {lines[0].index("long")}


def test_sql_table_says_when_rows_are_cut(data: Path) -> None:
    result = invoke("sql", str(data), "SELECT id FROM range(150) t(id)", "-f", "table")
    assert result.returncode == 0
    assert "more than 100 rows" in result.stdout
    assert sum(1 for line in result.stdout.splitlines() if line.strip().isdigit()) == 100


def test_sql_query_from_stdin_and_file(data: Path, tmp_path: Path) -> None:
    query = "SELECT max(label) AS m,\n count(*) AS n FROM dataset"
    piped = run_cli("sql", str(data), "-", stdin=query)
    (tmp_path / "q.sql").write_text(query + ";\n")
    filed = invoke("sql", str(data), f"@{tmp_path / 'q.sql'}", "-f", "jsonl")
    assert piped.returncode == 0 and filed.returncode == 0, piped.stderr + filed.stderr
    assert piped.stdout == f"m,n\n6,{TOTAL}\n"
    assert json.loads(filed.stdout) == {"m": 6, "n": TOTAL}


def test_sql_is_confined_by_default_and_says_how_to_lift_it(data: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("label,name\n0,zero\n")
    query = f"SELECT name FROM read_csv('{labels}')"
    confined = invoke("sql", str(data), query)
    assert confined.returncode == 1 and confined.stdout == ""
    error = confined.stderr.strip()
    # the way out is named for this command and for Python, not for another command
    assert "confined to the dataset's own files" in error and "shell" not in error, error
    assert "--sql-files any" in error and "sql_files='any'" in error, error
    free = invoke("sql", str(data), query, "--sql-files", "any")
    assert (free.returncode, free.stdout) == (0, "name\nzero\n"), free.stderr


def test_sql_limit_stops_early(data: Path) -> None:
    result = invoke("sql", str(data), "SELECT id FROM dataset", "--limit", "4", "-f", "jsonl")
    assert [json.loads(x)["id"] for x in result.stdout.splitlines()] == [
        datagen.row(i)["id"] for i in range(4)
    ]


def test_write_attempts_leave_the_dataset_byte_identical(data: Path, tmp_path: Path) -> None:
    before = snapshot(data)
    shard = data / "part-00000.parquet"
    link = tmp_path / "innocent.csv"
    link.symlink_to(shard)
    hard = tmp_path / "copy.parquet"
    os.link(shard, hard)  # the same file under another name, outside the dataset directory
    attempts: list[tuple[list[str], int, str]] = [
        (["sql", str(data), f"COPY (SELECT 1 AS a) TO '{shard}' (FORMAT parquet)"], 1, "COPY"),
        (["sql", str(data), f"COPY dataset TO '{data / 'new.parquet'}'"], 1, "read-only"),
        (["sql", str(data), f"ATTACH '{data / 'db.duckdb'}' AS x"], 1, "ATTACH"),
        (["sql", str(data), "SELECT 1; CREATE TABLE t AS SELECT 1"], 1, "CREATE"),
        (["sql", str(data), "SELECT 1 AS a", "--output", str(shard), "--force"], 2, "shard"),
        (["sql", str(data), "SELECT 1 AS a", "-o", str(data / "out.csv")], 2, "inside the dataset"),
        (["sql", str(data), "SELECT 1 AS a", "-o", str(link), "--force"], 2, "shard"),
        (["sql", f"{data}/*.parquet", "SELECT 1 AS a", "-o", str(data / "o.csv")], 2, "inside"),
        (["sql", str(shard), "SELECT 1 AS a", "-o", str(shard), "--force"], 2, "shard"),
        (["sql", str(data), "SELECT 1 AS a", "-o", str(hard), "--force"], 2, "shard"),
    ]
    for k, (args, status, words) in enumerate(attempts):
        result = (run_cli if k == 0 else invoke)(*args)
        assert result.returncode == status, (args, result.stderr)
        assert words in one_error_line(result), result.stderr
    assert snapshot(data) == before
    assert link.is_symlink() and link.resolve() == shard


def test_output_is_not_overwritten_without_force(data: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    target.write_text("precious\n")
    refused = invoke("sql", str(data), "SELECT 1 AS a", "-o", str(target))
    assert refused.returncode == 2 and "--force" in one_error_line(refused)
    assert target.read_text() == "precious\n"
    failed = invoke(
        "sql", str(data), "SELECT error('boom') FROM dataset", "-o", str(target), "--force"
    )
    assert failed.returncode == 1 and "boom" in one_error_line(failed)
    assert target.read_text() == "precious\n"  # a failed query leaves no partial file
    done = invoke("sql", str(data), "SELECT 1 AS a", "-o", str(target), "--force")
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "a\n1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


@pytest.mark.parametrize(
    ("args", "status", "words"),
    [
        (["sql", "{data}", "SELEC 1"], 1, "syntax error"),
        (["sql", "{data}", "SELECT nope FROM dataset"], 1, "nope"),
        (["sql", "{data}/missing", "SELECT 1"], 2, "does not exist"),
        (["sql", "{data}", "SELECT 1", "--format", "xml"], 2, "invalid choice"),
        (["sql", "{data}", "SELECT 1", "--format", "parquet"], 2, "--output"),
        (["sql", "{data}", "SELECT 1", "--limit", "many"], 2, "--limit"),
        (["sql", "{data}", "   "], 2, "no SQL"),
        (["sql", "{data}", "@/nonexistent/q.sql"], 2, "q.sql"),
        (["sql", "{data}", "SELECT 1", "-o", "/nonexistent/dir/x.csv"], 2, "does not exist"),
        (["head", "{data}", "--columns", "id,nope"], 2, "nope"),
        (["head", "{data}", "-n", "-3"], 2, "-n"),
        (["row", "{data}", str(TOTAL)], 2, "out of range"),
        (["row", "{data}", "seven"], 2, "INDEX"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_a_status(
    data: Path, args: list[str], status: int, words: str
) -> None:
    runner = run_cli if words == "syntax error" else invoke
    result = runner(*[a.format(data=data) for a in args])
    assert result.returncode == status, result.stderr
    assert words in one_error_line(result)
    assert result.stdout == ""


def test_not_parquet_shard_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "a.parquet").write_text("hello")
    result = invoke("sql", str(tmp_path / "a.parquet"), "SELECT 1")
    assert result.returncode == 2
    assert "a.parquet" in one_error_line(result) and "not a Parquet file" in result.stderr


# ------------------------------------------------------------------------------- head, row


def test_columns_whose_names_hold_commas_are_chosen_in_double_quotes(tmp_path: Path) -> None:
    rows = [{"id": i, "a,b": i * 2, ' "q" ': -i, "tokens": [i] * 3, "mask,1": [1] * 3}
            for i in range(6)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "part-0.parquet")
    result = invoke("head", str(tmp_path), "-n", "2", "--columns", '"a,b", id," ""q"" "',
                    "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"a,b": 0, "id": 0, ' "q" ': 0}, {"a,b": 2, "id": 1, ' "q" ': -1}]
    result = invoke("row", str(tmp_path), "3", "-c", '"a,b"', "-f", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["row"] == {"a,b": 6}
    result = invoke("pack", str(tmp_path), "--column", "tokens", "--length", "3",
                    "--alongside", '"mask,1"', "-n", "1", "-f", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["first"][0]["block"]["mask,1"] == [1, 1, 1]
    # the old form is unchanged: names separated by commas, spaces around them dropped
    result = invoke("head", str(tmp_path), "-n", "1", "--columns", " id , a", "-f", "csv")
    assert result.returncode == 2 and "--columns: column(s) ['a'] not found" in result.stderr


@pytest.mark.parametrize(("value", "words"), [
    ('"a,b', "--columns: the name in double quotes from character 1 of '\"a,b' has no closing"),
    ('"a,b"c', "--columns: text follows the quoted name 'a,b' in '\"a,b\"c'; separate names "
     "with commas"),
    ("id,", "--columns takes names separated by commas, got 'id,'; put a name holding a comma "
     "in double quotes"),
    ('id,""', "--columns takes names separated by commas"),
])
def test_a_bad_column_list_is_one_line_naming_the_flag(
    data: Path, value: str, words: str
) -> None:
    result = invoke("head", str(data), "--columns", value)
    assert result.returncode == 2 and result.stdout == ""
    assert words in one_error_line(result)


def test_head_rows_and_columns(data: Path) -> None:
    result = invoke("head", str(data), "-n", "3", "--columns", "label,id,blob", "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [
        {
            "label": i % 7,
            "id": f"row-{i:08d}",
            "blob": base64.b64encode(datagen.row(i)["blob"]).decode(),
        }
        for i in range(3)
    ]
    assert list(rows[0]) == ["label", "id", "blob"]
    everything = invoke("head", str(data), "-n", "1000")  # more than the dataset: all rows
    assert len(list(csv.reader(io.StringIO(everything.stdout)))) == TOTAL + 1


def test_head_and_row_read_within_their_memory_option(tmp_path: Path) -> None:
    # they had no --memory: a shard of 1 MiB values ran at the default 4096 MiB whatever the
    # machine (the other commands take one)
    wide = tmp_path / "wide"
    wide.mkdir()
    # one row group of 96 MiB of values (zstd: a few KB), past the 64 MiB least read limit
    values = [bytes([i]) * (1 << 20) for i in range(96)]
    pq.write_table(pa.table({"i": list(range(96)), "b": values}), wide / "w.parquet",
                   row_group_size=96, compression="zstd")
    for args in (["head", str(wide), "-n", "2", "-f", "jsonl"], ["row", str(wide), "1"]):
        refused = invoke(*args, "--memory", "8")
        assert refused.returncode != 0 and refused.stdout == "", refused.stderr
        assert "memory" in one_error_line(refused), refused.stderr
        served = invoke(*args, "--memory", "1GiB")
        assert served.returncode == 0, served.stderr


def test_row_of_an_empty_view_says_no_index_is_valid(data: Path) -> None:
    # it said "(valid: 0..-1, or -0..-1 from the end)"
    for index in ("0", "-1"):
        result = invoke("row", str(data), index, "--where", "label < 0")
        assert result.returncode == 2 and result.stdout == ""
        assert "the dataset has 0 rows (no index is valid)" in result.stderr, result.stderr
        assert "0..-1" not in result.stderr


def test_row_matches_the_dataset_with_its_shard(data: Path) -> None:
    # index 30 is the first row after the empty shard: row 0 of the third file
    result = run_cli("row", str(data), "31", "--format", "json")
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["index"] == 31
    assert got["shard"] == str(data / "part-00002.parquet")
    assert got["shard_row"] == 1
    assert got["row"] == jsonable(datagen.expected(TOTAL)[31])
    text = invoke("row", str(data), "-1")
    assert text.returncode == 0, text.stderr
    last = datagen.expected(TOTAL)[-1]
    assert text.stdout.splitlines()[0] == (
        f"row {TOTAL - 1} of {TOTAL}: row 4 of shard {data / 'part-00003.parquet'}"
    )
    values = dict(line.split(None, 1) for line in text.stdout.splitlines()[1:])
    assert values["id"] == repr(last["id"])
    assert values["blob"] == repr(last["blob"])
    assert values["when"] == repr(last["when"])


# -------------------------------------------------------------------------------- help, entry


def test_every_command_has_help_with_examples() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = set(sub.choices)  # type: ignore[arg-type]
    assert {"sql", "describe", "head", "row", "shell"} <= names
    for name in ("sql", "describe", "head", "row", "shell"):
        text = sub.choices[name].format_help()  # type: ignore[index]
        assert "examples:" in text and f"undertale-duck {name}" in text, name
    result = run_cli("sql", "--help")
    assert result.returncode == 0 and "examples:" in result.stdout and "--output" in result.stdout


def test_console_script_behaves_like_python_m(data: Path) -> None:
    script = Path(sys.executable).parent / "undertale-duck"
    if not script.exists():
        pytest.skip("the package is not installed with its console script in this environment")
    args = ["sql", str(data), "SELECT count(*) AS n FROM dataset"]
    direct = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120)
    assert direct.returncode == 0 and direct.stdout == f"n\n{TOTAL}\n"
    bad = subprocess.run([str(script), "sql", str(data), "SELEC"], capture_output=True, text=True)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr


# ------------------------------------------------------------------------------ invariants


@settings(deadline=None, max_examples=60)
@given(st.lists(st.lists(st.one_of(st.none(), st.text()), min_size=2, max_size=2), max_size=8))
def test_csv_round_trips_any_text_and_tells_null_from_empty(rows: list[list[str | None]]) -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    batch = pa.RecordBatch.from_pylist([{"a": a, "b": b} for a, b in rows], schema=schema)
    buffer = io.StringIO()
    assert writers.write_csv(schema, [batch], buffer) == len(rows)
    lines = buffer.getvalue().split("\n")
    parsed = list(csv.reader(io.StringIO(buffer.getvalue(), newline="")))
    assert parsed[0] == ["a", "b"]
    assert [[v for v in r] for r in parsed[1:]] == [[v or "" for v in r] for r in rows]
    if any("\n" in v or "\r" in v for r in rows for v in r if v):
        return  # fields span lines: the line-by-line check below does not apply
    for (a, _), line in zip(rows, lines[1:], strict=False):
        if a is None:
            assert line.startswith(",")  # NULL is an empty field
        elif a == "":
            assert line.startswith('"",')  # an empty string is quoted


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=50))
def test_limit_yields_exactly_min_of_rows(n: int, cap: int) -> None:
    batches = [pa.record_batch({"x": list(range(k, k + 7))}) for k in range(0, n, 7)]
    got = [b.num_rows for b in writers.limit(batches, cap)]
    assert sum(got) == min(cap, sum(b.num_rows for b in batches))


def test_sql_and_describe_do_not_import_torch(data: Path) -> None:
    # the view alone is attached: no torch import, so the commands start quickly
    code = (
        "import sys\n"
        "from undertale_duck.cli import main\n"
        f"assert main(['sql', {str(data)!r}, 'SELECT count(*) AS n FROM dataset']) == 0\n"
        f"assert main(['describe', {str(data)!r}]) == 0\n"
        "print('torch' in sys.modules, 'lightning' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.splitlines()[-1] == "False False"
    assert result.stdout.splitlines()[1] == str(sum(SIZES))


def test_sql_sees_nan_beside_finite_values_in_a_row_group(tmp_path: Path) -> None:
    """The row groups' min/max leave NaN out: DuckDB's optimizers made such rows vanish."""
    values = [float("nan") if i % 4 == 1 else float(i % 5) for i in range(40)]
    pq.write_table(pa.table({"f": values}), tmp_path / "a.parquet", row_group_size=6)
    done = invoke("sql", str(tmp_path), "SELECT count(*) AS n FROM dataset WHERE isnan(f)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", "10"]


def test_head_table_escapes_only_the_unprintable_characters(tmp_path: Path) -> None:
    # a value holding one control character was escaped whole: 'é🦆\x00' showed as
    # '\xe9\U0001f986\x00', every letter outside ASCII as an escape
    texts = [f"é🦆{i}" + ("\x00" if i % 2 else "") + "ß" for i in range(4)]
    pq.write_table(pa.table({"s": texts}), tmp_path / "a.parquet")
    result = invoke("head", str(tmp_path), "-n", "4", "--format", "table")
    assert result.returncode == 0, result.stderr
    shown = [line.strip() for line in result.stdout.splitlines()[2:6]]
    assert shown == [t.replace("\x00", "\\x00") for t in texts]


def test_durations_and_intervals_in_a_table_are_iso_8601_without_quotes(tmp_path: Path) -> None:
    # a terminal table showed them as JSON strings: "P0DT90S", quotes and all
    import datetime as dt

    spans = [dt.timedelta(seconds=90 * i, microseconds=i) for i in range(3)]
    pq.write_table(pa.table({"d": pa.array(spans, pa.duration("us"))}), tmp_path / "a.parquet")
    result = invoke("head", str(tmp_path), "-n", "3", "--format", "table")
    assert result.returncode == 0, result.stderr
    shown = [line.strip() for line in result.stdout.splitlines()[2:5]]
    assert shown == ["P0DT0S", "P0DT90.000001S", "P0DT180.000002S"]
    result = invoke("sql", str(tmp_path), "SELECT INTERVAL 14 MONTH + INTERVAL 3 DAY AS i, "
                    "[INTERVAL 1 SECOND] AS l", "-f", "table")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].split() == ["P14M3DT0S", '["P0DT1S"]']


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_sql_keeps_the_nanoseconds_of_a_time_ns(tmp_path: Path, fmt: str) -> None:
    # pyarrow's datetime.time drops nanoseconds: 00:00:01.000000123 came out as 00:00:01
    nanos = [i * 1_000_000_123 for i in range(5)]
    pq.write_table(pa.table({"t": pa.array(nanos, pa.time64("ns"))}), tmp_path / "a.parquet")
    result = invoke("sql", str(tmp_path), "SELECT t FROM dataset", "-f", fmt)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    shown = lines[1:] if fmt == "csv" else [json.loads(line)["t"] for line in lines]
    assert shown == [f"00:00:{n // 10**9:02d}.{n % 10**9:09d}" for n in nanos]
