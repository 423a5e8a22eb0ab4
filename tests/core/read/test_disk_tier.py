from __future__ import annotations

import multiprocessing
import os
import random
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from support.datagen import plain

from undertale_duck import ArgumentError, ParquetDataset, ShardChangedError
from undertale_duck.core.read.disk_tier import (
    CACHE_ENV,
    OLD_TRAILERS,
    DiskTier,
    default_directory,
    prepare_directory,
)
from undertale_duck.core.source.windows import Window


def window_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix == ".arrow")


def dataset_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


@pytest.fixture()
def data(tmp_path: Path) -> tuple[Path, int]:
    root = tmp_path / "data"
    sizes = [120, 0, 75, 200]
    datagen.write_shards(root, sizes, row_group_size=[30, 1, 25, 64])
    return root, sum(sizes)


@pytest.mark.parametrize("fmt", ["python", "torch"])
def test_every_value_through_the_disk_tier(
    data: tuple[Path, int], tmp_path: Path, fmt: str
) -> None:
    root, total = data
    before = dataset_files(root)
    cache = tmp_path / "cache"
    expected = datagen.expected(total)
    ds = ParquetDataset(root, memory=0.02, window_bytes=3000, format=fmt,  # type: ignore[arg-type]
                        disk=64, disk_dir=cache, read_ahead=False)
    order = list(range(total))
    random.Random(1).shuffle(order)
    for epoch in range(2):
        for start in range(0, total, 16):
            batch = order[start:start + 16]
            rows = ds.__getitems__(batch)
            assert [{k: plain(v) for k, v in r.items()} for r in rows] == [
                expected[i] for i in batch
            ]
        if epoch == 0:
            decoded = ds.cache_stats.misses
    assert decoded == len(ds.windows)  # each window decoded once, then served from its file
    assert ds.cache_stats.misses == decoded
    assert len(window_files(cache)) == len(ds.windows)
    assert {k: plain(v) for k, v in ds[-3].items()} == expected[-3]
    assert dataset_files(root) == before  # nothing written in or next to the dataset

    again = ParquetDataset(root, memory=0.02, window_bytes=3000, format=fmt,  # type: ignore[arg-type]
                           disk=64, disk_dir=cache)
    rows = again.__getitems__(order[:50])
    assert [{k: plain(v) for k, v in r.items()} for r in rows] == [expected[i] for i in order[:50]]
    assert again.cache_stats.misses == 0  # another dataset object (process) decodes nothing
    stats = again.disk_stats
    assert stats is not None and stats.hits > 0 and stats.writes == 0


def test_column_projection_gets_its_own_files(data: tuple[Path, int], tmp_path: Path) -> None:
    root, total = data
    cache = tmp_path / "cache"
    expected = datagen.expected(total)
    full = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache)
    part = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache,
                          columns=["label", "id"])
    assert full[7] == expected[7]
    assert part[7] == {"label": expected[7]["label"], "id": expected[7]["id"]}
    assert full[7] == expected[7]


def test_a_view_gets_its_own_files(data: tuple[Path, int], tmp_path: Path) -> None:
    root, total = data
    cache = tmp_path / "cache"
    expected = [r for r in datagen.expected(total) if r["label"] == 3]
    view = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache, where="label = 3")
    plain_ds = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache)
    assert plain_ds[5] == datagen.expected(6)[5]
    assert view.__getitems__(list(range(len(view)))) == expected
    again = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache, where="label = 3")
    assert again.__getitems__(list(range(len(again)))[::-1]) == expected[::-1]
    assert again.cache_stats.misses == 0


def test_directory_never_in_above_or_beside_the_dataset(data: tuple[Path, int]) -> None:
    root, _ = data
    for bad in (root, root / "cache", root / "sub" / "deeper", root.parent):
        with pytest.raises(ArgumentError, match="disk_dir"):
            ParquetDataset(root, disk=8, disk_dir=bad)
    single = next(root.glob("*.parquet"))
    with pytest.raises(ArgumentError, match="disk_dir"):
        ParquetDataset(single, disk=8, disk_dir=root)
    assert not (root / "cache").exists()


