"""Issue 27: no control character from the data reaches the terminal (escape-sequence injection).

Shard names, column names and query text holding ``ESC`` sequences, carriage returns and a
bidirectional override go through ``describe``, ``row``, ``shell``'s ``.shards``,
``validate``'s text report and error lines: each shows them escaped (common/text.py
``terminal_safe``). Machine formats (``-f json``) stay raw by design.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.cli_run import invoke

from undertale_duck.common.text import terminal_safe

EVIL = "\x1b]0;owned\x07\x1b[2J\r\u202e"
ROOT = Path(__file__).resolve().parents[2]


def digest(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    table = pa.table({"id": [f"r{i}" for i in range(10)], f"col{EVIL}": list(range(10))})
    pq.write_table(table, root / f"part{EVIL}.parquet")
    return root


def clean(text: str) -> bool:
    return all(c.isprintable() or c == "\n" for c in text)


def test_describe_escapes_shard_and_column_names(data: Path) -> None:
    before = digest(data)
    status, out, err = invoke("describe", str(data))
    assert status == 0 and clean(out) and clean(err)
    assert "\\x1b]0;owned\\x07" in out and "\\u202e" in out
    assert digest(data) == before


def test_row_escapes_names_and_json_stays_raw(data: Path) -> None:
    status, out, _ = invoke("row", str(data), "3")
    assert status == 0 and clean(out) and "\\x1b" in out
    status, out, _ = invoke("row", str(data), "3", "-f", "json")
    record = json.loads(out)
    assert record["shard"].endswith(f"part{EVIL}.parquet")  # raw, as JSON carries it
    assert f"col{EVIL}" in record["row"]


def test_error_lines_escape_echoed_query_text(data: Path) -> None:
    status, out, err = invoke("sql", str(data), f"SELECT nope{EVIL} FROM dataset")
    assert status != 0 and out == ""
    assert clean(err) and len(err.strip().splitlines()) == 1


def test_validate_text_report_escapes(data: Path, tmp_path: Path) -> None:
    schema = tmp_path / "evil_schema.py"
    schema.write_text(
        "from undertale_duck import schema\n"
        "class S(schema.Dataset):\n"
        "    id: int\n"  # the ids are strings: the check fails and names the shard
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    done = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "validate", str(data), "-s",
         "evil_schema:S", "-f", "text"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert done.returncode in (1, 2), done.stderr
    assert clean(done.stdout) and clean(done.stderr)


def test_shell_shards_escape(data: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        input=".shards\nSELECT nope FROM dataset;\n", capture_output=True, text=True,
        timeout=120,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path), "TERM": "dumb"},
    )
    assert clean(done.stdout) and clean(done.stderr)
    assert "\\x1b" in done.stdout


@given(st.text())
def test_terminal_safe_leaves_nothing_unprintable_and_is_idempotent(text: str) -> None:
    safe = terminal_safe(text)
    assert safe.isprintable()
    assert terminal_safe(safe) == safe
    if text.isprintable():
        assert safe == text
