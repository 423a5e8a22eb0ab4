from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from support.datagen import plain
from torch.utils.data import DataLoader

from undertale_duck import ArgumentError, ParquetDataset
from undertale_duck.core.rows import RowBatch
from undertale_duck.training.collate import collate


def fixed_table(start: int, stop: int) -> pa.Table:
    rows = range(start, stop)
    return pa.table({
        "id": [f"f{i}" for i in rows],
        "tokens": pa.array([[(i * 7 + k) % 100 for k in range(8)] for i in rows],
                           pa.list_(pa.int32())),
        "fixed": pa.array([[i % 2, 1, 0] for i in rows], pa.list_(pa.int8(), 3)),
        "u": pa.array([i for i in rows], pa.uint32()),
        "flag": pa.array([i % 3 == 0 for i in rows], pa.bool_()),
        "maybe": pa.array([None if i % 4 == 1 else [float(i)] * (i % 3) for i in rows],
                          pa.list_(pa.float32())),
        "holes": pa.array([[i, None] if i % 5 == 0 else [i] for i in rows],
                          pa.list_(pa.int64())),
        "half": pa.array([None if i % 6 == 0 else i for i in rows], pa.int16()),
    })


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("fixed")
    start = 0
    for k, size in enumerate([50, 30, 45]):
        pq.write_table(fixed_table(start, start + size), root / f"part-{k}.parquet",
                       row_group_size=10)
        start += size
    return root, start


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_values_equal_as_py(uneven: tuple[Path, int], fmt: str) -> None:
    root, total = uneven
    ds = ParquetDataset(root, format=fmt, window_bytes=2000)
    expected = datagen.expected(total)
    rows = ds.__getitems__(list(range(total)))
    assert [{k: plain(v) for k, v in r.items()} for r in rows] == expected
    array = np.ndarray if fmt == "numpy" else torch.Tensor
    row = ds[33]
    assert isinstance(row["tokens"], array) and row["tokens"].dtype in (np.int32, torch.int32)
    assert isinstance(row["label"], np.int64 if fmt == "numpy" else torch.Tensor)
    assert row["score"] is None and ds[34]["score"] == 34 / 4
    assert row["id"] == "row-00000033" and isinstance(row["point"], dict)
    assert {k: plain(v) for k, v in ds[-1].items()} == expected[-1]


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_shuffled_repeated_and_negative_indices(uneven: tuple[Path, int], fmt: str) -> None:
    root, total = uneven
    ds = ParquetDataset(root, format=fmt, window_bytes=3000)
    expected = datagen.expected(total)
    rng = random.Random(5)
    indices = [rng.randrange(-total, total) for _ in range(120)] + [3, 3, 3]
    rows = ds.__getitems__(indices)
    assert [plain(r["tokens"]) for r in rows] == [expected[i]["tokens"] for i in indices]
    assert [r["id"] for r in rows] == [expected[i]["id"] for i in indices]
    assert ds.__getitems__(np.array([5, 1], dtype=np.int32))[1]["id"] == "row-00000001"
    assert ds.__getitems__(torch.tensor([7]))[0]["id"] == "row-00000007"
    assert ds.__getitems__([]) == []
    with pytest.raises(IndexError, match=str(total)):
        ds.__getitems__([0, total])
    with pytest.raises(TypeError):
        ds.__getitems__([0, 1.5])
    with pytest.raises(TypeError):
        ds.__getitems__([True])


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_fixed_lengths_nulls_and_unsigned(fixed: tuple[Path, int], fmt: str) -> None:
    root, total = fixed
    ds = ParquetDataset(root, format=fmt, window_bytes=1000)
    expected = pq.read_table(root).to_pylist()
    indices = [*range(5, 40), 99, 2, 124]
    rows = ds.__getitems__(indices)
    assert isinstance(rows, RowBatch)
    assert [{k: plain(v) for k, v in r.items()} for r in rows] == [expected[i] for i in indices]
    assert rows[0]["holes"] == [5, None]  # a list holding a null keeps as_py values
    assert rows[4]["maybe"] is None and rows[1]["half"] is None and plain(rows[2]["half"]) == 7
    assert rows[1]["u"].dtype in (np.uint32, torch.int64)
    batch = collate(rows)
    assert batch["tokens"].shape == (len(indices), 8) and batch["tokens"].dtype == torch.int32
    assert batch["tokens"].tolist() == [expected[i]["tokens"] for i in indices]
    assert batch["fixed"].tolist() == [expected[i]["fixed"] for i in indices]
    assert batch["u"].tolist() == indices and batch["u"].dtype == torch.int64
    assert batch["flag"].dtype == torch.bool
    assert batch["half"] == [expected[i]["half"] for i in indices]  # nulls: kept as a list
    assert "maybe_mask" not in batch  # a null list: kept as a list, not padded
    assert [plain(v) for v in batch["maybe"]] == [expected[i]["maybe"] for i in indices]


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_values_do_not_share_memory_with_the_cache(fixed: tuple[Path, int], fmt: str) -> None:
    root, _ = fixed
    ds = ParquetDataset(root, format=fmt)
    before = plain(ds[3]["tokens"])
    rows = ds.__getitems__([2, 3, 4])
    rows[1]["tokens"][:] = 0
    batch = collate(rows)
    batch["tokens"][:] = -1
    assert plain(ds[3]["tokens"]) == before
    assert plain(ds.__getitems__([3])[0]["tokens"]) == before


