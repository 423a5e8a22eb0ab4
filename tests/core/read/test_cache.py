"""The window cache as a plain byte-bounded LRU (no reserve), and a dataset's cache bound."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck import ParquetDataset
from undertale_duck.core.read.cache import WindowCache, table_bytes


def _table(n: int) -> pa.Table:
    return pa.table({"x": pa.array(range(n), pa.int64())})


@settings(deadline=None)
@given(st.integers(0, 5000), st.lists(st.tuples(st.integers(0, 20), st.integers(0, 400)),
                                      max_size=60))
def test_cache_never_exceeds_limit(limit: int, ops: list[tuple[int, int]]) -> None:
    cache = WindowCache(limit)
    assert (cache.budget, cache.limit, cache.reserve, cache.held) == (limit, limit, 0, 0)
    model: OrderedDict[int, int] = OrderedDict()  # key -> bytes, least recently used first
    evictions = 0
    for key, n in ops:
        table = _table(n)
        got = cache.get(key)
        assert (got is not None) == (key in model)
        if got is not None:
            model.move_to_end(key)
        else:
            size = table_bytes(table)
            kept = cache.put(key, table)
            assert kept == (limit > 0 and size <= limit)
            if kept:
                while sum(model.values()) + size > limit:
                    model.popitem(last=False)
                    evictions += 1
                model[key] = size
        stats = cache.stats()
        assert stats.bytes == cache.held == sum(model.values()) <= limit
        assert cache.keys() == list(model)  # the same least recently used order
        assert stats.entries == len(cache) == len(model)
        assert stats.evictions == evictions
    stats = cache.stats()
    assert stats.hits + stats.misses == len(ops)


def test_cache_is_lru() -> None:
    one = table_bytes(_table(100))
    cache = WindowCache(2 * one)
    cache.put("a", _table(100))
    cache.put("b", _table(100))
    assert cache.get("a") is not None  # a is now most recent
    cache.put("c", _table(100))
    assert "b" not in cache and "a" in cache and "c" in cache
    assert cache.stats().evictions == 1
    assert cache.keys() == ["a", "c"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 599), min_size=1, max_size=200), st.integers(1, 64))
def test_dataset_cache_bound_under_access_patterns(tmp_path_factory: object,
                                                  indices: list[int], kib: int) -> None:
    root = _dataset(tmp_path_factory)
    ds = ParquetDataset(root, memory=kib / 1024, window_bytes=4096)
    expected = _expected()
    for i in indices:
        assert ds[i] == expected[i]
        assert ds.cache_stats.bytes <= kib * 1024


_ROOT: list[Path] = []
_EXPECTED: list[list[dict[str, object]]] = []


def _dataset(factory: object) -> Path:
    if not _ROOT:
        root = factory.mktemp("cachebound")  # type: ignore[attr-defined]
        datagen.write_shards(root, [200, 150, 250], row_group_size=25)
        _ROOT.append(root)
    return _ROOT[0]


def _expected() -> list[dict[str, object]]:
    if not _EXPECTED:
        _EXPECTED.append(datagen.expected(600))
    return _EXPECTED[0]


def test_window_larger_than_limit_is_served_not_kept(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [300], row_group_size=300)
    ds = ParquetDataset(tmp_path, memory=0.001, window_bytes=1 << 20)  # one window > 1 KB
    assert ds[299]["id"] == "row-00000299"
    assert ds[0]["id"] == "row-00000000"
    stats = ds.cache_stats
    # not cached, but held while it is used: read once (test_held_window.py)
    assert stats.entries == 0 and stats.oversized == 1 and stats.misses == 1
