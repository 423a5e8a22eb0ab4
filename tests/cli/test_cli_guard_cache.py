"""The output guard keeps every output out of undertale_duck's own caches, URL sources included."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import datagen
from support import hostile_files as hf
from support.cli_run import invoke
from support.storage_server import HTTPServer, S3Server, cached_files, serve_directory

from undertale_duck import ParquetDataset
from undertale_duck.cli.guard import cache_directories

QUERY = "SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("data")
    yield server
    server.close()


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("guard_cache") / "data"
    datagen.write_shards(root, [7, 5])
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache root for this test, as ``$UNDERTALE_DUCK_CACHE`` names it."""
    root = tmp_path / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(root))
    return root


def _flags(s3: S3Server) -> list[str]:
    return [
        "--storage-option", "key=testing", "--storage-option", "secret=testing",
        "--storage-option", f"client_kwargs.endpoint_url={s3.endpoint}",
        "--storage-option", "client_kwargs.region_name=us-east-1",
    ]  # fmt: skip


def _fill(cache: Path, url: str, s3: S3Server) -> list[Path]:
    """Read a remote dataset row by row: its shards are downloaded into the node's cache;
    the view index and disk tier directories are made as the library makes them."""
    ds = ParquetDataset(url, memory=64, storage_options=s3.options())
    assert [ds[i] for i in range(len(ds))] == datagen.expected(len(ds))
    for kind in ("views", "windows"):
        (cache / kind).mkdir(mode=0o700, exist_ok=True)
    shards = list(cached_files(cache / "shards"))  # the one rule: a folder per kind
    assert shards, "the remote shards were not cached"
    return shards


def test_cache_directories_follow_the_environment(cache: Path) -> None:
    kinds = ("shards", "views", "vectors", "windows", "verdicts")  # one folder per kind
    assert set(cache_directories()) == {str(cache), *(str(cache / kind) for kind in kinds)}


def test_url_source_output_never_lands_in_the_caches(
    s3: S3Server, local: Path, cache: Path, tmp_path: Path
) -> None:
    url = s3.upload(local, "s3://data/guarded")
    shards = _fill(cache, url, s3)
    before = hf.sha256s(cache)
    flags = _flags(s3)
    targets = [
        cache / "result.csv",  # the cache root
        cache / "shards" / "result.csv",  # the node's shard cache
        cache / "views" / "result.csv",  # the view indexes
        cache / "windows" / "result.csv",  # the disk tier
        shards[0],  # a cached shard itself, replaced only with --force
    ]
    for target in targets:
        for force in ([], ["--force"]):
            status, out, err = invoke("sql", url, QUERY, *flags, "-o", str(target), *force)
            assert status == 2, err
            assert "undertale_duck's cache directory" in err or "already exists" in err, err
            assert len(err.strip().splitlines()) == 1
            status, _, err = invoke(
                "validate", url, "-s", "Dataset", *flags, "-o", str(target), *force
            )
            assert status == 2 and len(err.strip().splitlines()) == 1, err
    # reached through a symbolic link to the cache, or with '..' from inside it
    link = tmp_path / "innocent"
    link.symlink_to(cache / "views")
    for target in (link / "result.csv", cache / "views" / ".." / "sneaky.csv"):
        status, _, err = invoke("sql", url, QUERY, *flags, "-o", str(target))
        assert status == 2 and "undertale_duck's cache directory" in err, err
    assert hf.sha256s(cache) == before  # nothing written, replaced or left behind
    assert not any(p.name.startswith(".undertale-duck-") for p in cache.rglob("*"))
    # the same command writes outside the caches
    outside = tmp_path / "out" / "result.csv"
    outside.parent.mkdir()
    status, _, err = invoke("sql", url, QUERY, *flags, "-o", str(outside))
    assert status == 0, err
    assert outside.read_text().splitlines()[0] == "label,n"


def test_http_source_and_local_source_outputs_stay_out_of_the_caches(
    local: Path, cache: Path, tmp_path: Path
) -> None:
    server = HTTPServer()
    try:
        urls = serve_directory(server, local, "data")
        (cache / "views").mkdir(parents=True)
        before = hf.sha256s(cache) | hf.sha256s(local)
        for source in (urls[0], str(local)):
            for target in (cache / "report.json", cache / "views" / "report.json"):
                status, _, err = invoke("validate", source, "-s", "Dataset", "-o", str(target))
                assert status == 2, err
                assert f"undertale_duck's cache directory {target.parent}" in err, err
        status, _, err = invoke("sql", urls[1], QUERY, "-o", str(cache / "views" / "x.csv"))
        assert status == 2 and "cache directory" in err, err
        after = hf.sha256s(cache) | hf.sha256s(local)
        assert {k: after.get(k) for k in before} == before  # nothing replaced
        # only the library's own footer cache entries (its cache tag and eviction lock) were
        # added, never an output
        added = set(after) - set(before)
        assert all(k.endswith((".footer", "/CACHEDIR.TAG", "/.evict.lock")) for k in added), after
        assert sorted(os.listdir(cache / "views")) == []
        report = tmp_path / "report.json"
        status, _, err = invoke("validate", urls[0], "-s", "Dataset", "-o", str(report))
        assert status in (0, 1) and report.exists(), err
    finally:
        server.close()
