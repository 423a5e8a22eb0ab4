"""Issue 27, item 1: cache files are reached through the directory resolved and held open.

A cache directory is resolved once and held open by a descriptor; every read and write of
its entries goes through that descriptor (``/proc/self/fd/<n>/<name>``), never through the
path's names again. So a link repointed, or a directory renamed away and replaced, after
the check can neither receive the victim's downloads nor serve a planted copy (even one
with a forged record, checksum and tag). Both directories are hashed before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen
from support.storage_server import S3Server

from undertale_duck import ParquetDataset
from undertale_duck.core.runtime import cachedir
from undertale_duck.core.source.remote.shard_cache import DATA_SUFFIX, file_xxh3

SIZES = [30, 20]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("held")
    yield server
    server.close()


@pytest.fixture(scope="module")
def url(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("heldsrc")
    datagen.write_shards(root / "data", SIZES, row_group_size=10)
    return s3.upload(root / "data", "s3://held/data")


def remote(s3: S3Server, url: str, directory: Path) -> ParquetDataset:
    return ParquetDataset(url, memory=64, storage_options=s3.options(), cache_dir=directory,
                          read_ahead=False)


def forged(first: int, rows: int, size: int) -> bytes:
    """A valid Parquet file of the shard's schema and exactly ``size`` bytes, wrong rows."""
    table = datagen.table(first, first + rows)
    table = table.set_column(0, "id", pa.array([f"PLANTED{i}" for i in range(rows)]))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=10, store_schema=False,
                   write_statistics=False)
    raw = sink.getvalue().to_pybytes()
    assert len(raw) <= size
    footer = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    return raw[:footer] + b"\0" * (size - len(raw)) + raw[footer:]  # padding before the footer


def plant(directory: Path, ds: ParquetDataset, shard: int) -> None:
    """A perfect forgery of shard ``shard``'s copy: its name and size, our record and tag."""
    cache = ds.source.store.cache
    target = ds.source.shards[shard]
    key = cache.key(target)
    path = directory / (key + DATA_SUFFIX)
    path.write_bytes(forged(sum(SIZES[:shard]), SIZES[shard], target.size))
    assert pq.read_table(path).column("id")[0].as_py() == "PLANTED0"
    st = path.stat()
    record = {"format": cachedir.RECORD_FORMAT, "entry": key + DATA_SUFFIX, "size": st.st_size,
              "inode": [st.st_dev, st.st_ino], "xxh3": file_xxh3(str(path)),
              "url": target.path}
    (directory / (key + DATA_SUFFIX + cachedir.RECORD_SUFFIX)).write_text(json.dumps(record))
    (directory / cachedir.TAG_NAME).write_bytes(cachedir.TAG)
    os.chmod(directory, 0o700)


def test_a_link_repointed_in_a_sticky_shared_directory_is_never_followed_again(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    shared = tmp_path / "scratch"  # as /tmp or /scratch: anyone writes, the sticky bit on
    shared.mkdir()
    os.chmod(shared, 0o1777)
    assert os.stat(shared).st_mode & stat.S_ISVTX
    victim, attacker = shared / "victim", shared / "attacker"
    victim.mkdir(mode=0o700)
    attacker.mkdir(mode=0o700)
    link = shared / "cache"
    link.symlink_to(victim, target_is_directory=True)
    ds = remote(s3, url, link)
    assert ds[0] == datagen.expected(1)[0]  # shard 0 downloaded into the victim's directory
    plant(attacker, ds, 1)  # at the name shard 1's copy will take
    before = digest(attacker)
    link.unlink()
    link.symlink_to(attacker, target_is_directory=True)  # repointed mid-run
    rows = [ds[i] for i in range(len(ds))]
    again = remote(s3, url, link)  # a second dataset of the same process: the same rule
    assert rows == [again[i] for i in range(len(again))] == datagen.expected(sum(SIZES))
    assert digest(attacker) == before  # nothing written there, nothing read from it
    assert sorted(os.listdir(attacker)) == sorted(before)
    copies = sorted(p.name for p in victim.glob("*" + DATA_SUFFIX))
    assert len(copies) == len(SIZES)  # both shards went to the directory that was checked


def test_a_cache_directory_renamed_away_and_replaced_mid_run_is_not_used(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    """The held descriptor, not the path: the renamed directory keeps receiving the copies."""
    base = tmp_path / "home"
    base.mkdir(mode=0o700)
    directory = base / "cache"
    ds = remote(s3, url, directory)
    assert ds[0] == datagen.expected(1)[0]
    moved = base / "cache-moved"
    os.rename(directory, moved)  # the checked directory, renamed away
    directory.mkdir(mode=0o700)  # and another put at its name, with a forged copy
    plant(directory, ds, 1)
    before = digest(directory)
    rows = [ds[i] for i in range(len(ds))]
    assert rows == datagen.expected(sum(SIZES))
    assert digest(directory) == before
    assert len(list(moved.glob("*" + DATA_SUFFIX))) == len(SIZES)
    # the kept footers and locks went there too: the impostor holds only what was planted
    assert sorted(os.listdir(directory)) == sorted(before)


def test_without_proc_the_path_is_used_and_still_checked(
    s3: S3Server, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where descriptors cannot be reached by path, a swap is detected and resolved again."""
    monkeypatch.setattr(cachedir, "_PROC_FD", str(tmp_path / "no-proc"))
    base = tmp_path / "home"
    base.mkdir(mode=0o700)
    directory = base / "cache"
    ds = remote(s3, url, directory)
    assert ds[0] == datagen.expected(1)[0]
    assert cachedir.held_path(directory) == directory
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))


def test_messages_name_held_directories_by_their_paths(tmp_path: Path) -> None:
    directory = cachedir.private_directory(tmp_path / "held", what="a test cache")
    held = cachedir.held_path(directory)
    assert str(held).startswith("/proc/self/fd/")
    fd = held.name
    text = f'Failed to read file "{held}/abc.parquet": bad; also {held}'
    assert cachedir.unheld(text) == (
        f'Failed to read file "{directory}/abc.parquet": bad; also {directory}')
    # descriptors not held (none reaches 2**31), and longer names, stay as they are
    assert cachedir.unheld(f"in '{held}'; at {held}") == f"in '{directory}'; at {directory}"
    for other in (f"/proc/self/fd/{fd}9999999999/x", f"/proc/self/fd/{fd}x",
                  "/proc/self/fd/99999999999/x", f"/data{held}/x.parquet", f"~{held}",
                  f"{held}.bak", f"{held}-old/x", f"./{held}", f"x{held}",
                  f"/proc/self/fdx/{fd}/x", "no path at all"):
        assert cachedir.unheld(other) == other


def test_a_child_forked_while_a_thread_resolves_a_directory_can_use_the_cache(
        tmp_path: Path) -> None:
    # the lock guarding the held directories, taken by another thread (a background
    # download) at fork(), stayed taken in the child: its first cache access hung
    import multiprocessing
    import threading

    directory = cachedir.private_directory(tmp_path / "held", what="a test cache")
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with cachedir._resolved_lock:
            taken.set()
            done.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(60)
        child = multiprocessing.get_context("fork").Process(
            target=cachedir.held_path, args=(directory,))
        child.start()
        child.join(60)
        hung = child.is_alive()
        if hung:
            child.kill()
            child.join()
    finally:
        done.set()
        holder.join()
    assert not hung and child.exitcode == 0
