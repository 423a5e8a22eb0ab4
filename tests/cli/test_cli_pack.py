"""``undertale-duck pack`` and ``split``: the library's blocks and parts, from the command line."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from undertale_duck import ArgumentError, Pack, ParquetDataset, Split
from undertale_duck.cli import app


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = app.main(list(args))
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-pack")
    for k in range(2):  # every value a function of the global row index g
        rows = [{"id": g, "tokens": [g * 10 + j for j in range(g % 5)]}
                for g in range(k * 60, (k + 1) * 60)]
        pq.write_table(pa.Table.from_pylist(rows), root / f"part-{k}.parquet", row_group_size=9)
    return root


def test_pack_json_matches_the_library(data: Path) -> None:
    status, out, err = _run("pack", str(data), "--column", "tokens", "--length", "6", "--eod",
                            "-1", "--last", "pad", "--pad", "-2", "-n", "3", "--format", "json")
    assert status == 0, err
    result: dict[str, Any] = json.loads(out)
    ds = ParquetDataset(data, pack=Pack(column="tokens", length=6, eod=-1, last="pad", pad=-2))
    assert result["blocks"] == len(ds)
    assert result["tokens"] == sum(g % 5 + 1 for g in range(120))
    assert result["fingerprint"] == ds.fingerprint
    assert [b["block"] for b in result["first"]] == [ds[k] for k in range(3)]
    assert result["first"][0]["documents"] == [ds.documents_of(0).start, ds.documents_of(0).stop]


def test_pack_text_over_a_view(data: Path) -> None:
    status, out, err = _run("pack", str(data), "--column", "tokens", "--length", "4",
                            "--where", "id % 2 = 0", "-n", "1")
    assert status == 0, err
    ds = ParquetDataset(data, pack=Pack(column="tokens", length=4), where="id % 2 = 0")
    assert f"blocks          {len(ds):,}" in out
    assert f"tokens: {ds[0]['tokens']}" in out


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--length", "0"], "--length must be"),
        (["--length", "-4"], "--length must be"),
        (["--length", "4", "--column", "id"], "--column: column 'id'"),
        (["--length", "4", "--alongside", "a,,b"], "--alongside"),
    ],
)
def test_pack_refuses_bad_specs(data: Path, args: list[str], named: str) -> None:
    base = ["pack", str(data), "--column", "tokens"]
    status, _, err = _run(*base, *args)
    assert status != 0
    assert named in err
    assert "Traceback" not in err


def test_split_counts_and_conditions(data: Path) -> None:
    status, out, err = _run("split", str(data), "--key", "id", "--fraction", "0.25",
                            "--seed", "4", "--format", "json")
    assert status == 0, err
    result = json.loads(out)
    assert result["rows"] == 120
    for part in ("train", "validation"):
        split = Split(key="id", fraction=0.25, part=part, seed=4)
        info = result["parts"][part]
        assert info["rows"] == sum(split.part_of(g) == part for g in range(120))
        assert info["rows"] == len(ParquetDataset(data, where=info["where"]))
        assert info["fingerprint"] == ParquetDataset(data, split=split).fingerprint


def test_split_refuses_a_bad_fraction(data: Path) -> None:
    status, _, err = _run("split", str(data), "--key", "id", "--fraction", "1.5")
    assert status != 0 and "--fraction must be" in err


def test_split_names_a_missing_key_before_indexing_its_condition(data: Path) -> None:
    # the split's condition was indexed first: exit 1 with DuckDB's "Binder Error:
    # Referenced column "nope" not found" instead of the key's own message
    status, out, err = _run("split", str(data), "--key", "nope", "--fraction", "0.5")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "Binder Error" not in err
    assert "--key: the dataset has no column 'nope'" in err
    with pytest.raises(ArgumentError, match=r"split\.key: the dataset has no column 'nope'"):
        ParquetDataset(data, split=Split(key="nope", fraction=0.5))
