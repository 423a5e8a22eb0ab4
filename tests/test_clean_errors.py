"""Issue 27: clean errors where foreign exceptions escaped, on real files and the real S3 server.

Hostile resume states, numeric CLI options out of range, a LIMIT below a vector, unknown or
malformed storage options, and the exit status of a memory-budget refusal. The dataset's
sha256 is checked before and after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from support import datagen
from support import hostile_files as hf
from support.cli_run import invoke
from support.storage_server import S3Server

from undertale_duck import ChunkedSampler, DataModule, ParquetDataset
from undertale_duck.errors import ArgumentError

SIZES = [60, 40]


def digest(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=10)
    return root


# ---------------------------------------------------------------------- resume states
def _sampler(ds: ParquetDataset) -> ChunkedSampler:
    return ChunkedSampler(ds, 4, 0, 1, 0, shuffle=True, seed=3)


@pytest.mark.parametrize(
    "hostile",
    [
        "stripped",
        "numpy-epoch",
        "tensor-consumed",
        "string-consumed",
        "negative",
        "array",
        "list",
        "newer",
    ],
)
def test_hostile_sampler_states_are_refused_cleanly(data: Path, hostile: str) -> None:
    before = digest(data)
    ds = ParquetDataset(data)
    good = _sampler(ds).state_dict(consumed=8)
    assert good["version"] == 1
    state: Any = {
        "stripped": {"epoch": 0, "consumed": 8},
        "numpy-epoch": {**good, "epoch": np.int64(0)},
        "tensor-consumed": {**good, "consumed": torch.tensor(8)},
        "string-consumed": {**good, "consumed": "8"},
        "negative": {**good, "consumed": -1},
        "array": np.zeros(3),
        "list": [good],
        "newer": {**good, "version": 99},
    }[hostile]
    with pytest.raises(ArgumentError, match=r"cannot resume|must be a dict"):
        _sampler(ds).load_state_dict(state)
    assert digest(data) == before


def test_states_of_earlier_versions_and_extra_keys_still_resume(data: Path) -> None:
    ds = ParquetDataset(data)
    first = _sampler(ds)
    state = first.state_dict(consumed=8)
    expected = list(first)[8:]
    unversioned = {k: v for k, v in state.items() if k != "version"}  # before versions
    for saved in (state, unversioned, {**state, "a_later_key": [1, 2]}):
        again = _sampler(ds)
        again.load_state_dict(saved)
        assert list(again) == expected


@pytest.mark.parametrize("state", [np.zeros(2), "train", {"train": [1, 2]},
                                   {"train": {"epoch": 0, "consumed": 4}}])
def test_hostile_datamodule_states_are_refused_cleanly(data: Path, state: Any) -> None:
    before = digest(data)
    dm = DataModule(str(data), str(data), None, None, 4)
    with pytest.raises(ArgumentError, match=r"DataModule|cannot resume"):
        dm.load_state_dict(state)
    assert digest(data) == before


# ---------------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--batch", str(2**63), "--step", "0"], "--batch"),
        (["--batch", "4", "--step", "0", "--workers", str(2**63)], "--workers"),
        (["--batch", "4", "--step", "0", "--mix", "1e30"], "--mix"),
        (["--batch", "4", "--step", str(2**64)], "--step"),
    ],
)
def test_numeric_options_out_of_range_are_one_clean_line(
    data: Path, args: list[str], option: str
) -> None:
    before = digest(data)
    status, out, err = invoke("batch", str(data), *args)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and f"argument {option}" in err
    assert "unexpected" not in err and "Traceback" not in err
    assert digest(data) == before


def test_validate_memory_beyond_reason_is_one_clean_line(data: Path) -> None:
    before = digest(data)
    status, _, err = invoke("validate", str(data), "-s", "undertale_duck.schema:Dataset",
                            "--memory", "1e30")
    assert status == 2 and len(err.strip().splitlines()) == 1 and "--memory" in err
    assert digest(data) == before


def test_a_memory_budget_refusal_exits_1_as_documented(tmp_path: Path) -> None:
    data = tmp_path / "bomb"
    data.mkdir()
    hf.dictionary_bomb(data / "bomb.parquet", 20_000, 64 << 10, ids=True, store_schema=False)
    before = digest(data)
    status, out, err = invoke("sql", str(data), "SELECT * FROM dataset", "--memory", "64")
    assert status == 1 and out == ""
    assert "memory budget" in err and "bomb.parquet" in err
    assert digest(data) == before


# ---------------------------------------------------------------------- LIMIT
def test_a_limit_below_a_vector_is_weighed_exactly(tmp_path: Path) -> None:
    data = tmp_path / "short"
    data.mkdir()
    n = 20_000
    pq.write_table(pa.table({"id": [f"{i:07d}" for i in range(n)], "x": list(range(n))}),
                   data / "a.parquet", row_group_size=5000)
    before = digest(data)
    ds = ParquetDataset(data, memory=64)
    for limit in (1, 1800, 2047, 3000):
        got = ds.sql(f"SELECT id FROM dataset LIMIT {limit}")
        assert got.column("id").to_pylist() == [f"{i:07d}" for i in range(limit)]
    assert digest(data) == before


# ---------------------------------------------------------------------- storage options
@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("opts")
    yield server
    server.close()


@pytest.mark.parametrize("case", ["unknown", "unknown-nested", "malformed", "wrong-type"])
def test_unknown_or_malformed_storage_options_are_our_error_at_once(
    s3: S3Server, data: Path, tmp_path: Path, case: str
) -> None:
    before = digest(data)
    url = s3.upload(data, f"s3://opts/{case}")
    base = s3.options()
    options = {
        "unknown": {**base, "bogus_option": 1},
        "unknown-nested": {**base, "client_kwargs": {**base["client_kwargs"], "bogus": 1}},
        "malformed": {**base, "config_kwargs": "fast please"},
        "wrong-type": {**base, "endpoint_url": 5},
    }[case]
    # refused, not retried as a transient failure (which would end in a StorageError)
    with pytest.raises(ArgumentError, match=r"storage_options .*not retried"):
        ParquetDataset(url, storage_options=options, cache_dir=tmp_path / "c", memory=64)[0]
    assert digest(data) == before
