"""The command line never shows a traceback: Ctrl-C, endless input, values no format holds."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen

from undertale_duck.cli import main

ROOT = Path(__file__).resolve().parents[2]

#: A query DuckDB would run for hours: it must stop at Ctrl-C.
ENDLESS = "SELECT count(*) AS n FROM range(1000000000000) t(x) WHERE x % 7 = 3"
#: One that would take hours to fill its first batch (a very selective filter).
ENDLESS_SPARSE = "SELECT x FROM range(1000000000000) t(x) WHERE x % 400000003 = 3"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("robust") / "data"
    datagen.write_shards(root, [10, 5])
    return root


def _default_sigint() -> None:
    # a test runner started in the background ignores SIGINT, and children inherit that
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "undertale_duck", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_default_sigint,
        **kwargs,
    )


def _wait_for_cpu(pid: int, seconds: float = 1.0) -> None:
    """Wait until a process has used some CPU time beyond now: its query is running."""
    process = psutil.Process(pid)
    begin = sum(process.cpu_times()[:2])
    for _ in range(2400):
        if sum(process.cpu_times()[:2]) - begin >= seconds:
            return
        time.sleep(0.05)
    raise AssertionError("the query never started")


@pytest.mark.heavy
@pytest.mark.parametrize("query", [ENDLESS, ENDLESS_SPARSE])
def test_ctrl_c_stops_a_running_query_with_status_130_and_no_file(
    data: Path, tmp_path: Path, query: str
) -> None:
    # the query comes through a FIFO: once it is read, the command is past its imports
    fifo = tmp_path / "query.sql"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "result.csv"
    proc = start("sql", str(data), f"@{fifo}", "--output", str(target))
    try:
        with open(fifo, "w") as writer:  # opens once the command reads it
            writer.write(query)
        _wait_for_cpu(proc.pid)  # the query is running inside DuckDB
        proc.send_signal(signal.SIGINT)
        # without the interrupt this query runs for hours: the wait would time out
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["undertale-duck: interrupted"]
    assert list(out.iterdir()) == []  # no result, no temporary file


def invoke(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def test_query_text_is_capped_and_endless_input_fails_at_once(data: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.sql"
    big.write_text("SELECT 1 AS a -- " + "x" * (1 << 20) + "\n")
    for source in ("/dev/zero", str(big)):
        status, out, err = invoke("sql", str(data), f"@{source}")
        assert status == 2 and out == ""
        assert "larger than 1 MiB" in err and len(err.strip().splitlines()) == 1
    small = tmp_path / "small.sql"
    small.write_text("SELECT 1 AS a -- " + "x" * ((1 << 20) - 100) + "\n")
    assert invoke("sql", str(data), f"@{small}") == (0, "a\n1\n", "")


def test_an_at_sign_alone_asks_for_a_file_name(data: Path) -> None:
    # "@" opened the working directory: "cannot read the QUERY file : Is a directory"
    for args in (["sql", str(data), "@"], ["sql", str(data), "--query", "@", "SELECT 1"]):
        status, out, err = invoke(*args)
        assert (status, out) == (2, "")
        assert "'@' needs a file name after it" in err and "directory" not in err, err


@pytest.mark.parametrize(("name", "says"), [("x.xlsx", ".xlsx is none of them"),
                                            (".csv", "the name has no suffix"),
                                            ("report", "the name has no suffix")])
def test_an_output_name_without_a_known_suffix_is_named_plainly(
    data: Path, tmp_path: Path, name: str, says: str
) -> None:
    # a name without a suffix (".csv" is a hidden file's name) said "no suffix is none of them"
    status, out, err = invoke("sql", str(data), "SELECT 1 AS a", "-o", str(tmp_path / name))
    assert (status, out) == (2, "") and says in err and "no suffix is none" not in err, err
    assert not list(tmp_path.iterdir())


def test_endless_standard_input_fails_at_once(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open("/dev/zero", "rb") as zeros:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(zeros, encoding="utf-8"))
        status, out, err = invoke("sql", str(data), "-")
    assert status == 2 and out == ""
    assert "standard input is larger than 1 MiB" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["sql", "{data}", "SELECT INTERVAL 1 DAY AS i", "-o", "{tmp}/i.parquet"],
        ["sql", "{data}", "SELECT 1 AS a, 2 AS a", "-o", "{tmp}/dup.parquet"],
        ["sql", "{data}", "SELECT 1 AS a", "-o", "{tmp}/missing/dir/x.csv"],
        ["sql", "{data}", "SELECT 1 AS a", "-o", ""],
        ["sql", "{data}", "SELECT 1 AS a", "-o", "{tmp}/"],
        ["describe", "{tmp}"],
        ["validate", "{data}", "-s", "no_such_module:Nope"],
        ["sql", "{data}", "SELECT 1 AS a; SELECT nope", "-f", "csv"],
    ],
)
def test_every_failure_is_one_line_without_a_traceback(
    data: Path, tmp_path: Path, args: list[str]
) -> None:
    status, _, err = invoke(*[a.format(data=data, tmp=tmp_path) for a in args])
    assert status in (1, 2), err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("undertale-duck"), err
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".parquet", ".csv", ".tmp")]


@pytest.mark.parametrize(
    ("fmt", "want"), [("jsonl", '{"d": "-5000-01-01"}\n'), ("csv", "d\n-5000-01-01\n")]
)
def test_dates_python_cannot_hold_are_written_as_text(data: Path, fmt: str, want: str) -> None:
    # Python's date stops at year 1: Arrow's text of the value is written, not an error
    status, out, err = invoke("sql", str(data), "SELECT DATE '-5000-01-01' AS d", "-f", fmt)
    assert (status, out, err) == (0, want, "")


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
@pytest.mark.parametrize(
    "query",
    [
        "SELECT TIMESTAMP '294247-01-10 04:00:54' AS t",
        "SELECT CAST(d AS DATE) AS t FROM (SELECT DATE '5881580-07-10' AS d)",
    ],
)
def test_values_arrow_cannot_write_as_text_either_are_an_error(
    data: Path, tmp_path: Path, fmt: str, query: str
) -> None:
    # Arrow writes "<value out of range: N>" for these: that text is not the value
    status, out, err = invoke("sql", str(data), query, "-f", fmt)
    assert status == 1, (out, err)
    assert "value out of range" not in out
    assert "column 't'" in err and "Arrow has no text for it" in err and "Traceback" not in err
    status, _, err = invoke("sql", str(data), query, "-o", str(tmp_path / f"r.{fmt}"))
    if fmt != "table":  # a table is for the terminal: no such output file
        assert status == 1 and "Arrow has no text" in err, err
        assert not list(tmp_path.iterdir())  # no partial file


@pytest.mark.heavy
def test_a_closed_pipe_is_not_an_error(data: Path) -> None:
    proc = start("sql", str(data), "SELECT x FROM range(3000000) t(x)")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "x\n"
    proc.stdout.close()  # like `| head -1`
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0
    assert err == ""


def test_describe_leaves_min_max_unknown_for_dates_python_cannot_hold(tmp_path: Path) -> None:
    # row i holds day -2_500_000 + i * 1_000_000 (years -4875 to 8814) and, as DuckDB writes
    # 'infinity', day 2**31 - 1 in its last row: Python's date holds neither the first nor
    # the last; describe showed "unexpected OverflowError" and exit status 2
    rows = 6
    days = [-2_500_000 + i * 1_000_000 for i in range(rows - 1)] + [(1 << 31) - 1]
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(
        pa.table({"i": list(range(rows)), "d": pa.array(days, pa.date32())}),
        data / "part-0.parquet",
    )
    for extra in ([], ["--scan"], ["--where", "i >= 0", "--scan"]):
        status, out, err = invoke("describe", str(data), *extra)
        assert (status, err) == (0, ""), err
        lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
        assert lines["i"] == ["BIGINT", "0", "0", str(rows - 1)]
        assert lines["d"] == ["DATE", "0", "?", "?"]
    status, out, err = invoke("describe", str(data), "--scan", "-f", "json")
    assert (status, err) == (0, "")
    columns = {c["name"]: c for c in json.loads(out)["columns"]}
    assert (columns["i"]["min"], columns["i"]["max"]) == (0, rows - 1)
    assert (columns["d"]["null_count"], columns["d"]["min"], columns["d"]["max"]) == (0, None, None)
