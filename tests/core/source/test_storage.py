"""Datasets in object storage: a real S3 server (moto) on 127.0.0.1, rows against the local copy."""

from __future__ import annotations

import importlib.util
import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support import datagen
from support.cli_run import invoke
from support.storage_server import HTTPServer, S3Server, cached_files, serve_directory

from undertale_duck import ParquetDataset
from undertale_duck.core.source.source import Source
from undertale_duck.errors import (
    ArgumentError,
    CorruptShardError,
    NotParquetError,
    ShardChangedError,
    SourceError,
    StorageError,
)
from undertale_duck.schema import TokenizedDataset


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("data")
    yield server
    server.close()


@pytest.fixture(scope="module")
def uneven_url(s3: S3Server, uneven: tuple[Path, int]) -> str:
    return s3.upload(uneven[0], "s3://data/uneven")


def _rows(ds: ParquetDataset) -> list[dict[str, object]]:
    return [ds[i] for i in range(len(ds))]


def test_prefix_lists_like_a_local_directory_and_every_row_matches(
    s3: S3Server, uneven: tuple[Path, int], uneven_url: str, tmp_path: Path
) -> None:
    local = ParquetDataset(uneven[0], memory=64)
    remote = ParquetDataset(
        uneven_url, memory=64, storage_options=s3.options(), cache_dir=tmp_path / "cache"
    )
    # _SUCCESS, *.crc, README.txt and the hidden file are left out, as locally
    assert [s.rsplit("/", 1)[1] for s in remote.shards] == [Path(p).name for p in local.shards]
    assert remote.shards[0] == "s3://data/uneven/part-00000.parquet"
    assert len(remote) == len(local) == uneven[1]
    assert remote.schema == local.schema
    assert _rows(remote) == _rows(local)
    backwards = list(range(len(local)))[::-3]
    assert list(remote.__getitems__(backwards)) == list(local.__getitems__(backwards))


def test_opening_reads_footers_by_range_and_downloads_nothing(
    s3: S3Server, tmp_path: Path
) -> None:
    datagen.write_shards(tmp_path / "big", [3000, 3000], row_group_size=500)
    url = s3.upload(tmp_path / "big", "s3://data/big")
    s3.log.clear()
    ds = ParquetDataset(url, storage_options=s3.options(), cache_dir=tmp_path / "cache",
                        read_ahead=False)
    assert len(ds) == 6000
    assert list(cached_files(tmp_path / "cache")) == []
    for shard in ds.shards:
        assert s3.gets(shard, status=200) == 0  # no whole-object GET
        assert s3.gets(shard, status=206) <= 3  # magic + footer (+ a long footer)
    ds[0]
    assert s3.gets(ds.shards[0], status=200) == 1
    assert s3.gets(ds.shards[1], status=200) == 0
    s3.log.clear()  # opened again: the footers come from the shard cache, no range read
    again = ParquetDataset(url, storage_options=s3.options(), cache_dir=tmp_path / "cache")
    assert again.source.shards == ds.source.shards
    assert [s3.gets(shard, status=None) for shard in again.shards] == [0, 0]


def test_glob_and_list_of_urls(s3: S3Server, uneven_url: str, uneven: tuple[Path, int],
                               tmp_path: Path) -> None:
    options = s3.options()
    globbed = Source(uneven_url + "part-0000[0-3].parquet", storage_options=options,
                     cache_dir=tmp_path)
    assert [p.rsplit("/", 1)[1] for p in globbed.paths] == [
        f"part-0000{k}.parquet" for k in range(4)
    ]
    urls = [uneven_url + "part-00004.parquet", uneven_url + "part-00000.parquet"]
    listed = ParquetDataset(urls, memory=64, storage_options=options, cache_dir=tmp_path)
    assert listed.shards == urls  # a list keeps its order
    local = ParquetDataset([uneven[0] / Path(u).name for u in urls], memory=64)
    assert _rows(listed) == _rows(local)


