"""URLs of object storage: their secrets never shown, their cache identity, footers pinned.

Real servers on 127.0.0.1 (moto's S3 and a ranged HTTP server, tests/support); rows are
compared with what the generator wrote for each global index.
"""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.parse
import warnings
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from support.cli_run import invoke
from support.storage_server import HTTPServer, S3ChildServer, S3Server

from undertale_duck import ParquetDataset
from undertale_duck.common.text import redact_url
from undertale_duck.core.source.remote.listing import footers, list_remote
from undertale_duck.core.source.remote.shard_cache import ShardCache
from undertale_duck.core.source.remote.store import identity, open_store, unsigned
from undertale_duck.errors import ArgumentError, ShardChangedError, SourceError, StorageError
from undertale_duck.schema import TokenizedDataset

#: A pre-signed URL's query (S3's, with a token and an Azure-style signature too).
SIGNED = (
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIACREDSECRET%2F20260101"
    "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-Signature=f00dsigsecret"
    "&token=tokensecret&sig=azsigsecret"
)
RESIGNED = SIGNED.replace("f00dsigsecret", "beefsigsecret2").replace("20260101T", "20260102T")
SECRETS = ("AKIACREDSECRET", "f00dsigsecret", "beefsigsecret2", "tokensecret", "azsigsecret",
           "hunter2")


def _signed(server: HTTPServer, name: str, data: bytes, query: str = SIGNED) -> str:
    """Serve ``data`` at a pre-signed URL; return the URL (its query percent-encoded)."""
    # the client sends %2F in a query as "/" (the same URL): the server matches that
    server.put(f"{name}?{urllib.parse.unquote(query)}", data)
    return f"{server.url(name)}?{query}"


@contextlib.contextmanager
def _signed_shards(tmp_path: Path) -> Iterator[tuple[HTTPServer, list[Path], list[str]]]:
    """Shards of 30 and 20 rows at pre-signed URLs of a ranged HTTP server: its paths, URLs."""
    pytest.importorskip("aiohttp")
    paths = datagen.write_shards(tmp_path / "src", [30, 20], row_group_size=10)
    server = HTTPServer()
    try:
        yield server, paths, [_signed(server, f"ds/{p.name}", p.read_bytes()) for p in paths]
    finally:
        server.close()


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _files_text(root: Path) -> str:
    return "\n".join(
        p.read_bytes().decode("latin-1") for p in sorted(root.rglob("*")) if p.is_file()
    )


def test_redact_url_keeps_host_and_path_only() -> None:
    url = f"https://reader:hunter2@bucket.s3.amazonaws.com/a/b.parquet?{SIGNED}#frag"
    assert redact_url(url) == (
        "https://<redacted>@bucket.s3.amazonaws.com/a/b.parquet?<redacted>#<redacted>"
    )
    assert redact_url(f"shard {url.split('#')[0]}; call refresh()") == (
        "shard https://<redacted>@bucket.s3.amazonaws.com/a/b.parquet?<redacted>; call refresh()"
    )
    assert redact_url("s3://bucket/key.parquet") == "s3://bucket/key.parquet"
    assert redact_url(redact_url(url)) == redact_url(url)  # redacting twice changes nothing
    assert redact_url("/data/odd?name.parquet") == "/data/odd?name.parquet"  # a local path
    # the cache's name of an object signed again is the same; a query choosing content is kept
    assert unsigned(f"https://u:p@h/k.parquet?part=2&{SIGNED}") == "https://h/k.parquet?part=2"
    assert unsigned(f"https://h/k.parquet?{SIGNED}") == unsigned(f"https://h/k.parquet?{RESIGNED}")


