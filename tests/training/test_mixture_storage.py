"""Mixtures of sources in object storage: a real S3 server (moto) on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import datagen
from support.storage_server import S3Server, cached_files, free_port
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, Mixture, ParquetDataset, Stream
from undertale_duck.errors import StorageError


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("mix")
    yield server
    server.close()


@pytest.fixture(scope="module")
def sources(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("mix")
    datagen.write_shards(root / "code", [40, 23], row_group_size=[8, 8])
    datagen.write_shards(root / "text", [31], row_group_size=[6])
    return {name: (root / name, s3.upload(root / name, f"s3://mix/{name}"))
            for name in ("code", "text")}


def _local(sources: dict[str, tuple[Path, str]]) -> Mixture:
    """The same mixture over the local copies, each dataset opened by hand."""
    return Mixture([Stream(ParquetDataset(sources["code"][0], memory=16, where="label <> 2"),
                           proportion=0.6, name="code"),
                    Stream(ParquetDataset(sources["text"][0], memory=16), proportion=0.4,
                           name="text")], epoch_size=90)


def test_storage_options_and_cache_dir_reach_the_remote_streams(
    s3: S3Server, sources: dict[str, tuple[Path, str]], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    remote = Mixture(
        [Stream(sources["code"][1], proportion=0.6, where="label <> 2", name="code"),
         Stream(sources["text"][1], proportion=0.4, name="text")],
        epoch_size=90, storage_options=s3.options(), cache_dir=cache, memory=16,
    )
    local = _local(sources)
    try:
        assert [s.dataset.shards[0] for s in remote.streams] == [
            sources["code"][1] + "part-00000.parquet", sources["text"][1] + "part-00000.parquet"
        ]
        assert remote.counts == local.counts and len(remote) == len(local)
        assert len(remote.streams[0].dataset) == sum(
            1 for r in datagen.expected(63) if r["label"] != 2)
        assert list(cached_files(cache)) == []  # opening reads footers by range
        order = ChunkedSampler(remote, 8, workers=0, shuffle=True, seed=3).order(1)
        assert order.tolist() == ChunkedSampler(local, 8, workers=0, shuffle=True,
                                                seed=3).order(1).tolist()
        assert [remote[int(i)] for i in order] == [local[int(i)] for i in order]
        # the shards were read through the cache directory the mixture was given
        assert len(list(cached_files(cache))) == 3
    finally:
        remote.close()


def test_a_streams_own_options_win(s3: S3Server, sources: dict[str, tuple[Path, str]],
                                   tmp_path: Path) -> None:
    # the mixture's options point at a port nothing listens on; the stream's own are right
    dead = {"endpoint_url": f"http://127.0.0.1:{free_port()}", "region_name": "us-east-1"}
    wrong = {**s3.options(), "client_kwargs": dead}
    mix = Mixture([Stream(sources["text"][1], options={"storage_options": s3.options(),
                                                       "cache_dir": tmp_path / "own"}),
                   Stream(ParquetDataset(sources["code"][0]))],
                  storage_options=wrong, cache_dir=tmp_path / "shared")
    try:
        assert [mix[i]["id"] for i in range(31)] == [datagen.row(i)["id"] for i in range(31)]
        assert len(list(cached_files(tmp_path / "own"))) == 1
        assert list(cached_files(tmp_path / "shared")) == []
    finally:
        mix.close()
    with pytest.raises(StorageError):  # the mixture's options do reach its sources
        Mixture([Stream(sources["text"][1])], storage_options=wrong, cache_dir=tmp_path / "x")


@pytest.mark.heavy
def test_remote_mixture_through_dataloader_workers(
    s3: S3Server, sources: dict[str, tuple[Path, str]], tmp_path: Path
) -> None:
    remote = Mixture([Stream(sources["code"][1], repeat=1.5), Stream(sources["text"][1])],
                     storage_options=s3.options(), cache_dir=tmp_path / "cache", memory=16)
    local = Mixture([Stream(ParquetDataset(sources["code"][0]), repeat=1.5),
                     Stream(ParquetDataset(sources["text"][0]))])
    sampler = ChunkedSampler(remote, 5, workers=2, shuffle=True, seed=8)
    loader = DataLoader(remote, batch_size=5, sampler=sampler, num_workers=2, collate_fn=list)
    got = [row for batch in loader for row in batch]  # workers reopen the store from pickles
    assert got == [local[int(i)] for i in sampler.order(0)] and len(got) == len(sampler)
    remote.close()
