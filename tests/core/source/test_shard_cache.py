"""The node's shard cache: one download per node, LRU under a limit, nothing untrusted kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
from support import datagen
from support.storage_server import (
    HTTPServer,
    S3Server,
    cached_files,
    child_env,
    free_port,
    serve_directory,
)

from undertale_duck import ParquetDataset
from undertale_duck.common.sizes import parse_size
from undertale_duck.core.source.remote.shard_cache import ShardCache, default_directory
from undertale_duck.errors import ArgumentError, SourceError

CHILD = str(Path(__file__).resolve().parents[2] / "support" / "storage_child.py")


@pytest.fixture
def memory_dataset(tmp_path: Path) -> Iterator[tuple[str, list[int]]]:
    """Four shards in fsspec's in-memory store (one process only), and their sizes."""
    sizes = [120, 80, 100, 60]
    paths = datagen.write_shards(tmp_path / "src", sizes, row_group_size=20)
    fs = fsspec.filesystem("memory")
    root = f"memory://cache-test-{os.getpid()}-{time.monotonic_ns()}"
    for p in paths:
        fs.pipe(f"{root}/{p.name}", p.read_bytes())
    yield root + "/", sizes
    fs.rm(root, recursive=True)


def _counters(ds: ParquetDataset) -> Any:
    return ds.source.store.cache.stats


def test_parse_size_and_default_directory(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    assert parse_size(123, "cache_limit", "bytes") == 123
    assert parse_size("2KB", "cache_limit", "bytes") == 2000
    assert parse_size("1.5 GiB", "cache_limit", "bytes") == 3 << 29
    assert parse_size("0", "cache_limit", "bytes") == 0
    for bad in (-1, "lots", "5 parsecs", True, 1.5):
        with pytest.raises(ArgumentError, match="cache_limit"):
            parse_size(bad, "cache_limit", "bytes")
    # the one cache rule: shards go to the shards/ folder of $UNDERTALE_DUCK_CACHE too
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "mine"))
    assert default_directory() == tmp_path / "mine" / "shards"
    monkeypatch.delenv("UNDERTALE_DUCK_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory() == tmp_path / "xdg" / "undertale_duck" / "shards"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE_LIMIT", "3MB")
    assert ShardCache(tmp_path).limit == 3_000_000
    monkeypatch.delenv("UNDERTALE_DUCK_CACHE_LIMIT")
    assert 0 < ShardCache(tmp_path).limit <= 64 << 30


def test_unusable_cache_directory_is_a_clear_error(memory_dataset: tuple[str, list[int]],
                                                    tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=blocker / "cache")
    with pytest.raises(SourceError, match=r"cannot use the shard cache directory .*a-file"):
        ds[0]


def test_rows_match_and_each_shard_is_downloaded_once(memory_dataset: tuple[str, list[int]],
                                                       tmp_path: Path) -> None:
    url, sizes = memory_dataset
    first = ParquetDataset(url, memory=64, cache_dir=tmp_path)
    assert [first[i] for i in range(len(first))] == [datagen.row(i) for i in range(sum(sizes))]
    assert _counters(first).downloads == 4
    second = ParquetDataset(url, memory=64, cache_dir=tmp_path)
    assert [second[i] for i in range(len(second))][::-1] == [
        datagen.row(i) for i in reversed(range(sum(sizes)))
    ]
    assert _counters(second).downloads == 0
    assert _counters(second).hits >= 4