def test_secrets_in_urls_are_never_shown_or_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("aiohttp")
    root = tmp_path / "root"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(root))  # view indexes, verdicts
    caplog.set_level(logging.DEBUG, logger="undertale_duck")
    paths = datagen.write_shards(tmp_path / "src", [30, 20], row_group_size=10)
    other = datagen.write_shards(tmp_path / "other", [25], row_group_size=5, prefix="x")
    server = HTTPServer()
    shown: list[str] = []
    try:
        urls = [_signed(server, f"ds/{p.name}", p.read_bytes()) for p in paths]
        urls[1] = urls[1].replace("http://", "http://reader:hunter2@")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = ParquetDataset(urls, cache_dir=tmp_path / "c", memory=64, read_ahead=False)
            assert [ds[i] for i in range(len(ds))] == datagen.expected(50)
            shown += [repr(ds), repr(ds.source.shards), str(ds.source.spec)]
            report = ds.report(TokenizedDataset)
            shown += [report.model_dump_json(), repr(report)]
            # an object replaced in the store: the error names it without its secrets
            fresh = ParquetDataset(urls, cache_dir=tmp_path / "c2", memory=64,
                                   read_ahead=False)
            _signed(server, f"ds/{paths[1].name}", other[0].read_bytes())
            with pytest.raises(ShardChangedError) as changed:
                fresh[35]
            assert changed.value.path == f"http://<redacted>@127.0.0.1:{server.port}/ds/" \
                f"{paths[1].name}?<redacted>"
            shown += [str(changed.value), repr(changed.value), str(changed.value.path)]
            with pytest.raises(SourceError) as missing:
                ParquetDataset([server.url(f"ds/none.parquet?{SIGNED}")],
                               cache_dir=tmp_path / "c3")
            shown += [str(missing.value), str(missing.value.path)]
        shown += [str(w.message) for w in caught]
        for args in (["describe", urls[0]], ["describe", urls[0], "--format", "json"],
                     ["describe", server.url(f"ds/none.parquet?{SIGNED}")],
                     ["validate", urls[0], "--schema", "TokenizedDataset"]):
            status, out, err = invoke(*args)
            shown += [out, err]
    finally:
        server.close()
    shown += [r.getMessage() for r in caplog.records]
    shown.append(_files_text(tmp_path / "c"))
    shown.append(_files_text(root))
    assert any("ds/part-00001.parquet" in text for text in shown)  # the shard is still named
    assert [(i, t[:3000]) for i, t in enumerate(shown) if _leaks(t)] == []


