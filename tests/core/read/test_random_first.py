"""Uniform random batches over data larger than memory, with a disk tier: the first pass.

Each row group a batch touches is decoded once, whole, in the background, its windows
written to the disk tier as they are decoded (``WindowReader.want``); every row is checked.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset

TOKENS = 64
SHARDS = (1500, 2500, 900, 2100)
ROW_GROUP = 500


def rows(start: int, stop: int) -> pa.Table:
    """Rows ``start..stop-1``: every value a function of the global row index."""
    index = np.arange(start, stop, dtype=np.int64)
    tokens = ((index[:, None] * 31 + np.arange(TOKENS)[None, :]) % 1000).astype(np.int32)
    offsets = pa.array(np.arange(len(index) + 1, dtype=np.int32) * TOKENS)
    return pa.table({
        "id": pa.array([f"row-{i:08d}" for i in index.tolist()], pa.string()),
        "tokens": pa.ListArray.from_arrays(offsets, pa.array(tokens.ravel())),
        "label": pa.array(index % 7),
    })


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("random-first") / "data"
    root.mkdir()
    start = 0
    for k, size in enumerate(SHARDS):
        pq.write_table(rows(start, start + size), root / f"part-{k:05d}.parquet",
                       row_group_size=ROW_GROUP)
        start += size
    return root, start


def groups(root: Path) -> int:
    return sum(pq.ParquetFile(p).num_row_groups for p in sorted(root.glob("*.parquet")))


def check(batch: dict[str, Any], index: list[int]) -> None:
    want = np.asarray(index, dtype=np.int64)
    assert list(batch["id"]) == [f"row-{i:08d}" for i in index]
    assert torch.equal(batch["label"], torch.from_numpy(want % 7))
    tokens = (want[:, None] * 31 + np.arange(TOKENS)[None, :]) % 1000
    assert np.array_equal(batch["tokens"].numpy(), tokens.astype(np.int32))


def open_dataset(root: Path, disk_dir: str | Path) -> ParquetDataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a tight budget warns; what is checked is the rows
        return ParquetDataset(root, memory=1, window_bytes=40_000, format="torch",
                              columns=["id", "tokens", "label"], disk=64, disk_dir=disk_dir)


def test_random_batches_decode_each_group_once(data: tuple[Path, int], tmp_path: Path) -> None:
    from undertale_duck import collate

    root, total = data
    ds = open_dataset(root, tmp_path / "disk")
    assert ds.reader.planned_bytes > 1 << 20  # the data is larger than memory
    assert len(ds.windows) > groups(root)  # row groups are cut into several windows
    order = np.random.default_rng(3).permutation(total).tolist()
    for epoch in range(2):
        for start in range(0, total, 64):
            index = order[start:start + 64]
            check(collate(ds.__getitems__(index)), index)
        if epoch == 0:
            direct = ds.reader.direct
            assert direct is not None and direct.stats["fallback"] == 0
            # every row group decoded once, whole, by pyarrow (its string dictionary weighed
            # by its longest value), and every window written once
            assert direct.stats["streams"] == groups(root)
            stats = ds.disk_stats
            assert stats is not None and stats.writes == len(ds.windows)
            assert ds.reader.read_ahead_stats["scheduled"] > 0  # groups read in the background
    stats = ds.disk_stats
    assert stats is not None and stats.writes == len(ds.windows)  # nothing decoded again
    ds.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_batches_give_their_rows(data: tuple[Path, int], draw: st.DataObject) -> None:
    from undertale_duck import collate

    root, total = data
    with tempfile.TemporaryDirectory() as disk:
        ds = open_dataset(root, disk)
        try:
            for _ in range(draw.draw(st.integers(1, 4))):
                index = draw.draw(st.lists(st.integers(0, total - 1), min_size=1, max_size=96))
                check(collate(ds.__getitems__(index)), index)
                ds[index[0]]  # single rows mix with batches
            stats = ds.disk_stats
            assert stats is not None and stats.writes <= len(ds.windows)
        finally:
            ds.close()
