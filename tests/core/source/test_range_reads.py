"""Windows of remote shards not yet cached are read by range requests (real S3 server, moto)."""

from __future__ import annotations

import contextlib
import itertools
import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import datagen
from support.storage_server import HTTPServer, S3Server, serve_directory

from undertale_duck import ChunkedSampler, ParquetDataset
from undertale_duck.core.source import StorageStats, window_row_groups
from undertale_duck.core.source.remote.ranges import GAP, chunk_ranges, coalesce
from undertale_duck.errors import ShardChangedError, StorageError


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("ranged")
    yield server
    server.close()


def _open(url: str, s3: S3Server, cache: Path, *, versions: bool = False,
          **kwargs: object) -> ParquetDataset:
    options = {**s3.options(), "version_aware": True} if versions else s3.options()
    return ParquetDataset(url, memory=256, storage_options=options, cache_dir=cache,
                          **kwargs)  # type: ignore[arg-type]


def _footer_bytes(path: Path) -> int:
    data = path.read_bytes()
    return int(struct.unpack("<i", data[-8:-4])[0]) + 8


def test_first_batch_reads_only_the_footer_and_its_row_groups(
    s3: S3Server, tmp_path: Path
) -> None:
    (path,) = datagen.write_shards(tmp_path / "src", [120_000], row_group_size=4000)
    url = s3.upload(tmp_path / "src", "s3://ranged/first")
    ds = _open(url, s3, tmp_path / "cache", window_bytes="256KiB", read_ahead=False)
    assert len(ds.windows) > 4  # the window is a small part of the shard
    assert ds[0] == datagen.row(0)
    stats = ds.storage_stats
    assert isinstance(stats, StorageStats)
    assert stats.download_bytes == 0 and stats.range_windows == 1
    meta = pq.read_metadata(path)
    shard = ds.source.shards[0]
    groups = window_row_groups(shard.row_groups, ds.windows[0])[0]
    needed = sum(
        meta.row_group(g).column(c).total_compressed_size
        for g in groups
        for c in range(meta.row_group(g).num_columns)
    )
    assert stats.range_bytes <= 1.5 * (_footer_bytes(path) + needed)
    assert stats.range_bytes < path.stat().st_size / 4
    # every row right, whichever way each window is served (range reads, then the copy
    # the background download leaves)
    assert all(ds[i] == datagen.row(i) for i in range(0, 120_000, 997))
    assert ds[119_999] == datagen.row(119_999)


def test_columns_not_asked_for_are_not_fetched(s3: S3Server, tmp_path: Path) -> None:
    (path,) = datagen.write_shards(tmp_path / "src", [40_000], row_group_size=4000)
    url = s3.upload(tmp_path / "src", "s3://ranged/columns")
    ds = _open(url, s3, tmp_path / "cache", window_bytes="256KiB", read_ahead=False,
               columns=["id", "label"])
    assert ds[5] == {k: datagen.row(5)[k] for k in ("id", "label")}
    meta = pq.read_metadata(path)
    groups = window_row_groups(ds.source.shards[0].row_groups, ds.windows[0])[0]
    both = sum(e - s for s, e in coalesce(chunk_ranges(meta, groups, ["id", "label"])))
    every = sum(e - s for s, e in coalesce(chunk_ranges(meta, groups, None)))
    assert both < every
    stats = ds.storage_stats
    assert stats is not None
    assert stats.range_bytes <= 65540 + both  # the footer read at open, and the two columns


