from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest
from support import datagen

from undertale_duck import load
from undertale_duck.cli import app


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = app.main(list(args))
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "d"
    datagen.write_shards(root, [50, 37, 41], row_group_size=[10, 10, 10])
    return root


@pytest.mark.parametrize(("where", "keep_last"), [(None, False), ("label <> 4", False),
                                                  (None, True), ("label <> 4", True)])
def test_batch_matches_what_a_loader_yielded(data: Path, where: str | None,
                                             keep_last: bool) -> None:
    view = [] if where is None else ["--where", where]
    keep = ["--keep-last"] if keep_last else []
    loader = load(data, None, None, 6, workers=2, shuffle=True, seed=9, ranks=3, rank=1,
                  where=where, drop_last=not keep_last)
    loader.sampler.set_epoch(3)
    batches = [[r["id"] for r in b] for b in loader]
    # 128 rows (112 in the view) over 3 ranks x 2 workers: the tail rule drops rows
    # without --keep-last, and --keep-last serves them (a rank's share is a row longer)
    shares = {(None, False): 42, ("label <> 4", False): 36, (None, True): 43,
              ("label <> 4", True): 37}
    assert sum(map(len, batches)) == len(loader.sampler) == shares[where, keep_last]
    for step in (0, 5, len(batches) - 1):
        status, out, err = _run(
            "batch", str(data), "--step", str(step), "--batch", "6", "--workers", "2",
            "--ranks", "3", "--rank", "1", "--shuffle", "--seed", "9", "--epoch", "3",
            "--values", "-f", "jsonl", *view, *keep,
        )
        assert status == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        assert [json.loads(r["row"])["id"] for r in rows] == batches[step]
        assert [r["position"] for r in rows] == list(range(len(rows)))
        for r in rows:
            local = r["shard_row"]
            offset = {"part-00000": 0, "part-00001": 50, "part-00002": 87}[Path(r["shard"]).stem]
            assert json.loads(r["row"])["id"] == datagen.row(offset + local)["id"]


def test_batch_errors_are_one_line(data: Path) -> None:
    status, out, err = _run("batch", str(data), "--step", "99", "--batch", "4")
    assert status == 2 and "beyond the epoch" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_info:  # argparse: --batch is required
        _run("batch", str(data), "--step", "0")
    assert exit_info.value.code == 2


def test_head_and_row_on_a_view(data: Path) -> None:
    status, out, _ = _run("head", str(data), "-n", "3", "--where", "label = 5", "-f", "csv",
                          "--columns", "id,label")
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    expected = [r for r in datagen.expected(128) if r["label"] == 5][:3]
    assert [r["id"] for r in rows] == [e["id"] for e in expected]
    status, out, _ = _run("row", str(data), "0", "--query",
                          "SELECT id, len(tokens) AS n FROM dataset WHERE label = 5",
                          "-f", "json")
    assert status == 0
    record = json.loads(out)
    assert record["row"] == {"id": expected[0]["id"], "n": len(expected[0]["tokens"])}
    status, _, err = _run("head", str(data), "--query", "SELECT DISTINCT label FROM dataset")
    assert status != 0 and "DISTINCT" in err


def test_validate_a_view_from_the_command_line(data: Path, tmp_path: Path) -> None:
    schema = tmp_path / "schemas.py"
    schema.write_text(
        "from pydantic import BaseModel, Field\n"
        "class Short(BaseModel):\n"
        "    id: str\n"
        "    n: int = Field(le=3)\n"
    )
    query = "SELECT id, len(tokens) AS n FROM dataset"
    status, out, err = _run("validate", str(data), "--schema", f"{schema}:Short",
                            "--query", query, "-f", "json")
    assert status == 1, err
    report = json.loads(out)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert [c["check"] for c in failed] == ["range"]
    assert failed[0]["violations"] == sum(1 for r in datagen.expected(128) if len(r["tokens"]) > 3)
    with pytest.raises(SystemExit) as exit_info:  # argparse: one of --query and --where
        _run("validate", str(data), "--schema", f"{schema}:Short",
             "--query", query, "--where", "label = 1")
    assert exit_info.value.code == 2
    status, out, err = _run("validate", str(data), "--schema", f"{schema}:Short",
                            "--query", "SELECT id, len(tokens) AS n FROM dataset "
                            "WHERE len(tokens) <= 3")
    assert status == 0, err


def test_batch_with_several_ranks_needs_the_rank(data: Path) -> None:
    # rank 0's rows, shown for --ranks 3 alone, would be a wrong answer for ranks 1 and 2
    status, out, err = _run("batch", str(data), "--step", "0", "--batch", "2", "--ranks", "3")
    assert (status, out) == (2, "")
    assert "error: --ranks 3 needs --rank: give the rank whose batch to show (0 to 2)" in err
    # one rank needs no --rank: it is rank 0
    alone = _run("batch", str(data), "--step", "0", "--batch", "2", "-f", "csv")
    assert alone == _run("batch", str(data), "--step", "0", "--batch", "2", "--ranks", "1",
                         "--rank", "0", "-f", "csv")
    assert alone[0] == 0 and len(alone[1].splitlines()) == 3
