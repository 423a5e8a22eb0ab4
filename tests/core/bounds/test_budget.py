"""The memory budget: touched bytes, the read reserve, WindowCache and MemoryBudgetWarning."""

from __future__ import annotations

import random
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck import MemoryBudgetWarning, ParquetDataset
from undertale_duck.core.read import reader as readermod
from undertale_duck.core.read.cache import WindowCache, table_bytes
from undertale_duck.core.read.readahead import usable_cores
from undertale_duck.core.source import windows as win

FB = win.FALLBACK_ROW_BYTES
#: ``memory`` is megabytes and may be fractional, though ``ParquetDataset`` annotates it ``int``.
HALF_MB: Any = 0.5

# ---------------------------------------------------------------------------- data

SCHEMA = pa.schema([("idx", pa.int64()), ("tokens", pa.list_(pa.int32())), ("text", pa.string())])


def _row(g: int, tok_mod: int) -> dict[str, object]:
    """Every value is a function of the global row index ``g``."""
    return {
        "idx": g,
        "tokens": [(g * 31 + j) % 100_000 - 50_000 for j in range(g % tok_mod)],
        "text": f"r{g:06d}-" + "abcdefghij"[g % 10] * (g % 41),
    }


def _table(start: int, stop: int, tok_mod: int) -> pa.Table:
    rows = [_row(g, tok_mod) for g in range(start, stop)]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _write(root: Path, layout: list[list[int]], tok_mod: int) -> list[dict[str, object]]:
    """Write one shard per entry of ``layout``, one row group per size; return all rows."""
    g = 0
    for k, groups in enumerate(layout):
        with pq.ParquetWriter(root / f"part-{k:05d}.parquet", SCHEMA) as writer:
            for rows in groups:
                writer.write_table(_table(g, g + rows, tok_mod), row_group_size=max(rows, 1))
                g += rows
    return [_row(i, tok_mod) for i in range(g)]


def _cache(ds: ParquetDataset) -> WindowCache:
    cache = ds.reader.cache
    assert isinstance(cache, WindowCache)
    return cache


def _check_bound(ds: ParquetDataset) -> None:
    stats = ds.cache_stats
    cache = _cache(ds)
    assert stats.bytes <= stats.limit
    assert stats.limit + cache.reserve == ds.memory_bytes == cache.budget


def _shuffled_pass(
    ds: ParquetDataset,
    expected: list[dict[str, object]],
    seed: int,
    batch: int = 37,
    singles: bool = True,
) -> None:
    """Visit every row once in a random order: batches via __getitems__, some via ds[i]."""
    rng = random.Random(seed)
    order = list(range(len(expected)))
    rng.shuffle(order)
    for k in range(0, len(order), batch):
        chunk = order[k : k + batch]
        if singles and (k // batch) % 3 == 2:
            for i in chunk:
                assert ds[i] == expected[i]
                _check_bound(ds)
        else:
            assert list(ds.__getitems__(chunk)) == [expected[i] for i in chunk]
            _check_bound(ds)


def _floor(reader: readermod.WindowReader) -> int:
    rows = max(w.rows for w in reader.windows)
    return int(rows * reader.row_bytes) + 1


# ---------------------------------------------------------------------------- 1. touched_bytes

GROUPS = [(100, 1000), (0, 777), (50, 0), (200, 4000)]  # rows 0-100, -, 100-150, 150-350


@pytest.mark.parametrize(
    ("start", "stop", "expected"),
    [
        (10, 20, 1000),  # inside one group: that whole group
        (0, 100, 1000),  # exactly one group; the empty group at row 100 is not touched
        (99, 101, 1000 + 50 * FB),  # spans two groups; the 0-row group between is skipped
        (100, 150, 50 * FB),  # only the group without a recorded size: fallback per row
        (100, 101, 50 * FB),
        (140, 160, 50 * FB + 4000),
        (200, 300, 4000),
        (349, 350, 4000),
        (0, 350, 1000 + 50 * FB + 4000),  # the whole shard
    ],
)
def test_touched_bytes_examples(start: int, stop: int, expected: int) -> None:
    assert win.touched_bytes(win.Window(0, start, stop, start), GROUPS) == expected


def test_touched_bytes_ignores_other_shards_offsets_and_trailing_empty_groups() -> None:
    groups = [(0, 10), (0, 0), (30, 300), (0, 999)]
    # offset (global position) plays no part; only local rows do
    assert win.touched_bytes(win.Window(5, 0, 30, 12345), groups) == 300
    assert win.touched_bytes(win.Window(5, 29, 30, 0), groups) == 300


def test_max_touched_bytes_examples() -> None:
    shards = [GROUPS, [(10, 0)], []]
    windows = [
        win.Window(0, 0, 50, 0),
        win.Window(0, 50, 120, 50),
        win.Window(0, 120, 350, 120),
        win.Window(1, 0, 10, 350),
    ]
    assert win.max_touched_bytes(windows, shards) == 50 * FB + 4000
    assert win.max_touched_bytes(windows[:2], shards) == 1000 + 50 * FB
    assert win.max_touched_bytes(windows[3:], shards) == 10 * FB
    assert win.max_touched_bytes([], shards) == 0
    assert win.max_touched_bytes([], []) == 0


def test_read_reserve_formula() -> None:
    assert win.read_reserve(10, 2.5, 100, 7) == 50 + 200 + 7
    assert win.read_reserve(3, 0.5, 0, 0) == 3
    assert win.read_reserve(0, 1000.0, 11, 5) == 27
    assert win.read_reserve(7, 1 / 3, 0, 0) == int(14 / 3)


# ---------------------------------------------------------------------------- 2. plan invariants

_groups = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 5000)), max_size=7)
_layouts = st.lists(_groups, max_size=5)


