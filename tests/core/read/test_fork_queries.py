"""Queries left open on row groups never reach a forked DataLoader worker."""

from __future__ import annotations

import os
import time
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader

from undertale_duck import ParquetDataset, collate


@pytest.mark.parametrize("read_ahead", [False, True])
def test_workers_forked_after_reads_by_range_deliver_the_epoch(
        tmp_path: Path, read_ahead: bool) -> None:
    # windows read by range are DuckDB queries left open on their row group; each holds a
    # cursor that keeps the database alive past the connection's close before fork(), and
    # a worker dropping the parent's hung in the database's destructor (forever, without
    # the DataLoader's timeout)
    fs = fsspec.filesystem("memory")
    root = f"memory://fork-queries-{os.getpid()}-{time.monotonic_ns()}"
    (tmp_path / "src").mkdir()
    for k in range(3):
        ids = np.arange(k * 1000, (k + 1) * 1000)
        pq.write_table(pa.table({"id": ids, "name": [f"row-{i}" for i in ids]}),
                       tmp_path / "src" / f"p{k}.parquet", row_group_size=250)
        fs.pipe(f"{root}/p{k}.parquet", (tmp_path / "src" / f"p{k}.parquet").read_bytes())
    try:
        ds = ParquetDataset(root + "/", memory=1, window_bytes=4000, read_ahead=read_ahead,
                            cache_dir=tmp_path / "cache", format="torch")
        for i in np.random.default_rng(0).permutation(len(ds))[:30].tolist():
            assert ds[i]["name"] == f"row-{i}"
        assert ds.reader.decoder.stream_stats["streams"] > 0  # queries left open
        loader = DataLoader(ds, batch_size=64, num_workers=2, timeout=120, collate_fn=collate,
                            multiprocessing_context="fork")
        ids = torch.cat([batch["id"] for batch in loader])
        assert ids.tolist() == list(range(3000))
        assert ds[2999]["name"] == "row-2999"  # the parent reads on after the fork
    finally:
        fs.rm(root, recursive=True)
