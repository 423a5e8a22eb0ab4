"""Issue 27's attacks on the cache directories, on real files and the real S3 server (moto).

One rule decides every cache directory (core/runtime/cachedir.py ``private_directory``):
ours only (marked by ``CACHEDIR.TAG``), never one holding someone's Parquet files, resolved
once and held open, and only entries our records name are ever deleted. The dataset's (and
the user's) files are hashed before and after every attack.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from support import datagen
from support.storage_server import S3Server

from undertale_duck import ParquetDataset
from undertale_duck.core.runtime import cachedir
from undertale_duck.core.source.remote.shard_cache import DATA_SUFFIX, file_crc32, file_xxh3
from undertale_duck.errors import ArgumentError, SourceError

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
    server.bucket("own")
    yield server
    server.close()


@pytest.fixture(scope="module")
def url(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("ownsrc")
    datagen.write_shards(root / "data", SIZES, row_group_size=10)
    return s3.upload(root / "data", "s3://own/data")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=10)
    return root


def remote(s3: S3Server, url: str, **kwargs: object) -> ParquetDataset:
    return ParquetDataset(url, memory=64, storage_options=s3.options(), **kwargs)  # type: ignore[arg-type]


def test_a_content_addressed_store_is_never_a_cache_and_loses_nothing(
    s3: S3Server, url: str, data: Path, tmp_path: Path
) -> None:
    """<40 hex>.parquet is how content-addressed stores name shards: never deleted."""
    store = tmp_path / "cas"
    store.mkdir(mode=0o700)
    for shard in sorted(data.glob("*.parquet")):
        content = shard.read_bytes()
        (store / f"{hashlib.sha1(content).hexdigest()}.parquet").write_bytes(content)
    before = digest(store)
    ds = remote(s3, url, cache_dir=store, cache_limit="20KB")
    with pytest.raises(SourceError, match="holding Parquet files"):
        ds[0]
    with pytest.raises(SourceError, match="holding Parquet files"):
        ds.source.store.cache.clear()
    assert digest(store) == before


def test_a_directory_with_other_files_gets_our_own_tagged_folder(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / "notes.txt").write_text("my notes")
    (mine / ("a" * 40 + ".footer")).write_bytes(b"a file named like ours")
    before = digest(mine)
    ds = remote(s3, url, cache_dir=mine, cache_limit="1KB")
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    ours = mine / cachedir.OWN_FOLDER
    assert ds.source.store.cache.directory == ours
    assert (ours / cachedir.TAG_NAME).read_bytes().startswith(cachedir.TAG_SIGNATURE)
    cache = ds.source.store.cache
    cache.make_room(1 << 30)
    cache.clear()
    after = digest(mine)
    assert {k: v for k, v in after.items() if not k.startswith(cachedir.OWN_FOLDER)} == before


def test_clear_deletes_only_recorded_copies(
    s3: S3Server, url: str, data: Path, tmp_path: Path
) -> None:
    """A user's file dropped into our directory later, named like a copy, is never deleted."""
    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory, read_ahead=False)
    assert ds[0] == datagen.expected(1)[0]
    planted = directory / ("b" * 40 + ".parquet")
    planted.write_bytes(sorted(data.glob("*.parquet"))[0].read_bytes())
    foot = directory / ("b" * 40 + ".footer")
    foot.write_bytes(b"not our footer")
    cache = ds.source.store.cache
    assert len(list(directory.glob("*.parquet.record"))) == 1
    assert cache.clear() == 1  # the copies we downloaded, and nothing else
    assert planted.exists() and foot.read_bytes() == b"not our footer"
    assert not list(directory.glob("*.record"))


def test_an_existing_cache_of_ours_is_adopted_and_tagged(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory)
    assert ds[0] == datagen.expected(1)[0]
    (directory / cachedir.TAG_NAME).unlink()  # e.g. removed by a cleanup tool
    cachedir._resolved.clear()
    again = remote(s3, url, cache_dir=directory)
    assert again[0] == datagen.expected(1)[0]
    assert again.source.store.cache.directory == directory
    assert (directory / cachedir.TAG_NAME).exists()
    assert again.source.store.cache.stats.downloads == 0


