"""Packed blocks against a pyarrow reference stream: blocks, the documents each block names
(``document_rows``, ``locate_documents``, ``batch_rows``), epochs with workers, splits' sizes.

The reference is built from the shards with pyarrow alone: every document's tokens (and
``eod``) laid end to end, with the shard and local row that owns each stream position.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from undertale_duck import (
    ChunkedSampler,
    Pack,
    PackedDataset,
    ParquetDataset,
    Split,
    batch_rows,
    collate,
)

SCHEMA = pa.schema([("id", pa.int64()), ("tokens", pa.list_(pa.int32()))])


def doc_length(g: int) -> int:
    """Document ``g``'s token count: 0 for some, up to 40 (a function of ``g``)."""
    return (g * 53) % 41 if g % 9 else 0


def tokens_of(g: int, n: int) -> list[int]:
    return [(g * 7919 + k * 13) % 30_000 for k in range(n)]


def write(root: Path, lengths: list[list[int]], row_group: int = 5) -> None:
    """One shard per entry of ``lengths`` (its documents' token counts), ids consecutive."""
    root.mkdir(parents=True, exist_ok=True)
    g = 0
    for k, sizes in enumerate(lengths):
        rows = [{"id": g + i, "tokens": tokens_of(g + i, n)} for i, n in enumerate(sizes)]
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        pq.write_table(table, root / f"part-{k:05d}.parquet", row_group_size=row_group)
        g += len(sizes)


@dataclass
class Stream:
    """The reference stream: tokens, and the (shard path, local row) of each position."""

    tokens: np.ndarray[Any, Any]
    shard: np.ndarray[Any, Any]
    row: np.ndarray[Any, Any]
    paths: list[str]

    def blocks(self, length: int) -> np.ndarray[Any, Any]:
        whole = len(self.tokens) // length
        return self.tokens[: whole * length].reshape(whole, length)

    def documents(self, k: int, length: int) -> list[tuple[str, int]]:
        """The documents with a token in block ``k``, in order."""
        part = slice(k * length, (k + 1) * length)
        out: list[tuple[str, int]] = []
        for s, r in zip(self.shard[part].tolist(), self.row[part].tolist(), strict=True):
            if not out or out[-1] != (self.paths[s], r):
                out.append((self.paths[s], r))
        return out


