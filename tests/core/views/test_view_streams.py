"""A view's windows cut from one row group are read by one query, window after window."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset, collate, load
from undertale_duck.core.source import window_row_groups

Row = dict[str, Any]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "own" / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(cache))
    return cache


def _row(i: int) -> Row:
    return {"id": i, "label": i % 7, "text": f"r{i}" * (1 + i % 3),
            "tokens": [(i * 3 + k) % 1000 for k in range(6)]}


def _write(root: Path, shards: Sequence[tuple[int, int]]) -> int:
    """Shards of (rows, row group size); every value a function of the global row."""
    root.mkdir(parents=True, exist_ok=True)
    start = 0
    for k, (rows, group) in enumerate(shards):
        got = [_row(i) for i in range(start, start + rows)]
        table = pa.table({
            "id": pa.array([r["id"] for r in got], pa.int64()),
            "label": pa.array([r["label"] for r in got], pa.int64()),
            "text": pa.array([r["text"] for r in got], pa.string()),
            "tokens": pa.array([r["tokens"] for r in got], pa.list_(pa.int32())),
        })
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=group)
        start += rows
    return start


#: Views without side tables (a scan: one query may serve a group's windows in turn), as
#: (keyword arguments, what the view serves of a source row or None where it drops it).
VIEWS: dict[str, tuple[dict[str, str], Callable[[Row], Row | None]]] = {
    "filter": ({"where": "label <> 3"}, lambda r: r if r["label"] != 3 else None),
    # most windows keep no row: the windows between two kept ones are dropped
    "sparse": ({"where": "id % 97 < 3"}, lambda r: r if r["id"] % 97 < 3 else None),
    "computed": (
        {"query": "SELECT id, tokens, id * 2 AS twice, length(text) AS n FROM dataset"},
        lambda r: {"id": r["id"], "tokens": r["tokens"], "twice": 2 * r["id"],
                   "n": len(r["text"])},
    ),
    "filter and computed": (
        {"query": "SELECT id, label + 1 AS up FROM dataset WHERE id % 5 IN (1, 2)"},
        lambda r: {"id": r["id"], "up": r["label"] + 1} if r["id"] % 5 in (1, 2) else None,
    ),
}


def _expected(total: int, serve: Callable[[Row], Row | None]) -> list[Row]:
    return [s for s in (serve(_row(i)) for i in range(total)) if s is not None]


def _cut(ds: ParquetDataset) -> tuple[int, int]:
    """How many of the view's windows are cut from a larger row group, and from how many."""
    cut, groups = 0, set()
    for w in ds.windows:
        shard = ds.source.shards[w.shard]
        found, skip = window_row_groups(shard.row_groups, w)
        spanned = sum(shard.row_groups[g][0] for g in found)
        if not (skip == 0 and spanned == w.stop - w.start):
            cut += 1
            groups.add((w.shard, found[0]))
    return cut, len(groups)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_pass_in_order_reads_each_group_with_one_query(tmp_path: Path, name: str) -> None:
    kwargs, serve = VIEWS[name]
    total = _write(tmp_path / "d", [(600, 300), (450, 450), (40, 40)])
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=1024, read_ahead=False, **kwargs)
    cut, groups = _cut(ds)
    assert cut >= 8 and groups >= 3  # the groups of 300 and the one of 450 at least
    assert [ds[i] for i in range(len(ds))] == expected
    stats = ds.reader.decoder.stream_stats
    # each group cut into windows is one query; its later windows continue it
    assert stats == {"streams": groups, "continued": cut - groups}
    ds.close()


@pytest.mark.parametrize("name", ["filter", "computed"])
def test_an_epoch_through_load_with_read_ahead(tmp_path: Path, name: str) -> None:
    kwargs, serve = VIEWS[name]
    total = _write(tmp_path / "d", [(900, 900), (300, 100)])
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=2048, format="python", **kwargs)
    cut, groups = _cut(ds)
    assert cut >= 12 and groups >= 2
    for _ in range(2):  # the second epoch from the cache
        got = [row for batch in load(ds, None, list, 13) for row in batch]
        assert got == expected
    stats = ds.reader.decoder.stream_stats
    # one query per group; the read-ahead may start the next group's while the last window
    # of a group is still to read, which that window then reads by its own query
    assert stats["streams"] == groups
    assert cut - 2 * groups < stats["continued"] <= cut - groups
    ds.close()