def test_arguments_are_checked(data: tuple[Path, int], tmp_path: Path) -> None:
    root, _ = data
    for bad in (-1, "ten", "10 parsecs", True, float("nan")):
        with pytest.raises(ArgumentError, match="disk"):
            ParquetDataset(root, disk=bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="disk_dir needs disk"):
        ParquetDataset(root, disk_dir=tmp_path / "c")
    for wrong in (123, [str(tmp_path)], b"/tmp/c"):  # a raw TypeError before
        with pytest.raises(ArgumentError, match="disk_dir must be a directory path"):
            ParquetDataset(root, disk=8, disk_dir=wrong)  # type: ignore[arg-type]
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ArgumentError, match="cannot be created"):
        ParquetDataset(root, disk=8, disk_dir=blocker / "sub")
    off = ParquetDataset(root, disk=0, disk_dir=tmp_path / "unused")
    assert off.disk_stats is None and off[0] == datagen.expected(1)[0]
    assert not (tmp_path / "unused").exists()


def test_default_directory_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: tuple[Path, int]
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))
    assert default_directory() == tmp_path / "env-cache" / "windows"
    ds = ParquetDataset(data[0], window_bytes=3000, disk=8)
    ds.__getitems__(list(range(10)))
    assert ds.disk_dir == os.path.realpath(tmp_path / "env-cache" / "windows")
    assert window_files(tmp_path / "env-cache" / "windows")
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory() == tmp_path / "xdg" / "undertale_duck" / "windows"


def test_a_changed_shard_is_never_served_from_old_files(tmp_path: Path) -> None:
    root = tmp_path / "data"
    datagen.write_shards(root, [60, 60], row_group_size=20)
    cache = tmp_path / "cache"
    expected = datagen.expected(120)
    first = ParquetDataset(root, window_bytes=2000, disk=64, disk_dir=cache)
    assert first.__getitems__(list(range(120))) == expected
    held = len(window_files(cache))
    opened = ParquetDataset(root, window_bytes=2000, disk=64, disk_dir=cache)

    # Replace shard 1 by different rows (those of global rows 500..559).
    path = root / "part-00001.parquet"
    pq.write_table(datagen.table(500, 560), path, row_group_size=20)
    with pytest.raises(ShardChangedError):
        opened[70]  # its file was written from the old shard: refused, as a read would be
    assert opened[10] == expected[10]  # shard 0 is unchanged

    fresh = ParquetDataset(root, window_bytes=2000, disk=64, disk_dir=cache)
    new = datagen.expected(560)
    assert fresh.__getitems__(list(range(60, 120))) == new[500:560]
    assert fresh.cache_stats.misses > 0  # new fingerprint, new keys: decoded again
    assert len(window_files(cache)) > held


def test_corrupt_or_foreign_files_are_replaced(data: tuple[Path, int], tmp_path: Path) -> None:
    root, total = data
    cache = tmp_path / "cache"
    expected = datagen.expected(total)
    ds = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache)
    ds.__getitems__(list(range(total)))
    files = window_files(cache)
    files[0].write_bytes(files[0].read_bytes()[:100])  # truncated (as after a crash)
    (cache / "notes.txt").write_text("not ours")
    again = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache)
    assert again.__getitems__(list(range(total))) == expected
    assert again.cache_stats.misses == 1  # the truncated file's window, decoded again
    assert (cache / "notes.txt").read_text() == "not ours"  # only our own files are touched


