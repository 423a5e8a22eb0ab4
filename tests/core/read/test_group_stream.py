"""A row group cut into windows is decoded once per sequential pass, at any memory.

A shard written with pyarrow's defaults is one row group, which the plan cuts into windows.
Each window read continues the group's open reader (pyarrow's for files on the allow-list,
DuckDB's query otherwise) where the previous window stopped, so a pass decodes the group
once, whatever the budget: counted, not timed. Every value is a function of the row index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import MemoryBudgetWarning, ParquetDataset


def _row(i: int) -> dict[str, Any]:
    return {"i": i, "tokens": [(i * 7 + k) % 997 for k in range(16)], "s": f"id-{i:07d}"}


def _write(path: Path, rows: int, *, group: int | None = None) -> Path:
    table = pa.table({
        "i": pa.array(range(rows), pa.int64()),
        "tokens": pa.array([_row(i)["tokens"] for i in range(rows)], pa.list_(pa.int32())),
        "s": pa.array([f"id-{i:07d}" for i in range(rows)], pa.string()),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=group)  # pyarrow's defaults otherwise
    return path.parent


def _decodes(ds: ParquetDataset) -> int:
    """Row-group decodes begun, by either reader."""
    direct = ds.reader.direct
    return ds.reader.decoder.stream_stats["streams"] + (
        0 if direct is None else direct.stats["streams"]
    )


def _epoch(ds: ParquetDataset, batch: int) -> None:
    for a in range(0, len(ds), batch):
        indices = list(range(a, min(a + batch, len(ds))))
        assert [dict(r) for r in ds.__getitems__(indices)] == [_row(i) for i in indices]
        ds.reader.ahead.settle()  # counts must not depend on which thread got the CPU


@pytest.fixture(scope="module")
def one_group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # many distinct strings: a dictionary page bounds each value by the whole page, so
    # DuckDB reads this file (as it reads the benchmark's one-group shard)
    return _write(tmp_path_factory.mktemp("one") / "a.parquet", 6000)


@pytest.mark.filterwarnings("ignore", category=MemoryBudgetWarning)
@pytest.mark.parametrize("read_ahead", [False, True])
@pytest.mark.parametrize("memory", [0.25, 64])
def test_a_sequential_pass_decodes_the_group_once(
    one_group: Path, read_ahead: bool, memory: float
) -> None:
    ds = ParquetDataset(one_group, memory=memory, window_bytes=16 << 10, read_ahead=read_ahead)
    assert len(ds.windows) >= 6  # the one row group is cut into windows
    _epoch(ds, 97)
    ds.reader.stop_read_ahead()
    assert _decodes(ds) == 1
    ds.close()


@pytest.mark.filterwarnings("ignore", category=MemoryBudgetWarning)
def test_each_pass_that_cannot_be_cached_decodes_the_group_once_more(one_group: Path) -> None:
    ds = ParquetDataset(one_group, memory=0.25, window_bytes=16 << 10, read_ahead=False)
    for epoch in range(1, 4):
        _epoch(ds, 64)
        assert _decodes(ds) == epoch
    ds.close()


def test_the_allow_listed_reader_streams_too(tmp_path: Path) -> None:
    root = tmp_path / "d"
    table = pa.table({"i": pa.array(range(8000), pa.int64())})
    root.mkdir()
    pq.write_table(table, root / "a.parquet")
    # memory=0 keeps nothing: each window is read once, when asked for, continuing the group
    ds = ParquetDataset(root, memory=0, window_bytes=4 << 10, read_ahead=False)
    assert len(ds.windows) >= 4
    for win in ds.windows:
        got = ds.__getitems__(list(range(win.offset, win.end)))
        assert [r["i"] for r in got] == list(range(win.offset, win.end))
    direct = ds.reader.direct
    assert direct is not None and direct.stats["direct"] == len(ds.windows)
    assert direct.stats["streams"] == 1
    ds.close()


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(order=st.lists(st.integers(0, 5999), min_size=1, max_size=40),
       memory=st.sampled_from([0, 0.25, 4]), read_ahead=st.booleans())
def test_any_order_gives_the_rows(
    one_group: Path, order: list[int], memory: float, read_ahead: bool
) -> None:
    ds = ParquetDataset(one_group, memory=memory, window_bytes=16 << 10, read_ahead=read_ahead)
    for k in range(0, len(order), 7):
        part = order[k:k + 7]
        assert [dict(r) for r in ds.__getitems__(part)] == [_row(i) for i in part]
    ds.close()


@pytest.fixture(scope="module")
def wide_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # integers only (pyarrow's allow-list), 8 KiB rows, groups of 200 rows cut into windows
    root = tmp_path_factory.mktemp("wide")
    i = pa.array(range(2000), pa.int64())
    tokens = pa.array([[(r * 7 + k) % 997 for k in range(2048)] for r in range(2000)],
                      pa.list_(pa.int32()))
    pq.write_table(pa.table({"i": i, "tokens": tokens}), root / "a.parquet",
                   row_group_size=200)
    return root


@pytest.mark.filterwarnings("ignore", category=MemoryBudgetWarning)
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(order=st.lists(st.integers(0, 1999), min_size=1, max_size=60),
       read_ahead=st.booleans())
def test_open_group_readers_hold_at_most_their_cap(
    wide_groups: Path, order: list[int], read_ahead: bool
) -> None:
    # rows a group's reader decoded past a window wait outside the cache for the next
    # window; however the windows are visited, what the readers left open by earlier
    # windows hold stays within the cap the budget reserves for them, and every row is right
    ds = ParquetDataset(wide_groups, memory=4, window_bytes=256 << 10, read_ahead=read_ahead)
    direct = ds.reader.direct
    assert direct is not None and direct.park_cap is not None and direct.park_cap > 0
    assert len(ds.windows) > 10  # every group is cut into windows
    for k in range(0, len(order), 5):
        part = order[k:k + 5]
        got = ds.__getitems__(part)
        assert [r["i"] for r in got] == part
        assert [r["tokens"][:3] for r in got] == [[(r * 7 + j) % 997 for j in range(3)]
                                                 for r in part]
        ds.reader.ahead.settle()
        *older, _newest = direct._streams.values() or [None]
        assert sum(s.held_bytes for s in older) <= direct.park_cap  # the newest is kept
    assert direct.stats["direct"] > 0
    ds.close()
