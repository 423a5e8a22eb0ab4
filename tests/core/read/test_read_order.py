"""A batch across windows reads the current window first: a shuffled epoch reads each once."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, ParquetDataset, collate
from undertale_duck.errors import MemoryBudgetWarning

WIDTH = 128


def _tokens(i: int) -> list[int]:
    return datagen.tokens(i, WIDTH)


def _write(directory: Path, sizes: list[int], group: int) -> int:
    return datagen.write_token_shards(directory, sizes, group=group, width=WIDTH)


def _ids(batch: Any) -> list[int]:
    if isinstance(batch, dict):  # collated torch rows
        ids = batch["id"].tolist()
        assert batch["tokens"].tolist() == [_tokens(i) for i in ids]
        return list(ids)
    for row in batch:  # python rows as they come
        assert row["tokens"] == _tokens(row["id"])
    return [row["id"] for row in batch]


@pytest.mark.parametrize("fmt", ["torch", "python"])
@pytest.mark.parametrize("memory", [0, 1])
def test_a_shuffled_epoch_reads_each_window_once_when_one_fits(
    tmp_path: Path, fmt: str, memory: int
) -> None:
    total = _write(tmp_path / "d", [700, 460, 530], group=300)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ParquetDataset(tmp_path / "d", memory=memory, window_bytes=48 << 10,
                            format=fmt)  # type: ignore[arg-type]
        windows = len(ds.windows)
        ds[0]
    # memory=1 is below what a read needs: said once, not raised
    assert [w.category for w in caught] == ([MemoryBudgetWarning] if memory else [])
    stats = ds.cache_stats
    largest = max(w.rows for w in ds.windows) * (WIDTH * 4 + 16)
    # the cache holds one window at most (none at memory=0): a batch across two windows
    # could evict the one it came from to read the other
    assert stats.limit < 2 * largest
    assert windows > 20
    reads = stats.misses
    sampler = ChunkedSampler(ds, 7, 0, shuffle=True, seed=3)  # 7: batches cross windows
    loader = DataLoader(ds, batch_size=7, sampler=sampler,
                        collate_fn=collate if fmt == "torch" else _rows)
    seen: list[int] = []
    crossing = 0
    for batch in loader:
        ids = _ids(batch)
        crossing += len({ds.window_of(i) for i in ids}) > 1
        seen.extend(ids)
    assert sorted(seen) == list(range(total)) and seen != sorted(seen)
    assert crossing > windows // 2  # batches that cross from one window into another
    # each window read once in the epoch (the first window at most twice: ds[0] read it)
    assert ds.cache_stats.misses - reads <= windows + 1
    assert ds.cache_stats.bytes <= ds.cache_stats.limit


def _rows(batch: list[Any]) -> list[Any]:
    return batch


def test_the_read_order_puts_the_current_window_first_and_keeps_the_rest_ascending(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "d", [600], group=100)
    ds = ParquetDataset(tmp_path / "d", memory=0, window_bytes=48 << 10, format="torch")
    starts = [w.offset for w in ds.windows]
    assert len(starts) >= 6
    reader = ds.reader
    assert reader.current is None and ds._read_order([0, 2, 5]) == [0, 1, 2]
    ds[starts[5]]  # window 5 read and held (memory=0 caches nothing)
    assert reader.current == 5
    assert ds._read_order([0, 2, 5]) == [2, 0, 1]
    assert ds._read_order([5]) == [0] and ds._read_order([2, 5]) == [1, 0]
    assert ds._read_order([1, 3]) == [0, 1]  # the current window not in the batch
    reads = ds.cache_stats.misses
    got = collate(ds.__getitems__([starts[2], starts[5] + 1]))
    assert got["id"].tolist() == [starts[2], starts[5] + 1]
    assert isinstance(got["tokens"], torch.Tensor)
    assert ds.cache_stats.misses == reads + 1  # window 5 served as held, 2 read
    # the window read last by that batch (2, after the held 5) is the one held now
    assert reader.current == 2
    assert ds[starts[2] + 3]["id"] == starts[2] + 3 and ds.cache_stats.misses == reads + 1
    assert ds[starts[5] + 3]["id"] == starts[5] + 3 and ds.cache_stats.misses == reads + 2