@pytest.mark.parametrize("damaged", [False, True])
def test_the_read_ahead_maps_the_coming_windows_files(
    data: tuple[Path, int], tmp_path: Path, damaged: bool
) -> None:
    root, total = data
    cache = tmp_path / "cache"
    expected = datagen.expected(total)
    first = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache, format="torch")
    first.__getitems__(list(range(total)))
    assert first.cache_stats.misses == len(first.windows) > 2
    # another object, as another process: its files must be mapped and checked first
    again = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache, format="torch")
    tier = again.reader.cache.tier  # type: ignore[attr-defined]  # a TieredCache
    if damaged:  # the next window's file, truncated: never mapped, decoded anew
        path = Path(tier.path(1))
        path.write_bytes(path.read_bytes()[:200])
    size = again.windows[0].rows
    rows = again.__getitems__(list(range(size)))
    assert [{k: plain(v) for k, v in r.items()} for r in rows] == expected[:size]
    hits = again.disk_stats.hits  # type: ignore[union-attr]
    again.reader.ahead.settle()
    # the consumer is still on window 0; window 1's file was mapped (its pages read, its
    # checksum taken) in the background, unless it was damaged
    assert tier.opened(1) is not damaged
    assert again.reader.read_ahead_stats["read"] >= (0 if damaged else 1)
    assert again.disk_stats.hits == hits  # mapping ahead is not a hit: the consumer's is
    rows = again.__getitems__(list(range(size, total)))
    assert [{k: plain(v) for k, v in r.items()} for r in rows] == expected[size:]
    assert again.cache_stats.misses == (1 if damaged else 0)
    assert again.disk_stats.writes == (1 if damaged else 0)  # type: ignore[union-attr]


# --------------------------------------------------------------------------- bounds


def _table(seed: int, rows: int) -> pa.Table:
    return pa.table({"id": [f"{seed}-{i}" for i in range(rows)],
                     "x": pa.array(np.arange(rows, dtype=np.int64) * seed)})


class _Source:
    """What DiskTier needs of a Source: the columns and unchanging shards."""

    class _Shard:
        path = "/shard.parquet"  # local: checked (unchanged) before a file is mapped

        def check_unchanged(self) -> None:
            pass

    columns = ("id", "x")
    shards = (_Shard(),)


def _tier(directory: str, limit: int, keys: list[str], windows: list[Window]) -> DiskTier:
    return DiskTier(directory, limit, keys, _Source(), windows, ["id", "x"])  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(
    limit=st.integers(2_000, 60_000),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 11)), min_size=1, max_size=40),
    sizes=st.lists(st.integers(1, 600), min_size=12, max_size=12),
)
def test_bound_and_values_under_any_sequence(
    tmp_path_factory: pytest.TempPathFactory, limit: int, ops: list[tuple[bool, int]],
    sizes: list[int],
) -> None:
    directory = str(tmp_path_factory.mktemp("tier"))
    windows = [Window(0, 0, rows, 0) for rows in sizes]
    keys = [f"{k:064x}" for k in range(12)]
    tier = _tier(directory, limit, keys, windows)
    tables = [_table(k + 1, rows) for k, rows in enumerate(sizes)]
    for write, k in ops:
        if write:
            stored = tier.put(k, tables[k])
            held, files = tier.scan()
            assert held <= limit
            assert held == sum(os.path.getsize(p) for _, _, p in files)
            # The window just written is kept; one that cannot fit is not written.
            assert stored == os.path.exists(tier.path(k))
        got = tier.get(k)
        assert got is None or got.equals(tables[k])
    assert not [n for n in os.listdir(directory) if n.endswith(".tmp")]


def _equal_windows(
    count: int, tmp_path: Path
) -> tuple[list[Window], list[str], list[pa.Table], int]:
    """``count`` windows of 200 rows, their keys and tables, and the size of one's file."""
    windows = [Window(0, 0, 200, 0) for _ in range(count)]
    keys = [f"{k:064x}" for k in range(count)]
    tables = [_table(k + 1, 200) for k in range(count)]
    probe = _tier(str(tmp_path / "probe"), 1 << 30, keys, windows)
    probe.put(0, tables[0])
    return windows, keys, tables, os.path.getsize(probe.path(0))


def test_least_recently_used_files_go_first(tmp_path: Path) -> None:
    windows, keys, tables, size = _equal_windows(4, tmp_path)
    tier = _tier(str(tmp_path / "t"), 3 * size, keys, windows)
    for k in range(3):
        assert tier.put(k, tables[k])
        os.utime(tier.path(k), ns=(10**18 + k * 10**9, 10**18 + k * 10**9))
    other = _tier(str(tmp_path / "t"), 3 * size, keys, windows)
    assert other.get(0) is not None  # reading window 0 makes it the most recent
    assert other.put(3, tables[3])
    assert [os.path.exists(other.path(k)) for k in range(4)] == [True, False, True, True]