def test_random_access_over_three_times_the_cache_fetches_under_twice_the_data(
    s3: S3Server, tmp_path: Path
) -> None:
    sizes = [8000] * 6
    paths = datagen.write_shards(tmp_path / "src", sizes, row_group_size=1000)
    total = sum(p.stat().st_size for p in paths)
    url = s3.upload(tmp_path / "src", "s3://ranged/random")
    ds = _open(url, s3, tmp_path / "cache", window_bytes="512KiB", cache_limit=total // 3)
    assert len(ds.windows) >= 12  # windows of whole row groups, several per shard
    sampler = ChunkedSampler(ds, 32, 0, ranks=1, rank=0, shuffle=True, seed=3,
                             drop_last=False)
    seen = []
    for i in sampler:
        row = ds[i]
        assert row == datagen.row(i)
        seen.append(i)
    assert sorted(seen) == list(range(sum(sizes)))  # an epoch, every row right
    stats = ds.storage_stats
    assert stats is not None
    assert stats.bytes < 2 * total
    # no shard downloaded twice, none evicted, no more copied than the cache holds: whether
    # a copy is made in the background or by a window that finds it in flight is timing
    # (on a loaded machine the window may come first), the counts are not
    assert stats.downloads + stats.background_downloads <= len(paths)
    assert ds.source.store.cache.stats.evictions == 0
    assert stats.background_bytes + stats.download_bytes <= total // 3


def test_background_downloads_serve_later_epochs(s3: S3Server, tmp_path: Path) -> None:
    sizes = [3000, 2000]
    datagen.write_shards(tmp_path / "src", sizes, row_group_size=500)
    url = s3.upload(tmp_path / "src", "s3://ranged/later")
    ds = _open(url, s3, tmp_path / "cache", window_bytes="32KiB")
    assert [ds[i] for i in range(len(ds))] == [datagen.row(i) for i in range(sum(sizes))]
    stats = ds.storage_stats
    assert stats is not None
    # each shard's first window by ranges, then one whole copy of each shard: made in the
    # background, or by a later window that found none yet (which comes first is timing)
    assert stats.range_windows >= 2
    assert stats.background_downloads + stats.downloads == 2
    assert stats.background_bytes + stats.download_bytes == sum(
        s.size for s in ds.source.shards)
    again = _open(url, s3, tmp_path / "cache", window_bytes="32KiB")
    assert [again[i] for i in range(len(again))] == [datagen.row(i) for i in range(sum(sizes))]
    later = again.storage_stats
    assert later is not None
    assert later.range_windows == later.downloads == later.background_downloads == 0


def test_object_replaced_after_open_is_refused_by_range_reads(
    s3: S3Server, tmp_path: Path
) -> None:
    datagen.write_shards(tmp_path / "src", [6000], row_group_size=500)
    datagen.write_shards(tmp_path / "other", [6000], row_group_size=400)
    url = s3.upload(tmp_path / "src", "s3://ranged/changing")
    ds = _open(url, s3, tmp_path / "cache", window_bytes="32KiB", read_ahead=False)
    s3.fs.put_file(str(tmp_path / "other" / "part-00000.parquet"),
                   "ranged/changing/part-00000.parquet")
    with pytest.raises(ShardChangedError, match=r"part-00000\.parquet was replaced"):
        ds[0]
    stats = ds.storage_stats
    assert stats is not None and stats.range_windows == 0


def test_http_store_checks_the_version_after_range_reads(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    datagen.write_shards(tmp_path / "src", [6000], row_group_size=500)
    server = HTTPServer()
    try:
        urls = serve_directory(server, tmp_path / "src", "ds")
        ds = ParquetDataset(urls, memory=256, cache_dir=tmp_path / "cache",
                            window_bytes="32KiB", read_ahead=False)
        assert ds[0] == datagen.row(0)
        stats = ds.storage_stats
        assert stats is not None and stats.range_windows == 1 and stats.download_bytes == 0
        # the same size, other bytes (a data page's): another ETag
        key = next(iter(server.state.files))
        fresh = ParquetDataset(urls, memory=256, cache_dir=tmp_path / "cache2",
                               window_bytes="32KiB", read_ahead=False)
        data = server.state.files[key]
        server.state.files[key] = data[:10] + bytes([data[10] ^ 1]) + data[11:]
        with pytest.raises(ShardChangedError):
            fresh[3000]
    finally:
        server.close()


def test_workers_forked_during_a_background_download_read_every_row(
    s3: S3Server, tmp_path: Path
) -> None:
    import torch.utils.data

    sizes = [4000, 3000]
    datagen.write_shards(tmp_path / "src", sizes, row_group_size=500)
    url = s3.upload(tmp_path / "src", "s3://ranged/forked")
    ds = _open(url, s3, tmp_path / "cache", window_bytes="32KiB")
    assert ds[0] == datagen.row(0)  # a range read, then the shard's download behind it
    sampler = ChunkedSampler(ds, 50, 2, ranks=1, rank=0, drop_last=False)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=50, sampler=sampler, num_workers=2, collate_fn=list,
        multiprocessing_context="fork",
    )
    ids = [row["id"] for batch in loader for row in batch]
    assert sorted(ids) == [datagen.row(i)["id"] for i in range(sum(sizes))]


def test_versioned_bucket_refuses_a_newer_version(s3: S3Server, tmp_path: Path) -> None:
    s3.bucket("versioned")
    s3.fs.call_s3("put_bucket_versioning", Bucket="versioned",
                  VersioningConfiguration={"Status": "Enabled"})
    datagen.write_shards(tmp_path / "src", [6000], row_group_size=500)
    datagen.write_shards(tmp_path / "other", [6000], row_group_size=400)
    url = s3.upload(tmp_path / "src", "s3://versioned/ds")
    ds = _open(url, s3, tmp_path / "cache", versions=True, window_bytes="32KiB",
               read_ahead=False)
    assert ds.source.shards[0].version.startswith("versionid=")  # requests name it
    assert ds[0] == datagen.row(0)
    stats = ds.storage_stats
    assert stats is not None and stats.range_windows == 1
    fresh = _open(url, s3, tmp_path / "cache2", versions=True, window_bytes="32KiB",
                  read_ahead=False)
    s3.fs.put_file(str(tmp_path / "other" / "part-00000.parquet"),
                   "versioned/ds/part-00000.parquet")
    with pytest.raises(ShardChangedError, match=r"part-00000\.parquet was replaced"):
        fresh[3000]


@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 1 << 18)), max_size=40))
def test_merged_ranges_cover_every_range_and_nothing_closer_than_the_gap(
    given_ranges: list[tuple[int, int]],
) -> None:
    ranges = [(start, start + length) for start, length in given_ranges]
    merged = coalesce(ranges)
    for start, end in ranges:  # every range lies inside one merged range
        assert any(a <= start and end <= b for a, b in merged)
    for (_, end), (start, _) in itertools.pairwise(merged):
        assert start > end + GAP  # sorted, apart by more than the gap
    # nothing merged in that no range needs, except gaps of at most GAP between them
    assert sum(b - a for a, b in merged) <= sum(e - s for s, e in ranges) + GAP * len(ranges)