def test_threads_racing_download_once(memory_dataset: tuple[str, list[int]],
                                      tmp_path: Path) -> None:
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=tmp_path)
    shard = ds.source.shards[0]
    barrier = threading.Barrier(6)
    seen: list[str] = []

    def pin() -> None:
        barrier.wait()
        with shard.local() as local:
            seen.append(local.path)

    threads = [threading.Thread(target=pin) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1 and len(seen) == 6
    stats = _counters(ds)
    assert stats.downloads == 1
    assert stats.downloads + stats.waits + stats.hits == 6


def test_eviction_is_lru_and_never_touches_a_shard_in_use(
    memory_dataset: tuple[str, list[int]], tmp_path: Path
) -> None:
    url, sizes = memory_dataset
    ds = ParquetDataset(url, memory=64, cache_dir=tmp_path, read_ahead=False)
    shards = ds.source.shards
    limit = shards[1].size + shards[2].size + 1  # room for about two shards
    tiny = ParquetDataset(url, memory=64, cache_dir=tmp_path, cache_limit=limit,
                          read_ahead=False)
    held = tiny.source.shards[0]
    with held.local() as copy:
        for k in (1, 2, 3, 1, 2, 3):  # every other shard twice, over the limit each time
            with tiny.source.shards[k].local() as other:
                assert Path(other.path).exists()
            assert Path(copy.path).exists()  # the shard in use stays
        assert _counters(tiny).evictions >= 3
        copy.check_unchanged()
    # LRU: with 0 released and 3 used last, the next download evicts 0 (least recent)
    # before 3; the bytes kept never exceed the limit once nothing is in use
    with tiny.source.shards[1].local():
        pass
    cache = tiny.source.store.cache
    assert not Path(cache.path(shards[0])).exists()
    assert Path(cache.path(shards[1])).exists()
    assert cache.usage() <= limit
    rows = [tiny[i] for i in range(len(tiny))]
    assert rows == [datagen.row(i) for i in range(sum(sizes))]
    assert cache.usage() <= limit


def test_a_copy_of_the_wrong_size_is_not_trusted(memory_dataset: tuple[str, list[int]],
                                                 tmp_path: Path) -> None:
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=tmp_path)
    assert ds[0] == datagen.row(0)
    copy = Path(ds.source.store.cache.path(ds.source.shards[0]))
    with open(copy, "r+b") as fh:
        fh.truncate(copy.stat().st_size // 2)
    again = ParquetDataset(memory_dataset[0], memory=64, cache_dir=tmp_path)
    assert [again[i] for i in range(120)] == [datagen.row(i) for i in range(120)]
    assert _counters(again).downloads == 1


def _children(*many: dict[str, Any]) -> list[subprocess.Popen[str]]:
    """Start children together; return once each has opened its dataset (said ``ready``)."""
    procs = [
        subprocess.Popen(
            [sys.executable, CHILD, json.dumps(args)],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for args in many
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", line
    return procs


@pytest.mark.heavy
def test_killed_downloader_leaves_no_trusted_file(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    datagen.write_shards(tmp_path / "src", [3000], row_group_size=500)
    server = HTTPServer()
    try:
        urls = serve_directory(server, tmp_path / "src", "ds")
        cache = tmp_path / "cache"
        server.state.stall.set()  # whole-object GETs send half the bytes, then hang
        go = tmp_path / "go"
        (proc,) = _children({"url": urls, "cache": str(cache), "mode": "pin", "shard": 0,
                             "go": str(go)})
        go.touch()
        deadline = time.monotonic() + 60
        parts: list[Path] = []
        while time.monotonic() < deadline and not parts:
            parts = [p for p in cache.glob("*.part-*") if p.stat().st_size > 0]
            time.sleep(0.01)
        assert parts, "the download never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert list(cached_files(cache)) == []  # only an untrusted part file is left
        assert list(cache.glob("*.part-*"))
        server.state.stall.clear()
        server.state.release.set()
        ds = ParquetDataset(urls, memory=64, cache_dir=cache)
        assert [ds[i] for i in range(3000)] == [datagen.row(i) for i in range(3000)]
        assert _counters(ds).downloads == 1
        assert list(cache.glob("*.part-*")) == []  # swept by the next download
    finally:
        server.close()


@pytest.mark.heavy
def test_two_processes_racing_download_each_shard_once(tmp_path: Path) -> None:
    server = S3Server()
    try:
        server.bucket("race")
        sizes = [400, 300, 500, 200]
        datagen.write_shards(tmp_path / "src", sizes, row_group_size=100)
        url = server.upload(tmp_path / "src", "s3://race/ds")
        go = tmp_path / "go"
        args = {"url": url, "options": server.options(), "cache": str(tmp_path / "cache"),
                "mode": "rows", "go": str(go)}
        procs = _children(args, args)
        go.touch()
        results = [json.loads(p.communicate(timeout=300)[0].splitlines()[-1]) for p in procs]
        assert all(p.returncode == 0 for p in procs)
        assert all(r["bad"] == [] and r["rows"] == sum(sizes) for r in results)
        assert sum(r["stats"]["downloads"] for r in results) == 4
        for k in range(4):
            assert server.gets(f"s3://race/ds/part-{k:05d}.parquet") == 1
    finally:
        server.close()


def test_leftover_parts_of_other_downloads_are_swept(memory_dataset: tuple[str, list[int]],
                                                     tmp_path: Path) -> None:
    directory = tmp_path / "c"
    directory.mkdir(mode=0o700)  # empty: ours
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=directory)
    stale = directory / ("0" * 40 + ".parquet.part-1-2-3")
    stale.write_bytes(b"half a shard")
    # a record being written when its process was killed (atomic_file's temp file)
    record = directory / (".1" + "a" * 39 + ".parquet.record.k_9x2Q.tmp")
    record.write_text('{"format"')
    # names like ours that are not: the user's, never touched
    kept = [directory / name for name in (
        ".1" + "a" * 39 + ".parquet.record.tmp", "." + "a" * 39 + ".parquet.record.x.tmp",
        ".1" + "a" * 39 + ".parquet.record.x.tmp.bak", "1" + "a" * 39 + ".parquet.record.x.tmp",
    )]
    for path in kept:
        path.write_text("mine")
    assert ds[0] == datagen.row(0)
    assert not stale.exists()
    assert not record.exists()
    assert all(path.read_text() == "mine" for path in kept)


@pytest.mark.heavy
def test_two_ddp_ranks_share_the_cache(tmp_path: Path) -> None:
    server = S3Server()
    try:
        server.bucket("ddp")
        sizes = [160, 96, 200, 64, 120]
        datagen.write_shards(tmp_path / "src", sizes, row_group_size=16)
        url = server.upload(tmp_path / "src", "s3://ddp/ds")
        go = tmp_path / "go"
        port = free_port()
        procs = _children(*(
            {"url": url, "options": server.options(), "cache": str(tmp_path / "cache"),
             "mode": "ddp", "go": str(go), "rank": rank, "world": 2,
             "init": f"tcp://127.0.0.1:{port}"}
            for rank in range(2)
        ))
        go.touch()
        results = [json.loads(p.communicate(timeout=300)[0].splitlines()[-1]) for p in procs]
        assert all(p.returncode == 0 for p in procs)
        total = sum(sizes)
        for epoch in range(2):
            ids = results[0]["epochs"][epoch] + results[1]["epochs"][epoch]
            assert len(ids) == len(set(ids)) == total  # each row once over the two ranks
        # different shuffles per epoch: each rank read shards the other one had fetched
        assert set(results[0]["epochs"][0]) != set(results[0]["epochs"][1])
        assert sum(r["stats"]["downloads"] for r in results) == len(sizes)
        for k in range(len(sizes)):
            assert server.gets(f"s3://ddp/ds/part-{k:05d}.parquet") == 1
    finally:
        server.close()


def test_footers_swapped_between_objects_are_read_again(
    memory_dataset: tuple[str, list[int]], tmp_path: Path
) -> None:
    """A kept footer names its object: another object's (same cache, swapped) is not used."""
    url, sizes = memory_dataset
    first = ParquetDataset(url, memory=64, cache_dir=tmp_path)
    expected = datagen.expected(sum(sizes))
    assert {k: datagen.plain(v) for k, v in first[sizes[0]].items()} == expected[sizes[0]]
    first.close()
    footers = sorted(tmp_path.rglob("*.footer"), key=lambda p: p.stat().st_size)
    assert len(footers) == len(sizes)
    # shards of 120 and 60 rows: a swap would plan one's windows from the other's footer
    one, other = footers[0], footers[-1]
    a, b = one.read_bytes(), other.read_bytes()
    assert a != b
    one.write_bytes(b)
    other.write_bytes(a)
    for _ in range(2):  # read again, kept anew, and the next dataset uses the mended ones
        again = ParquetDataset(url, memory=64, cache_dir=tmp_path)
        assert len(again) == sum(sizes)
        assert [again.source.shards[k].rows for k in range(len(sizes))] == sizes
        order = [*range(0, sum(sizes), 7), sum(sizes) - 1]
        rows = again.__getitems__(order)
        assert [{k: datagen.plain(v) for k, v in r.items()} for r in rows] == [
            expected[i] for i in order
        ]
        again.close()
    assert {one.read_bytes(), other.read_bytes()} == {a, b}  # each object's own footer again
    assert one.read_bytes() == a


def test_a_copy_refused_right_after_its_download_is_not_downloaded_forever(
        memory_dataset: tuple[str, list[int]], tmp_path: Path) -> None:
    # pin downloaded again whenever the copy just written was refused (a filesystem that
    # reports our own new file as another user's would do so every time): an endless loop
    class Refusing(ShardCache):
        def _valid(self, key: str, data: str, shard: Any) -> None:
            return None

    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=tmp_path / "c")
    store = ds.source.store
    cache = Refusing(tmp_path / "c")
    shard = ds.source.shards[1]
    with pytest.raises(SourceError, match=r"refused 3 copies of memory://.*part-00001"), \
            cache.pin(shard, store.download):
        pass
    assert cache.stats.downloads == 3
    assert ds[0] == datagen.row(0)  # the real cache still serves


def test_a_symbolic_link_at_a_lock_files_name_is_named_and_left_alone(
    memory_dataset: tuple[str, list[int]], tmp_path: Path
) -> None:
    # it was "cannot use the shard cache directory ...: Too many levels of symbolic links",
    # naming neither the file nor what to do
    url, sizes = memory_dataset
    cache = tmp_path / "cache"
    ds = ParquetDataset(url, memory=64, cache_dir=cache)
    assert ds[0] == datagen.row(0)
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file")
    locks = [p for p in cache.glob("*.lock") if not p.name.startswith(".")]
    assert locks
    for lock in locks:
        lock.unlink()
        lock.symlink_to(victim)
    again = ParquetDataset(url, memory=64, cache_dir=cache)
    with pytest.raises(SourceError, match=r"lock file .*\.lock is a symbolic link") as info:
        again[0]
    assert str(cache) in str(info.value) and "/proc/" not in str(info.value)
    assert victim.read_text() == "the user's file"
    assert all(lock.is_symlink() for lock in locks)
    for lock in locks:
        lock.unlink()
    assert ParquetDataset(url, memory=64, cache_dir=cache)[sizes[0]] == datagen.row(sizes[0])


def test_a_directory_at_a_lock_files_name_is_named(
    memory_dataset: tuple[str, list[int]], tmp_path: Path
) -> None:
    # "cannot use the shard cache directory ...: Is a directory" named no file to remove
    url, sizes = memory_dataset
    cache = tmp_path / "cache"
    assert ParquetDataset(url, memory=64, cache_dir=cache)[0] == datagen.row(0)
    locks = [p for p in cache.glob("*.lock") if not p.name.startswith(".")]
    assert locks
    for lock in locks:
        lock.unlink()
        lock.mkdir()
    again = ParquetDataset(url, memory=64, cache_dir=cache)
    with pytest.raises(SourceError, match=r"Is a directory \(.*\.lock; remove it\)") as info:
        again[0]
    named = str(info.value).split("(", 1)[1].split(";", 1)[0]
    assert Path(named) in locks and str(cache) in str(info.value)
    for lock in locks:
        lock.rmdir()
    assert ParquetDataset(url, memory=64, cache_dir=cache)[sizes[0]] == datagen.row(sizes[0])


def test_a_download_in_flight_counts_at_the_size_it_will_reach(
        memory_dataset: tuple[str, list[int]], tmp_path: Path) -> None:
    # a download counted at its part file's size so far let a second one start that did
    # not fit beside it: both finished, and the cache held more than its limit
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=tmp_path / "c",
                        read_ahead=False)
    store, shards = ds.source.store, ds.source.shards
    held = ShardCache(tmp_path / "c").usage()  # the footers kept at open
    limit = held + shards[0].size + shards[1].size // 2
    cache = ShardCache(tmp_path / "c", limit=limit)
    started, finish = threading.Event(), threading.Event()

    def slow(shard: Any, part: str) -> None:
        with open(part, "wb") as fh:
            fh.write(b"PAR1")  # a little of it, then held there until told
        started.set()
        assert finish.wait(60)
        store.download(shard, part)

    def pin() -> None:
        with cache.pin(shards[0], slow, evict=False):
            pass

    worker = threading.Thread(target=pin)
    worker.start()
    try:
        assert started.wait(60)
        rest = limit - held - shards[0].size
        assert cache.has_room(rest)
        assert not cache.has_room(rest + 1)
        assert not cache.has_room(shards[1].size)
    finally:
        finish.set()
        worker.join()
    assert cache.stats.downloads == 1
    assert cache.usage() == held + shards[0].size <= limit
    assert cache.has_room(rest) and not cache.has_room(rest + 1)


def test_a_killed_downloads_part_is_not_counted_at_its_size_while_readers_hold_the_shard(
        memory_dataset: tuple[str, list[int]], tmp_path: Path) -> None:
    # a whole download's part names the size it will reach; killed, its part was counted
    # at that size (not its disk) for as long as any reader held the shard's lock shared:
    # downloads refused, idle shards evicted for bytes that were not there
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=tmp_path / "c",
                        read_ahead=False)
    store, shards = ds.source.store, ds.source.shards
    held = ShardCache(tmp_path / "c").usage()
    limit = held + shards[0].size + shards[1].size + 4096
    cache = ShardCache(tmp_path / "c", limit=limit)
    with cache.pin(shards[0], store.download):
        pass
    key = cache.key(shards[2])
    directory = Path(cache.path(shards[2])).parent
    with cache.scratch(shards[2]):  # a reader of shard 2 (a window read by range)
        killed = directory / f"{key}.parquet.part-1-2-3a4b-{shards[2].size:x}"
        killed.write_bytes(b"PAR1")
        assert cache.has_room(shards[1].size)
        assert not killed.exists()  # no download of shard 2 runs: a leftover, swept
        killed.write_bytes(b"PAR1")
        with cache.pin(shards[1], store.download, evict=False):
            pass
        assert not killed.exists()
    assert cache.stats.evictions == 0 and cache.cached(shards[0]) and cache.cached(shards[1])