def test_a_url_signed_again_reuses_the_cached_copy(tmp_path: Path) -> None:
    with _signed_shards(tmp_path) as (server, paths, first):
        ds = ParquetDataset(first, cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        assert [ds[i] for i in range(len(ds))] == datagen.expected(50)
        assert ds.source.store.cache.stats.downloads == 2
        # the same objects signed again (an hour later): no footer read, no download
        again = [_signed(server, f"ds/{p.name}", p.read_bytes(), RESIGNED) for p in paths]
        server.state.requests.clear()
        ds2 = ParquetDataset(again, cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        assert [ds2[i] for i in range(len(ds2))] == datagen.expected(50)
        assert ds2.source.store.cache.stats.downloads == 0
        assert [m for m, _, rng in server.state.requests if m == "GET"] == []
        # a replaced object is another version: its new ETag is a new entry
        other = datagen.write_shards(tmp_path / "other", [40], row_group_size=10, prefix="x")
        _signed(server, f"ds/{paths[0].name}", other[0].read_bytes(), RESIGNED)
        ds3 = ParquetDataset(again, cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        assert [ds3[i]["id"] for i in (0, 39, 40)] == ["row-00000000", "row-00000039",
                                                      "row-00000030"]


def test_a_url_signed_again_reuses_the_disk_tier_and_the_views_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the shard cache found a re-signed URL's copy, but the disk tier's windows and a view's
    # index were keyed by the whole URL: decoded and indexed again, their old files kept
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "own"))
    with _signed_shards(tmp_path) as (server, paths, first):
        options = {"cache_dir": tmp_path / "c", "memory": 1, "window_bytes": 2000,
                   "disk": 8, "disk_dir": tmp_path / "disk", "read_ahead": False}
        where = "label % 2 = 0"
        kept = [row for row in datagen.expected(50) if row["label"] % 2 == 0]
        ds = ParquetDataset(first, **options)
        assert [ds[i] for i in range(len(ds))] == datagen.expected(50)
        view = ParquetDataset(first, where=where, **options)
        assert [view[i] for i in range(len(view))] == kept
        written = ds.disk_stats.writes
        assert written > 0
        disk_files = sorted(p.name for p in (tmp_path / "disk").rglob("*") if p.is_file())
        indexes = sorted((tmp_path / "own" / "views").glob("*.json"))
        assert len(indexes) == 1
        again = [_signed(server, f"ds/{p.name}", p.read_bytes(), RESIGNED) for p in paths]
        ds2 = ParquetDataset(again, **options)
        assert [ds2[i] for i in range(len(ds2))] == datagen.expected(50)
        assert ds2.disk_stats.writes == 0 and ds2.disk_stats.hits > 0
        assert sorted(p.name for p in (tmp_path / "disk").rglob("*")
                      if p.is_file()) == disk_files
        view2 = ParquetDataset(again, where=where, **options)
        assert [view2[i] for i in range(len(view2))] == kept
        assert sorted((tmp_path / "own" / "views").glob("*.json")) == indexes
        # a replaced object (a new ETag) is still another entry everywhere
        other = datagen.write_shards(tmp_path / "other", [40], row_group_size=10, prefix="x")
        _signed(server, f"ds/{paths[0].name}", other[0].read_bytes(), RESIGNED)
        ds3 = ParquetDataset(again, **options)
        assert [ds3[i]["id"] for i in (0, 39, 40)] == ["row-00000000", "row-00000039",
                                                      "row-00000030"]
        assert ds3.disk_stats.writes > 0


def test_a_state_saved_over_signed_urls_resumes_over_the_urls_signed_again(
    tmp_path: Path,
) -> None:
    # the dataset's fingerprint held each URL whole: once the URLs were signed again (they
    # expire), every checkpoint was refused as "saved over other data"
    from undertale_duck import ChunkedSampler

    with _signed_shards(tmp_path) as (server, paths, first):
        ds = ParquetDataset(first, cache_dir=tmp_path / "c", memory=64)
        sampler = ChunkedSampler(ds, 4, 0)
        order = list(sampler)
        state = sampler.state_dict(consumed=12)
        again = [_signed(server, f"ds/{p.name}", p.read_bytes(), RESIGNED) for p in paths]
        ds2 = ParquetDataset(again, cache_dir=tmp_path / "c", memory=64)
        assert ds2.fingerprint == ds.fingerprint
        resumed = ChunkedSampler(ds2, 4, 0)
        resumed.load_state_dict(state)
        assert list(resumed) == order[12:]
        # a replaced object (a new ETag) is other data still
        other = datagen.write_shards(tmp_path / "other", [40], row_group_size=10, prefix="x")
        _signed(server, f"ds/{paths[0].name}", other[0].read_bytes(), RESIGNED)
        ds3 = ParquetDataset(again, cache_dir=tmp_path / "c", memory=64)
        assert ds3.fingerprint != ds.fingerprint
        with pytest.raises(ArgumentError, match="saved over other data"):
            ChunkedSampler(ds3, 4, 0).load_state_dict(state)


# ---------------------------------------------------------------------- S3


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("same")
    yield server
    server.close()


def test_storage_option_credentials_are_never_shown(s3: S3Server, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="undertale_duck")
    datagen.write_shards(tmp_path / "src", [20, 20], row_group_size=10)
    url = s3.upload(tmp_path / "src", "s3://same/creds")
    options = {**s3.options(), "key": "AKIAOPTIONKEYSECRET", "secret": "optionsecretvalue",
               "token": "optionsessiontoken"}
    secrets = ("AKIAOPTIONKEYSECRET", "optionsecretvalue", "optionsessiontoken")
    shown: list[str] = []
    ds = ParquetDataset(url, storage_options=options, cache_dir=tmp_path / "c", memory=64,
                        read_ahead=False, retries=0)
    assert ds[0] == datagen.row(0)
    shown += [repr(ds), repr(ds.source.shards)]
    with pytest.raises(SourceError) as missing:
        ParquetDataset("s3://same/none/", storage_options=options, cache_dir=tmp_path / "c")
    shown.append(str(missing.value))
    s3.stop()
    try:
        with pytest.raises(StorageError) as down:
            ds[25]
        shown.append(str(down.value))
    finally:
        s3.start()
    status, out, err = invoke("describe", "s3://same/none/", *[
        a for k, v in (("key", options["key"]), ("secret", options["secret"]),
                       ("client_kwargs.endpoint_url", s3.endpoint))
        for a in ("--storage-option", f"{k}={v}")])
    assert status == 2
    shown += [out, err, _files_text(tmp_path / "c")]
    shown += [r.getMessage() for r in caplog.records]
    text = "\n".join(shown)
    assert [s for s in secrets if s in text] == []


def test_two_endpoints_with_the_same_bucket_and_key_are_two_cache_entries(
    s3: S3Server, tmp_path: Path
) -> None:
    second = S3ChildServer()  # its own objects (in-process servers share moto's state)
    try:
        second.bucket("same")
        datagen.write_shards(tmp_path / "a", [30], row_group_size=10)
        datagen.write_shards(tmp_path / "x", [12, 30], row_group_size=10)  # other rows
        # the same key, size and ETag on both servers: still two objects
        s3.upload(tmp_path / "a", "s3://same/ds")
        second.upload(tmp_path / "a", "s3://same/ds")
        s3.upload(tmp_path / "x", "s3://same/ds2")
        second.upload(tmp_path / "a", "s3://same/ds2")
        one = ParquetDataset("s3://same/ds/", storage_options=s3.options(),
                             cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        assert [one[i] for i in range(len(one))] == datagen.expected(30)
        two = ParquetDataset("s3://same/ds/", storage_options=second.options(),
                             cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        assert [two[i] for i in range(len(two))] == datagen.expected(30)
        # its own copy, from its own server, not the first server's under the same name
        assert two.source.store.cache.stats.downloads == 1
        stats = two.storage_stats
        assert stats is not None and stats.download_bytes == two.source.shards[0].size
        a = ParquetDataset("s3://same/ds2/", storage_options=s3.options(),
                           cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        b = ParquetDataset("s3://same/ds2/", storage_options=second.options(),
                           cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        assert [a[i] for i in range(len(a))] == datagen.expected(42)
        assert [b[i] for i in range(len(b))] == datagen.expected(30)
    finally:
        second.close()


def _same_size_versions(directory: Path) -> tuple[Path, Path]:
    """Two shards of the same size whose footers differ (their key-value metadata)."""
    table = datagen.table(0, 20)
    one, two = directory / "one.parquet", directory / "two.parquet"
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata({"written": "first"}), one, row_group_size=10)
    pq.write_table(table.replace_schema_metadata({"written": "other"}), two, row_group_size=10)
    assert one.stat().st_size == two.stat().st_size
    assert one.read_bytes() != two.read_bytes()
    return one, two


def test_a_footer_read_after_the_object_was_replaced_is_refused_s3(
    s3: S3Server, tmp_path: Path
) -> None:
    one, two = _same_size_versions(tmp_path / "v")
    s3.fs.put_file(str(one), "same/pinned/part.parquet")
    store = open_store("s3://same/pinned/", s3.options(), ShardCache(tmp_path / "c"))
    listed = list_remote(store, "s3://same/pinned/")  # what the dataset is opened as
    s3.fs.put_file(str(two), "same/pinned/part.parquet")  # replaced before its footer read
    with pytest.raises(ShardChangedError, match=r"part\.parquet was replaced or deleted in the "
                                                r"store while the dataset was being opened"):
        footers(store, listed)
    (url, info), = listed
    assert store.cache.load_footer(store.key(url, identity(info), info["size"])) is None
    # opened again, the store's version is listed and its own footer read
    shard, = footers(store, list_remote(store, "s3://same/pinned/"))
    assert shard.version != identity(info)


def test_a_footer_read_after_the_object_was_replaced_is_refused_http(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    one, two = _same_size_versions(tmp_path / "v")
    server = HTTPServer()
    try:
        url = server.put("ds/part.parquet", one.read_bytes())
        store = open_store([url], None, ShardCache(tmp_path / "c"))
        listed = list_remote(store, [url])
        server.put("ds/part.parquet", two.read_bytes())
        with pytest.raises(ShardChangedError, match="while the dataset was being opened"):
            footers(store, listed)
        (_, info), = listed
        assert store.cache.load_footer(store.key(url, identity(info), info["size"])) is None
    finally:
        server.close()


def test_describe_json_names_a_shard_without_its_password(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    paths = datagen.write_shards(tmp_path / "src", [10], row_group_size=10)
    server = HTTPServer()
    try:
        url = server.put(f"ds/{paths[0].name}", paths[0].read_bytes())
        url = url.replace("http://", "http://reader:hunter2@")
        status, out, err = invoke("describe", url, "--format", "json")
    finally:
        server.close()
    assert (status, err) == (0, "")
    data = json.loads(out)
    assert data["source"] == data["shards"][0]["path"] == redact_url(url)
    assert data["shards"][0]["path"] == (
        f"http://<redacted>@127.0.0.1:{server.port}/ds/part-00000.parquet"
    )
    assert data["totals"]["rows"] == 10


# ---------------------------------------------------------------------- HTTP servers


def test_a_server_that_ignores_byte_ranges_serves_the_rows(tmp_path: Path) -> None:
    # Python's http.server answers a range request with the whole object: opening such a
    # dataset raised "was replaced or deleted in the store while the dataset was being opened"
    pytest.importorskip("aiohttp")
    paths = datagen.write_shards(tmp_path / "src", [30, 25, 5], row_group_size=10)
    server = HTTPServer()
    server.state.ranges = False
    try:
        urls = [server.put(f"ds/{p.name}", p.read_bytes()) for p in paths]
        ds = ParquetDataset(urls, cache_dir=tmp_path / "c", memory=64, read_ahead=False)
        order = [59, 0, 31, 30, 12, 58, 29, *range(60)]
        assert [ds[i] for i in order] == [datagen.expected(60)[i] for i in order]
        assert ds.__getitems__(list(range(60))) == datagen.expected(60)
        # windows came from whole copies (no range reads of a server that sends everything)
        assert ds.storage_stats is not None and ds.storage_stats.range_windows == 0
        ds.close()
        # ds.sql needs byte ranges: a clear StorageError naming the shard, no traceback text
        ds = ParquetDataset(urls, cache_dir=tmp_path / "c2", memory=64, read_ahead=False)
        with pytest.raises(StorageError, match="does not answer byte-range requests") as info:
            ds.sql("SELECT id, label FROM dataset")
        assert "/ds/part-" in str(info.value) and "Traceback" not in str(info.value)
    finally:
        server.close()


def _same_size_rows(directory: Path, rows: int) -> tuple[Path, Path]:
    """Two shards of one size and footer whose rows differ: ``x = i`` and ``x = i + 1000``."""
    import pyarrow as pa

    directory.mkdir(parents=True, exist_ok=True)
    one, two = directory / "one.parquet", directory / "two.parquet"
    for path, shift in ((one, 0), (two, 1000)):
        table = pa.table({"x": pa.array(range(shift, shift + rows), pa.int64())})
        pq.write_table(table, path, row_group_size=rows // 2, compression="none",
                       use_dictionary=False, write_statistics=False)
    assert one.stat().st_size == two.stat().st_size
    assert pq.read_metadata(one).serialized_size == pq.read_metadata(two).serialized_size
    assert one.read_bytes() != two.read_bytes()
    return one, two


@pytest.mark.parametrize("versions", ["none", "last_modified", "etag"])
@pytest.mark.parametrize("window_bytes", [None, "256B"])  # whole downloads, range reads
def test_an_object_replaced_by_one_of_its_size_is_read_anew_by_the_next_open(
    tmp_path: Path, versions: str, window_bytes: str | None
) -> None:
    # a server sending neither ETag nor Last-Modified: the object was known by URL and size
    # alone, and the next open served the copy an earlier process had cached (old rows);
    # one sending only Last-Modified (http.server), replaced within its second or with its
    # mtime set back (the date below never changes), did the same
    pytest.importorskip("aiohttp")
    one, two = _same_size_rows(tmp_path / "v", 40)
    server = HTTPServer()
    server.state.versions = versions == "etag"
    if versions == "last_modified":
        server.state.last_modified = "Mon, 01 Jan 2024 00:00:00 GMT"
    cache = tmp_path / "cache"
    options: dict[str, object] = {"cache_dir": cache, "memory": 64, "read_ahead": False}
    if window_bytes is not None:
        options["window_bytes"] = window_bytes
    try:
        url = server.put("ds/part.parquet", one.read_bytes())
        first = ParquetDataset([url], **options)
        assert [first[i]["x"] for i in range(40)] == list(range(40))
        first.close()
        same = ParquetDataset([url], **options)  # not replaced: the same rows
        assert [same[i]["x"] for i in (39, 0, 20)] == [39, 0, 20]
        stats = same.storage_stats
        assert stats is not None
        if window_bytes is None:
            # a versioned object's copy is shared by the opens; one without a version is
            # downloaded by each open (its copy is that open's own)
            assert stats.downloads == (0 if versions == "etag" else 1)
        same.close()
        server.put("ds/part.parquet", two.read_bytes())
        second = ParquetDataset([url], **options)
        assert [second[i]["x"] for i in range(40)] == list(range(1000, 1040))
        got = second.sql("SELECT x FROM dataset ORDER BY x").column("x").to_pylist()
        assert got == list(range(1000, 1040))
        second.close()
    finally:
        server.close()


def test_a_listing_gives_an_unversioned_object_its_own_token(tmp_path: Path) -> None:
    # each listing's token, on the objects without a version only; a later info() of the
    # object gives no token, so its check compares the size alone (no false change)
    pytest.importorskip("aiohttp")
    one, _ = _same_size_rows(tmp_path / "v", 40)
    server = HTTPServer()
    try:
        server.state.versions = False
        url = server.put("ds/part.parquet", one.read_bytes())
        store = open_store([url], None, ShardCache(tmp_path / "c"))
        (_, a), = list_remote(store, [url])
        (_, b), = list_remote(store, [url])
        first, second = identity(a), identity(b)
        assert first is not None and second is not None and first != second
        assert first.startswith("undertale_duck_listed=")
        shard, = footers(store, [(url, a)])
        store.check(shard)  # unchanged: no ShardChangedError
        # only a time (Last-Modified): the listing's token too, and the time still compared
        server.state.last_modified = "Mon, 01 Jan 2024 00:00:00 GMT"
        (_, d), = list_remote(store, [url])
        timed = str(identity(d))
        assert timed.startswith("undertale_duck_listed=") and "last_modified=" in timed
        shard, = footers(store, [(url, d)])
        store.check(shard)
        server.state.last_modified = "Mon, 01 Jan 2024 00:00:01 GMT"
        with pytest.raises(ShardChangedError, match="last_modified"):
            store.check(shard)
        server.state.last_modified = None
        server.state.versions = True
        (_, c), = list_remote(store, [url])
        assert not str(identity(c)).startswith("undertale_duck_listed=")
    finally:
        server.close()


def test_sql_reads_shards_at_urls_with_a_query_string(tmp_path: Path) -> None:
    # DuckDB globs "?": the escaped URL reached the HTTP client as a pattern, "No files found"
    with _signed_shards(tmp_path) as (_, _, urls):
        ds = ParquetDataset(urls, cache_dir=tmp_path / "c", memory=64)
        want = datagen.expected(50)
        got = ds.sql("SELECT id, label FROM dataset WHERE label >= 0").to_pylist()
        assert got == [{"id": r["id"], "label": r["label"]} for r in want]
        assert ds.__getitems__([49, 0, 30]) == [want[49], want[0], want[30]]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab/?*[]:.=&%", max_size=30))
def test_an_escaped_url_names_exactly_itself(path: str) -> None:
    # what DuckDB hands the filesystem's glob for a shard URL (escaped by duckdb_path) maps
    # back to that URL; a pattern with a glob character of its own stays a pattern
    from undertale_duck.core.runtime.duck import duckdb_path
    from undertale_duck.core.source.remote.fsclient import _literal

    escaped = duckdb_path(path)
    assert _literal(escaped) == (path if set("*?[") & set(path) else None)
    if "*" in path or "?" in path:
        # a pattern is one name only when it is that name escaped ("[?]" matches only "?")
        literal = _literal(path)
        assert literal is None or duckdb_path(literal) == path