def test_no_part_file_is_left_after_range_reads(s3: S3Server, tmp_path: Path) -> None:
    datagen.write_shards(tmp_path / "src", [6000], row_group_size=500)
    url = s3.upload(tmp_path / "src", "s3://ranged/parts")
    cache = tmp_path / "cache"
    ds = _open(url, s3, cache, window_bytes="32KiB", read_ahead=False)
    ds.source.store.background = False
    assert [ds[i] for i in range(0, 6000, 250)] == [datagen.row(i) for i in range(0, 6000, 250)]
    stats = ds.storage_stats
    assert stats is not None and stats.range_windows > 1 and stats.background_downloads == 0
    assert list(cache.rglob("*.part-*")) == []
    assert not any(p.name.endswith(".parquet") for p in cache.rglob("*"))  # nothing cached


@pytest.mark.parametrize("tier", [False, True])
def test_uniform_random_access_over_three_times_the_cache_fetches_under_twice_the_data(
    s3: S3Server, tmp_path: Path, tier: bool
) -> None:
    # torch's RandomSampler (uniform over rows, no locality) through a DataLoader, over a
    # remote dataset 3x cache_limit: with the data within memory, or beyond it with a disk
    # tier (what RandomAccessWarning advises), every window is fetched by range once
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    sizes = [8000] * 6
    paths = datagen.write_shards(tmp_path / "src", sizes, row_group_size=1000)
    total = sum(p.stat().st_size for p in paths)
    url = s3.upload(tmp_path / "src", "s3://ranged/uniform")
    options: dict[str, object] = {"memory": 1, "disk": 64, "disk_dir": str(tmp_path / "tier")}
    ds = ParquetDataset(url, storage_options=s3.options(), cache_dir=tmp_path / "cache",
                        window_bytes="512KiB", cache_limit=total // 3,
                        **(options if tier else {}))  # type: ignore[arg-type]
    sampler = RandomSampler(range(len(ds)), generator=torch.Generator().manual_seed(5))
    loader = DataLoader(ds, batch_size=64, sampler=sampler, collate_fn=lambda rows: rows)
    seen = []
    for rows in loader:
        seen.extend(row["id"] for row in rows)
        assert all(row == datagen.row(int(row["id"].split("-")[-1])) for row in rows)
    assert sorted(seen) == sorted(datagen.row(i)["id"] for i in range(sum(sizes)))
    stats = ds.storage_stats
    assert stats is not None
    assert stats.bytes < 2 * total
    # no shard downloaded twice, none evicted: whether a small shard's copy comes from a
    # window needing all of it or from the background depends on timing, the count does not
    assert stats.downloads + stats.background_downloads <= len(paths)
    assert ds.source.store.cache.stats.evictions == 0