def _memory_copy(tmp_path: Path, name: str, sizes: list[int]) -> str:
    """Shards of ``sizes`` rows in fsspec's in-memory store (its URL)."""
    paths = datagen.write_shards(tmp_path / name, sizes, row_group_size=20)
    fs = fsspec.filesystem("memory")
    root = f"memory://{name}-{os.getpid()}-{time.monotonic_ns()}"
    for p in paths:
        fs.pipe(f"{root}/{p.name}", p.read_bytes())
    return root + "/"


def _footers(ds: ParquetDataset) -> list[Path]:
    store = ds.source.store
    return [store.cache.directory / (store.key(s.path, s.version, s.size) + ".footer")
            for s in ds.source.shards]


@pytest.mark.parametrize("spare", [0, 1, 2])
def test_footers_kept_at_open_stay_within_the_limit_and_never_evict_a_shard(
        tmp_path: Path, spare: int) -> None:
    # footers were saved without making room: many shards under a small limit held more
    # than the limit until a download trimmed the cache
    one = _memory_copy(tmp_path, "one", [120, 80, 100, 60])
    two = _memory_copy(tmp_path, "two", [70, 90, 50, 110, 30])
    probe = tmp_path / "probe"
    sizes = {u: [p.stat().st_size for p in _footers(ParquetDataset(u, cache_dir=probe))]
             for u in (one, two)}
    ds = ParquetDataset(one, memory=64, cache_dir=tmp_path / "c", read_ahead=False)
    cache = ds.source.store.cache
    with ds.source.shards[0].local():
        pass
    shard = cache.usage() - sum(sizes[one])  # the one cached copy
    assert shard == ds.source.shards[0].size
    # room for the shard, every footer of the second dataset and ``spare`` of the first's
    limit = shard + sum(sizes[two]) + sum(sorted(sizes[one])[:spare]) + spare
    time.sleep(0.01)  # the second dataset's footers are the more recent
    again = ParquetDataset(two, memory=64, cache_dir=tmp_path / "c", cache_limit=limit)
    kept = ShardCache(tmp_path / "c", limit=limit)
    assert kept.usage() <= limit
    assert kept.cached(ds.source.shards[0])  # footers never evict a shard
    assert all(p.exists() for p in _footers(again))  # the newest footers kept
    assert sum(p.exists() for p in _footers(ds)) <= spare
    assert [again[i] for i in range(len(again))] == [datagen.row(i) for i in range(350)]


