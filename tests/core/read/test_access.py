from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, ParquetDataset, RandomAccessWarning, collate
from undertale_duck.core.read import access

TOTAL = 2400


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("access")
    datagen.write_shards(root, [800, 800, 800], row_group_size=40)
    return root


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a process that has not warned yet (the warning is once a process)."""
    monkeypatch.setattr(access, "_warned", False)


def small(root: Path, **kwargs: object) -> ParquetDataset:
    """Windows of ~40 rows and a budget that keeps about one of them."""
    return ParquetDataset(root, memory=0.02, window_bytes=6000, format="torch",
                          read_ahead=False, **kwargs)  # type: ignore[arg-type]


def epoch(loader: DataLoader[object], batches: int) -> int:
    rows = 0
    for k, batch in enumerate(loader):
        rows += len(batch["label"])
        if k + 1 == batches:
            break
    return rows


def caught(run: object) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run()  # type: ignore[operator]
    return [w for w in seen if issubclass(w.category, RandomAccessWarning)]


def test_uniform_random_access_over_the_budget_warns_once(data: Path) -> None:
    ds = small(data)
    assert len(ds) / len(ds.windows) >= 8
    torch.manual_seed(0)
    loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate)
    seen = caught(lambda: epoch(loader, 20))
    assert len(seen) == 1
    text = str(seen[0].message)
    for hint in ("uniform random", "ChunkedSampler", "shuffle=True", "mix=", "disk=", "memory"):
        assert hint in text
    assert access.warned()
    again = small(data)  # a second dataset in the same process does not warn again
    assert caught(lambda: epoch(DataLoader(again, batch_size=8, shuffle=True,
                                           collate_fn=collate), 20)) == []


def test_single_rows_in_random_order_warn_too(data: Path) -> None:
    ds = small(data)
    order = torch.randperm(len(ds), generator=torch.Generator().manual_seed(1)).tolist()
    assert len(caught(lambda: [ds[i] for i in order[:150]])) == 1


def test_sequential_and_chunked_orders_do_not_warn(data: Path) -> None:
    ds = small(data)
    assert caught(lambda: epoch(DataLoader(ds, batch_size=8, collate_fn=collate), 10**6)) == []
    sampler = ChunkedSampler(ds, 8, 0, shuffle=True)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, collate_fn=collate)
    assert caught(lambda: epoch(loader, 10**6)) == []
    assert ds.cache_stats.evictions > 0  # the data did not fit: only the order differs
    assert not access.warned()


def test_random_access_within_the_budget_does_not_warn(data: Path) -> None:
    ds = ParquetDataset(data, memory=64, window_bytes=6000, format="torch")
    torch.manual_seed(0)
    loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate)
    assert caught(lambda: epoch(loader, 10**6)) == []
    assert ds.cache_stats.evictions == 0


def test_random_access_with_the_disk_tier_does_not_warn(data: Path, tmp_path: Path) -> None:
    ds = small(data, disk=16, disk_dir=tmp_path / "cache")
    torch.manual_seed(0)
    loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate)
    assert caught(lambda: epoch(loader, 10**6)) == []
    assert ds.cache_stats.misses == len(ds.windows)  # each window decoded once