@contextlib.contextmanager
def _over_http(tmp_path: Path) -> Iterator[tuple[HTTPServer, ParquetDataset]]:
    """One 600-row shard served by a local HTTP server, read by ranges with one retry."""
    pytest.importorskip("aiohttp")
    datagen.write_shards(tmp_path / "src", [600], row_group_size=50)
    server = HTTPServer()
    try:
        urls = serve_directory(server, tmp_path / "src", "ds")
        # cache_limit=1: every window is read by ranges (no background download)
        yield server, ParquetDataset(urls, memory=256, cache_dir=tmp_path / "cache", retries=1,
                                     cache_limit=1, window_bytes="4KiB", read_ahead=False)
    finally:
        server.close()


@pytest.mark.parametrize("status", [500, 503])
def test_http_5xx_on_head_is_retried_not_taken_for_a_deleted_shard(
    tmp_path: Path, status: int
) -> None:
    """fsspec's HTTP client raises FileNotFoundError for any failed info(): a 5xx is the
    store's failure, retried then a StorageError; only a 404 means the object is gone."""
    with _over_http(tmp_path) as (server, ds):
        # info() sends a HEAD, then a GET when it fails: both fail once, the retry passes
        server.state.failing.update(HEAD=[status], GET=[status])
        assert ds[300] == datagen.row(300)
        assert server.state.failing == {"HEAD": [], "GET": []}
        server.state.failing.update(HEAD=[status] * 2, GET=[status] * 2)  # both tries
        with pytest.raises(StorageError, match=rf"{status}.*tried 2 times") as failed:
            ds[550]
        assert not isinstance(failed.value, ShardChangedError)
        server.state.failing.update(HEAD=[404], GET=[404])  # gone
        with pytest.raises(ShardChangedError, match="deleted"):
            ds[100]


def test_http_short_range_answer_is_retried(tmp_path: Path) -> None:
    """An honest 206 with fewer bytes than asked (the object unchanged) is a cut answer:
    tried again, then a StorageError; never "shorter than when it was listed"."""
    with _over_http(tmp_path) as (server, ds):
        assert ds[0] == datagen.row(0)
        server.state.short = 1
        assert ds[300] == datagen.row(300)
        assert server.state.short == 0
        server.state.short = 1000
        with pytest.raises(StorageError, match="tried 2 times") as failed:
            ds[550]
        assert not isinstance(failed.value, ShardChangedError)


def test_a_window_never_evicts_for_a_copy_planned_in_the_background(
    s3: S3Server, tmp_path: Path
) -> None:
    # a window that found its shard's background download planned (queued behind another,
    # or refused for want of room) downloaded it itself, evicting what the plan had kept
    from concurrent.futures import Future

    sizes = [4000, 4000]
    paths = datagen.write_shards(tmp_path / "src", sizes, row_group_size=500)
    url = s3.upload(tmp_path / "src", "s3://ranged/planned")
    first = _open(url, s3, tmp_path / "cache", window_bytes="32KiB", read_ahead=False)
    with first.source.shards[0].local():
        pass  # shard 0 cached
    limit = first.source.store.cache.usage() + paths[1].stat().st_size // 2
    ds = _open(url, s3, tmp_path / "cache", window_bytes="32KiB", read_ahead=False,
               cache_limit=limit)
    store = ds.source.store
    assert store.cache.cached(ds.source.shards[0])
    planned: Future[None] = Future()  # a background download of shard 1, not yet run
    store._behind[store.cache.key(ds.source.shards[1])] = planned
    rows = [ds[i] for i in range(sizes[0], sum(sizes))]
    assert rows == [datagen.row(i) for i in range(sizes[0], sum(sizes))]
    stats = ds.storage_stats
    assert stats is not None
    assert stats.downloads == 0 and stats.range_windows >= 1  # no room: read by range
    assert store.cache.stats.evictions == 0
    assert store.cache.cached(ds.source.shards[0])
    assert store.cache.usage() <= limit
