"""Read-ahead depth: several windows read at once, in order, within the budget."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck import ArgumentError, ParquetDataset
from undertale_duck.core.read.readahead import ReadAhead, in_loader_worker, usable_cores

SIZES = [700, 0, 1300, 500]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("readahead")
    datagen.write_shards(root, SIZES, row_group_size=100)
    return root, sum(SIZES)


class Recorder:
    """A fetch that records how many reads overlap; reads wait at a barrier of ``meet``."""

    def __init__(self, meet: int) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.read: list[int] = []
        self.barrier = threading.Barrier(meet, timeout=30) if meet > 1 else None
        self.done = threading.Semaphore(0)

    def __call__(self, position: int, keep: int | None) -> bool:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            if self.barrier is not None:
                self.barrier.wait()  # raises BrokenBarrierError unless ``meet`` reads overlap
            with self.lock:
                self.read.append(position)
            self.done.release()
        finally:
            with self.lock:
                self.now -= 1
        return True


def test_depth_two_reads_two_windows_at_once() -> None:
    fetch = Recorder(meet=2)
    ahead = ReadAhead(fetch, depth=2)
    ahead.schedule([4, 5], keep=3)
    # (not ahead.wait: a window not yet picked up is the consumer's to read)
    assert fetch.done.acquire(timeout=30) and fetch.done.acquire(timeout=30)
    ahead.stop()
    assert sorted(fetch.read) == [4, 5]  # both got past the barrier: they overlapped
    assert fetch.most == 2
    assert ahead.stats["read"] == 2


def test_depth_one_never_overlaps() -> None:
    fetch = Recorder(meet=1)
    ahead = ReadAhead(fetch, depth=1)
    for start in range(0, 30, 3):
        ahead.schedule([start, start + 1, start + 2], keep=None)
        for _ in range(3):
            assert fetch.done.acquire(timeout=30)
    ahead.stop()
    assert fetch.most == 1
    assert fetch.read == list(range(30))  # in hint order, one at a time
    assert ahead.depth == 1


def test_newer_hint_replaces_queued_ones_and_stop_joins_every_thread() -> None:
    release = threading.Event()
    started = threading.Event()
    read: list[int] = []

    def fetch(position: int, keep: int | None) -> bool:
        started.set()
        release.wait(30)
        read.append(position)
        return True

    ahead = ReadAhead(fetch, depth=1)
    ahead.schedule([1, 2], keep=None)
    assert started.wait(30)
    assert ahead.reading(1)
    ahead.schedule([7, 8], keep=None)  # 2 is dropped: the consumer moved on
    release.set()
    # settle, not wait(7): wait() drops a queued window the consumer takes over, so whether 7
    # was read would depend on which thread ran first
    ahead.settle()
    ahead.stop()
    assert 2 not in read and read[:1] == [1] and sorted(read) == [1, 7, 8]
    assert not any(t.is_alive() for t in threading.enumerate()
                   if t.name == "undertale-duck-read-ahead" and t in ahead._threads)
    ahead.schedule([9], keep=None)  # stopped: refused
    assert not ahead.reading(9) and 9 not in read


def test_automatic_depth_follows_the_cores() -> None:
    ahead = ReadAhead(lambda p, k: True)
    assert ahead.depth == (2 if usable_cores() >= 2 else 1)
    ahead.reset_in_child()  # a forked DataLoader worker reads one window at a time
    assert ahead.depth == 1
    assert ReadAhead(lambda p, k: True, depth=3).depth == 3


@pytest.mark.parametrize("bad", [-1, 1.5, "2", None])
def test_bad_read_ahead_is_refused(shards: tuple[Path, int], bad: object) -> None:
    root, _ = shards
    with pytest.raises(ArgumentError, match="read_ahead"):
        ParquetDataset(root, read_ahead=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [True, 1, 3])
def test_sequential_pass_with_depth(shards: tuple[Path, int], depth: bool | int) -> None:
    root, total = shards
    ds = ParquetDataset(root, window_bytes=2000, read_ahead=depth, format="python")
    assert len(ds.windows) > 6
    expected = datagen.expected(total)
    got = [ds[i]["id"] for i in range(total)]
    assert got == [e["id"] for e in expected]
    ds.reader.stop_read_ahead()
    stats = ds.reader.read_ahead_stats
    assert stats["scheduled"] >= 1  # (whether a hint is read before the consumer gets there
    # is a race the consumer may win: each window is then read once, by one of them)
    assert ds.cache_stats.misses + stats["read"] >= len(ds.windows)
    assert ds.cache_stats.bytes <= ds.cache_stats.limit
    if depth == 3:
        assert ds.reader.read_depth == 3


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(1, 4),
       memory=st.sampled_from([0.05, 0.2, 64.0]))
def test_shuffled_window_order_any_depth(
    shards: tuple[Path, int], seed: int, depth: int, memory: float
) -> None:
    """Rows are right and the cache within its limit whatever the depth, order and budget."""
    root, total = shards
    ds = ParquetDataset(root, window_bytes=3000, read_ahead=depth, memory=memory)
    order = list(range(len(ds.windows)))
    random.Random(seed).shuffle(order)
    ds.prefetch(order)
    expected = datagen.expected(total)
    for position in order:
        w = ds.windows[position]
        rows = ds.__getitems__(list(range(w.offset, w.end)))
        assert [r["id"] for r in rows] == [e["id"] for e in expected[w.offset:w.end]]
        assert ds.cache_stats.bytes <= ds.cache_stats.limit
    ds.reader.stop_read_ahead()
    assert ds.reader.read_depth <= depth
    ds.close()


class _Probe(torch.utils.data.Dataset[bool]):
    """Answers, from wherever it is read, whether that is a DataLoader worker."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> bool:
        return in_loader_worker()


