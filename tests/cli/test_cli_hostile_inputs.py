"""Hostile but realistic inputs: a filter on columns left out, special entries, stray options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import datagen
from support.cli_run import invoke

from undertale_duck import ParquetDataset
from undertale_duck.errors import ArgumentError, QueryError, SourceError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "data"
    datagen.write_shards(root, [10, 5])
    return root


def test_where_may_name_columns_that_columns_leaves_out(data: Path) -> None:
    kept = [r for r in datagen.expected(15) if r["label"] > 4 and r["point"]["x"] > 3]
    where = "label > 4 AND point.x > 3"
    ds = ParquetDataset(data, columns=["id", "score"], where=where)
    assert ds.columns == ["id", "score"] and len(ds) == len(kept)
    assert [ds[i] for i in range(len(ds))] == [
        {"id": r["id"], "score": r["score"]} for r in kept
    ]
    status, out, err = invoke("head", str(data), "--where", where, "--columns", "id", "-f", "jsonl")
    assert (status, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [{"id": r["id"]} for r in kept]
    status, out, err = invoke(
        "row", str(data), "-1", "--where", where, "--columns", "id", "-f", "json"
    )
    assert (status, err) == (0, "") and json.loads(out)["row"] == {"id": kept[-1]["id"]}
    # a filter over every column (COLUMNS(*)) keeps meaning the columns given, as before
    ds = ParquetDataset(data, columns=["id"], where="COLUMNS(*) IS NOT NULL")
    assert len(ds) == 15 and ds.query == "SELECT * FROM dataset WHERE COLUMNS(*) IS NOT NULL"


def test_a_query_naming_a_column_columns_leaves_out_is_named(data: Path) -> None:
    query = "SELECT id FROM dataset WHERE label > 4"
    with pytest.raises(QueryError) as info:
        ParquetDataset(data, columns=["id"], query=query)
    assert "['label']" in str(info.value) and "add them to columns=" in str(info.value)
    status, out, err = invoke("head", str(data), "--query", query, "--columns", "id")
    assert status == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and "['label']" in lines[0]
    assert "add them to --columns, or leave --columns out" in lines[0]


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_describe_refuses_a_broken_link_named_like_a_shard_as_the_dataset_does(
    tmp_path: Path, kind: str
) -> None:
    root = tmp_path / "data"
    datagen.write_shards(root, [4, 3])
    link = root / "part-00002.parquet"
    link.symlink_to(tmp_path / "gone.parquet" if kind == "dangling" else link)
    with pytest.raises(SourceError) as info:
        ParquetDataset(root)
    for extra in ([], ["--scan"], ["--format", "json"]):
        status, out, err = invoke("describe", str(root), *extra)
        assert status == 2 and out == ""
        assert err.splitlines() == [f"undertale-duck: error: {info.value}"]


@pytest.mark.timeout(180)
def test_describe_never_opens_a_fifo_named_like_a_shard(tmp_path: Path) -> None:
    root = tmp_path / "data"
    datagen.write_shards(root, [4, 3])
    fifo = root / "part-00002.parquet"
    os.mkfifo(fifo)
    with pytest.raises(SourceError) as info:
        ParquetDataset(root)
    # in a child with a timeout: a FIFO opened for reading would hang the suite
    done = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "describe", str(root), "--scan"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"undertale-duck: error: {info.value}"]


def test_storage_options_for_a_local_source_are_ignored_with_a_warning(data: Path) -> None:
    plain = invoke("head", str(data), "-n", "3", "-f", "csv")
    status, out, err = invoke(
        "head", str(data), "-n", "3", "-f", "csv", "--storage-option", "anon=true"
    )
    assert (status, out) == (0, plain[1])  # ignored, as ParquetDataset ignores them
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("undertale-duck: warning: --storage-option")
    assert str(data) in lines[0] and "ignored" in lines[0]
    assert len(ParquetDataset(data, storage_options={"anon": True})) == 15
    status, _, err = invoke("describe", str(data), "--storage-option", "anon=true")
    assert status == 0 and len(err.splitlines()) == 1 and "warning" in err


@pytest.mark.parametrize("command", ["describe", "validate"])
def test_file_url_options_are_checked_by_every_command_as_by_the_dataset(
    data: Path, command: str
) -> None:
    url = data.as_uri()
    with pytest.raises(ArgumentError) as info:
        ParquetDataset(url, storage_options={"anon": True})
    extra = ["--schema", "TokenizedDataset"] if command == "validate" else []
    status, out, err = invoke(command, url, *extra, "--storage-option", "anon=true")
    assert status == 2 and out == ""
    said = str(info.value).replace("storage_options", "--storage-option", 1)
    assert err.splitlines() == [f"undertale-duck: error: {said}"]


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["sql", "{data}", "SELECT 'caf\udce9' AS x"], "QUERY"),
        (["head", "{data}", "--where", "id = 'caf\udce9'"], "--where"),
        (["describe", "{data}", "--query", "SELECT id AS \"caf\udce9\" FROM dataset"], "--query"),
        (["row", "{data}", "0", "--columns", "i\udcffd"], "--columns"),
        (["split", "{data}", "--key", "i\udcffd", "--fraction", "0.5"], "--key"),
        (["pack", "{data}", "--column", "tok\udcffens", "--length", "4"], "--column"),
    ],
)
def test_text_arguments_that_are_not_utf8_are_named(
    data: Path, args: list[str], name: str
) -> None:
    # argv bytes that are not UTF-8 reach Python as lone surrogates (\udcXX)
    status, out, err = invoke(*(a.replace("{data}", str(data)) for a in args))
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and f"error: {name} '" in lines[0]
    assert "is not valid UTF-8 text" in lines[0] and "unexpected" not in lines[0]


def test_a_side_table_whose_path_is_not_utf8_is_not_called_corrupt(
    data: Path, tmp_path: Path
) -> None:
    side = os.path.join(os.fsencode(tmp_path), b"s\xff.parquet")
    with open(side, "wb") as fh:
        fh.write((data / "part-00001.parquet").read_bytes())
    path = os.fsdecode(side)
    query = "SELECT d.id FROM dataset d JOIN s ON d.id = s.id"
    with pytest.raises(ArgumentError, match=r"not valid UTF-8.*rename it"):
        ParquetDataset(data, query=query, tables={"s": path})
    status, out, err = invoke(
        "sql", str(data), "SELECT count(*) FROM dataset_view", "--query", query,
        "--table", f"s={path}",
    )
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert "not valid UTF-8" in err and "corrupt" not in err
    assert f"--table s: '{tmp_path}/s\\xff.parquet' has a path" in err


def test_a_path_that_is_not_utf8_is_shown_with_its_bytes(data: Path, tmp_path: Path) -> None:
    # the byte 0xff reaches Python as the surrogate \udcff; a terminal is shown the byte
    base = os.fsencode(tmp_path)
    status, out, err = invoke("head", os.fsdecode(base + b"/gone\xff"))
    assert (status, out) == (2, "")
    assert err == f"undertale-duck: error: dataset source {tmp_path}/gone\\xff does not exist\n"
    shards = base + b"/d\xff"
    os.mkdir(shards)
    os.link(data / "part-00001.parquet", shards + b"/part-00001.parquet")
    for command in (["describe"], ["row", "0"], ["split", "--key", "id", "--fraction", "0.5"]):
        status, out, err = invoke(command[0], os.fsdecode(shards), *command[1:])
        assert (status, out) == (2, "")
        assert f"dataset file '{tmp_path}/d\\xff/part-00001.parquet' has a path that is not " \
            "valid UTF-8" in err
        assert "udc" not in err


def test_shell_input_that_is_not_utf8_stops_with_one_line(data: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        input=b"SELECT 1 AS a;\nSELECT 'caf\xe9';\nSELECT 2;\n", capture_output=True,
        timeout=120, cwd=ROOT,
        # a locale whose standard input passes bytes that are not UTF-8 on as surrogates
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8:surrogateescape"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().splitlines() == [
        "error: line 2 of the input is not UTF-8 text; the shell reads SQL text"
    ]


def test_a_library_warning_is_one_line_as_errors_are(data: Path) -> None:
    # in a child: the test run's filters ignore this warning; a user's Python shows it
    done = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "batch", str(data), "--step", "0",
         "--batch", "1", "--workers", "4096"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("undertale-duck: warning: ChunkedSampler: the dataset's 15 rows")
    assert lines[1].startswith("undertale-duck: error: --step 0 is beyond the epoch")


def test_a_column_name_holding_nul_is_named_not_an_unexpected_error(tmp_path: Path) -> None:
    # quote_identifier's ValueError reached the user: `undertale-duck: error: unexpected
    # ValueError: identifier 'a\x00b' contains a NUL character` (no shard, nothing to do)
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pydantic import Field, create_model

    from undertale_duck.errors import ColumnError
    from undertale_duck.validation.runner import report_for

    root = tmp_path / "data"
    root.mkdir()
    shard = root / "a.parquet"
    ids = [f"r{i}" for i in range(4)]
    pq.write_table(pa.table({"a\x00b": [3 * i for i in range(4)], "id": ids}), shard)
    for args in (["describe"], ["describe", "--scan"], ["head"], ["row", "0"],
                 ["sql", "SELECT count(*) FROM dataset"]):
        status, out, err = invoke(args[0], str(root), *args[1:])
        assert status == 2, (args, out, err)
        assert err.count("\n") == 1 and "unexpected" not in err, (args, err)
        assert str(shard) in err and "'a\\x00b', holding a NUL character" in err, (args, err)
    status, out, err = invoke("head", str(root), "--columns", "id", "-f", "jsonl")
    assert (status, err) == (0, "")
    assert [json.loads(line)["id"] for line in out.splitlines()] == ids
    with pytest.raises(ColumnError, match="holding a NUL character"):
        ParquetDataset(root)
    model = create_model("Nul", x=(int, Field(alias="a\x00b", ge=0)))
    with pytest.raises(ArgumentError, match="field 'x' reads the column 'a\\\\x00b'"):
        report_for(root, model)


def test_describe_scan_says_once_that_a_damaged_shard_cannot_be_read(tmp_path: Path) -> None:
    # the error line read "shard ... cannot be read: cannot be read: Out of buffer"
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "data"
    root.mkdir()
    shard = root / "a.parquet"
    table = pa.table({"idx": list(range(64)), "text": [f"t-{i}" for i in range(64)]})
    pq.write_table(table, shard, row_group_size=32, use_dictionary=False)
    chunk = pq.ParquetFile(shard).metadata.row_group(1).column(1)
    data = bytearray(shard.read_bytes())
    for k in range(chunk.data_page_offset, chunk.data_page_offset + 6):
        data[k] ^= 0x5A  # a garbled page header past the first rows
    shard.write_bytes(bytes(data))
    status, out, err = invoke("describe", str(root), "--scan")
    assert status == 2, (out, err)
    assert err.startswith(f"undertale-duck: error: shard {shard}") and err.count("\n") == 1
    assert err.count("cannot be read") == 1, err