def test_keys_with_glob_characters_name_their_objects_literally(
    s3: S3Server, uneven: tuple[Path, int], tmp_path: Path
) -> None:
    # `[`, `?` and `*` are legal in keys: a prefix or object so named (matching nothing as a
    # pattern) is read as that prefix or object, as a local path with them is
    prefix = s3.upload(uneven[0], "s3://data/run[1] v?2")
    local = ParquetDataset(uneven[0], memory=64)
    remote = ParquetDataset(prefix, memory=64, storage_options=s3.options(),
                            cache_dir=tmp_path)
    assert remote.shards[0] == "s3://data/run[1] v?2/part-00000.parquet"
    assert _rows(remote) == _rows(local)
    one = ParquetDataset(prefix + "part-00003.parquet", memory=64,
                         storage_options=s3.options(), cache_dir=tmp_path)
    assert _rows(one) == _rows(ParquetDataset(uneven[0] / "part-00003.parquet", memory=64))
    with pytest.raises(SourceError, match="no Parquet objects match the pattern"):
        Source("s3://data/run[2] v?2/", storage_options=s3.options(), cache_dir=tmp_path)


def test_keys_holding_double_colons_are_read_and_chained_urls_refused(
    s3: S3Server, uneven: tuple[Path, int], tmp_path: Path
) -> None:
    # `::` inside a key is not an fsspec chain (was refused as one); a chain is refused as
    # a chain, not looked for on local disk (was "does not exist")
    prefix = s3.upload(uneven[0], "s3://data/a::b")
    local = ParquetDataset(uneven[0], memory=64)
    remote = ParquetDataset(prefix, memory=64, storage_options=s3.options(),
                            cache_dir=tmp_path)
    assert remote.shards[0] == "s3://data/a::b/part-00000.parquet"
    assert _rows(remote) == _rows(local)
    assert remote.sql("SELECT count(*) AS n FROM dataset") == local.sql(
        "SELECT count(*) AS n FROM dataset")
    for chained in ("simplecache::" + prefix, "zip://x.parquet::" + prefix + "a.zip"):
        with pytest.raises(ArgumentError, match="chained fsspec URLs such as"):
            ParquetDataset(chained, storage_options=s3.options(), cache_dir=tmp_path)


def test_sql_and_validation_on_a_remote_source(
    s3: S3Server, uneven: tuple[Path, int], uneven_url: str, tmp_path: Path
) -> None:
    local = ParquetDataset(uneven[0], memory=64)
    remote = ParquetDataset(uneven_url, memory=64, storage_options=s3.options(),
                            cache_dir=tmp_path)
    query = "SELECT label, count(*) AS n, sum(score) AS s FROM dataset GROUP BY label ORDER BY 1"
    assert remote.sql(query) == local.sql(query)
    assert remote.sql("SELECT id FROM dataset WHERE label = $l ORDER BY id", {"l": 3}) == \
        local.sql("SELECT id FROM dataset WHERE label = $l ORDER BY id", {"l": 3})
    report = remote.report(TokenizedDataset)
    expected = local.report(TokenizedDataset)
    assert [(c.check, c.column, c.passed, c.violations) for c in report.checks] == [
        (c.check, c.column, c.passed, c.violations) for c in expected.checks
    ]
    assert list(cached_files(tmp_path)) == []  # SQL reads by ranges, not through the cache


def test_missing_and_empty_sources(s3: S3Server, tmp_path: Path) -> None:
    options = s3.options()
    with pytest.raises(SourceError, match="does not exist"):
        Source("s3://data/nothing-here/x.parquet", storage_options=options, cache_dir=tmp_path)
    s3.fs.pipe("data/clutter/_SUCCESS", b"")
    s3.fs.pipe("data/clutter/README.txt", b"not parquet")
    s3.fs.pipe("data/clutter/sub/part-0.parquet", b"whatever")
    with pytest.raises(SourceError, match=r"holds no Parquet objects.*\*\*/\*\.parquet"):
        Source("s3://data/clutter/", storage_options=options, cache_dir=tmp_path)
    with pytest.raises(SourceError, match="no Parquet objects match"):
        Source("s3://data/clutter/*.parq", storage_options=options, cache_dir=tmp_path)
    s3.fs.pipe("data/bad/part-0.parquet", b"not a parquet file at all")
    with pytest.raises(NotParquetError, match=r"bad/part-0\.parquet is not a Parquet file"):
        Source("s3://data/bad/", storage_options=options, cache_dir=tmp_path)
    s3.fs.pipe("data/cut/part-0.parquet", b"PAR1 and then the file was cut")
    with pytest.raises(CorruptShardError, match=r"cut/part-0\.parquet is truncated or corrupt"):
        Source("s3://data/cut/", storage_options=options, cache_dir=tmp_path)
    with pytest.raises(SourceError, match="mixes"):
        Source(["s3://data/bad/part-0.parquet", str(tmp_path)], storage_options=options)