def test_a_cache_dir_naming_a_dataset_nobody_opened_is_refused(
    s3: S3Server, url: str, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = digest(data)
    for where in (data, data / "sub"):
        with pytest.raises(SourceError, match="holding Parquet files"):
            remote(s3, url, cache_dir=where)[0]
    monkeypatch.setenv(cachedir.CACHE_ENV, str(data))  # shards would go to data/shards
    with pytest.raises(SourceError, match="lies inside a directory holding Parquet files"):
        remote(s3, url)[0]
    with pytest.raises(ArgumentError, match="holding Parquet files"):
        ParquetDataset(url, memory=64, storage_options=s3.options(), disk=8,
                       disk_dir=data / "w", cache_dir=data.parent / "fine")
    assert digest(data) == before
    assert len(ParquetDataset(data)) == sum(SIZES)


def test_a_swapped_symlink_cannot_redirect_the_cache(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    evil = tmp_path / "evil"
    evil.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    real.mkdir(mode=0o700)
    ds = remote(s3, url, cache_dir=link)
    assert ds[0] == datagen.expected(1)[0]
    link.unlink()
    link.symlink_to(evil, target_is_directory=True)  # repointed after the check
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    assert os.listdir(evil) == []
    assert ds.source.store.cache.directory == real


def test_a_planted_copy_with_the_right_size_is_never_served(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory)
    assert ds[0] == datagen.expected(1)[0]
    cache = ds.source.store.cache
    copy = Path(cache.path(ds.source.shards[0]))
    forged = pq.read_table(copy)
    forged = forged.set_column(0, "id", pa.array(["PLANTED"] * forged.num_rows))
    pq.write_table(forged, tmp_path / "forged.parquet")
    body = (tmp_path / "forged.parquet").read_bytes()
    size = copy.stat().st_size
    os.replace(tmp_path / "forged.parquet", copy)  # a new inode: not the recorded copy
    fresh = remote(s3, url, cache_dir=directory)
    rows = [fresh[i] for i in range(len(fresh))]
    assert rows == datagen.expected(sum(SIZES))
    assert len(body) != size or copy.read_bytes() != body


def test_a_damaged_copy_fails_its_checksum_and_is_downloaded_again(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    from undertale_duck.core.source.remote import shard_cache

    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory)
    assert ds[0] == datagen.expected(1)[0]
    copy = Path(ds.source.store.cache.path(ds.source.shards[0]))
    good = copy.read_bytes()
    with open(copy, "r+b") as fh:  # one flipped byte in place (same inode, size)
        fh.seek(len(good) // 2)
        fh.write(bytes([good[len(good) // 2] ^ 0xFF]))
    shard_cache._verified.clear()  # as a new process
    fresh = remote(s3, url, cache_dir=directory)
    assert [fresh[i] for i in range(len(fresh))] == datagen.expected(sum(SIZES))
    assert fresh.source.store.cache.stats.downloads >= 1
    assert copy.read_bytes() == good
    assert file_xxh3(copy) == xxhash.xxh3_64_intdigest(good)
    assert file_crc32(copy) == zlib.crc32(good)


def test_a_copy_an_earlier_version_recorded_is_checked_by_its_crc(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    """Records with a CRC-32 (before XXH3): the copy is still used, and still checked."""
    from undertale_duck.core.source.remote import shard_cache

    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory)
    expected = datagen.expected(sum(SIZES))
    assert [ds[i] for i in range(len(ds))] == expected
    cache = ds.source.store.cache
    copies = [Path(cache.path(shard)) for shard in ds.source.shards]
    for shard, copy in zip(ds.source.shards, copies, strict=True):
        record_path = cache.directory / (cache.key(shard) + DATA_SUFFIX + cachedir.RECORD_SUFFIX)
        record = json.loads(record_path.read_text())
        assert record.pop("xxh3") == file_xxh3(copy)
        record["crc32"] = file_crc32(copy)
        record_path.write_text(json.dumps(record))
    shard_cache._verified.clear()  # as a new process
    fresh = remote(s3, url, cache_dir=directory)
    assert [fresh[i] for i in range(len(fresh))] == expected
    assert fresh.source.store.cache.stats.downloads == 0  # the old copies are used
    good = copies[1].read_bytes()
    with open(copies[1], "r+b") as fh:  # one flipped byte in place (same inode, size)
        fh.seek(len(good) // 3)
        fh.write(bytes([good[len(good) // 3] ^ 0x01]))
    shard_cache._verified.clear()
    again = remote(s3, url, cache_dir=directory)
    assert [again[i] for i in range(len(again))] == expected
    assert again.source.store.cache.stats.downloads == 1  # the damaged one, again
    assert copies[1].read_bytes() == good


def test_an_old_layout_cache_is_left_alone(
    s3: S3Server, url: str, data: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    content = sorted(data.glob("*.parquet"))[0].read_bytes()
    (old / ("c" * 40 + ".parquet")).write_bytes(content)
    (old / ("c" * 40 + ".lock")).write_bytes(b"")
    (old / ("c" * 40 + ".footer")).write_bytes(b"old footer")
    before = digest(old)
    ds = remote(s3, url, cache_dir=old, cache_limit="1KB")
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    ds.source.store.cache.clear()
    assert ds.source.store.cache.directory == old / cachedir.OWN_FOLDER
    assert {k: v for k, v in digest(old).items() if not k.startswith(cachedir.OWN_FOLDER)} \
        == before


def test_the_disk_tier_bound_never_removes_a_file_it_did_not_write(
    data: Path, tmp_path: Path
) -> None:
    before = digest(data)
    directory = tmp_path / "windows"
    first = ParquetDataset(data, disk=0.01, disk_dir=directory, window_bytes=2000,
                           read_ahead=False)
    assert first[0] == datagen.expected(1)[0]
    real = Path(first.disk_dir or "")
    assert (real / cachedir.TAG_NAME).exists()
    planted = real / ("f" * 64 + ".arrow")  # named like a window file, not sealed by us
    planted.write_bytes(b"\0" * 5000)
    again = ParquetDataset(data, disk=0.01, disk_dir=directory, window_bytes=2000,
                           read_ahead=False)
    assert [again[i] for i in range(len(again))] == datagen.expected(sum(SIZES))
    assert again.reader.cache.tier.stats.removed > 0  # type: ignore[attr-defined]
    assert planted.read_bytes() == b"\0" * 5000
    assert digest(data) == before


def _copies(ds: ParquetDataset) -> list[Path]:
    cache = ds.source.store.cache
    return [Path(cache.path(shard)) for shard in ds.source.shards]


@pytest.mark.parametrize("attack", ["others-write", "group-writes", "another-owner"])
def test_a_copy_others_may_write_is_never_served_as_it_is(
    s3: S3Server, url: str, tmp_path: Path, attack: str
) -> None:
    """A copy someone else owns or may write could change between its checksum and a read.

    One of ours that others may write is made private, then checked; another user's is
    downloaded again.
    """
    from undertale_duck.core.source.remote import shard_cache

    if attack == "another-owner" and os.getuid() != 0:
        pytest.skip("giving a file to another user takes root")
    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory)
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    copy = _copies(ds)[0]
    if attack == "another-owner":
        os.chown(copy, 54321, 54321)
    else:
        os.chmod(copy, 0o666 if attack == "others-write" else 0o620)
    shard_cache._verified.clear()  # as a new process: the checksum alone still passes
    fresh = remote(s3, url, cache_dir=directory)
    assert [fresh[i] for i in range(len(fresh))] == datagen.expected(sum(SIZES))
    assert fresh.source.store.cache.stats.downloads == (attack == "another-owner")
    st = os.lstat(copy)
    assert st.st_uid == os.getuid() and not st.st_mode & 0o022, oct(st.st_mode)


def test_copies_are_private_whatever_the_umask(s3: S3Server, url: str, tmp_path: Path) -> None:
    old = os.umask(0)  # a user whose files are writable by everyone
    try:
        ds = remote(s3, url, cache_dir=tmp_path / "c")
        assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    finally:
        os.umask(old)
    written = [*_copies(ds), *Path(ds.source.store.cache.directory).glob("*.footer")]
    assert len(written) == 2 * len(SIZES)
    for path in written:
        assert os.lstat(path).st_mode & 0o077 == 0, (path.name, oct(os.lstat(path).st_mode))


def test_a_link_at_a_copys_name_is_never_followed_out_of_the_cache(
    s3: S3Server, url: str, tmp_path: Path
) -> None:
    """The recorded copy moved into the user's files and linked back: not read there."""
    from undertale_duck.core.source.remote import shard_cache

    directory = tmp_path / "c"
    ds = remote(s3, url, cache_dir=directory)
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    copy = _copies(ds)[0]
    mine = tmp_path / "mine" / "kept.bin"
    mine.parent.mkdir()
    os.replace(copy, mine)  # same inode: the record still names it
    copy.symlink_to(mine)
    kept = mine.read_bytes()
    shard_cache._verified.clear()
    fresh = remote(s3, url, cache_dir=directory)
    assert [fresh[i] for i in range(len(fresh))] == datagen.expected(sum(SIZES))
    assert fresh.source.store.cache.stats.downloads == 1
    assert not copy.is_symlink()
    fresh.source.store.cache.clear()
    assert mine.read_bytes() == kept


def test_a_copy_changed_with_its_mtime_put_back_is_checked_again(
    s3: S3Server, tmp_path: Path
) -> None:
    """A process checks a copy once per file state: the state includes its ctime."""
    source = tmp_path / "plain"
    datagen.write_shards(source, SIZES, row_group_size=10, compression="none")
    plain_url = s3.upload(source, "s3://own/plain-mtime")
    directory = tmp_path / "c"
    ds = remote(s3, plain_url, cache_dir=directory)
    expected = datagen.expected(sum(SIZES))
    assert [ds[i] for i in range(len(ds))] == expected
    copy = _copies(ds)[0]
    st = os.stat(copy)
    body = copy.read_bytes()
    at = body.index(b"row-00000003")  # uncompressed: the value's bytes as written
    with open(copy, "r+b") as fh:  # the same inode and size, the mtime put back
        fh.seek(at)
        fh.write(b"row-00000777")
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    fresh = remote(s3, plain_url, cache_dir=directory)  # the same process
    assert [fresh[i] for i in range(len(fresh))] == expected
    assert fresh.source.store.cache.stats.downloads == 1


def test_an_empty_cache_dir_is_the_default_never_the_working_directory(
    s3: S3Server, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cache_dir=""`` (an unset variable's default) means the default, as disk_dir="" does."""
    from undertale_duck.core.source.remote.shard_cache import default_directory

    work = tmp_path / "project"
    work.mkdir()
    monkeypatch.chdir(work)
    ds = remote(s3, url, cache_dir="")
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    assert os.listdir(work) == []
    assert ds.source.store.cache.directory == default_directory().resolve()


def test_a_disk_dir_among_shards_without_a_suffix_is_refused(tmp_path: Path) -> None:
    # sources take files by their magic bytes; the refusal looked at suffixes only, so a
    # directory of suffix-less shards (part-00000) that this process never opened took a
    # cache folder of ours
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(pa.table({"id": list(range(10))}), other / "part-00000")
    (other / "notes.txt").write_text("mine")
    os.mkfifo(other / "a-fifo")  # looked at without waiting on it
    (other / "part-00000.parquet.part-1-2-3").write_bytes(b"PAR1half")  # a download's part
    src = tmp_path / "src"
    datagen.write_shards(src, [12])
    before = digest(other)
    for where in (other, other / "w"):
        with pytest.raises(ArgumentError, match=r"holding Parquet files \(.*part-00000\)"):
            ParquetDataset(src, disk=8, disk_dir=where)
    assert digest(other) == before and sorted(p.name for p in other.iterdir()) == sorted(
        ["part-00000", "notes.txt", "a-fifo", "part-00000.parquet.part-1-2-3"])
    # a directory of the user's other files, a fifo and a part file alone is no dataset
    (other / "part-00000").unlink()
    ds = ParquetDataset(src, disk=8, disk_dir=other / "w")
    assert ds[3] == datagen.row(3)
