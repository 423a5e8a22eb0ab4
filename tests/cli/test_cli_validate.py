"""``undertale-duck validate``: exit statuses, every format, --output, schema specs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from undertale_duck import ValidationReport
from undertale_duck.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _write(directory: Path, shards: int, rows: int, plant: dict[int, dict[str, object]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for k in range(shards):
        data = []
        for j in range(rows):
            i = k * rows + j
            row: dict[str, object] = {
                "id": f"fn-{i:05d}",
                "tokens": [i % 50, 1, 2],
                "mask": [1, 1, 0],
                "label": i % 4,
            }
            row.update(plant.get(i, {}))
            data.append(row)
        arrow = pa.schema(
            [
                ("id", pa.string()),
                ("tokens", pa.list_(pa.int32())),
                ("mask", pa.list_(pa.int8())),
                ("label", pa.int64()),
            ]
        )
        pq.write_table(pa.Table.from_pylist(data, arrow), directory / f"part-{k:05d}.parquet")
    return directory


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("clean"), 3, 40, {})


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # after the first shard: two null labels, one duplicated id (2 rows)
    return _write(
        tmp_path_factory.mktemp("planted"),
        3,
        40,
        {50: {"label": None}, 119: {"label": None}, 90: {"id": "fn-00041"}},
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "undertale_duck", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_exit_statuses_through_a_real_process(clean: Path, planted: Path, tmp_path: Path) -> None:
    ok = _cli("validate", str(clean), "--schema", "TokenizedClassificationDataset")
    assert ok.returncode == 0, ok.stderr
    assert "PASSED" in ok.stdout and ok.stderr == ""  # no progress bar when not a terminal
    bad = _cli("validate", str(planted), "--schema", "TokenizedClassificationDataset", "-f", "json")
    assert bad.returncode == 1, bad.stderr
    report = ValidationReport.model_validate_json(bad.stdout)
    failed = {(c.check, c.column): c.violations for c in report.failed}
    assert failed == {("not_null", "label"): 2, ("unique", "id"): 2}
    usage = _cli("validate", str(clean), "--schema", "NoSuchSchema")
    assert usage.returncode == 2
    assert usage.stderr.count("\n") == 1 and "unknown schema" in usage.stderr
    assert "Traceback" not in usage.stderr


def test_formats_in_process(planted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(planted), "--schema", "TokenizedClassificationDataset"]) == 1
    text = capsys.readouterr().out
    assert "FAIL    not_null" in text and "#50 (" in text and "#119 (" in text
    assert main(["validate", str(planted), "-s", "TokenizedDataset", "-f", "markdown"]) == 1
    markdown = capsys.readouterr().out
    assert markdown.startswith("# Validation report") and "| FAIL | unique | id | 2 |" in markdown
    assert main(["validate", str(planted), "-s", "TokenizedDataset", "-f", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    unique = next(c for c in data["checks"] if c["check"] == "unique")
    assert sorted(e["index"] for e in unique["examples"]) == [41, 90]
    assert main(["validate", str(planted), "-s", "Dataset", "-f", "html"]) == 1
    HTMLParser().feed(capsys.readouterr().out)


def test_output_file_follows_its_suffix(
    planted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["validate", str(planted), "-s", "TokenizedDataset", "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "checks failed" in captured.err and "unique(id): 2 rows" in captured.err
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "unique" in page
    out_json = tmp_path / "report.json"
    assert main(["validate", str(planted), "-s", "Dataset", "-o", str(out_json)]) == 1
    assert json.loads(out_json.read_text())["passed"] is False
    assert sorted(os.listdir(tmp_path)) == ["report.html", "report.json"]  # no temp files left
    htm = tmp_path / "REPORT.HTM"  # was written as text
    assert main(["validate", str(planted), "-s", "Dataset", "-o", str(htm)]) == 1
    assert htm.read_text().startswith("<!DOCTYPE html>")


def test_refuses_to_overwrite_a_shard(planted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shard = planted / "part-00000.parquet"
    before = shard.read_bytes()
    assert main(["validate", str(planted), "-s", "Dataset", "-o", str(shard)]) == 2
    assert "is a shard of the dataset" in capsys.readouterr().err
    assert shard.read_bytes() == before


def test_schema_from_a_file(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "schemas.py"
    file.write_text(
        "from pydantic import Field\n"
        "from undertale_duck.schema import TokenizedDataset\n"
        "class Small(TokenizedDataset):\n"
        "    label: int = Field(lt=2)\n"
    )
    assert main(["validate", str(clean), "--schema", f"{file}:Small"]) == 1
    text = capsys.readouterr().out
    assert f"{file}:Small" in text
    assert "label < 2" in text and "60" in text  # labels 2 and 3: half of 120 rows


@pytest.mark.parametrize("status", [0, 3])
def test_a_schema_file_that_exits_at_import_is_an_error_not_its_status(
    clean: Path, tmp_path: Path, status: int
) -> None:
    # a training script's argument parser, or sys.exit(0) at import, made validate exit with
    # the script's status, 0 meaning "passed", having validated nothing
    file = tmp_path / "train.py"
    file.write_text(
        "import sys\n"
        "from undertale_duck.schema import TokenizedDataset\n"
        "class Small(TokenizedDataset):\n"
        "    pass\n"
        f"sys.exit({status})\n"
    )
    done = _cli("validate", str(clean), "--schema", f"{file}:Small", "-o", str(tmp_path / "r.json"))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert f"called sys.exit({status})" in done.stderr and "nothing was validated" in done.stderr
    assert sorted(os.listdir(tmp_path)) == ["train.py"]  # no report, no temporary file


def test_a_schema_pydantic_cannot_use_is_refused_not_checked(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a misspelt type under `from __future__ import annotations` left the field "not
    # checked" and the dataset passed, while model_validate refuses every row of it
    file = tmp_path / "schemas.py"
    file.write_text(
        "from __future__ import annotations\n"
        "from pydantic import RootModel\n"
        "from undertale_duck.schema import TokenizedDataset\n"
        "class Typo(TokenizedDataset):\n"
        "    label: Integer\n"
        "class Root(RootModel[dict[str, object]]):\n"
        "    pass\n"
    )
    assert main(["validate", str(clean), "--schema", f"{file}:Typo"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "schema Typo is not fully defined (name 'Integer' is not defined)" in captured.err
    assert "Typo.model_rebuild()" in captured.err
    assert main(["validate", str(clean), "--schema", f"{file}:Root"]) == 2
    assert "schema Root is a RootModel" in capsys.readouterr().err


def test_truncated_shard_and_input_errors(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = _write(tmp_path / "broken", 2, 10, {})
    with open(broken / "part-00001.parquet", "r+b") as fh:
        fh.truncate(60)
    assert main(["validate", str(broken), "-s", "TokenizedDataset", "-f", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    readable = next(c for c in data["checks"] if c["check"] == "readable")
    assert readable["examples"][0]["shard"].endswith("part-00001.parquet")
    assert main(["validate", str(tmp_path / "missing"), "-s", "Dataset"]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["validate", str(clean), "-s", "Dataset", "--format", "xml"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["validate", str(clean)])
    assert info.value.code == 2


def test_progress_bar_only_on_a_terminal(clean: Path) -> None:
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "validate", str(clean), "-s", "Dataset"],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        timeout=120,
        check=False,
    )
    os.close(slave)
    drawn = os.read(master, 65536).decode()
    os.close(master)
    assert proc.returncode == 0
    assert "queries" in drawn  # the bar went to the terminal ...
    assert b"queries" not in proc.stdout and b"PASSED" in proc.stdout  # ... not to stdout


@pytest.mark.parametrize("view", [[], ["--where", "label >= 0"]])
def test_examples_option_holds_for_a_view_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], view: list[str]
) -> None:
    """--examples N was ignored with --where/--query (the view's report kept 5 examples)."""
    pq.write_table(pa.table({"id": [f"r{i % 7}" for i in range(20)], "label": list(range(20))}),
                   tmp_path / "a.parquet")
    for n in (0, 1, 3):
        code = main(["validate", str(tmp_path), "-s", "Dataset", "-f", "json",
                     "--examples", str(n), *view])
        assert code == 1
        unique = next(c for c in json.loads(capsys.readouterr().out)["checks"]
                      if c["check"] == "unique")
        assert unique["violations"] == 20 and len(unique["examples"]) == n