@settings(max_examples=40, deadline=None)
@given(where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255),
       rows=st.integers(1, 300))
def test_a_file_with_any_byte_changed_is_refused_and_written_anew(
    tmp_path_factory: pytest.TempPathFactory, where: float, mask: int, rows: int
) -> None:
    """Body, magic or digest: a file another process wrote is checked whole when mapped."""
    directory = str(tmp_path_factory.mktemp("tier"))
    windows = [Window(0, 0, rows, 0)]
    keys = ["a" * 64]
    table = _table(3, rows)
    assert _tier(directory, 1 << 30, keys, windows).put(0, table)
    path = Path(directory) / f"{keys[0]}.arrow"
    data = bytearray(path.read_bytes())
    at = int(where * len(data))
    data[at] ^= mask
    path.unlink()
    path.write_bytes(bytes(data))  # a new inode: the check runs, as in another process
    other = _tier(directory, 1 << 30, keys, windows)
    assert other.get(0) is None
    assert not path.exists()  # removed, then written anew from the shard
    assert other.put(0, table)
    got = _tier(directory, 1 << 30, keys, windows).get(0)
    assert got is not None and got.equals(table)


def _old_file(path: Path, table: pa.Table, mtime_ns: int) -> None:
    """A window file as the previous version wrote it: Arrow IPC, then its CRC-32 trailer."""
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as out:
        out.write_table(table)
    body = sink.getvalue().to_pybytes()
    magic, width = OLD_TRAILERS[0]
    path.write_bytes(body + magic + zlib.crc32(body).to_bytes(width, "big"))
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_files_an_earlier_version_wrote_are_never_read_and_leave_with_the_bound(
    tmp_path: Path,
) -> None:
    windows, keys, tables, size = _equal_windows(3, tmp_path)
    directory = tmp_path / "t"
    directory.mkdir(mode=0o700)
    stale = directory / f"{'e' * 64}.arrow"  # another window of an older version
    _old_file(stale, tables[2], 10**18)
    tier = _tier(str(directory), 3 * size, keys, windows)
    _old_file(Path(tier.path(0)), tables[1], 10**18 + 1)  # our name, older format, other rows
    held, files = tier.scan()
    assert len(files) == 2 and held == sum(os.path.getsize(p) for _, _, p in files)
    assert tier.get(0) is None  # never served: its trailer is not this version's
    assert not os.path.exists(tier.path(0))
    for k in range(3):
        assert tier.put(k, tables[k])
        got = _tier(str(directory), 3 * size, keys, windows).get(k)
        assert got is not None and got.equals(tables[k])
    assert not stale.exists()  # the least recently used file made room for ours
    held, files = tier.scan()
    assert held <= 3 * size and len(files) == 3


# --------------------------------------------------------------------------- processes


def _reader(root: str, cache: str, seed: int, total: int, out: Any) -> None:
    try:
        ds = ParquetDataset(root, memory=0.02, window_bytes=3000, format="torch",
                            disk=0.05, disk_dir=cache)
        expected = datagen.expected(total)
        order = list(range(total))
        random.Random(seed).shuffle(order)
        for start in range(0, total, 8):
            batch = order[start:start + 8]
            rows = ds.__getitems__(batch)
            got = [{k: plain(v) for k, v in r.items()} for r in rows]
            if got != [expected[i] for i in batch]:
                out.put(f"process {seed}: wrong rows for {batch}")
                return
        stats = ds.disk_stats
        out.put(("ok", stats.writes if stats else -1))
    except BaseException as exc:  # report, never hang the parent
        out.put(f"process {seed}: {type(exc).__name__}: {exc}")


@pytest.mark.heavy
def test_processes_racing_on_one_directory(data: tuple[Path, int], tmp_path: Path) -> None:
    root, total = data
    cache = tmp_path / "cache"
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_reader, args=(str(root), str(cache), s, total, out))
             for s in range(3)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(isinstance(r, tuple) and r[0] == "ok" for r in results), results
    assert sum(r[1] for r in results) > 0
    held, files = _tier(str(cache), 1, [], []).scan()
    # The bound (0.05 MB) holds up to the windows the three processes wrote at once.
    largest = max(os.path.getsize(p) for _, _, p in files)
    assert held <= 0.05 * (1 << 20) + 3 * largest
    assert not [n for n in os.listdir(cache) if n.endswith(".tmp")]


