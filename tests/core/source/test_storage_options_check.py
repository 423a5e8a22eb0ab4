"""Issue 27, item 5: storage options are checked against the filesystem's signature first.

An unknown option is our ArgumentError naming it, the closest accepted names and every
accepted one; a malformed value (a mapping option given text, a flag given text) names the
option. Both are refused before any request reaches the store (never retried as transient).
Real moto S3 server and ``file://`` URLs; the dataset's sha256 is checked before and after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import datagen
from support.storage_server import S3Server

from undertale_duck import ArgumentError, ParquetDataset

SIZES = [20, 10]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("sig")
    yield server
    server.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=10)
    return root


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"endpont_url": "http://x"}, r"'endpont_url' is not an option of the s3:// client.*"
                                      r"did you mean 'endpoint_url'\?.*it accepts anon, "),
        ({"anonymous": True}, r"'anonymous' is not an option.*did you mean .*'anon'\?"),
        ({"config_kwargs": "fast please"}, r"'config_kwargs' of the s3:// client .*takes a "
                                            r"mapping of options, got 'fast please'"),
        ({"use_ssl": "no"}, r"'use_ssl' of the s3:// client .*takes true or false"),
        # botocore's Config took these and failed each request (retried 4 times, then a
        # StorageError) or refused them without naming the option
        ({"config_kwargs": {"connect_timeout": "abc"}},
         r"config_kwargs 'connect_timeout' of the s3:// client .*takes a number of seconds "
         r"> 0, got 'abc': fix the value in storage_options"),
        ({"config_kwargs": {"read_timeout": True}}, r"config_kwargs 'read_timeout' .*takes a "
                                                     r"number of seconds"),
        ({"config_kwargs": {"conect_timeout": 5}},
         r"config_kwargs 'conect_timeout' is not an option of botocore's Config .*did you "
         r"mean 'connect_timeout'.*it accepts .*connect_timeout, "),
        ({"config_kwargs": {"retries": "often"}}, r"config_kwargs 'retries' .*takes a mapping"),
        ({"config_kwargs": {"retries": {"mode": "eager"}}},
         r"config_kwargs of the s3:// client .*are refused by botocore's Config "
         r"\(InvalidRetryModeError: .*eager"),
    ],
)
def test_s3_options_are_checked_before_any_request(
    s3: S3Server, data: Path, tmp_path: Path, change: dict[str, object], match: str
) -> None:
    before = digest(data)
    url = s3.upload(data, "s3://sig/data")
    s3.log.clear()
    with pytest.raises(ArgumentError, match=match) as caught:
        ParquetDataset(url, storage_options={**s3.options(), **change},
                       cache_dir=tmp_path / "c", memory=64)
    assert "not retried" in str(caught.value)
    assert s3.log.requests == []  # refused before the store was asked anything
    assert digest(data) == before


def test_accepted_s3_options_pass(s3: S3Server, data: Path, tmp_path: Path) -> None:
    """Options of the base classes and of the botocore session s3fs passes **kwargs to."""
    url = s3.upload(data, "s3://sig/ok")
    options = {**s3.options(), "use_listings_cache": False, "skip_instance_cache": True,
               "profile": None, "default_fill_cache": False}
    ds = ParquetDataset(url, storage_options=options, cache_dir=tmp_path / "c", memory=64)
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))


def test_file_urls_check_the_local_filesystems_options(data: Path) -> None:
    before = digest(data)
    url = "file://" + str(data)
    with pytest.raises(ArgumentError, match=r"'bogus' is not an option of the file:// client.*"
                                            r"it accepts .*auto_mkdir"):
        ParquetDataset(url, storage_options={"bogus": 1})
    with pytest.raises(ArgumentError, match=r"'auto_mkdir' .*takes true or false, got 'yes'"):
        ParquetDataset(url, storage_options={"auto_mkdir": "yes"})
    ds = ParquetDataset(url, storage_options={"auto_mkdir": False})
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    # a plain path keeps ignoring options meant for other streams of a mixture
    assert len(ParquetDataset(data, storage_options={"anon": True})) == sum(SIZES)
    assert digest(data) == before


def test_a_storage_options_that_is_no_mapping_is_refused(data: Path) -> None:
    with pytest.raises(ArgumentError, match="storage_options must be a mapping"):
        ParquetDataset("file://" + str(data), storage_options=["anon"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("endpoint", "refusal"),
    [
        ("ftp://127.0.0.1:{port}", "EndpointResolutionError"),  # botocore: not a valid URI
        ("http://127.0.0.1:{port}/?sig=SECRET", "EndpointResolutionError"),
        ("http://user:SECRET@127.0.0.1:{port}", "HTTPClientError"),  # aiohttp: no credentials
    ],
)
def test_an_endpoint_the_client_refuses_when_asked_is_not_retried(
    s3: S3Server, data: Path, tmp_path: Path, endpoint: str, refusal: str
) -> None:
    """botocore refuses these endpoint_urls only at the first request: still no retry."""
    url = s3.upload(data, "s3://sig/endpoint")
    options = s3.options(fast=False)
    options["client_kwargs"] = {**options["client_kwargs"],
                                "endpoint_url": endpoint.format(port=s3.port)}
    s3.log.clear()
    with pytest.raises(ArgumentError, match=f"client refused \\({refusal}: ") as caught:
        ParquetDataset(url, storage_options=options, cache_dir=tmp_path / "c", memory=64)
    assert "not retried" in str(caught.value)
    assert "SECRET" not in str(caught.value)
    assert s3.log.requests == []