def test_format_is_checked_and_python_is_the_default(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    with pytest.raises(ArgumentError, match="format"):
        ParquetDataset(root, format="pandas")  # type: ignore[arg-type]
    ds = ParquetDataset(root)
    assert ds.format == "python"
    rows = ds.__getitems__([4, 1])
    assert type(rows) is list and rows == [datagen.expected(total)[i] for i in (4, 1)]
    assert isinstance(rows[0]["tokens"], list)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 549), max_size=40), st.sampled_from(["python", "numpy", "torch"]))
def test_getitems_matches_getitem(
    uneven: tuple[Path, int], indices: list[int], fmt: str
) -> None:
    ds = _shared_ds(uneven[0], fmt)
    total = len(ds)
    indices = [i % total for i in indices]
    expected = _expected(total)
    assert [{k: plain(v) for k, v in r.items()} for r in ds.__getitems__(indices)] == [
        expected[i] for i in indices
    ]


_CACHE: dict[str, Any] = {}


def _expected(total: int) -> list[dict[str, Any]]:
    if "expected" not in _CACHE:
        _CACHE["expected"] = datagen.expected(total)
    return _CACHE["expected"]  # type: ignore[no-any-return]


def _shared_ds(root: Path, fmt: str) -> ParquetDataset:
    if fmt not in _CACHE:
        _CACHE[fmt] = ParquetDataset(root, format=fmt, window_bytes=4000)  # type: ignore[arg-type]
    return _CACHE[fmt]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- read-ahead

def test_sequential_reads_ahead(fixed: tuple[Path, int]) -> None:
    root, total = fixed
    ds = ParquetDataset(root, format="torch", window_bytes=1000)
    assert len(ds.windows) > 5
    loader = DataLoader(ds, batch_size=7, collate_fn=collate)
    ids = []
    for batch in loader:
        ids += batch["id"]
        ds.reader.ahead.settle()  # the next window is read before it is asked for: no race
    assert ids == [f"f{i}" for i in range(total)]
    stats = ds.reader.read_ahead_stats
    assert stats["read"] >= 1
    cache = ds.cache_stats
    assert cache.misses + stats["read"] >= len(ds.windows)
    assert cache.misses < len(ds.windows)  # some windows came from the background