def test_prepare_directory_refuses_overlap_and_creates(tmp_path: Path) -> None:
    shard = tmp_path / "ds" / "a.parquet"
    shard.parent.mkdir()
    shard.write_bytes(b"")
    with pytest.raises(ArgumentError):
        prepare_directory(tmp_path / "ds", [str(shard)])
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "ds")
    with pytest.raises(ArgumentError):  # a symbolic link to the dataset is the dataset
        prepare_directory(link / "cache", [str(shard)])
    made = prepare_directory(tmp_path / "c" / "windows", [str(shard)])
    assert os.path.isdir(made) and (os.stat(made).st_mode & 0o777) == 0o700


@pytest.mark.parametrize("how", ["swap", "copy"])
def test_window_files_swapped_or_copied_over_each_other_are_written_anew(
    data: tuple[Path, int], tmp_path: Path, how: str
) -> None:
    """A window file is sound Arrow with the right row count, but another window's rows."""
    root, total = data
    cache = tmp_path / "cache"
    expected = datagen.expected(total)
    first = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache, read_ahead=False)
    list(first.__getitems__(list(range(total))))
    first.close()
    # two windows of one row count (so only what the file is bound to can tell them apart)
    by_rows: dict[int, list[int]] = {}
    for position, window in enumerate(first.windows):
        by_rows.setdefault(window.rows, []).append(position)
    p, q = next(ps for ps in by_rows.values() if len(ps) >= 2)[:2]
    keys = first.reader.cache.tier._keys  # type: ignore[attr-defined]
    a, b = cache / f"{keys[p]}.arrow", cache / f"{keys[q]}.arrow"
    if how == "swap":
        a.rename(tmp_path / "a")
        b.rename(a)
        (tmp_path / "a").rename(b)
    else:
        a.write_bytes(b.read_bytes())
    again = ParquetDataset(root, window_bytes=3000, disk=64, disk_dir=cache, read_ahead=False)
    for position in (p, q):
        window = again.windows[position]
        rows = again.__getitems__(list(range(window.offset, window.end)))
        assert [{k: plain(v) for k, v in r.items()} for r in rows] == expected[
            window.offset:window.end
        ]
    stats = again.disk_stats
    assert stats is not None and stats.writes == (2 if how == "swap" else 1)


@pytest.mark.parametrize("restore_mtime", [False, True])
def test_a_file_copied_over_in_place_after_it_was_checked_is_checked_again(
    tmp_path: Path, restore_mtime: bool
) -> None:
    """``cp`` over a window file keeps its inode and size: the process that wrote (and so
    trusts) it must still not serve another window's rows once the mapping is dropped."""
    windows, keys, tables, size = _equal_windows(2, tmp_path)
    tier = _tier(str(tmp_path / "t"), 1 << 30, keys, windows)
    assert tier.put(0, tables[0]) and tier.put(1, tables[1])
    first = tier.get(0)
    assert first is not None and first.equals(tables[0])
    tier.forget()  # as when more than OPEN_WINDOWS windows were mapped since
    # past the tick of the file system's clock that stamped the file (coarse on kernels
    # without fine-grained timestamps), so the copy below gets a later ctime
    time.sleep(0.02)
    a, b = Path(tier.path(0)), Path(tier.path(1))
    assert a.stat().st_size == b.stat().st_size == size
    before = a.stat()
    with open(a, "r+b") as out:  # in place, as cp does: same inode, same size
        out.write(b.read_bytes())
    if restore_mtime:
        os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (a.stat().st_ino, a.stat().st_size) == (before.st_ino, before.st_size)
    got = tier.get(0)
    assert got is None  # refused and removed: the reader decodes it again
    assert not a.exists()
    assert tier.put(0, tables[0])
    again = tier.get(0)
    assert again is not None and again.equals(tables[0])