def test_footers_over_a_limit_below_them_are_read_again_and_rows_stay_right(
        tmp_path: Path) -> None:
    url = _memory_copy(tmp_path, "small", [40, 30, 50])
    ds = ParquetDataset(url, memory=64, cache_dir=tmp_path / "c", cache_limit=1,
                        read_ahead=False)
    assert ShardCache(tmp_path / "c", limit=1).usage() <= 1  # no footer fits: none kept
    assert [ds[i] for i in range(len(ds))] == [datagen.row(i) for i in range(120)]


def test_a_footer_being_written_is_not_swept_and_a_killed_ones_part_is(
        memory_dataset: tuple[str, list[int]], tmp_path: Path) -> None:
    # a footer's part file has no lock: another process's sweep deleted it mid-write
    directory = tmp_path / "c"
    ds = ParquetDataset(memory_dataset[0], memory=64, cache_dir=directory)
    writing = directory / ("1" * 40 + ".footer.part-7-8-9abc")
    writing.write_bytes(b"x" * 5000)
    killed = directory / ("2" * 40 + ".footer.part-7-8-9abd")
    killed.write_bytes(b"y" * 7000)
    old = time.time() - 120
    os.utime(killed, (old, old))
    cache = ds.source.store.cache
    held = cache.make_room(0)
    assert writing.exists() and not killed.exists()
    st = os.stat(writing)
    assert held == cache.usage() + min(st.st_size, st.st_blocks * 512)  # counted while written
    assert ds[0] == datagen.row(0)
    assert writing.exists()
