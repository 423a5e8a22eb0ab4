"""undertale-duck shell: through piped standard input and through a pseudo-terminal."""

from __future__ import annotations

import csv
import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import datagen
import pytest

from undertale_duck.cli.shell import statement_complete

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
    result = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        input=script + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=env(tmp_path),
    )
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


def test_piped_shell_without_errors_exits_zero(data: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "shell", str(data), "--format", "jsonl"],
        input=".schema\nSELECT max(id) AS m FROM dataset;\n.quit\nSELECT 1;\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert '{"column_name": "id", "column_type": "VARCHAR"}' in lines
    assert lines[-1] == f'{{"m": "row-{TOTAL - 1:08d}"}}'  # nothing after .quit ran


def read_until(fd: int, marker: bytes, timeout: float = 60.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{marker!r} not seen; got {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen


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