def test_loader_workers_are_recognised() -> None:
    assert in_loader_worker() is False  # the test process itself
    inline = [bool(b) for b in torch.utils.data.DataLoader(_Probe(), batch_size=None)]
    assert inline == [False, False]
    worker = torch.utils.data.DataLoader(
        _Probe(), batch_size=None, num_workers=1, multiprocessing_context="fork"
    )
    assert [bool(b) for b in worker] == [True, True]  # so a reader made there reads one window


@pytest.mark.parametrize("depth", [2, 3])
def test_a_window_read_by_the_consumer_runs_beside_the_next_ones(
    tmp_path: Path, depth: int
) -> None:
    # On a miss, the windows after the one the consumer reads are read beside it (one
    # fewer than the depth), not after it: window 0's read waits until window 1's has
    # started, which only a read scheduled before window 0's ends can do. Windows of whole
    # row groups (windows cut from one group continue its reader one after another)
    root = tmp_path / "whole"
    datagen.write_shards(root, SIZES, row_group_size=10)
    total = sum(SIZES)
    ds = ParquetDataset(root, window_bytes=2000, read_ahead=depth, format="python")
    assert ds.reader.decoder.neighbours(0) == []
    assert ds.reader.read_depth == depth
    decoder = ds.reader.decoder
    plain = decoder.decode_with
    started = threading.Event()
    overlapped: list[bool] = []

    def decode_with(position: int, *args: object) -> object:
        if position == 1:
            started.set()
        elif position == 0:
            overlapped.append(started.wait(timeout=20))
        return plain(position, *args)  # type: ignore[arg-type]

    decoder.decode_with = decode_with  # type: ignore[method-assign]
    assert ds[0]["id"] == datagen.expected(1)[0]["id"]
    ds.reader.stop_read_ahead()
    assert overlapped == [True]
    stats = ds.reader.read_ahead_stats
    assert stats["scheduled"] == depth - 1  # the consumer's own read is one of the depth
    got = [ds[i]["id"] for i in range(total)]
    assert got == [e["id"] for e in datagen.expected(total)]
    ds.close()


def test_settle_returns_once_every_hinted_window_is_read() -> None:
    read: list[int] = []
    gate = threading.Event()

    def fetch(position: int, keep: int | None) -> bool:
        gate.wait(30)
        read.append(position)
        return True

    ahead = ReadAhead(fetch, depth=1)
    ahead.settle()  # nothing hinted: returns at once
    ahead.schedule([3, 4, 5], keep=None)
    gate.set()
    ahead.settle()
    assert read == [3, 4, 5] and ahead.stats["read"] == 3
    ahead.stop()


@pytest.mark.parametrize("fails_at", [None, 1])
def test_group_reads_release_each_window_as_written(fails_at: int | None) -> None:
    covers = {0: [0, 1, 2], 3: [3, 4]}
    written: list[int] = []
    ahead: ReadAhead

    def fetch(position: int, keep: int | None) -> bool:
        for p in covers[position]:
            if p == fails_at:
                raise RuntimeError("the read fails part-way")
            written.append(p)
            ahead.finished(p)
        return True

    ahead = ReadAhead(fetch, depth=2)
    ahead.schedule_groups(covers, None, at_once=1)
    for p in (2, 4, 1, 3):  # a window of a queued group is waited for, never read twice
        ahead.wait(p)
        assert not ahead.reading(p)  # written, or its group's read failed: read it anew
    ahead.settle()
    ahead.stop()
    if fails_at is None:
        assert written == [0, 1, 2, 3, 4]
    else:
        assert written == [0, 3, 4]
    assert ahead.stats["scheduled"] == 2


def test_an_interrupted_read_is_dropped_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    # stop()'s poke interrupts DuckDB work in flight (at exit, before a fork); a read ended
    # so comes back as KeyboardInterrupt, which must not escape the thread as a traceback
    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    calls: list[int] = []

    def fetch(position: int, keep: int | None) -> bool:
        calls.append(position)
        if position == 1:
            raise KeyboardInterrupt
        return True

    ahead = ReadAhead(fetch, depth=1)
    ahead.schedule([1], keep=None)
    ahead.settle()
    ahead.schedule([2], keep=None)  # the thread goes on with the next hint
    ahead.settle()
    ahead.stop()
    assert calls == [1, 2]
    assert escaped == []
    assert not ahead.reading(1) and not ahead.reading(2)
