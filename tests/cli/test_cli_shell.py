"""undertale-duck shell: through piped standard input and through a pseudo-terminal."""

from __future__ import annotations

import csv
import io
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from support.terminal import read_until

from undertale_duck.cli.statements import scan, statement_complete

SIZES = [12, 0, 9]
TOTAL = sum(SIZES)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shell") / "train"
    datagen.write_shards(root, SIZES, row_group_size=4)
    (root / "_SUCCESS").write_text("")
    return root


def env(state: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(state), "TERM": "dumb", "COLUMNS": "120"}


def piped_shell(
    root: Path, state: Path, script: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """Run ``undertale-duck shell root`` with ``script`` piped to it."""
    return subprocess.run(
        [sys.executable, "-m", "undertale_duck", "shell", str(root), *options],
        input=script, capture_output=True, text=True, timeout=120, env=env(state),
    )


def test_piped_statements_commands_errors_and_exit_status(data: Path, tmp_path: Path) -> None:
    before = {p: p.read_bytes() for p in data.iterdir()}
    script = "\n".join(
        [
            "SELECT count(*) AS n",
            "FROM dataset;",
            ".format csv",
            "SELECT label, count(*) AS c FROM dataset GROUP BY 1 ORDER BY 1; SELECT 7 AS x;",
            "SELECT nope FROM dataset;",
            f"COPY dataset TO '{data / 'stolen.csv'}';",
            "SELECT 'a;b' AS s",
            ";",
            ".rows 1",
            ".bogus",
            "SELECT 99 AS tail",  # no ';' at the end of input: still run
        ]
    )
    result = piped_shell(data, tmp_path, script + "\n")
    assert result.returncode == 1  # some statements failed
    out = result.stdout
    assert "duck>" not in out and "undertale-duck shell" not in out  # no prompt noise in a pipe
    table, rest = out.split("(1 row)\n", 1)
    assert table.split()[-1] == str(TOTAL)
    blocks = list(csv.reader(io.StringIO(rest)))
    labels = sorted({datagen.row(i)["label"] for i in range(TOTAL)})
    counts = [sum(datagen.row(i)["label"] == k for i in range(TOTAL)) for k in labels]
    assert blocks[0] == ["label", "c"]
    assert blocks[1 : 1 + len(labels)] == [
        [str(k), str(c)] for k, c in zip(labels, counts, strict=True)
    ]
    assert blocks[1 + len(labels) :] == [["x"], ["7"], ["s"], ["a;b"], ["tail"], ["99"]]
    errors = result.stderr.splitlines()
    assert len(errors) == 3
    assert errors[0].startswith("error (line 5):") and "nope" in errors[0]
    assert errors[1].startswith("error (line 6):") and "COPY" in errors[1]
    assert errors[2].startswith("error (line 10):") and ".bogus" in errors[2]
    assert "Traceback" not in result.stderr
    assert {p: p.read_bytes() for p in data.iterdir()} == before
    assert not (tmp_path / "undertale-duck").exists()  # no history file from a pipe


def test_a_cut_table_names_the_shell_s_own_commands(data: Path, tmp_path: Path) -> None:
    # the shell has no --limit or --format options: its hint names .rows and .format
    result = piped_shell(data, tmp_path, ".rows 2\nSELECT * FROM range(5) t(n);\n")
    assert result.returncode == 0, result.stderr
    hint = result.stdout.splitlines()[-1]
    assert hint.startswith("(more than 2 rows; the first 2 are shown") and "--" not in hint, hint
    assert ".rows N" in hint and ".format csv" in hint, hint


def test_format_and_rows_alone_show_their_setting(data: Path, tmp_path: Path) -> None:
    # they were errors ("got ''") rather than showing the setting
    result = piped_shell(data, tmp_path, ".format\n.rows\n.format csv\n.rows 5\n.format\n.rows\n"
                         ".rows 0\n.rows\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["table", "100", "csv", "5", "all"]


def test_piped_shell_without_errors_exits_zero(data: Path, tmp_path: Path) -> None:
    script = ".schema\nSELECT max(id) AS m FROM dataset;\n.quit\nSELECT 1;\n"
    result = piped_shell(data, tmp_path, script, "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert '{"column_name": "id", "column_type": "VARCHAR"}' in lines
    assert lines[-1] == f'{{"m": "row-{TOTAL - 1:08d}"}}'  # nothing after .quit ran


def test_terminal_session_with_prompt_multiline_and_history(data: Path, tmp_path: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env(tmp_path),
        close_fds=True,
    )
    os.close(slave)
    try:
        banner = read_until(master, b"duck> ")
        assert b"undertale-duck shell" in banner and f"({TOTAL} rows)".encode() in banner
        os.write(master, b"SELECT count(*) AS n\r")
        assert b"...>" in read_until(master, b"...> ")
        os.write(master, b"FROM dataset;\r")
        shown = read_until(master, b"duck> ")
        assert f"{TOTAL}".encode() in shown and b"(1 row)" in shown
        os.write(master, b"DROP VIEW dataset;\r")
        refused = read_until(master, b"duck> ")
        assert b"refused" in refused
        os.write(master, b".help\r")
        assert b".quit" in read_until(master, b"duck> ")
        os.write(master, b".quit\r")
        read_until(master, b"\xff", timeout=30)  # until the terminal closes
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    history = (tmp_path / "undertale-duck" / "shell_history").read_text()
    assert "FROM dataset;" in history and "SELECT count(*) AS n" in history


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("SELECT 1;", True),
        ("SELECT 1", False),
        ("SELECT ';'", False),
        ("SELECT 'it''s;'", False),
        ("SELECT 1; -- done", True),
        ("SELECT 1 -- not yet;", False),
        ("SELECT 1 /* ; */", False),
        ('SELECT ";" AS "a;"', False),
        ('SELECT 1 AS "x";  ', True),
        ("SELECT 'open", False),
    ],
)
def test_statement_complete(text: str, complete: bool) -> None:
    assert statement_complete(text) is complete


# --------------------------------------------------------------------------- Ctrl-C, limits


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


LONG_QUERY = b"SELECT sum(hash(range)) FROM range(1000000000000);"


def test_ctrl_c_at_the_prompt_stops_the_query_and_the_shell_goes_on(
    data: Path, tmp_path: Path
) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env(tmp_path),
        close_fds=True,
        preexec_fn=_default_sigint,
    )
    os.close(slave)
    try:
        read_until(master, b"duck> ")
        for _ in range(2):  # twice: the shell keeps working after an interruption
            os.write(master, LONG_QUERY + b"\r")
            read_until(master, LONG_QUERY)
            _wait_for_cpu(proc.pid)
            proc.send_signal(signal.SIGINT)
            after = read_until(master, b"duck> ", timeout=120)
            assert b"interrupted" in after and b"Traceback" not in after
        os.write(master, b"SELECT 6 * 7 AS answer;\r")
        assert b"42" in read_until(master, b"duck> ")
        os.write(master, b".quit\r")
        read_until(master, b"\xff", timeout=30)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_ctrl_c_with_piped_input_exits_130(data: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(tmp_path),
        preexec_fn=_default_sigint,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        # a first statement's answer says the shell is up (imports done, prompt read), so
        # the CPU time counted from then on is the long query's, whatever imports cost
        proc.stdin.write(b"SELECT 4242 AS ready;\n" + LONG_QUERY + b"\nSELECT 1 AS never;\n")
        proc.stdin.flush()
        seen = b""
        while b"4242" not in seen:
            line = proc.stdout.readline()
            assert line, "the shell ended before answering its first statement"
            seen += line
        _wait_for_cpu(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert err.decode().strip() == "interrupted"
    assert b"never" not in out


def _shell_with_peak(data: Path, tmp_path: Path, stdin: object) -> tuple[int, str, str, int]:
    """Run the shell with its own peak RSS (MiB) printed last on stderr."""
    code = (
        "import sys\n"
        "from undertale_duck.cli.app import main\n"
        "status = main(sys.argv[1:])\n"
        # VmHWM, not ru_maxrss: ru_maxrss survives exec, so it would count pytest's own size
        "status_lines = open('/proc/self/status').read().splitlines()\n"
        "hwm = int(next(l.split()[1] for l in status_lines if l.startswith('VmHWM:')))\n"
        "sys.stderr.write(f'peak {hwm >> 10}\\n')\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "shell", str(data)],
        stdin=stdin,  # type: ignore[arg-type]
        capture_output=True,
        text=True,
        timeout=300,
        env=env(tmp_path),
    )
    *errors, peak = done.stderr.splitlines()
    return done.returncode, done.stdout, "\n".join(errors), int(peak.split()[1])


def test_shell_fetches_only_the_rows_it_shows(data: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.sql"
    # 200 million rows are 1.6 GB as one table; the shell shows 100 and stops the query
    script.write_text("SELECT * FROM range(200000000);\n.rows 3\nSELECT * FROM range(10);\n")
    with script.open() as stdin:
        status, out, err, peak = _shell_with_peak(data, tmp_path, stdin)
    assert status == 0, err
    first, second = out.split("(more than 100 rows", 1)
    assert first.split()[-1] == "99"
    assert "(more than 3 rows" in second and " 2\n" in second and " 3\n" not in second
    assert peak < 800, peak


def test_input_without_line_ends_is_refused(data: Path, tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        status, out, err, peak = _shell_with_peak(data, tmp_path, zero)
    assert status == 2
    assert "longer than 1,048,576 characters" in err and "Traceback" not in err
    assert peak < 800, peak
    # a statement that never ends with ';' is refused the same way
    many = tmp_path / "many.sql"
    many.write_text("SELECT\n" + "1 +\n" * 400_000 + "1;\nSELECT 2;\n")
    with many.open() as stdin:
        status, out, err, _ = _shell_with_peak(data, tmp_path, stdin)
    assert status == 2 and "without a ';'" in err and out == ""


def test_values_the_shell_cannot_show_are_one_error_line(tmp_path: Path) -> None:
    deep = pa.array([1, 2])
    for _ in range(64):
        deep = pa.StructArray.from_arrays([deep], names=["f"])
    root = tmp_path / "deep"
    root.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "deep": deep}), root / "d.parquet")
    script = ("SELECT deep FROM dataset;\nSELECT id FROM dataset;\n.format jsonl\n"
              "SELECT deep FROM dataset;\nSELECT 5 AS five;\n")
    result = piped_shell(root, tmp_path, script)
    assert result.returncode == 1
    errors = result.stderr.splitlines()
    assert len(errors) == 2 and all(e.startswith("error (line") for e in errors), errors
    assert "Traceback" not in result.stderr
    assert '{"five": 5}' in result.stdout and "(2 rows)" in result.stdout


def test_confined_by_default(data: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t")
    query = f"SELECT content FROM read_text('{secret}');\n"
    confined = piped_shell(data, tmp_path, query)
    assert confined.returncode == 1 and "s3cr3t" not in confined.stdout
    assert "confined to the dataset's own files" in confined.stderr
    free = piped_shell(data, tmp_path, query, "--sql-files", "any")
    assert free.returncode == 0 and "s3cr3t" in free.stdout


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab;'\"-/*\n ", max_size=12), min_size=1, max_size=6))
def test_scanning_line_by_line_equals_scanning_the_whole(lines: list[str]) -> None:
    state = ("", "")
    for line in lines:
        state = scan(line + "\n", *state)
    assert (state == ("", ";")) == statement_complete("\n".join(lines) + "\n")