def test_a_view_with_a_side_table_reads_each_window_by_its_own_query(tmp_path: Path) -> None:
    # a join needs a sort to keep source order: no query spans windows
    total = _write(tmp_path / "d", [(500, 500)])
    (tmp_path / "side").mkdir()
    side = tmp_path / "side" / "names.parquet"
    pq.write_table(pa.table({"label": list(range(7)), "name": [f"n{k}" for k in range(7)]}),
                   side)
    ds = ParquetDataset(
        tmp_path / "d", window_bytes=1024, read_ahead=False, tables={"names": str(side)},
        query="SELECT d.id, n.name FROM dataset AS d JOIN names AS n ON d.label = n.label "
              "WHERE d.id % 4 <> 0",
    )
    assert _cut(ds)[0] >= 3
    want = [{"id": i, "name": f"n{i % 7}"} for i in range(total) if i % 4 != 0]
    assert [ds[i] for i in range(len(ds))] == want
    assert ds.reader.decoder.stream_stats == {"streams": 0, "continued": 0}
    ds.close()


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shards=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 300)), min_size=1,
                    max_size=3),
    name=st.sampled_from(sorted(VIEWS)),
    window_bytes=st.sampled_from([256, 1024, 4096]),
    order=st.randoms(use_true_random=False),
    memory=st.sampled_from([0, 1, 64]),
)
def test_any_order_serves_the_views_rows(
    tmp_path_factory: pytest.TempPathFactory, shards: list[tuple[int, int]], name: str,
    window_bytes: int, order: Any, memory: int,
) -> None:
    """Windows in any order (a stream continued, passed, restarted or not used): every row
    is the view's, then a pass in order is too."""
    root = tmp_path_factory.mktemp("streams")
    kwargs, serve = VIEWS[name]
    total = _write(root / "d", shards)
    expected = _expected(total, serve)
    ds = ParquetDataset(root / "d", window_bytes=window_bytes, memory=memory,
                        read_ahead=False, **kwargs)
    assert len(ds) == len(expected)
    indices = list(range(len(ds)))
    order.shuffle(indices)
    for start in range(0, len(indices), 17):
        part = indices[start:start + 17]
        assert list(ds.__getitems__(part)) == [expected[i] for i in part]
    assert [ds[i] for i in range(len(ds))] == expected
    ds.close()


@pytest.mark.parametrize("loader", ["DataLoader", "load"])
def test_windows_of_a_group_in_a_shuffled_epoch(tmp_path: Path, loader: str) -> None:
    from torch.utils.data import DataLoader

    from undertale_duck import ChunkedSampler

    kwargs, serve = VIEWS["filter"]
    total = _write(tmp_path / "d", [(1200, 1200)])
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=2048, format="torch", **kwargs)
    if loader == "load":  # declares the sampler's order of windows to the reader
        batches = load(ds, None, collate, 16, shuffle=True, drop_last=False)
    else:
        sampler = ChunkedSampler(ds, 16, 0, shuffle=True, drop_last=False)
        batches = DataLoader(ds, batch_size=16, sampler=sampler, collate_fn=collate)
    seen: list[int] = []
    following = -1
    for batch in batches:
        if following < 0:
            nxt = ds.reader.decoder.order_next
            following = sum(1 for p, q in nxt.items() if q == p + 1)
        for k, i in enumerate(batch["id"].tolist()):
            assert batch["tokens"][k].tolist() == _row(i)["tokens"]
            assert batch["text"][k] == _row(i)["text"]
        seen += batch["id"].tolist()
    assert sorted(seen) == [r["id"] for r in expected]
    if loader == "load":
        # a query over the rest of the group begins only where the order reads the next
        # window of the plan after this one (else DuckDB decodes rows ahead for nothing)
        assert following >= 0 and len(nxt) == len(ds.windows) - 1
        assert ds.reader.decoder.stream_stats["streams"] <= following
    ds.close()


def test_a_window_reached_out_of_order_begins_no_query_over_its_group(tmp_path: Path) -> None:
    kwargs, serve = VIEWS["computed"]
    total = _write(tmp_path / "d", [(600, 600), (600, 600)])
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=1024, read_ahead=False, **kwargs)
    starts = [w.offset for w in ds.windows]
    second = next(p for p, w in enumerate(ds.windows) if w.shard == 1)
    assert second >= 5
    # a group's first window reached from the window after it; then one reached from the
    # window before it, which the consumer reached by a jump (a shuffled order)
    for p in (3, 1, 0, second + 3, second - 1, second):
        assert ds[starts[p] + 1] == expected[starts[p] + 1]
    assert ds.reader.decoder.stream_stats == {"streams": 0, "continued": 0}
    assert [ds[i] for i in range(len(ds))] == expected
    ds.close()