def test_prefetch_hint_follows_a_shuffled_window_order(fixed: tuple[Path, int]) -> None:
    root, total = fixed
    ds = ParquetDataset(root, format="numpy", window_bytes=1000)
    order = list(range(len(ds.windows)))
    random.Random(3).shuffle(order)
    ds.prefetch(order)
    expected = pq.read_table(root).to_pylist()
    seen = []
    for position in order:
        w = ds.windows[position]
        rows = ds.__getitems__(list(range(w.offset, w.end))[::-1])
        seen += [r["id"] for r in rows]
        assert ds.window_of(w.offset) == position
        ds.reader.ahead.settle()  # the hinted windows are read now, not whenever a thread runs
    assert sorted(seen) == sorted(r["id"] for r in expected)
    assert ds.reader.read_ahead_stats["read"] >= 1
    assert ds.cache_stats.misses < len(order)
    with pytest.raises(IndexError, match="window position"):
        ds.prefetch([0, len(ds.windows)])
    # int() read 1.5 and True as window 1 and "10" as windows 1 and 0: hints for other windows
    for bad in ([1.5], [True], [0, None], np.zeros((2, 2), dtype=np.int64), [torch.tensor(1.0)]):
        with pytest.raises(TypeError, match="prefetch: window positions must be integers"):
            ds.prefetch(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prefetch takes a list of window positions"):
        ds.prefetch("10")  # type: ignore[arg-type]
    ds.prefetch(np.array([1, 0]))
    assert ds._order == [1, 0]
    ds.prefetch(None)


def test_read_ahead_stays_within_the_memory_budget(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    window = ParquetDataset(root, window_bytes=2500)
    sizes = []
    for position in range(len(window.windows)):
        sizes.append(window.reader.window(position).get_total_buffer_size())
    limit_mb = 2.2 * max(sizes) / (1 << 20)
    ds = ParquetDataset(root, memory=limit_mb, window_bytes=2500, format="torch")
    expected = datagen.expected(total)
    for start in range(0, total, 9):
        rows = ds.__getitems__(list(range(start, min(start + 9, total))))
        assert [r["id"] for r in rows] == [e["id"] for e in expected[start:start + 9]]
        assert ds.cache_stats.bytes <= ds.cache_stats.limit
    assert ds.cache_stats.evictions > 0
    tiny = ParquetDataset(root, memory=1.5 * max(sizes) / (1 << 20), window_bytes=2500)
    for start in range(0, total, 50):
        assert tiny[start]["id"] == expected[start]["id"]
    assert tiny.reader.read_ahead_stats["read"] == 0  # two windows never fit side by side


def test_read_ahead_off(fixed: tuple[Path, int]) -> None:
    root, total = fixed
    ds = ParquetDataset(root, window_bytes=1, read_ahead=False)
    assert [ds[i]["id"] for i in range(total)] == [f"f{i}" for i in range(total)]
    assert ds.reader.read_ahead_stats["scheduled"] == 0
    assert ds.cache_stats.misses == len(ds.windows)


def test_fork_workers_while_reading_ahead(fixed: tuple[Path, int]) -> None:
    root, total = fixed
    ds = ParquetDataset(root, format="torch", window_bytes=1000)
    ds.prefetch(list(range(len(ds.windows)))[::-1])  # background reads start in the parent
    assert ds[0]["id"] == "f0"
    for _ in range(2):
        loader = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=collate,
                            multiprocessing_context="fork")
        ids = [i for batch in loader for i in batch["id"]]
        assert ids == [f"f{i}" for i in range(total)]
    assert ds[total - 1]["id"] == f"f{total - 1}"
    ds.close()
    assert ds[5]["id"] == "f5"


def test_threads_share_one_dataset(fixed: tuple[Path, int]) -> None:
    root, total = fixed
    ds = ParquetDataset(root, format="torch", window_bytes=1, memory=1)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(40):
                start = rng.randrange(total - 8)
                rows = ds.__getitems__(list(range(start, start + 8)))
                assert [r["id"] for r in rows] == [f"f{i}" for i in range(start, start + 8)]
                assert ds[start]["u"].item() == start
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --------------------------------------------------------------------------- DuckDB settings

class _Settings(torch.utils.data.Dataset[dict[str, Any]]):
    def __init__(self, ds: ParquetDataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> dict[str, Any]:
        sql = "SELECT current_setting('threads') AS t, current_setting('memory_limit') AS m"
        return self.ds.sql(sql).to_pylist()[0]  # type: ignore[no-any-return]


def test_worker_duckdb_config() -> None:
    from undertale_duck.core.runtime.duck import default_duckdb_config, worker_duckdb_config

    assert worker_duckdb_config(2, cpus=2, ram_bytes=10 << 30) == {
        "threads": 1, "memory_limit": f"{int((10 << 30) * 0.8) // 2 >> 20}MB"}
    assert worker_duckdb_config(1, cpus=16, ram_bytes=1 << 30)["threads"] == 2
    assert worker_duckdb_config(8, cpus=4, ram_bytes=1 << 30) == {
        "threads": 1, "memory_limit": "256MB"}
    assert default_duckdb_config()["enable_external_file_cache"] is False


def test_workers_get_their_share_unless_configured(fixed: tuple[Path, int]) -> None:
    from undertale_duck.core.runtime.duck import worker_duckdb_config

    root, _ = fixed
    loader = DataLoader(_Settings(ParquetDataset(root)), batch_size=None, num_workers=2)
    seen = list(loader)
    expected = worker_duckdb_config(2)
    assert all(int(s["t"]) == expected["threads"] for s in seen)
    mine = ParquetDataset(root, duckdb_config={"threads": 1, "memory_limit": "300MB"})
    seen = list(DataLoader(_Settings(mine), batch_size=None, num_workers=2))
    assert all(int(s["t"]) == 1 for s in seen)
    assert all(s["m"].startswith("286") for s in seen)  # 300 MB, shown in MiB


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_equal_length_rows_of_a_ragged_window(uneven: tuple[Path, int], fmt: str) -> None:
    root, total = uneven
    ds = ParquetDataset(root, format=fmt)
    expected = datagen.expected(total)
    for indices in ([3, 8, 13, 18], [18, 3, 13], [5, 10, 15], [6, 7, 8]):
        rows = ds.__getitems__(indices)
        assert [plain(r["tokens"]) for r in rows] == [expected[i]["tokens"] for i in indices]
        batch = collate(rows)
        width = {len(expected[i]["tokens"]) for i in indices}
        if len(width) == 1:
            assert batch["tokens"].tolist() == [expected[i]["tokens"] for i in indices]
        else:
            assert batch["tokens_mask"].sum().item() == sum(len(expected[i]["tokens"])
                                                            for i in indices)