def test_missing_client_names_the_extra() -> None:
    for protocol, module, extra in (("gs", "gcsfs", "gcs"), ("az", "adlfs", "azure")):
        if importlib.util.find_spec(module) is not None:
            continue  # the client is installed here: nothing to check
        with pytest.raises(StorageError, match=rf"pip install 'undertale_duck\[{extra}\]'"):
            ParquetDataset(f"{protocol}://bucket/prefix/")
    with pytest.raises(ArgumentError, match="unknown storage protocol"):
        ParquetDataset("nosuchprotocol://bucket/prefix/")
    with pytest.raises(ArgumentError, match="retries"):
        ParquetDataset("memory://x/", retries=-1)


def test_object_replaced_or_deleted_before_download_is_a_shard_change(
    s3: S3Server, tmp_path: Path
) -> None:
    datagen.write_shards(tmp_path / "src", [50, 60, 70], row_group_size=25)
    url = s3.upload(tmp_path / "src", "s3://data/changing")
    ds = ParquetDataset(url, memory=64, storage_options=s3.options(), cache_dir=tmp_path / "c",
                        read_ahead=False)
    assert ds[0] == datagen.row(0)  # shard 0 is now cached: it is the version listed
    datagen.write_shards(tmp_path / "other", [60], row_group_size=10, prefix="x")
    s3.fs.put_file(str(tmp_path / "other" / "x-00000.parquet"), "data/changing/part-00001.parquet")
    with pytest.raises(ShardChangedError, match=r"part-00001\.parquet was replaced") as info:
        ds[55]
    assert info.value.path == "s3://data/changing/part-00001.parquet"
    s3.fs.rm("data/changing/part-00002.parquet")
    with pytest.raises(ShardChangedError, match=r"part-00002\.parquet was deleted"):
        ds[115]
    with pytest.raises(ShardChangedError):
        ds.sql("SELECT count(*) FROM dataset")
    assert ds[10] == datagen.row(10)  # the cached copy is the listed version: still served
    assert not any("part-0000" in p.name for p in cached_files(tmp_path / "c"))  # by key only
    assert len(list(cached_files(tmp_path / "c"))) == 1
    ds.refresh()  # reopen as the store is now
    assert len(ds) == 110


@pytest.mark.parametrize("window_bytes", [None, "1KiB"])  # whole downloads, range reads
def test_prefix_of_a_versioned_bucket_is_read_and_still_checked(
    s3: S3Server, tmp_path: Path, window_bytes: str | None
) -> None:
    # a listing gives ETags, info() in a versioned bucket adds a version id: the two kinds
    # are not compared (every shard was called replaced)
    bucket = f"versioned-{'range' if window_bytes else 'whole'}"
    s3.bucket(bucket)
    s3.fs.call_s3("put_bucket_versioning", Bucket=bucket,
                  VersioningConfiguration={"Status": "Enabled"})
    datagen.write_shards(tmp_path / "src", [50, 60], row_group_size=10)
    url = s3.upload(tmp_path / "src", f"s3://{bucket}/p")
    local = ParquetDataset(tmp_path / "src", memory=64)
    for source in (url, url + "*.parquet"):
        ds = ParquetDataset(source, memory=64, storage_options=s3.options(),
                            cache_dir=tmp_path / "c", read_ahead=False,
                            window_bytes=window_bytes)
        assert _rows(ds) == _rows(local)
        assert ds.sql("SELECT count(*) AS n FROM dataset") == local.sql(
            "SELECT count(*) AS n FROM dataset")
    ds = ParquetDataset(url, memory=64, storage_options=s3.options(),
                        cache_dir=tmp_path / "c2", read_ahead=False,
                        window_bytes=window_bytes)
    datagen.write_shards(tmp_path / "other", [60], row_group_size=10, prefix="x")
    s3.fs.put_file(str(tmp_path / "other" / "x-00000.parquet"), f"{bucket}/p/part-00001.parquet")
    with pytest.raises(ShardChangedError, match=r"part-00001\.parquet was replaced"):
        ds[55]


