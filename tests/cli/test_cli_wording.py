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


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wording-flags") / "docs"
    root.mkdir()
    for k in range(2):
        rows = [{"id": g, "tokens": [g * 10 + j for j in range(g % 5)]}
                for g in range(k * 30, (k + 1) * 30)]
        pq.write_table(pa.Table.from_pylist(rows), root / f"part-{k}.parquet")
    return root


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # pack: Pack's fields
        (["pack", "--column", "tokens", "--length", "0"], "error: --length must be between 1"),
        (["pack", "--column", "tokens", "--length", "4", "--alongside", "id"],
         "error: --alongside: column 'id' is int64, not a list of integers"),
        (["pack", "--column", "id", "--length", "4"], "error: --column: column 'id' is int64"),
        (["pack", "--column", "nope", "--length", "4"],
         "error: --column: column(s) ['nope'] not found in "),
        (["pack", "--column", "tokens", "--length", "4", "--alongside", "nope"],
         "error: --alongside: column(s) ['nope'] not found in "),
        (["pack", "--column", "tokens", "--length", "4", "--alongside", "tokens"],
         "; --alongside must not name --column, "),
        (["pack", "--column", "tokens", "--length", "4", "--eod", str(1 << 64)],
         "error: --eod must be between "),
        (["pack", "--column", "tokens", "--length", "4", "--last", "pad", "--pad",
          str(-1 << 64)], "error: --pad must be between "),
        (["pack", "--column", "tokens", "--length", "16000000", "--memory", "100"],
         "error: --length 16000000: one block of 3 columns takes "),
        # split: Split's fields
        (["split", "--key", "id", "--fraction", "1.5"],
         "error: --fraction must be a number strictly between 0 and 1, got 1.5"),
        (["split", "--key", "nope", "--fraction", "0.5"],
         "error: --key: the dataset has no column 'nope'"),
        (["split", "--key", "tokens", "--fraction", "0.5"], "error: --key: column 'tokens' is "),
        (["split", "--key", "id", "--fraction", "0.5", "--seed", "-1"],
         "error: --seed must be an integer >= 0, got -1"),
        # batch: ChunkedSampler's and batch_rows' arguments
        (["batch", "--step", "0", "--batch", "0"], "error: --batch must be >= 1, got 0"),
        (["batch", "--step", "0", "--batch", "4", "--ranks", "0"], "error: --ranks must be >= 1"),
        (["batch", "--step", "0", "--batch", "4", "--ranks", "2", "--rank", "2"],
         "error: --rank must be in [0, 1] for --ranks 2, got 2"),
        (["batch", "--step", "0", "--batch", "4", "--mix", "0"], "error: --mix must be >= 1"),
        (["batch", "--step", "99", "--batch", "4"],
         "error: --step 99 is beyond the epoch: rank 0 has 15 batches of 4 (60 rows)"),
        # head and row: columns=
        (["head", "--columns", "id,nope"], "error: --columns: column(s) ['nope'] not found in "),
        (["row", "0", "--columns", "nope"], "error: --columns: column(s) ['nope'] not found in "),
    ],
)
def test_every_command_names_the_flag_a_bad_value_came_from(
    documents: Path, args: list[str], said: str
) -> None:
    status, out, err = invoke(args[0], str(documents), *args[1:])
    assert (status, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and said in _said(err)
    assert "pack." not in err and "split." not in err


def test_a_missing_column_names_the_argument_in_the_library_too(documents: Path) -> None:
    from undertale_duck import ColumnError, Pack, ParquetDataset, Split

    with pytest.raises(ColumnError, match=r"^columns: column\(s\) \['nope'\] not found") as info:
        ParquetDataset(documents, columns=["id", "nope"])
    assert info.value.missing == ("nope",)
    with pytest.raises(ColumnError, match=r"^pack\.column: column\(s\) \['nope'\]"):
        ParquetDataset(documents, pack=Pack(column="nope", length=4))
    with pytest.raises(ColumnError, match=r"^split\.key: column\(s\) \['nope'\]"):
        ParquetDataset(documents, pack=Pack(column="tokens", length=4),
                       split=Split(key="nope", fraction=0.5))


@pytest.mark.parametrize(("message", "said"), [
    ("rank must be in [0, 1] for ranks=2, got 2", "--rank must be in [0, 1] for --ranks 2, got 2"),
    ("ranks=2 without rank=, and no rank here", "--ranks 2 without --rank, and no rank here"),
    # a plain word is the argument only as the subject or NAME=VALUE
    ("step 9 is beyond the epoch: rank 0 has 2 batches", "--step 9 is beyond the epoch: rank 0 "
     "has 2 batches"),
    ("shard /data/rank=1/part-0.parquet: the rank must", "shard /data/rank=1/part-0.parquet: "
     "the rank must"),
    ("column 'rank' is missing", "column 'rank' is missing"),
    # a spec's field anywhere, but not inside a longer name or a path
    ("column 'x' (pack.alongside) holds 3 values", "column 'x' (--alongside) holds 3 values"),
    ("pack.eod=-1 does not fit", "--eod -1 does not fit"),
    ("pack.columns and /p/pack.column and 'pack.column'",
     "pack.columns and /p/pack.column and 'pack.column'"),
])
def test_a_commands_own_arguments_become_its_flags(message: str, said: str) -> None:
    flags = {"rank": "--rank", "ranks": "--ranks", "step": "--step",
             "pack.alongside": "--alongside", "pack.eod": "--eod", "pack.column": "--column"}
    assert for_the_command_line(message, flags) == said
    assert for_the_command_line(message) == message  # another command's: left alone


def test_a_failed_querys_sql_keeps_its_words(capsys: pytest.CaptureFixture[str]) -> None:
    from undertale_duck.cli import app
    from undertale_duck.errors import ArgumentError, QueryError

    # a query's message may quote its SQL: "rank=1" there is no --rank
    flags = {"rank": "--rank", "step": "--step"}
    assert app._report(QueryError("step failed: WHERE rank=1"), flags) == app.EXIT_FAILED
    assert capsys.readouterr().err == "undertale-duck: error: step failed: WHERE rank=1\n"
    assert app._report(ArgumentError("step 3 is late: rank=1"), flags) == app.EXIT_USAGE
    assert capsys.readouterr().err == "undertale-duck: error: --step 3 is late: --rank 1\n"


def test_the_empty_epoch_warning_advises_the_flag_batch_has(data: Path) -> None:
    # it advised drop_last=False, which the command line had no flag for
    args = ("batch", str(data), "--step", "0", "--batch", "4", "--ranks", "2", "--rank", "0",
            "--workers", "300")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        status, out, err = invoke(*args)
    assert status == 2 and "beyond the epoch: rank 0 has 0 batches" in err
    said = _said(err)
    assert "without --keep-last every rank gets none" in said
    assert "if the run kept every row, give --keep-last" in said and "drop_last" not in said
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        status, out, err = invoke(*args, "--keep-last", "-f", "csv")
    assert status == 0 and err == ""
    assert out.splitlines()[1:] == [f"{p},{p},{data / 'part-0.parquet'},{p}" for p in range(4)]
