"""The command line's errors and warnings name its flags, not the library's Python arguments."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_run import invoke

from undertale_duck.cli.wording import for_the_command_line

PYTHON_FORMS = ("columns=", "tables[", "memory=", "window_bytes", "storage_options")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wording") / "data"
    root.mkdir()
    n = 400
    table = pa.table({"id": list(range(n)), "label": [i % 7 for i in range(n)],
                      "text": [f"row {i:04d} " * 20 for i in range(n)]})
    pq.write_table(table, root / "part-0.parquet", row_group_size=100)
    return root


def _said(err: str) -> str:
    lines = err.splitlines()
    assert lines and all(line.startswith("undertale-duck: ") for line in lines), err
    for form in PYTHON_FORMS:
        assert form not in err, err
    return err


def test_errors_name_the_flags_typed(data: Path) -> None:
    status, out, err = invoke("head", str(data), "--columns", "id,id")
    assert status == 2 and out == ""
    assert "--columns names a column twice" in _said(err)

    missing = data.parent / "no-such-side.parquet"
    status, out, err = invoke("head", str(data), "--table", f"side={missing}", "--query",
                              "SELECT d.id FROM dataset d JOIN side USING (id)")
    assert status == 2 and f"--table side: {missing}" in _said(err)

    status, out, err = invoke("head", str(data), "--query",
                              "SELECT id FROM dataset WHERE label > 4", "--columns", "id")
    assert status == 1
    assert "add them to --columns, or leave --columns out" in _said(err)


def test_a_memory_warning_names_the_flag_and_only_advice_the_command_line_can_follow(
    data: Path,
) -> None:
    with warnings.catch_warnings():  # shown even where an earlier test in this process saw it
        warnings.simplefilter("always")
        status, out, err = invoke("head", str(data), "-n", "2", "--memory", "1", "-f", "csv")
    assert status == 0 and out.splitlines()[1].startswith('0,0,"row 0000 ')
    said = _said(err)
    assert "warning: --memory 1 is below" in said and "Raise --memory" in said


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=80))
def test_messages_without_python_arguments_are_unchanged(text: str) -> None:
    # a message's paths, names and SQL may hold anything; only the argument forms change
    for form in ("columns", "memory", "tables[", "storage_options", "window_bytes"):
        text = text.replace(form, "x")
    assert for_the_command_line(text) == text


@pytest.mark.parametrize("message", [
    "shard /data/memory=1 MB/part-0.parquet is corrupt",
    "column 'columns=[...]' is missing",
    "table 'tables['x']' cannot be read",
    "in /runs/x-columns=a/b.parquet",
])
def test_argument_forms_inside_paths_and_quoted_names_are_left_alone(message: str) -> None:
    assert for_the_command_line(message) == message
