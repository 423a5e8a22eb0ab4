"""Mistakes a new user makes in the first hour each get one line that names the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import cli_run, datagen

from undertale_duck import (
    ArgumentError,
    DataModule,
    Mixture,
    ParquetDataset,
    QueryError,
    SourceError,
    Stream,
    load,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("first_hour") / "train"
    datagen.write_shards(root, [150, 60])
    return root


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    status, out, err = cli_run.invoke(*args)
    return subprocess.CompletedProcess(list(args), status, out, err)


def one_line(message: str) -> str:
    assert "\n" not in message.strip(), message
    return message


def test_an_unknown_table_names_dataset_and_dataset_view(data: Path) -> None:
    with pytest.raises(QueryError) as caught:
        ParquetDataset(data).sql("SELECT count(*) FROM train")
    message = one_line(str(caught.value))
    assert "no table train" in message and "dataset" in message and "dataset_view" in message
    assert "pg_attribute" not in message
    # a near miss keeps DuckDB's guess when it is one of ours
    with pytest.raises(QueryError, match="did you mean dataset_view"):
        ParquetDataset(data, where="label > 0").sql("SELECT * FROM datset_view")
    result = invoke("sql", str(data), "SELECT * FROM train")
    assert result.returncode == 1
    assert "no table train" in one_line(result.stderr)


def test_a_view_with_no_source_table_says_to_select_from_dataset(data: Path) -> None:
    with pytest.raises(QueryError) as caught:
        ParquetDataset(data, query="SELECT 1")
    message = one_line(str(caught.value))
    assert "FROM dataset" in message and "EMPTY" not in message


@pytest.mark.parametrize("wrapped", ["mixture", "dataset"])
def test_a_dataset_where_a_path_goes_is_refused_without_reading_a_row(
    data: Path, wrapped: str
) -> None:
    ds = ParquetDataset(data)
    source = Mixture([Stream(ds)]) if wrapped == "mixture" else ds
    with pytest.raises(SourceError) as caught:
        ParquetDataset(source)  # type: ignore[arg-type]
    message = one_line(str(caught.value))
    assert f"is a {type(source).__name__}, not a path" in message and "load()" in message
    assert "row-" not in message  # no row of the data is dumped into the message
    with pytest.raises(SourceError) as listed:
        ParquetDataset([ds])  # type: ignore[list-item]
    assert "row-" not in str(listed.value)


def test_torch_style_keywords_point_at_ours(data: Path) -> None:
    with pytest.raises(ArgumentError, match=r"load\(\) takes workers=, not num_workers="):
        load(data, None, None, 8, num_workers=2)  # type: ignore[call-arg]
    with pytest.raises(ArgumentError, match=r"load\(\) takes batch=, not batch_size="):
        load(data, None, None, batch_size=8)  # type: ignore[call-arg]
    with pytest.raises(ArgumentError, match=r"DataModule\(\) takes workers=, not num_workers="):
        DataModule(data, None, None, None, 8, num_workers=2)
    with pytest.raises(ArgumentError, match=r"ParquetDataset\(\) takes no num_workers=.*load\("):
        ParquetDataset(data, num_workers=2)  # type: ignore[call-arg]
    with pytest.raises(ArgumentError, match=r"ParquetDataset\(\) takes no batch_size="):
        ParquetDataset(data, batch_size=2)  # type: ignore[call-arg]
    with pytest.raises(ArgumentError, match=r"unknown keyword memroy=; it takes .*memory"):
        ParquetDataset(data, memroy=2)  # type: ignore[call-arg]
    # ArgumentError is a ValueError; a TypeError catcher written for torch would not see it,
    # so the wrapped signatures must stay what the docs say
    import inspect

    assert "num_workers" not in inspect.signature(ParquetDataset).parameters
    assert list(inspect.signature(load).parameters)[:4] == ["path", "schema", "collator", "batch"]


def test_validate_takes_md_as_render_does(data: Path) -> None:
    result = invoke("validate", str(data), "--schema", "Dataset", "--format", "md")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Validation report")


def test_sql_output_format_follows_the_suffix_or_is_refused(data: Path, tmp_path: Path) -> None:
    xlsx = tmp_path / "x.xlsx"
    result = invoke("sql", str(data), "SELECT id FROM dataset", "--output", str(xlsx))
    assert result.returncode == 2 and not xlsx.exists()
    assert ".xlsx is none of them" in one_line(result.stderr) and "--format" in result.stderr
    # with --format the name is the user's business
    result = invoke(
        "sql", str(data), "SELECT id FROM dataset", "--output", str(xlsx), "--format", "csv"
    )
    assert result.returncode == 0 and xlsx.read_text().count("\n") == 211


def test_a_table_file_never_drops_rows_silently(data: Path, tmp_path: Path) -> None:
    txt = tmp_path / "x.txt"
    result = invoke("sql", str(data), "SELECT id FROM dataset", "--output", str(txt))
    assert result.returncode == 2 and not txt.exists()
    assert "more than 100 rows" in one_line(result.stderr) and "--limit" in result.stderr
    result = invoke("sql", str(data), "SELECT id FROM dataset", "-o", str(txt), "--limit", "150")
    assert result.returncode == 0 and txt.read_text().count("row-") == 150
    small = tmp_path / "small.txt"
    result = invoke("sql", str(data), "SELECT id FROM dataset LIMIT 100", "-o", str(small))
    assert result.returncode == 0 and small.read_text().count("row-") == 100


def test_the_cli_prints_no_traceback_for_these(data: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "sql", str(data), "SELECT * FROM train"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("undertale-duck: ") and "Traceback" not in result.stderr
