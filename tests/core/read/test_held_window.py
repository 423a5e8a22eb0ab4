"""A window the cache cannot keep (memory=0, or larger than the budget) is read once per pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, ParquetDataset, collate, load
from undertale_duck.errors import MemoryBudgetWarning

WIDTH = 16


def _tokens(i: int) -> list[int]:
    return datagen.tokens(i, WIDTH)


def _write(directory: Path, sizes: list[int], group: int, blob: int = 0) -> int:
    return datagen.write_token_shards(directory, sizes, group=group, width=WIDTH, blob=blob)


def _check_batch(batch: dict[str, object], expect_from: int) -> int:
    ids = batch["id"]
    assert isinstance(ids, torch.Tensor)
    n = len(ids)
    assert ids.tolist() == list(range(expect_from, expect_from + n))
    tokens = batch["tokens"]
    assert isinstance(tokens, torch.Tensor)
    assert tokens.tolist() == [_tokens(i) for i in range(expect_from, expect_from + n)]
    return n


@pytest.mark.parametrize("loader", ["DataLoader", "load"])
def test_memory_zero_reads_each_window_once_in_an_epoch(tmp_path: Path, loader: str) -> None:
    total = _write(tmp_path / "d", [150, 90, 211], group=40)
    ds = ParquetDataset(tmp_path / "d", memory=0, window_bytes=2048, format="torch")
    windows = len(ds.windows)
    assert windows > 10  # several batches of 7 rows in each window, batches across windows
    batches = (
        DataLoader(ds, batch_size=7, sampler=ChunkedSampler(ds, 7, 0), collate_fn=collate)
        if loader == "DataLoader" else load(ds, None, collate, 7)
    )
    for epoch in range(2):
        seen = 0
        for batch in batches:
            seen += _check_batch(batch, seen)
        assert seen == total
        stats = ds.cache_stats
        # each window decoded once an epoch (before: once per batch that touched it)
        assert stats.misses == windows * (epoch + 1)
        assert stats.entries == 0 and stats.bytes == 0  # nothing cached


def test_memory_zero_python_rows_in_order_and_back(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [120, 80], row_group_size=30)
    expected = datagen.expected(200)
    ds = ParquetDataset(tmp_path, memory=0, window_bytes=1024)
    windows = len(ds.windows)
    assert windows > 4
    assert [ds[i] for i in range(200)] == expected
    assert ds.cache_stats.misses == windows
    # back to an earlier window, then forward again: each switch is a read
    assert ds[5] == expected[5] and ds[199] == expected[199] and ds[5] == expected[5]
    assert ds.cache_stats.misses == windows + 3
    assert ds.cache_stats.entries == 0


def test_window_larger_than_the_budget_is_read_once_in_an_epoch(tmp_path: Path) -> None:
    blob = 64 << 10
    total = _write(tmp_path / "d", [96, 64], group=32, blob=blob)
    with pytest.warns(MemoryBudgetWarning):
        ds = ParquetDataset(tmp_path / "d", memory=1, window_bytes=4 << 20, format="torch")
        ds[0]  # the first read measures the rows and warns
    windows = len(ds.windows)
    assert windows == 5  # one row group each: about 2 MiB, twice the whole budget
    seen = 0
    for batch in DataLoader(ds, batch_size=5, sampler=ChunkedSampler(ds, 5, 0),
                            collate_fn=collate):
        for k, value in enumerate(batch["blob"]):
            assert value == bytes([(seen + k) % 251]) * blob
        seen += _check_batch(batch, seen)
    assert seen == total
    stats = ds.cache_stats
    # each window once (the first read by ds[0] above, still held when the epoch began)
    assert stats.misses == windows
    assert stats.oversized == windows and stats.entries == 0
    assert stats.bytes <= stats.limit


_ROOT: list[Path] = []


def _shared(factory: pytest.TempPathFactory) -> Path:
    if not _ROOT:
        root = factory.mktemp("held")
        datagen.write_shards(root, [70, 45, 85], row_group_size=20)
        _ROOT.append(root)
    return _ROOT[0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(-200, 199), min_size=1, max_size=12), min_size=1,
                max_size=25), st.sampled_from(["python", "numpy", "torch"]))
def test_memory_zero_serves_any_batches_right(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[int]], fmt: str
) -> None:
    root = _shared(tmp_path_factory)
    expected = datagen.expected(200)
    ds = ParquetDataset(root, memory=0, window_bytes=1024, format=fmt)  # type: ignore[arg-type]
    for indices in batches:
        rows = ds.__getitems__(indices)
        got = [{k: datagen.plain(v) for k, v in dict(r).items()} for r in rows]
        want = [expected[i] for i in indices]
        for g, w in zip(got, want, strict=True):
            assert g["id"] == w["id"] and g["tokens"] == w["tokens"] and g["blob"] == w["blob"]
        one = indices[-1]
        assert {k: datagen.plain(v) for k, v in dict(ds[one]).items()}["id"] == expected[one]["id"]
    assert ds.cache_stats.entries == 0
    ds.close()