def reference(root: Path, eod: int | None, keep: Any = None) -> Stream:
    """The stream built with pyarrow from each shard in order (``keep``: a row filter on ids)."""
    paths = sorted(str(p) for p in root.glob("*.parquet"))
    tokens, shards, rows = [], [], []
    for s, path in enumerate(paths):
        table = pq.read_table(path)
        local = np.arange(table.num_rows, dtype=np.int64)
        if keep is not None:
            mask = keep(table["id"].to_numpy())
            table, local = table.filter(pa.array(mask)), local[mask]
        column = table["tokens"]
        lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy().astype(np.int64)
        values = pc.list_flatten(column).to_numpy().astype(np.int64)
        step = lengths + (0 if eod is None else 1)
        stream = np.empty(int(step.sum()), dtype=np.int64)
        ends = np.cumsum(step)
        if eod is not None:
            stream[ends - 1] = eod
            body = np.ones(len(stream), dtype=bool)
            body[ends - 1] = False
            stream[body] = values
        else:
            stream[:] = values
        tokens.append(stream)
        shards.append(np.full(len(stream), s, dtype=np.int64))
        rows.append(np.repeat(local, step))
    return Stream(np.concatenate(tokens), np.concatenate(shards), np.concatenate(rows), paths)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards of 90, 1, 0, 12 and 150 documents (the 1- and 12-document shards are shorter
    than the longest blocks), in row groups of 5."""
    root = tmp_path_factory.mktemp("acceptance")
    sizes, g = [], 0
    for n in (90, 1, 0, 12, 150):
        sizes.append([doc_length(i) for i in range(g, g + n)])
        g += n
    write(root, sizes)
    return root


def kept_ids(ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return (ids % 4 != 1) & (ids % 7 != 3)


WHERE = "id % 4 <> 1 AND id % 7 <> 3"


# ---------------------------------------------------------------------------- blocks
@pytest.mark.parametrize("eod", [None, 30_001])
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("length", [5, 64, 700])
def test_blocks_and_their_documents_equal_the_reference(
    shards: Path, eod: int | None, view: bool, length: int
) -> None:
    options: dict[str, Any] = {"where": WHERE} if view else {}
    ds = ParquetDataset(shards, pack=Pack(column="tokens", length=length, eod=eod),
                        window_bytes=200, format="numpy", **options)
    assert isinstance(ds, PackedDataset)
    ref = reference(shards, eod, kept_ids if view else None)
    expected = ref.blocks(length)
    assert len(ds) == len(expected)
    got = ds.__getitems__(list(range(len(ds))))
    assert np.array_equal(np.stack([np.asarray(r["tokens"]) for r in got]), expected)
    for k in range(len(ds)):
        named = ds.locate_documents(k)
        assert named == ref.documents(k, length)
        assert len(named) == int(np.asarray(ds[k]["segment_ids"]).max())
        assert ds.locate(k) == named[0]
        rows = ds.document_rows(k)
        assert rows == sorted(rows) and rows[0] == ds.documents_of(k).start
        assert rows[-1] == ds.documents_of(k).stop - 1
    if length == 700:  # a block longer than a shard's stream spans more than two shards
        assert max(len({p for p, _ in ds.locate_documents(k)}) for k in range(len(ds))) >= 3


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.lists(st.integers(0, 30), max_size=25), min_size=1, max_size=4),
    length=st.integers(1, 80),
    eod=st.booleans(),
    view=st.booleans(),
    window=st.sampled_from([64, 300, 100_000]),
)
def test_any_documents_any_block_length(
    tmp_path_factory: pytest.TempPathFactory,
    lengths: list[list[int]],
    length: int,
    eod: bool,
    view: bool,
    window: int,
) -> None:
    root = tmp_path_factory.mktemp("any")
    write(root, lengths, row_group=3)
    options: dict[str, Any] = {"where": "id % 3 <> 2"} if view else {}
    ds = ParquetDataset(root, pack=Pack(column="tokens", length=length,
                                        eod=-1 if eod else None),
                        window_bytes=window, format="numpy", **options)
    ref = reference(root, -1 if eod else None, (lambda i: i % 3 != 2) if view else None)
    expected = ref.blocks(length)
    assert len(ds) == len(expected)
    order = list(range(len(ds)))[::-1]
    batch = ds.__getitems__(order)
    for position, k in enumerate(order):
        assert np.array_equal(np.asarray(ds[k]["tokens"]), expected[k])
        assert np.array_equal(np.asarray(batch[position]["tokens"]), expected[k])
        assert ds.locate_documents(k) == ref.documents(k, length)


def test_batch_rows_names_every_document_of_each_block(shards: Path) -> None:
    length = 48
    ds = ParquetDataset(shards, pack=Pack(column="tokens", length=length, eod=30_001),
                        where=WHERE, window_bytes=200)
    ref = reference(shards, 30_001, kept_ids)
    sampler = ChunkedSampler(ds, 4, workers=2, shuffle=True, seed=5)
    steps = -(-len(sampler) // 4)
    seen = 0
    for step in range(steps):
        for entry in batch_rows(sampler, step, values=True):
            documents = [(d["shard"], d["shard_row"]) for d in entry["documents"]]
            assert documents == ref.documents(entry["index"], length)
            assert (entry["shard"], entry["shard_row"]) == documents[0]
            assert entry["row"]["tokens"] == ref.blocks(length)[entry["index"]].tolist()
            seen += 1
    assert seen == len(sampler)
    plain = ParquetDataset(shards, where=WHERE)  # rows name no documents
    assert "documents" not in batch_rows(ChunkedSampler(plain, 4, workers=0), 0)[0]


def test_batch_rows_of_a_mixture_names_the_documents_of_packed_streams(shards: Path) -> None:
    from undertale_duck import Mixture, Stream

    length = 16
    mix = Mixture([Stream(shards, proportion=0.5, name="all"),
                   Stream(shards, proportion=0.5, name="some", where=WHERE)],
                  pack=Pack(column="tokens", length=length), window_bytes=200)
    refs = {"all": reference(shards, None), "some": reference(shards, None, kept_ids)}
    sampler = ChunkedSampler(mix, 8, workers=0, shuffle=True, seed=1)
    for step in range(3):
        for entry in batch_rows(sampler, step):
            _, inner = mix.source_of(entry["index"])
            documents = [(d["shard"], d["shard_row"]) for d in entry["documents"]]
            assert documents == refs[entry["source"]].documents(inner, length)


# ---------------------------------------------------------------------------- epochs
@pytest.mark.parametrize("drop_last", [False, True])
def test_an_epoch_with_two_workers_sees_every_block_once(shards: Path, drop_last: bool) -> None:
    length = 8
    ds = ParquetDataset(shards, pack=Pack(column="tokens", length=length, eod=30_001),
                        window_bytes=200, format="torch")
    expected = reference(shards, 30_001).blocks(length)
    sampler = ChunkedSampler(ds, 4, workers=2, shuffle=True, seed=11, drop_last=drop_last)
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2, collate_fn=collate)
    seen = torch.cat([b["tokens"] for b in loader]).numpy()
    order = np.asarray(sampler.order())
    assert len(set(order.tolist())) == len(order) == len(seen)  # no block twice
    assert np.array_equal(seen, expected[order])
    if drop_last:  # undertale's rule: equal shares, the sequence's last few blocks left out
        assert len(ds) - 2 * 4 < len(order) <= len(ds)
    else:
        assert sorted(order.tolist()) == list(range(len(ds)))
    assert order.tolist() != sorted(order.tolist())  # shuffled


# ---------------------------------------------------------------------------- splits
@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60,000 keyed rows in three shards (strings and integers)."""
    root = tmp_path_factory.mktemp("many")
    for k in range(3):
        ids = np.arange(k * 20_000, (k + 1) * 20_000, dtype=np.int64)
        names = pa.array([f"doc-{i}" for i in ids.tolist()])
        pq.write_table(pa.table({"id": ids, "name": names}), root / f"p{k}.parquet")
    return root


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fraction=st.sampled_from([0.01, 0.02, 0.1, 0.25, 0.5, 0.9]),
       seed=st.integers(0, 2**31), key=st.sampled_from(["id", "name"]))