def test_store_stopped_then_restarted(tmp_path: Path) -> None:
    server = S3Server()
    try:
        server.bucket("flaky")
        datagen.write_shards(tmp_path / "src", [40, 40, 40], row_group_size=20)
        url = server.upload(tmp_path / "src", "s3://flaky/ds")
        ds = ParquetDataset(url, memory=64, storage_options=server.options(),
                            cache_dir=tmp_path / "c", retries=1, read_ahead=False)
        assert [ds[i] for i in range(40)] == [datagen.row(i) for i in range(40)]
        server.stop()
        with pytest.raises(StorageError, match=r"download s3://flaky/ds/part-00001.*tried 2 times"):
            ds[45]
        assert ds[5] == datagen.row(5)  # cached shards are still served
        server.start()
        assert [ds[i] for i in range(len(ds))] == [datagen.row(i) for i in range(120)]
    finally:
        server.close()


def test_a_view_of_cached_shards_is_served_while_the_store_is_down(tmp_path: Path) -> None:
    # a database opened while the store is down (a DataLoader worker forked for the next
    # epoch, or after close()) cannot bind the ``dataset`` view over the URLs; the view's
    # dataset_view, defined over it, failed too and took every window read down with it
    server = S3Server()
    try:
        server.bucket("down")
        datagen.write_shards(tmp_path / "src", [30, 30], row_group_size=10)
        url = server.upload(tmp_path / "src", "s3://down/ds")
        ds = ParquetDataset(url, where="label <> 2", storage_options=server.options(),
                            cache_dir=tmp_path / "c", retries=0, read_ahead=False)
        expected = [r for r in (datagen.row(i) for i in range(60)) if r["label"] != 2]
        assert [ds[i] for i in range(len(ds))] == expected
        deadline = time.monotonic() + 30  # the shards download whole behind the range reads
        while len(list(cached_files(tmp_path / "c"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(list(cached_files(tmp_path / "c"))) == 2
        server.stop()
        ds.close()  # the next read opens a new database, as a forked worker does
        assert [ds[i] for i in range(len(ds))] == expected
        with pytest.raises(SourceError):  # ad hoc SQL needs the store: it says so
            ds.sql("SELECT count(*) FROM dataset_view")
    finally:
        server.close()


def test_pickled_dataset_reopens_its_store(s3: S3Server, uneven_url: str, tmp_path: Path) -> None:
    ds = ParquetDataset(uneven_url, memory=64, storage_options=s3.options(), cache_dir=tmp_path)
    rows = _rows(ds)
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.source.store._fs is None  # a new client in the new process
    assert _rows(clone) == rows
    assert clone.source.store.cache.stats.downloads == 0  # the shards were in the cache


def test_https_list_of_urls_and_memory_protocol(uneven: tuple[Path, int], tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    local = ParquetDataset(uneven[0], memory=64)
    server = HTTPServer()
    try:
        urls = serve_directory(server, uneven[0], "ds")
        remote = ParquetDataset(urls, memory=64, cache_dir=tmp_path / "http")
        assert remote.shards == urls
        assert _rows(remote) == _rows(local)
        assert remote.sql("SELECT count(*) AS n FROM dataset") == pa.table({"n": [uneven[1]]})
    finally:
        server.close()
    import fsspec

    fs = fsspec.filesystem("memory")
    for p in sorted(uneven[0].iterdir()):
        fs.pipe(f"memory://uneven-test/{p.name}", p.read_bytes())
    remote = ParquetDataset("memory://uneven-test/", memory=64, cache_dir=tmp_path / "mem")
    assert _rows(remote) == _rows(local)


def test_http_requests_have_no_cap_on_their_whole_time_and_a_silent_server_fails_clearly(
        uneven: tuple[Path, int], tmp_path: Path) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    server = HTTPServer()
    try:
        urls = serve_directory(server, uneven[0], "quiet")
        ds = ParquetDataset(urls, memory=64, cache_dir=tmp_path / "a")
        # aiohttp's default capped each request's whole time at 300 s: a shard whose
        # download took longer failed on every try
        timeout = ds.source.store.fs.client_kwargs["timeout"]
        assert (timeout.total, timeout.sock_connect, timeout.sock_read) == (None, 30, 60)
        assert ds[0] == datagen.row(0)
        # the user's own timeout is kept, with their other client options
        options = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(sock_read=1),
                                     "trust_env": False}}
        quick = ParquetDataset(urls, memory=64, cache_dir=tmp_path / "b", retries=1,
                               storage_options=options)
        assert quick.source.store.fs.client_kwargs == options["client_kwargs"]
        # timeouts given another way stand too: aiohttp refuses them beside a timeout=
        # (read_timeout is the usual way round its 300 s cap)
        async def own_session(**kwargs: Any) -> Any:
            return aiohttp.ClientSession(**kwargs)

        with pytest.warns(DeprecationWarning):
            for other in ({"client_kwargs": {"read_timeout": 600}},
                          {"client_kwargs": {"conn_timeout": 5}},
                          {"get_client": own_session}):
                served = ParquetDataset(urls, memory=64, cache_dir=tmp_path / "c",
                                        storage_options=other)
                assert "timeout" not in served.source.store.fs.client_kwargs
                assert served[len(served) - 1] == datagen.row(len(served) - 1)
        # a server that goes silent midway through its answer: each try waits out the
        # silence allowed, then a StorageError names the object and the tries
        server.state.ranges = False
        server.state.stall.set()
        with pytest.raises(StorageError, match=r"cannot (read|download) http://127\.0\.0\.1:"
                           r"\d+/quiet/part-00000\.parquet: no answer within the client's "
                           r"timeout \(FSTimeoutError\); storage_options set it: client_kwargs="
                           r"\{'timeout': aiohttp\.ClientTimeout\(\.\.\.\)\} \(tried 2 times"):
            quick[0]
    finally:
        server.close()
    assert options["client_kwargs"] == {"timeout": aiohttp.ClientTimeout(sock_read=1),
                                        "trust_env": False}  # not changed


def _flags(s3: S3Server) -> list[str]:
    return [
        "--storage-option", "key=testing", "--storage-option", "secret=testing",
        "--storage-option", f"client_kwargs.endpoint_url={s3.endpoint}",
        "--storage-option", "client_kwargs.region_name=us-east-1",
    ]


def test_command_line_on_a_remote_source(
    s3: S3Server, uneven: tuple[Path, int], uneven_url: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "cache"))
    flags = _flags(s3)
    query = "SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label"
    status, out, err = invoke("sql", uneven_url, query, "--format", "json", *flags)
    local = invoke("sql", str(uneven[0]), query, "--format", "json")
    assert (status, err) == (0, "") and out == local[1]
    status, out, _ = invoke("describe", uneven_url, "--format", "json", *flags)
    assert status == 0
    remote_description = json.loads(out)
    local_description = json.loads(invoke("describe", str(uneven[0]), "--format", "json")[1])
    assert remote_description["totals"] == local_description["totals"]
    assert remote_description["columns"] == local_description["columns"]
    assert list(cached_files(tmp_path / "cache")) == []  # footers only: nothing downloaded
    status, out, _ = invoke("head", uneven_url, "-n", "3", "--format", "json", *flags)
    assert status == 0 and out == invoke("head", str(uneven[0]), "-n", "3", "--format", "json")[1]
    status, out, _ = invoke("validate", uneven_url, "--schema", "TokenizedDataset",
                          "--format", "json", *flags)
    expected = invoke("validate", str(uneven[0]), "--schema", "TokenizedDataset",
                    "--format", "json")
    assert status == expected[0]
    def checks(text: str) -> list[tuple[str, str, bool]]:
        return [(c["check"], c["column"], c["passed"]) for c in json.loads(text)["checks"]]

    assert checks(out) == checks(expected[1])
    status, _, err = invoke("describe", uneven_url, "--storage-option", "nonsense")
    assert status == 2 and "KEY=VALUE" in err


def test_command_line_with_credentials_from_the_environment(
    s3: S3Server, uneven_url: str, uneven: tuple[Path, int], tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    from support.storage_server import child_env

    env = {**child_env(), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_ENDPOINT_URL": s3.endpoint, "AWS_DEFAULT_REGION": "us-east-1",
           "UNDERTALE_DUCK_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "sql", uneven_url,
         "SELECT count(*) AS n FROM dataset", "--format", "csv"],
        capture_output=True, text=True, timeout=120, env=env, cwd=os.getcwd(),
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == ["n", str(uneven[1])]
    if importlib.util.find_spec("gcsfs") is None:
        done = subprocess.run(
            [sys.executable, "-m", "undertale_duck", "describe", "gs://bucket/prefix/"],
            capture_output=True, text=True, timeout=120, env=env,
        )
        assert done.returncode == 2
        assert "pip install 'undertale_duck[gcs]'" in done.stderr
        assert "Traceback" not in done.stderr


def test_storage_option_parsing() -> None:
    from undertale_duck.core.source import parse_storage_options

    assert parse_storage_options(
        ["anon=true", "client_kwargs.endpoint_url=http://h:9", "client_kwargs.verify=false",
         "block_size=1024", "token=abc=def", 'headers={"a": 1}']
    ) == {"anon": True, "client_kwargs": {"endpoint_url": "http://h:9", "verify": False},
          "block_size": 1024, "token": "abc=def", "headers": {"a": 1}}
    for bad in (["novalue"], ["=x"], ["a..b=1"], ["a=1", "a.b=2"]):
        with pytest.raises(ArgumentError, match="storage-option"):
            parse_storage_options(bad)


@pytest.mark.parametrize("plaintext_footer", [True, False])
def test_encrypted_remote_shard_is_refused(tmp_path: Path, plaintext_footer: bool) -> None:
    import fsspec
    from support import hostile_files

    from undertale_duck.errors import EncryptedShardError

    path = tmp_path / "enc.parquet"
    hostile_files.encrypted(path, plaintext_footer=plaintext_footer)
    url = f"memory://encrypted-{plaintext_footer}/enc.parquet"
    fsspec.filesystem("memory").pipe(url, path.read_bytes())
    with pytest.raises(EncryptedShardError, match=r"enc\.parquet"):
        ParquetDataset(url, cache_dir=tmp_path / "cache")


def test_disk_tier_files_of_a_remote_shard_ask_the_store_nothing(tmp_path: Path) -> None:
    """A window file is keyed by the version listed at open: mapping it sends no request
    (it sent a HEAD per window), and files already on disk are served while the store is
    down, as cached shards are."""
    server = S3Server()
    try:
        server.bucket("tier")
        datagen.write_shards(tmp_path / "src", [60, 60], row_group_size=10)
        url = server.upload(tmp_path / "src", "s3://tier/ds")
        options = dict(storage_options=server.options(), cache_dir=tmp_path / "c",
                       disk=64, disk_dir=tmp_path / "w", window_bytes=1, read_ahead=False)
        first = ParquetDataset(url, memory=64, **options)  # type: ignore[arg-type]
        assert [first[i] for i in range(120)] == [datagen.row(i) for i in range(120)]
        assert len(first.windows) >= 12
        again = ParquetDataset(url, memory=64, retries=0, **options)  # type: ignore[arg-type]
        server.log.clear()
        assert [again[i] for i in range(60)] == [datagen.row(i) for i in range(60)]
        assert [m for m, _, _ in server.log.requests] == []
        server.stop()
        assert [again[i] for i in range(60, 120)] == [datagen.row(i) for i in range(60, 120)]
        stats = again.disk_stats
        assert stats is not None and stats.writes == 0
    finally:
        server.close()


def test_a_corrupt_remote_shard_is_named_by_its_url_and_its_copy_by_its_path(
        s3: S3Server, tmp_path: Path) -> None:
    # DuckDB names the file it read, which for a cached copy was the held directory's
    # /proc/self/fd/<n>/<key>.parquet: meaningless to a user
    import pyarrow.parquet as pq

    (path,) = datagen.write_shards(tmp_path / "src", [3000], row_group_size=500)
    chunk = pq.read_metadata(path).row_group(0).column(0)
    start, end = chunk.data_page_offset, chunk.data_page_offset + chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    data[(start + end) // 2 : end] = bytes(end - (start + end) // 2)  # its pages cut short
    path.write_bytes(bytes(data))
    url = s3.upload(tmp_path / "src", "s3://data/corrupt")
    ds = ParquetDataset(url, memory=64, storage_options=s3.options(),
                        cache_dir=tmp_path / "cache")
    with pytest.raises(CorruptShardError) as caught:
        ds[0]
    text = str(caught.value)
    assert text.startswith(f"shard {url}part-00000.parquet is corrupt")
    assert caught.value.path == f"{url}part-00000.parquet"
    assert "/proc/" not in text
    held = ds.source.store.cache.path(ds.source.shards[0])
    copy = (tmp_path / "cache").resolve() / Path(held).name
    assert f'"{copy}"' in text  # DuckDB's words name the cached copy it read, by its path
