"""The default budget is shared between a process's DataLoader workers; the plan is not.

Left at its default, ``memory`` is divided between the workers (as DuckDB's memory limit
is), with a floor; a budget given is each process's own. The window plan is cut in the
main process from the whole budget, so it, and the sampler's orders and resume states,
are the same for 0, 1 or 2 workers (the sampler hands each worker its own part of that
order, and a resumed epoch serves each row not yet consumed once). Every value is a
function of its global row index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader, Dataset

from undertale_duck import ChunkedSampler, ParquetDataset
from undertale_duck.core.dataset.arguments import WORKER_BUDGET_FLOOR, worker_budget

MIB = 1 << 20


def _write(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for k in range(3):
        rows = range(k * 700, (k + 1) * 700)
        table = pa.table({"i": pa.array(rows, pa.int64()),
                          "tokens": pa.array([[i % 97] * 40 for i in rows],
                                             pa.list_(pa.int32()))})
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=350)
    return root


class Probe(Dataset[tuple[int, int, int]]):
    """What a process's reader holds: its cache budget and its window plan's fingerprint."""

    def __init__(self, ds: ParquetDataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> tuple[int, int, int]:
        reader = self.ds.reader
        assert self.ds[index * 10]["i"] == index * 10
        plan = hash(tuple((w.shard, w.start, w.stop) for w in reader.windows))
        return index, reader.cache.budget, plan


def _probe(ds: ParquetDataset, workers: int) -> set[tuple[int, int]]:
    loader = DataLoader(Probe(ds), batch_size=None, num_workers=workers)
    return {(budget, plan) for _, budget, plan in loader}


@given(memory=st.integers(0, 1 << 40), workers=st.integers(0, 64))
def test_a_share_is_the_budget_divided_with_a_floor(memory: int, workers: int) -> None:
    share = worker_budget(memory, workers)
    assert share <= memory
    if workers <= 1 or memory == 0:
        assert share == memory
    else:
        assert share == max(memory // workers, min(memory, WORKER_BUDGET_FLOOR))


def test_the_default_budget_is_shared_between_workers(tmp_path: Path) -> None:
    root = _write(tmp_path / "d")
    ds = ParquetDataset(root, window_bytes=16 << 10)  # memory left at its default
    plan = hash(tuple((w.shard, w.start, w.stop) for w in ds.windows))
    assert ds.memory == 4096 and ds.memory_shared
    fresh = ParquetDataset(root, window_bytes=16 << 10)
    assert _probe(fresh, 2) == {(2048 * MIB, plan)}  # a reader built in each worker
    assert _probe(ds, 0) == {(4096 * MIB, plan)}
    assert _probe(ds, 2) == {(2048 * MIB, plan)}  # the parent's reader, shared on fork
    assert ds.reader.cache.budget == 4096 * MIB  # the parent keeps its own
    fresh.close()
    given_ = ParquetDataset(root, 4096, window_bytes=16 << 10)  # a budget given: per process
    assert not given_.memory_shared
    assert _probe(given_, 2) == {(4096 * MIB, plan)}
    ds.close()
    given_.close()


@pytest.mark.parametrize("shuffle", [False, True])
def test_orders_and_resume_states_do_not_depend_on_workers(
    tmp_path: Path, shuffle: bool
) -> None:
    root = _write(tmp_path / "d")
    seen: dict[int, Any] = {}
    for workers in (0, 1, 2):
        ds = ParquetDataset(root, format="torch", window_bytes=16 << 10)
        sampler = ChunkedSampler(ds, 32, workers, ranks=1, rank=0, shuffle=shuffle)
        sampler.set_epoch(3)
        rows: list[int] = []
        loader = DataLoader(ds, batch_size=32, sampler=sampler, num_workers=workers,
                            collate_fn=lambda b: b)
        for batch in loader:
            rows.extend(int(r["i"]) for r in batch)
        state = sampler.state_dict(consumed=4 * 32)
        resumed = ChunkedSampler(ds, 32, workers, ranks=1, rank=0, shuffle=shuffle)
        resumed.load_state_dict(state)
        rest = list(resumed)
        seen[workers] = (
            [w for w in ds.windows],
            list(sampler.sequence(3)),
            sorted(rows),
            {k: v for k, v in state.items() if k not in ("workers", "topology", "parts")},
            sorted(rows[:4 * 32] + rest) == list(range(len(ds))),  # resumed: each row once
        )
        assert sorted(rows) == list(range(len(ds)))
        assert torch.is_tensor(ds[0]["i"])
        ds.close()
    assert seen[0][:3] == seen[1][:3] == seen[2][:3]
    assert seen[0][3] == seen[1][3] == seen[2][3]
    assert seen[0][4] and seen[1][4] and seen[2][4]