def test_split_sizes_are_within_one_percent_of_the_fraction(
    many: Path, fraction: float, seed: int, key: str
) -> None:
    split = Split(key=key, fraction=fraction, part="validation", seed=seed)
    validation = len(ParquetDataset(many, split=split, columns=[key]))
    train = len(ParquetDataset(many, split=split.other(), columns=[key]))
    assert validation + train == 60_000
    assert abs(validation / 60_000 - fraction) < 0.01


@pytest.mark.parametrize("options", [{}, {"where": WHERE},
                                     {"query": "SELECT * FROM dataset WHERE id % 5 <> 0"}])
def test_locate_many_agrees_with_locate(shards: Path, options: dict[str, Any]) -> None:
    ds = ParquetDataset(shards, window_bytes=200, **options)
    picks = [len(ds) - 1, 0, 3, -1, 100, 3, *range(90, 110)]
    assert ds.locate_many(picks) == [ds.locate(i) for i in picks]
    assert ds.locate_many([]) == []
    with pytest.raises(IndexError):
        ds.locate_many([0, len(ds)])


# ---------------------------------------------------------------------------- memory
RSS_CHILD = Path(__file__).resolve().parents[2] / "support" / "pack_rss_child.py"


def _rss(data: Path, memory: int, cache: Path, *mode: str) -> dict[str, int]:
    import json
    import os
    import subprocess
    import sys

    command = [sys.executable, str(RSS_CHILD), str(data), str(memory), "2048", *mode]
    env = {**os.environ, "UNDERTALE_DUCK_CACHE": str(cache)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.heavy
def test_packing_five_times_the_budget_keeps_memory_bounded(tmp_path: Path) -> None:
    # 350 MiB of int32 tokens (5.5x memory=64) in row groups of 500 documents (about
    # 4 MiB); the indexing pass and a shuffled epoch, every block checked, in a child whose
    # peak RSS is measured against its fixed footprint (the same pipeline over tiny data)
    from support import pack_rss_child

    memory, mib = 64, 1 << 20
    tokens = pack_rss_child.write(tmp_path / "data", 9, 5000, 4096, 500)
    assert tokens * 4 > 5 * memory * mib
    packed = _rss(tmp_path / "data", memory, tmp_path / "cache")
    assert packed["bad"] == 0 and packed["blocks"] == packed["length"] == tokens // 2048
    rows = _rss(tmp_path / "data", memory, tmp_path / "cache", "rows")
    indexed = packed["indexed"] - packed["footprint"]
    over = packed["peak"] - packed["footprint"]
    over_rows = rows["peak"] - rows["footprint"]
    print(f"packed: indexing pass {indexed / mib:.0f} MiB, epoch {over / mib:.0f} MiB over "
          f"the footprint; unpacked rows {over_rows / mib:.0f} MiB (memory={memory} MiB)")
    batch = 2 * pack_rss_child.BATCH * 2048 * (4 + 8 + 8)  # the batch served and the next
    # packing holds no more than the unpacked rows of the same data under the same budget,
    # give or take what the allocators keep of freed pages, which moves each of the two
    # separate children's peaks by up to 10 MiB: in 7 quiet runs the packed epoch peaked at
    # 71-75 MiB and the rows at 54-62, so their difference alone ranged over 10-21 MiB (a
    # 16 MiB allowance failed one CI); the absolute bound below is the budget's promise
    slack = 24 * mib
    assert indexed <= over_rows + slack + batch
    assert over <= over_rows + slack + batch
    # and about the budget itself: what the allocator keeps of freed pages moves the peak
    # by 10-15 MiB from run to run (61-73 MiB measured; 88-107 before small budgets made
    # pyarrow return freed memory at once), so a quarter of the budget is allowed for it
    assert over <= memory * mib * 5 // 4 + batch
    assert indexed <= memory * mib * 5 // 4