def _size(rows: int, nbytes: int) -> int:
    return nbytes if nbytes > 0 else rows * FB


def _bounds(groups: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``(first row, end row, counted bytes)`` of each non-empty row group."""
    out, local = [], 0
    for rows, nbytes in groups:
        if rows > 0:
            out.append((local, local + rows, _size(rows, nbytes)))
        local += rows
    return out


@settings(max_examples=100, deadline=None)
@given(_layouts, st.integers(1, 20_000))
def test_max_touched_bytes_matches_brute_force(
    shards: list[list[tuple[int, int]]], target: int
) -> None:
    plan = win.plan(shards, target)
    touched = [win.touched_bytes(w, shards[w.shard]) for w in plan]
    assert win.max_touched_bytes(plan, shards) == max(touched, default=0)
    for w, t in zip(plan, touched, strict=True):
        bounds = _bounds(shards[w.shard])
        inside = sum(s for a, b, s in bounds if w.start <= a and b <= w.stop)
        overlapping = sum(s for a, b, s in bounds if a < w.stop and w.start < b)
        assert t >= inside
        assert t == overlapping
        assert t > 0  # a window has rows, so it overlaps a non-empty group
    # every non-empty row group is decoded by some window
    for k, groups in enumerate(shards):
        shard_touched = sum(t for w, t in zip(plan, touched, strict=True) if w.shard == k)
        assert shard_touched >= sum(s for _, _, s in _bounds(groups))


@settings(max_examples=100, deadline=None)
@given(_layouts, st.data())
def test_touched_bytes_of_arbitrary_windows(
    shards: list[list[tuple[int, int]]], data: st.DataObject
) -> None:
    """Any row range, not only planned ones: max_touched_bytes agrees with brute force."""
    windows = []
    for k, groups in enumerate(shards):
        total = sum(r for r, _ in groups)
        if total == 0:
            continue
        for _ in range(data.draw(st.integers(0, 3))):
            start = data.draw(st.integers(0, total - 1))
            stop = data.draw(st.integers(start + 1, total))
            windows.append(win.Window(k, start, stop, 0))
    touched = [win.touched_bytes(w, shards[w.shard]) for w in windows]
    assert win.max_touched_bytes(windows, shards) == max(touched, default=0)


# ---------------------------------------------------------------------------- 3. WindowCache

_tables: dict[int, pa.Table] = {}


def _fake(rows: int) -> pa.Table:
    if rows not in _tables:
        _tables[rows] = pa.table({"x": pa.array(range(rows), pa.int64())})
    return _tables[rows]


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), st.integers(-100, 4000), st.integers(0, 4000)),
        st.tuples(st.just("put"), st.integers(0, 7), st.integers(0, 80)),
        st.tuples(st.just("room"), st.integers(0, 1500), st.integers(-1, 7)),
        st.tuples(st.just("get"), st.integers(0, 7), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3000), _ops)
def test_budget_cache_against_a_model(budget: int, ops: list[tuple[str, int, int]]) -> None:
    cache = WindowCache(budget)
    assert (cache.budget, cache.limit, cache.reserve) == (budget, budget, 0)
    model: OrderedDict[int, int] = OrderedDict()  # key -> bytes, least recently used first
    limit, floor = budget, 0
    evictions = oversized = 0

    def trim(nbytes: int, keep: int | None) -> None:
        nonlocal evictions
        while sum(model.values()) + nbytes > limit and len(model) > (1 if keep in model else 0):
            model.popitem(last=False)
            evictions += 1

    for op, a, b in ops:
        if op == "reserve":
            cache.set_reserve(a, floor=b)
            floor = b
            limit = max(budget - max(a, 0), min(budget, b))
            trim(0, None)
        elif op == "put":
            table = _fake(b)
            size = table_bytes(table)
            fits = limit > 0 and size <= limit
            assert cache.put(a, table) is fits
            if fits:
                model.pop(a, None)
                trim(size, None)
                model[a] = size
                assert a in cache
            else:
                oversized += 1
        elif op == "room":
            keep = None if b < 0 else b
            held = keep is not None and keep in cache
            if keep is not None and keep in model:
                model.move_to_end(keep)
            trim(a, keep)
            assert cache.make_room(a, keep) is (sum(model.values()) + a <= limit)
            if held:
                assert keep in cache  # the window being consumed is never evicted for room
        else:
            got = cache.get(a)
            if a in model:
                model.move_to_end(a)
                assert got is not None and table_bytes(got) == model[a]
            else:
                assert got is None
        stats = cache.stats()
        assert stats.bytes == cache.held == sum(model.values()) <= cache.limit
        assert cache.keys() == list(model)  # same evictions, same LRU order
        assert cache.limit + cache.reserve == budget
        assert cache.limit == limit
        assert cache.limit >= min(budget, floor)
        assert stats.limit == cache.limit
        assert stats.evictions == evictions
        assert stats.oversized == oversized


def test_set_reserve_floor_and_eviction_order() -> None:
    one = table_bytes(_fake(10))  # 80 bytes
    cache = WindowCache(4 * one)
    for k in range(4):
        assert cache.put(k, _fake(10))
    assert cache.get(0) is not None  # 0 is now most recently used
    cache.set_reserve(2 * one)
    assert (cache.limit, cache.reserve) == (2 * one, 2 * one)
    assert cache.keys() == [3, 0]  # least recently used first: 1, then 2
    cache.set_reserve(10 * one, floor=one)  # the reserve alone would leave nothing
    assert (cache.limit, cache.reserve) == (one, 3 * one)
    assert cache.keys() == [0]
    cache.set_reserve(10 * one, floor=100 * one)  # the floor is capped by the budget
    assert (cache.limit, cache.reserve) == (4 * one, 0)
    assert not cache.put("big", _fake(41))  # larger than the share
    assert cache.stats().oversized == 1
    cache.set_reserve(0)
    assert (cache.limit, cache.reserve) == (4 * one, 0)


def test_make_room_keeps_the_consumed_window() -> None:
    one = table_bytes(_fake(10))
    cache = WindowCache(3 * one)
    for k in range(3):
        cache.put(k, _fake(10))
    # key 0 is least recently used, but it is the one being consumed
    assert cache.make_room(2 * one, keep=0)
    assert cache.keys() == [0]
    assert not cache.make_room(3 * one, keep=0)  # does not fit beside it: kept anyway
    assert 0 in cache
    assert cache.make_room(3 * one)
    assert cache.stats().entries == 0


# ---------------------------------------------------------------------------- 4. real dataset

LAYOUT = [[300, 50, 0, 40, 200], [120, 400], [250, 250, 10, 300]]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    root = tmp_path_factory.mktemp("budget")
    return root, _write(root, LAYOUT, tok_mod=23)


@pytest.mark.parametrize("read_ahead", [False, True])
def test_full_pass_within_a_large_budget(
    small: tuple[Path, list[dict[str, object]]], read_ahead: bool
) -> None:
    root, expected = small
    ds = ParquetDataset(root, memory=4096, window_bytes=16 << 10, read_ahead=read_ahead)
    groups = [s.row_groups for s in ds.source.shards]
    assert [len(g) for g in groups] == [len(g) for g in LAYOUT]  # the empty group is kept
    # the plan both splits large row groups and merges small ones
    bounds = {(k, a, b) for k, g in enumerate(groups) for a, b, _ in _bounds(list(g))}
    assert any(
        (w.shard, a, b) in bounds and a <= w.start and w.stop <= b and w.rows < b - a
        for w in ds.windows
        for a, b in [(x[1], x[2]) for x in bounds if x[0] == w.shard]
    )
    assert any(
        sum(1 for a, b, _ in _bounds(list(groups[w.shard])) if a < w.stop and w.start < b) > 1
        for w in ds.windows
    )
    reader = ds.reader
    assert reader.row_bytes == 0.0
    _check_bound(ds)  # the reserve is set from the footers before any read
    assert _cache(ds).reserve >= readermod.READ_OVERHEAD_BYTES

    _shuffled_pass(ds, expected, seed=1)
    _shuffled_pass(ds, expected, seed=2, batch=64)
    reader.stop_read_ahead()  # no read in flight while the reserve is compared

    cache = reader.cache
    assert isinstance(cache, WindowCache)
    touched = win.max_touched_bytes(ds.windows, groups)
    assert touched == max(win.touched_bytes(w, groups[w.shard]) for w in ds.windows)
    max_rows = max(w.rows for w in ds.windows)
    assert reader.row_bytes > 0
    expected_reserve = win.read_reserve(
        max_rows, reader.row_bytes, touched, readermod.READ_OVERHEAD_BYTES + reader.retained
    )
    assert reader.direct is not None  # pyarrow's allocator keeps one more read's buffers
    expected_reserve += win.read_reserve(max_rows, reader.row_bytes, touched, 0)
    # and the rows open group readers hold past their windows: two windows, or a floor
    park = max(2 * reader.largest_window,
               min(readermod.PARK_FLOOR_BYTES, ds.memory_bytes // 32))
    assert reader.direct.park_cap == park
    expected_reserve += park
    # a large budget reads two windows ahead at once where there are two cores: each
    # concurrent read has its own transient memory
    depth = 2 if read_ahead and usable_cores() >= 2 else 1
    assert reader.read_depth == depth
    expected_reserve += (depth - 1) * (
        win.read_reserve(max_rows, reader.row_bytes, touched, 0) + readermod.READ_OVERHEAD_BYTES
    )
    assert cache.reserve == expected_reserve
    assert ds.cache_stats.limit + cache.reserve == ds.memory_bytes
    assert ds.cache_stats.limit == ds.memory_bytes - expected_reserve
    stats = ds.cache_stats
    assert stats.bytes <= stats.limit
    assert stats.entries == len(ds.windows)  # a big budget keeps every window
    assert stats.evictions == 0 and stats.oversized == 0

    measured = max(table_bytes(reader.read(p)) / w.rows for p, w in enumerate(ds.windows))
    if read_ahead:
        assert 0 < reader.row_bytes <= measured
    else:
        assert reader.row_bytes == measured  # the largest Arrow bytes per row seen
    ds.close()


# ---------------------------------------------------------------------------- 5. the warning


@pytest.fixture(scope="module")
def megabyte(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    """About 1 MB of Arrow data in 3 shards of 1500 rows (6 row groups each)."""
    root = tmp_path_factory.mktemp("budget_mb")
    return root, _write(root, [[250] * 6] * 3, tok_mod=97)


def _budget_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, MemoryBudgetWarning)]


def test_tiny_budget_warns_once_and_serves_every_row(
    megabyte: tuple[Path, list[dict[str, object]]],
) -> None:
    root, expected = megabyte
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ParquetDataset(root, memory=HALF_MB)
        # the default window is half of a tiny budget, so one window can be kept
        assert ds.window_bytes == ds.memory_bytes // 2 and len(ds.windows) > 3
        assert sum(table_bytes(ds.reader.read(p)) for p in range(len(ds.windows))) > 900_000
        _shuffled_pass(ds, expected, seed=3, batch=100, singles=False)
        for i in range(0, len(expected), 7):  # sequential single rows
            assert ds[i] == expected[i]
            _check_bound(ds)
        for i in random.Random(4).sample(range(len(expected)), 20):
            assert ds[i] == expected[i]
        ds.reader.stop_read_ahead()
        messages = _budget_warnings(caught)
        assert len(messages) == 1, messages
        assert "memory=0.5 MiB is below" in messages[0]  # memory= is in MiB
        assert "memory=" in messages[0] and "window_bytes" in messages[0]
        # the budget holds only the floor: one (the largest) window
        stats = ds.cache_stats
        assert stats.limit == min(ds.memory_bytes, _floor(ds.reader))
        assert stats.limit < ds.memory_bytes
        assert stats.entries >= 1  # one window is kept anyway
        # once per reader: a new reader (after close) warns again, once
        ds.close()
        assert ds[5] == expected[5]
        assert len(_budget_warnings(caught)) == 2
        ds.close()


def test_pytest_warns_catches_it_despite_the_ini_filter(
    megabyte: tuple[Path, list[dict[str, object]]],
) -> None:
    root, expected = megabyte
    ds = ParquetDataset(root, memory=HALF_MB, read_ahead=False)
    with pytest.warns(MemoryBudgetWarning, match=r"memory=.*window_bytes"):
        assert ds[0] == expected[0]
    ds.close()


def test_big_budget_does_not_warn(megabyte: tuple[Path, list[dict[str, object]]]) -> None:
    root, expected = megabyte
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        ds = ParquetDataset(root, memory=4096)
        _shuffled_pass(ds, expected, seed=5, batch=200)
        ds.reader.stop_read_ahead()
    stats = ds.cache_stats
    assert stats.entries == len(ds.windows) and stats.evictions == 0
    ds.close()


def test_zero_budget_caches_nothing_and_does_not_warn(
    megabyte: tuple[Path, list[dict[str, object]]],
) -> None:
    root, expected = megabyte
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        ds = ParquetDataset(root, memory=0)
        rng = random.Random(6)
        for _ in range(4):
            batch = rng.sample(range(len(expected)), 50)
            assert list(ds.__getitems__(batch)) == [expected[i] for i in batch]
            assert ds.cache_stats.bytes == 0
        for i in rng.sample(range(len(expected)), 10):
            assert ds[i] == expected[i]
        ds.reader.stop_read_ahead()
    cache = ds.reader.cache
    assert isinstance(cache, WindowCache)
    stats = ds.cache_stats
    assert (stats.bytes, stats.entries, stats.limit, stats.hits) == (0, 0, 0, 0)
    assert (cache.budget, cache.reserve) == (0, 0)
    assert stats.oversized >= stats.misses > 0  # every window read was served, never kept
    ds.close()


def test_warning_when_a_read_measures_more_than_the_footers(tmp_path: Path) -> None:
    """Dictionary-encoded strings: the footers say ~10 bytes a row, Arrow holds ~1 KB."""
    n = 4000
    table = pa.table(
        {"idx": pa.array(range(n), pa.int64()), "text": ["q" * 1000 + str(g % 3) for g in range(n)]}
    )
    pq.write_table(table, tmp_path / "dict.parquet")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ParquetDataset(tmp_path, memory=18, read_ahead=False)
        reader = ds.reader
        assert _budget_warnings(caught) == []  # the footers' guess fits in 18 MB
        reserve_before = _cache(ds).reserve
        assert ds[n - 1] == {"idx": n - 1, "text": "q" * 1000 + str((n - 1) % 3)}
        messages = _budget_warnings(caught)
        assert len(messages) == 1 and "window_bytes" in messages[0]
        assert _cache(ds).reserve > reserve_before  # the reserve grew with the measurement
        assert ds.cache_stats.limit == _floor(reader)
        assert ds.cache_stats.entries == 1  # the window is still cached (the floor)
        rows = ds.__getitems__(list(range(0, n, 13)))
        assert [r["idx"] for r in rows] == list(range(0, n, 13))
        assert ds.cache_stats.misses == 1
        assert len(_budget_warnings(caught)) == 1
    ds.close()


# ---------------------------------------------------------------------------- 6. floor only


@pytest.mark.parametrize("read_ahead", [False, True])
def test_floor_only_budget_reads_each_window_about_once(
    small: tuple[Path, list[dict[str, object]]], read_ahead: bool
) -> None:
    root, expected = small
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ParquetDataset(root, memory=1, window_bytes=16 << 10, read_ahead=read_ahead)
        n_windows = len(ds.windows)
        assert n_windows >= 8
        for i in range(len(expected)):  # sequential single rows
            assert ds[i] == expected[i]
            _check_bound(ds)
        reader = ds.reader
        reader.stop_read_ahead()
        # the reserve (>= READ_OVERHEAD_BYTES) leaves only the floor: one largest window
        assert ds.cache_stats.limit == _floor(reader) < ds.memory_bytes
        assert _cache(ds).reserve == ds.memory_bytes - _floor(reader)
        assert len(_budget_warnings(caught)) == 1
    first = ds.cache_stats
    assert first.evictions > 0  # the cache cannot hold the dataset
    if read_ahead:
        assert first.misses <= n_windows + 2
    else:
        assert first.misses == n_windows  # each window read exactly once
    # sequential batches (torch's batched fetch), some straddling two windows
    for k in range(0, len(expected), 64):
        batch = list(range(k, min(k + 64, len(expected))))
        assert list(ds.__getitems__(batch)) == [expected[i] for i in batch]
        _check_bound(ds)
    second = ds.cache_stats
    assert second.misses - first.misses <= n_windows + 2
    assert second.hits > 0
    ds.close()


# ---------------------------------------------------------------------------- 7. DuckDB allocator


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 1 << 40), st.integers(1, 256))
def test_allocator_config_bounds(memory: int, threads: int) -> None:
    from undertale_duck.core.runtime.duck import (
        FLUSH_THRESHOLD_MAX,
        FLUSH_THRESHOLD_MIN,
        allocator_config,
    )

    settings_, retained = allocator_config(memory, threads)
    value = settings_["allocator_flush_threshold"]
    assert settings_["allocator_bulk_deallocation_flush_threshold"] == value
    assert value.endswith("MB")
    threshold = int(value[:-2]) << 20
    assert FLUSH_THRESHOLD_MIN <= threshold <= FLUSH_THRESHOLD_MAX
    assert retained == (threshold - FLUSH_THRESHOLD_MIN) * (threads + 1)
    # what DuckDB may keep beyond the baseline stays a small part of the budget
    assert retained <= max(0, memory) * (threads + 1) // (16 * threads)
    bigger, _ = allocator_config(memory * 2, threads)
    assert int(bigger["allocator_flush_threshold"][:-2]) >= int(value[:-2])


def test_dataset_reserves_what_duckdb_may_keep(
    megabyte: tuple[Path, list[dict[str, object]]],
) -> None:
    root, expected = megabyte
    ds = ParquetDataset(root, memory=4096, read_ahead=False)
    assert ds[3] == expected[3]
    reader = ds.reader
    threads = int(ds.duckdb_config["threads"])
    from undertale_duck.core.runtime.duck import allocator_config

    setting, retained = allocator_config(ds.memory_bytes, threads)
    assert reader.retained == retained > 0
    shown = reader.connection.cursor().sql(
        "SELECT current_setting('allocator_flush_threshold')"
    ).fetchall()[0][0]
    assert shown.replace(" ", "").upper().startswith(setting["allocator_flush_threshold"][:-2])
    assert _cache(ds).reserve >= retained
    ds.close()
    # a threshold given by the user is kept, and nothing extra is reserved for it
    ds = ParquetDataset(root, memory=4096, read_ahead=False,
                        duckdb_config={"allocator_flush_threshold": "8MB"})
    assert ds[3] == expected[3]
    assert ds.reader.retained == 0
    ds.close()