def _closed(cursor: Any) -> bool:
    """Whether a stream's cursor is closed (an open one refuses a query beside its result)."""
    try:
        cursor.sql("SELECT 1").fetchall()
    except duckdb.ConnectionException:
        return True
    except duckdb.Error as exc:
        assert "open result" in str(exc)
    return False


@pytest.mark.parametrize("kwargs", [{"where": "label <> 3"}, {}], ids=["view", "plain"])
def test_a_fork_closes_the_open_query_and_the_pass_goes_on(
    tmp_path: Path, kwargs: dict[str, str]
) -> None:
    """A query left open on a row group (a view's, or DuckDB's for a plain shard) belongs to
    the process's database, which is closed before a fork (a child inheriting a database
    with a query running in it crashed): the child reads on its own, and the parent's pass
    continues the group with a new query from the window it had reached."""
    total = _write(tmp_path / "d", [(900, 900)])
    serve = VIEWS["filter"][1] if kwargs else (lambda r: r)
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=2048, read_ahead=False, **kwargs)
    if not kwargs:
        ds.reader.decoder.direct = None  # DuckDB reads the plain shard (as a remote one)
    half = len(ds) // 2
    got = [ds[i] for i in range(half)]
    decoder = ds.reader.decoder
    [stream] = list(decoder._open_queries.values())
    assert not _closed(stream.cursor)
    pid = os.fork()
    if pid == 0:  # the child: its own database, every row right
        code = 1
        try:
            code = 0 if [ds[i] for i in range(len(ds))] == expected else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert _closed(stream.cursor)  # closed before the fork, with the database
    got += [ds[i] for i in range(half, len(ds))]
    assert got == expected
    # the window reached when the fork came began a second query; the others continued
    assert decoder.stream_stats["streams"] == 2
    ds.close()


def test_random_batches_of_a_view_with_a_disk_tier(tmp_path: Path) -> None:
    """With a disk tier, a batch's windows are read in the background by row group; a view's
    windows are still read one by one (a group's others are not decoded for nothing)."""
    import random

    kwargs, serve = VIEWS["filter"]
    total = _write(tmp_path / "d", [(800, 800), (300, 300)])
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=2048, disk=8,
                        disk_dir=str(tmp_path / "own" / "tier"), **kwargs)
    assert _cut(ds)[0] >= 8
    assert all(ds.reader.decoder.group_windows(p) == [p] for p in range(len(ds.windows)))
    indices = list(range(len(ds)))
    random.Random(3).shuffle(indices)
    for start in range(0, len(indices), 50):
        part = indices[start:start + 50]
        assert list(ds.__getitems__(part)) == [expected[i] for i in part]
    assert [ds[i] for i in range(len(ds))] == expected
    ds.close()


def test_the_query_ends_with_the_groups_last_kept_row(tmp_path: Path) -> None:
    # the group's last 400 rows keep none: no query stays open on them once the last
    # window that keeps rows is served
    _write(tmp_path / "d", [(900, 900)])
    ds = ParquetDataset(tmp_path / "d", window_bytes=1024, read_ahead=False,
                        where="id < 500 AND label <> 3")
    want = [_row(i) for i in range(500) if i % 7 != 3]
    assert [ds[i] for i in range(len(ds))] == want
    assert ds.reader.decoder.stream_stats["streams"] == 1
    assert not ds.reader.decoder._open_queries
    ds.close()


def test_rows_of_another_window_are_never_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each window checks the source row numbers the open query gave it (as many as the
    index counts, the first and last inside the window); a query that stood one row off
    (here each take skips the query's next row first) is dropped and the window read by
    its own query."""
    from undertale_duck.core.read import window_read

    take = window_read.ViewStream.take

    def shifted_take(self: Any, rows: int) -> Any:
        list(take(self, 1))  # one row lost: the window would get its next's first row
        yield from take(self, rows)

    monkeypatch.setattr(window_read.ViewStream, "take", shifted_take)
    kwargs, serve = VIEWS["filter"]
    total = _write(tmp_path / "d", [(600, 600)])
    expected = _expected(total, serve)
    ds = ParquetDataset(tmp_path / "d", window_bytes=1024, read_ahead=False, **kwargs)
    assert [ds[i] for i in range(len(ds))] == expected
    assert ds.reader.decoder.stream_stats["continued"] == 0  # every one fell back
    ds.close()
