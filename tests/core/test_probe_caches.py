"""Probes of the caches as an attacker and as a careless user would poke them.

Real files, the real S3 server (moto) and real child processes: a full disk is a child
under ``RLIMIT_FSIZE`` (every write past the limit fails with ``EFBIG``, as a full disk's
with ``ENOSPC``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import datagen
from support.storage_server import S3Server

from undertale_duck import ParquetDataset

ROOT = Path(__file__).resolve().parents[2]
SIZES = [40, 30]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("probe")
    yield server
    server.close()


@pytest.fixture(scope="module")
def url(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("probesrc")
    datagen.write_shards(root / "data", SIZES, row_group_size=10)
    return s3.upload(root / "data", "s3://probe/data")


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


FULL_DISK_CHILD = """
import json, resource, signal, sys
from undertale_duck import ParquetDataset
options, cache, url, view = json.loads(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # no shard fits: a full disk
try:
    ds = ParquetDataset(url, memory=64, storage_options=options, cache_dir=cache,
                        **({"where": "label < 3"} if view else {}))
    ds[0]
except Exception as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
"""


@pytest.mark.parametrize("view", [False, True], ids=["download", "range-read"])
def test_a_full_shard_cache_is_named_not_retried_nor_raw(
    s3: S3Server, url: str, tmp_path: Path, view: bool
) -> None:
    """A shard cache on a full disk is a ``SourceError`` naming it, asked of the store once.

    A whole-shard download (a window that needs every byte) was retried four times and
    blamed on the store ("the store may be down"); a window read by range (here a view's
    indexing pass) raised the raw ``OSError`` of the sparse part file.
    """
    cache = tmp_path / "cache"
    shard = f"{url}part-00000.parquet"
    s3.log.clear()
    out = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHILD, json.dumps([s3.options(), str(cache), url, view])],
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
             "UNDERTALE_DUCK_CACHE": str(tmp_path / "root")},
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    kind, message = json.loads(out.stdout.splitlines()[-1])
    assert kind == "SourceError", message
    assert "into the shard cache" in message and "File too large" in message, message
    assert "store may be down" not in message
    assert shard.replace("s3://", "") in message
    assert s3.gets(shard) <= 1  # never downloaded again for a local disk's failure
    assert not [p for p in cache.iterdir() if ".part-" in p.name]


def test_a_glob_over_a_tree_never_lists_the_shard_cache_inside_it(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    """A shard cache_dir= inside a local dataset's tree never becomes part of its glob.

    ``data/`` holds no Parquet file of its own (only ``train/``), so ``data/cache`` passes
    the cache directory's check; its shard copies (``<key>.parquet``) were then listed by
    ``data/**/*.parquet`` as shards of the local dataset: every remote row served twice.
    """
    root = tmp_path / "data"
    datagen.write_shards(root / "train", [25, 15], row_group_size=10)
    remote = ParquetDataset(url, memory=64, storage_options=s3.options(),
                            cache_dir=str(root / "cache"))
    assert [remote[i]["id"] for i in range(len(remote))] == [
        r["id"] for r in datagen.expected(sum(SIZES))
    ]
    copies = sorted(str(p) for p in (root / "cache").glob("*.parquet"))
    assert len(copies) == len(SIZES)
    before = digest(root / "train")

    ds = ParquetDataset(str(root / "**" / "*.parquet"), memory=64)
    assert ds.shards == sorted(str(p) for p in (root / "train").glob("*.parquet"))
    assert [ds[i] for i in range(len(ds))] == datagen.expected(40)
    # named literally, the cache directory is what was asked for
    assert ParquetDataset(str(root / "cache" / "*.parquet")).shards == copies
    assert digest(root / "train") == before


def test_a_view_bitmap_edited_in_place_with_its_mtime_put_back_is_never_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept-rows bitmap rewritten in place (mtime restored) is checked again, not served.

    The mapping a process holds shows the file's new bits; it was checked again only when
    the file's inode, size or mtime changed, so swapping a kept and a dropped row's bits and
    putting the mtime back served a row the view's filter drops.
    """
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "root"))
    datagen.write_shards(tmp_path / "data", SIZES, row_group_size=10)
    want = [r["id"] for r in datagen.expected(sum(SIZES)) if r["label"] < 3]
    first = ParquetDataset(str(tmp_path / "data"), memory=64, where="label < 3")
    assert [first[i]["id"] for i in range(len(first))] == want
    (bitmap,) = (tmp_path / "root" / "views").glob("*.rows")
    st = bitmap.stat()
    data = bytearray(bitmap.read_bytes())
    assert data[0] == 0b11100001  # rows 0-2 kept (label 0-2), 3-6 dropped, 7 kept
    data[0] = 0b11110000  # row 3 (label 3) in place of row 7: the same count
    with open(bitmap, "r+b") as out:
        out.write(data)
    os.utime(bitmap, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert bitmap.stat().st_mtime_ns == st.st_mtime_ns

    again = ParquetDataset(str(tmp_path / "data"), memory=64, where="label < 3")
    assert [again[i]["id"] for i in range(len(again))] == want


@pytest.mark.parametrize("edit", ["one more", "one fewer", "swapped"])
def test_a_view_index_record_edited_between_runs_is_indexed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    """A view index whose counts were edited is not trusted: the view is indexed again.

    Every later open (``refresh()`` too) trusted the record, and each window of the shard
    then raised ``ShardChangedError`` blaming a side table the view does not have.
    """
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "root"))
    datagen.write_shards(tmp_path / "data", SIZES, row_group_size=10)
    want = [r["id"] for r in datagen.expected(sum(SIZES)) if r["label"] < 3]
    first = ParquetDataset(str(tmp_path / "data"), memory=64, where="label < 3")
    assert len(first) == len(want)
    (index,) = (tmp_path / "root" / "views").glob("*.json")
    record = json.loads(index.read_bytes())
    counts = record["counts"]
    if edit == "swapped":
        counts[0], counts[1] = counts[1], counts[0]
    else:
        counts[0] += 1 if edit == "one more" else -1
    index.write_text(json.dumps(record))

    again = ParquetDataset(str(tmp_path / "data"), memory=64, where="label < 3")
    assert [again[i]["id"] for i in range(len(again))] == want


def test_a_directory_at_a_window_files_name_costs_one_decode_not_one_per_row(
    tmp_path: Path,
) -> None:
    """A directory (or FIFO) planted at a disk-tier window's name never makes rows re-decode.

    The tier took the name for a window file written by another process: the window was
    neither written nor kept in memory, so every row of it decoded the whole window again.
    """
    datagen.write_shards(tmp_path / "data", SIZES, row_group_size=10)
    want = datagen.expected(sum(SIZES))
    disk = tmp_path / "disk"
    first = ParquetDataset(str(tmp_path / "data"), memory=64, disk="5MiB", disk_dir=str(disk))
    assert [first[i] for i in range(len(first))] == want
    files = sorted(p for p in disk.iterdir() if p.suffix == ".arrow")
    assert len(files) == len(SIZES)  # one window per shard
    files[0].unlink()
    files[0].mkdir()
    files[1].unlink()
    os.mkfifo(files[1])

    again = ParquetDataset(str(tmp_path / "data"), memory=64, disk="5MiB", disk_dir=str(disk))
    for _ in range(2):
        assert [again[i] for i in range(len(again))] == want
    assert again.cache_stats.misses <= len(SIZES)  # each window decoded once at most
    assert files[0].is_dir() and not any(files[0].iterdir())  # not ours: left alone
    assert files[1].is_file()  # the FIFO replaced by the window's file
