"""Packed token blocks: exact slices of the documents' stream, across windows and shards."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from undertale_duck import (
    ArgumentError,
    ChunkedSampler,
    OutOfRangeError,
    Pack,
    PackedDataset,
    ParquetDataset,
    collate,
    load,
)
from undertale_duck.core.read import WindowCache

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("label", pa.int64()),
        ("tokens", pa.list_(pa.int32())),
        ("mask", pa.list_(pa.int8())),
    ]
)


def doc_length(g: int) -> int:
    """Document ``g``'s token count (0 for some: empty documents are part of the data)."""
    return (g * 37) % 23


def doc(g: int) -> dict[str, Any]:
    """Every value a function of the global row index ``g``."""
    n = doc_length(g)
    return {
        "id": g,
        "label": g % 5,
        "tokens": [(g * 7919 + k) % 30_000 for k in range(n)],
        "mask": [(g + k) % 2 for k in range(n)],
    }


def write(root: Path, sizes: list[int], row_group: int = 7) -> list[dict[str, Any]]:
    """Consecutive shards of ``sizes`` documents; return every document."""
    root.mkdir(parents=True, exist_ok=True)
    g = 0
    for k, size in enumerate(sizes):
        rows = [doc(i) for i in range(g, g + size)]
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        pq.write_table(table, root / f"part-{k:05d}.parquet", row_group_size=row_group)
        g += size
    return [doc(i) for i in range(g)]


def reference(root: Path, spec: Pack, where: Any = None) -> dict[str, list[list[int]]]:
    """The blocks, built with pyarrow alone from the shards (the stream, then slices)."""
    table = pq.read_table(sorted(root.glob("*.parquet")), schema=SCHEMA)
    if where is not None:
        table = table.filter(where(table))
    lengths = pc.list_value_length(table["tokens"]).to_numpy(zero_copy_only=False)
    columns: dict[str, list[int]] = {spec.column: [], "position_ids": [], "segment_ids": []}
    for name in spec.alongside:
        columns[name] = []
    documents: list[int] = []
    flat = {name: pc.list_flatten(table[name]).to_pylist() for name in spec.inputs}
    at = 0
    for d, n in enumerate(lengths.tolist()):
        for name in spec.inputs:
            columns[name] += flat[name][at : at + n]
        columns["position_ids"] += list(range(n))
        documents += [d] * n
        if spec.eod is not None:
            columns[spec.column].append(spec.eod)
            for name in spec.alongside:
                columns[name].append(spec.fill)
            columns["position_ids"].append(n)
            documents.append(d)
        at += n
    size = spec.length
    total = len(documents)
    blocks = total // size + (1 if total % size and spec.last == "pad" else 0)
    out: dict[str, list[list[int]]] = {name: [] for name in spec.outputs}
    for k in range(blocks):
        part = slice(k * size, (k + 1) * size)
        pad = size - len(documents[part])
        out[spec.column].append(columns[spec.column][part] + [spec.pad] * pad)
        for name in spec.alongside:
            out[name].append(columns[name][part] + [spec.fill] * pad)
        if spec.position_ids:
            out["position_ids"].append(columns["position_ids"][part] + [0] * pad)
        if spec.segment_ids:
            out["segment_ids"].append(_segments(documents[part]) + [0] * pad)
    return out


def _segments(ids: list[int]) -> list[int]:
    out = []
    current = 0
    for j, d in enumerate(ids):
        if j == 0 or d != ids[j - 1]:
            current += 1
        out.append(current)
    return out


def as_rows(ref: dict[str, list[list[int]]]) -> list[dict[str, list[int]]]:
    names = list(ref)
    return [dict(zip(names, values, strict=True)) for values in zip(*ref.values(), strict=True)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five shards (one of them empty, one of a single document), small row groups."""
    root = tmp_path_factory.mktemp("pack")
    write(root, [120, 1, 0, 77, 200])
    return root


# ---------------------------------------------------------------------------- exact blocks
@pytest.mark.parametrize(
    "spec",
    [
        Pack(column="tokens", length=16),
        Pack(column="tokens", length=16, eod=30_001),
        Pack(column="tokens", length=5, eod=30_001, last="pad", pad=30_002),
        Pack(column="tokens", length=1),
        Pack(column="tokens", length=997, last="pad"),  # longer than a shard's tokens
        Pack(column="tokens", length=12, eod=30_001, alongside=("mask",), fill=-1),
        Pack(column="tokens", length=8, position_ids=False, segment_ids=False),
    ],
)
def test_every_block_is_the_reference_slice(shards: Path, spec: Pack) -> None:
    ds = ParquetDataset(shards, pack=spec, window_bytes=300)
    assert isinstance(ds, PackedDataset)
    assert len(ds.documents.windows) > 20  # blocks cross windows and shards
    expected = as_rows(reference(shards, spec))
    assert len(ds) == len(expected)
    assert [ds[k] for k in range(len(ds))] == expected
    assert ds.columns == spec.outputs


def test_blocks_over_a_where_view(shards: Path) -> None:
    spec = Pack(column="tokens", length=9, eod=30_001, alongside=("mask",))
    ds = ParquetDataset(shards, pack=spec, where="label <> 2 AND id % 3 <> 0", window_bytes=300)
    def kept(t: pa.Table) -> pa.Array:
        ids = t["id"].to_numpy()
        return pa.array((t["label"].to_numpy() != 2) & (ids % 3 != 0))

    expected = as_rows(reference(shards, spec, kept))
    assert len(ParquetDataset(shards, where="label <> 2 AND id % 3 <> 0")) < 398
    assert len(ds) == len(expected)
    assert [ds[k] for k in range(len(ds))] == expected


def test_random_access_and_batches_equal_sequential(shards: Path) -> None:
    spec = Pack(column="tokens", length=13, eod=30_001)
    ds = ParquetDataset(shards, pack=spec, window_bytes=300, format="numpy")
    sequential = [ds[k] for k in range(len(ds))]
    rng = random.Random(0)
    picks = [rng.randrange(-len(ds), len(ds)) for _ in range(200)]
    fresh = ParquetDataset(shards, pack=spec, window_bytes=300, format="numpy")
    for k in picks:
        row = fresh[k]
        for name in spec.outputs:
            np.testing.assert_array_equal(row[name], sequential[k][name])
    batch = fresh.__getitems__(picks[:50])
    for row, k in zip(batch, picks[:50], strict=True):
        for name in spec.outputs:
            np.testing.assert_array_equal(row[name], sequential[k][name])


def test_a_block_asked_for_twice_in_a_batch_is_the_same_block(shards: Path) -> None:
    from undertale_duck import Mixture, Stream

    spec = Pack(column="tokens", length=13, eod=30_001, alongside=("mask",), fill=-1)
    ds = ParquetDataset(shards, pack=spec, window_bytes=300)
    expected = as_rows(reference(shards, spec))
    crossing = [k for k in range(len(ds)) if len(ds.blocks.plan.spans(k)) > 1]
    assert crossing  # blocks whose tokens come from two windows or more
    for picks in ([crossing[0]] * 2, [crossing[0], 1, crossing[0]], crossing[:5] * 3,
                  [len(ds) - 1, -1, 0, 0]):
        assert ds.__getitems__(picks) == [expected[k] for k in picks]
    # an upsampled mixture of packed blocks serves a block twice in one batch
    mix = Mixture([Stream(ds, repeat=3)])
    sampler = ChunkedSampler(mix, 64, workers=0, shuffle=True, seed=0)
    order = list(sampler)
    for start in range(0, len(order), 64):
        picks = order[start : start + 64]
        assert mix.__getitems__(picks) == [expected[k] for k in picks]


def test_torch_format_and_collate(shards: Path) -> None:
    spec = Pack(column="tokens", length=32, eod=30_001, last="pad")
    ds = ParquetDataset(shards, pack=spec, format="torch", window_bytes=300)
    expected = reference(shards, spec)
    batch = collate(ds.__getitems__([3, 0, len(ds) - 1]))
    assert batch["tokens"].shape == (3, 32)
    assert batch["tokens"].tolist() == [expected["tokens"][k] for k in (3, 0, len(ds) - 1)]
    assert batch["position_ids"].dtype == torch.int64
    assert batch["segment_ids"].tolist()[2] == expected["segment_ids"][len(ds) - 1]
    assert ds.schema.field("tokens").type == pa.list_(pa.int32(), 32)


def test_empty_dataset_and_all_empty_documents(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), tmp_path / "a.parquet")
    assert len(ParquetDataset(tmp_path, pack=Pack(column="tokens", length=4))) == 0
    rows = [{"id": i, "label": 0, "tokens": [], "mask": []} for i in range(10)]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "b.parquet")
    assert len(ParquetDataset(tmp_path, pack=Pack(column="tokens", length=4))) == 0
    with_eod = ParquetDataset(tmp_path, pack=Pack(column="tokens", length=4, eod=7))
    assert len(with_eod) == 2
    assert with_eod[1] == {"tokens": [7] * 4, "position_ids": [0] * 4,
                           "segment_ids": [1, 2, 3, 4]}


@settings(max_examples=25)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=0, max_size=60),
    shard_cut=st.integers(0, 60),
    length=st.integers(1, 50),
    eod=st.booleans(),
    pad=st.booleans(),
    window=st.sampled_from([64, 200, 10_000]),
    large=st.booleans(),
)
def test_blocks_are_slices_of_the_stream(
    tmp_path_factory: pytest.TempPathFactory,
    lengths: list[int],
    shard_cut: int,
    length: int,
    eod: bool,
    pad: bool,
    window: int,
    large: bool,
) -> None:
    root = tmp_path_factory.mktemp("hyp")
    docs = [[(g * 101 + k) % 1000 for k in range(n)] for g, n in enumerate(lengths)]
    cut = min(shard_cut, len(docs))
    for k, part in enumerate([docs[:cut], docs[cut:]]):
        # large lists: their lengths come from Arrow as a read-only array
        lists = pa.large_list(pa.int64()) if large else pa.list_(pa.int64())
        table = pa.table({"tokens": pa.array(part, lists),
                          "mask": pa.array([[t % 3 for t in d] for d in part],
                                           pa.list_(pa.int8()))})
        pq.write_table(table, root / f"p{k}.parquet", row_group_size=3)
    spec = Pack(column="tokens", length=length, eod=-1 if eod else None,
                last="pad" if pad else "drop", pad=-2, alongside=("mask",), fill=7)
    extra = [-1] if eod else []
    stream = [t for d in docs for t in d + extra]
    masks = [t % 3 for d in docs for t in d] if not eod else [
        m for d in docs for m in [t % 3 for t in d] + [7]]
    where = [p for d in docs for p in range(len(d) + len(extra))]
    owner = [g for g, d in enumerate(docs) for _ in range(len(d) + len(extra))]
    blocks = len(stream) // length + (1 if pad and len(stream) % length else 0)
    ds = ParquetDataset(root, pack=spec, window_bytes=window)
    assert len(ds) == blocks
    got = ds.__getitems__(list(range(blocks))[::-1])[::-1]
    for k in range(blocks):
        part = slice(k * length, (k + 1) * length)
        short = length - len(stream[part])
        expected = {
            "tokens": stream[part] + [-2] * short,
            "position_ids": where[part] + [0] * short,
            "segment_ids": _segments(owner[part]) + [0] * short,
            "mask": masks[part] + [7] * short,
        }
        assert ds[k] == expected == got[k]


# ---------------------------------------------------------------------------- the index
def test_index_is_cached_and_keyed_by_the_spec(shards: Path, private_cache: Path) -> None:
    spec = Pack(column="tokens", length=11, eod=5)
    first = ParquetDataset(shards, pack=spec, window_bytes=300)
    assert list((private_cache / "views").glob("pack-*.json"))
    again = ParquetDataset(shards, pack=spec, window_bytes=300)
    assert again.documents._reader is None  # the lengths came from the cache: nothing read
    assert len(again) == len(first)
    assert again.fingerprint == first.fingerprint
    other = ParquetDataset(shards, pack=Pack(column="tokens", length=11), window_bytes=300)
    assert other.fingerprint != first.fingerprint
    assert other.documents._reader is not None  # another spec: indexed again
    assert other.documents.fingerprint == first.documents.fingerprint


def test_changed_shard_is_indexed_again(tmp_path: Path) -> None:
    write(tmp_path, [30, 30])
    spec = Pack(column="tokens", length=4)
    before = len(ParquetDataset(tmp_path, pack=spec))
    write(tmp_path, [30, 50])
    after = ParquetDataset(tmp_path, pack=spec)
    assert after.documents._reader is not None
    assert len(after) == len(as_rows(reference(tmp_path, spec))) != before


def test_locate_and_documents_of(shards: Path) -> None:
    spec = Pack(column="tokens", length=16, eod=30_001)
    ds = ParquetDataset(shards, pack=spec, window_bytes=300)
    everything = ParquetDataset(shards)
    for k in (0, 7, len(ds) - 1):
        docs = ds.documents_of(k)
        tokens = [t for d in docs for t in everything[d]["tokens"] + [30_001]]
        assert all(t in tokens for t in ds[k]["tokens"])
        shard, row = ds.locate(k)
        assert (shard, row) == everything.locate(docs.start)


def test_locate_many_names_the_first_document_of_each_block(shards: Path) -> None:
    # PackedDataset inherited the rows' locate_many, which failed with an AttributeError
    spec = Pack(column="tokens", length=16, eod=30_001)
    ds = ParquetDataset(shards, pack=spec, window_bytes=300)
    blocks = [len(ds) - 1, 0, 7, -1, 7, -len(ds)]
    expected = [ds.locate(k) for k in blocks]
    assert ds.locate_many(blocks) == expected
    assert ds.locate_many(np.array(blocks)) == expected
    assert ds.locate_many(torch.tensor(blocks)) == expected
    assert ds.locate_many([]) == []
    with pytest.raises(IndexError, match="out of range"):
        ds.locate_many([0, len(ds)])
    with pytest.raises(TypeError, match="locate_many"):
        ds.locate_many("01")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- memory
def test_memory_budget_is_kept_on_a_small_budget(tmp_path: Path) -> None:
    # about 2.6 MB of tokens against a 256 KiB budget
    write(tmp_path, [20_000, 20_000, 20_000], row_group=300)
    spec = Pack(column="tokens", length=64, eod=30_001)
    ds = ParquetDataset(tmp_path, "256KiB", pack=spec, read_ahead=False)
    assert ds.documents.reader.largest_window * 4 < ds.memory_bytes * 8
    cache = ds.documents.reader.cache
    assert isinstance(cache, WindowCache)
    rng = random.Random(1)
    highest = 0
    for _ in range(300):
        ds[rng.randrange(len(ds))]
        highest = max(highest, cache.stats().bytes)
    assert 0 < highest <= cache.limit <= ds.memory_bytes
    tokens = pc.sum(pc.list_value_length(pq.read_table(tmp_path)["tokens"])).as_py()
    assert tokens * 4 > 5 * ds.memory_bytes  # the data is larger than 5x the budget


# ---------------------------------------------------------------------------- training
def test_sampler_epoch_with_two_workers_sees_every_block_once(shards: Path) -> None:
    spec = Pack(column="tokens", length=8, eod=30_001)
    ds = ParquetDataset(shards, pack=spec, window_bytes=300, format="torch")
    sampler = ChunkedSampler(ds, 4, workers=2, shuffle=True, seed=3)
    assert len({(w.offset, w.rows) for w in ds.windows}) == len(ds.windows)
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2, collate_fn=collate)
    seen = torch.cat([b["tokens"] for b in loader])
    expected = torch.tensor(reference(shards, spec)["tokens"], dtype=torch.int32)
    order = np.array(sampler.order())
    assert torch.equal(seen, expected[torch.from_numpy(order)])
    assert len(set(order.tolist())) == len(order) >= len(ds) - 2


def test_load_resumes_exactly(shards: Path) -> None:
    spec = Pack(column="tokens", length=8, eod=30_001)
    options: dict[str, Any] = {"pack": spec, "window_bytes": 300, "format": "torch",
                               "shuffle": True, "seed": 1}
    loader = load(shards, None, collate, 4, **options)
    whole = [b["tokens"] for b in loader]
    first = load(shards, None, collate, 4, **options)
    it = iter(first)
    head = [next(it)["tokens"] for _ in range(5)]
    state = first.state_dict()
    second = load(shards, None, collate, 4, **options)
    second.load_state_dict(state)
    rest = [b["tokens"] for b in second]
    assert all(torch.equal(a, b) for a, b in zip(head + rest, whole, strict=True))


def test_load_refuses_a_state_saved_over_another_spec(shards: Path) -> None:
    loader = load(shards, None, collate, 4, pack=Pack(column="tokens", length=8))
    state = loader.state_dict()
    other = load(shards, None, collate, 4, pack=Pack(column="tokens", length=8, eod=1))
    state["length"] = len(other.sampler)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="other data"):
        other.load_state_dict(state)


# ---------------------------------------------------------------------------- hostile specs
@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"column": "tokens", "length": 0}, "pack.length"),
        ({"column": "tokens", "length": -3}, "pack.length"),
        ({"column": "tokens", "length": 10**12}, "pack.length"),
        ({"column": "tokens", "length": 2.5}, "pack.length"),
        ({"column": "tokens", "length": True}, "pack.length"),
        ({"column": "", "length": 4}, "pack.column"),
        ({"column": "tokens", "length": 4, "last": "keep"}, "pack.last"),
        ({"column": "tokens", "length": 4, "eod": "x"}, "pack.eod"),
        ({"column": "tokens", "length": 4, "alongside": "mask"}, "pack.alongside"),
        ({"column": "tokens", "length": 4, "alongside": ["tokens"]}, "pack.alongside"),
        ({"column": "tokens", "length": 4, "position_ids": 1}, "pack.position_ids"),
        ({"column": "tokens", "length": 4, "colour": 1}, "colour"),
        ({"length": 4}, "column"),
    ],
)
def test_hostile_specs_name_the_argument(shards: Path, fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ArgumentError, match=named):
        ParquetDataset(shards, pack=fields)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (Pack(column="label", length=4), "pack.column.*'label'.*not a list of integers"),
        (Pack(column="missing", length=4), "pack.column.*no column 'missing'"),
        (Pack(column="tokens", length=4, alongside=("id",)), "pack.alongside.*'id'"),
        (Pack(column="tokens", length=4, eod=2**40), "pack.eod"),
        (Pack(column="tokens", length=4, alongside=("mask",), fill=300), "pack.fill"),
        (Pack(column="tokens", length=1 << 24), "pack.length.*quarter of memory"),
    ],
)
def test_specs_that_do_not_fit_the_data(shards: Path, spec: Pack, named: str) -> None:
    with pytest.raises(ArgumentError, match=named):
        ParquetDataset(shards, 64, pack=spec, columns=["id", "label", "tokens", "mask"])


def test_pack_of_a_wrong_type(shards: Path) -> None:
    with pytest.raises(ArgumentError, match="pack must be a Pack"):
        ParquetDataset(shards, pack=16)


def test_null_tokens_and_unequal_alongside_are_refused(tmp_path: Path) -> None:
    rows = [{"id": 0, "label": 0, "tokens": [1, None, 3], "mask": [1, 1, 1]}]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "a.parquet")
    with pytest.raises(OutOfRangeError, match="null token"):
        ParquetDataset(tmp_path, pack=Pack(column="tokens", length=2))
    rows = [{"id": 0, "label": 0, "tokens": [1, 2, 3], "mask": [1, 1]}]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "a.parquet")
    with pytest.raises(OutOfRangeError, match=r"'mask'.*2 values"):
        ParquetDataset(tmp_path, pack=Pack(column="tokens", length=2, alongside=("mask",)))


def test_refused_documents_of_a_filtered_view_are_named_by_their_source_row(
    tmp_path: Path,
) -> None:
    # row i: tokens [i, i] and a mask as long, except row 7 (a null token, a short mask)
    rows = [{"id": i, "label": 0, "tokens": [i, None] if i == 7 else [i, i],
             "mask": [1] if i == 7 else [1, 1]} for i in range(10)]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "a.parquet",
                   row_group_size=4)
    where = "id % 3 = 1"  # rows 1, 4, 7: document 2 is source row 7
    with pytest.raises(OutOfRangeError, match=r"row 2 \(local row 7\): column 'tokens'"):
        ParquetDataset(tmp_path, where=where, pack=Pack(column="tokens", length=2))
    query = ("SELECT list_transform(tokens, lambda t: coalesce(t, 0)) AS tokens, mask "
             f"FROM dataset WHERE {where}")
    with pytest.raises(OutOfRangeError, match=r"row 2 \(local row 7\): column 'mask'"):
        ParquetDataset(tmp_path, query=query,
                       pack=Pack(column="tokens", length=2, alongside=("mask",)))


def test_mixture_of_packed_streams_and_batch_rows(shards: Path, tmp_path: Path) -> None:
    from undertale_duck import Mixture, Stream, batch_rows

    spec = Pack(column="tokens", length=8, eod=30_001)
    packed = ParquetDataset(shards, pack=spec, window_bytes=300)
    mix = Mixture(
        [Stream(packed, proportion=0.5, name="a"),
         Stream(shards, proportion=0.5, name="b", where="label = 1")],
        pack=spec, window_bytes=300,
    )
    assert isinstance(mix.streams[1].dataset, PackedDataset)  # opened with the mixture's pack
    expected_a = reference(shards, spec)["tokens"]
    sampler = ChunkedSampler(mix, 4, workers=1, shuffle=True, seed=0)
    rows = batch_rows(sampler, step=0, values=True)
    for entry in rows:
        stream, inner = mix.source_of(entry["index"])
        if entry["source"] == "a":
            assert entry["row"]["tokens"] == expected_a[inner]
            docs = packed.documents_of(inner)
            assert (entry["shard"], entry["shard_row"]) == packed.documents.locate(docs.start)
        assert len(entry["row"]["tokens"]) == 8


def test_datamodule_with_pack(shards: Path) -> None:
    from undertale_duck import DataModule

    spec = Pack(column="tokens", length=8)
    module = DataModule(shards, shards, None, collate, 4, pack=spec, format="torch")
    batches = list(module.val_dataloader())
    expected = torch.tensor(reference(shards, spec)["tokens"], dtype=torch.int32)
    seen = torch.cat([b["tokens"] for b in batches])
    assert torch.equal(seen, expected[: len(seen)])
    assert len(seen) == len(expected) // 4 * 4 or len(seen) == len(expected)


def test_pickled_dataset_serves_the_same_blocks(shards: Path) -> None:
    import pickle

    ds = ParquetDataset(shards, pack=Pack(column="tokens", length=8, eod=3), window_bytes=300)
    first = ds[5]
    copy = pickle.loads(pickle.dumps(ds))
    assert isinstance(copy, PackedDataset)
    assert copy[5] == first
    assert len(copy) == len(ds) and copy.fingerprint == ds.fingerprint


def test_schema_sql_and_validation_are_about_the_documents(shards: Path) -> None:
    from pydantic import BaseModel, Field

    from undertale_duck import SchemaError

    class Document(BaseModel):
        tokens: list[int]

    class Short(BaseModel):
        tokens: list[int] = Field(max_length=3)

    spec = Pack(column="tokens", length=8)
    loader = load(shards, Document, collate, 4, pack=spec, format="torch")
    assert len(next(iter(loader))["tokens"][0]) == 8
    with pytest.raises(SchemaError):
        load(shards, Short, collate, 4, pack=spec)
    ds = ParquetDataset(shards, pack=spec)
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 398}]
    assert ds.documents.columns == ["tokens"]  # only the packed column is read


def test_resume_with_two_workers(shards: Path) -> None:
    spec = Pack(column="tokens", length=8, eod=30_001)
    options: dict[str, Any] = {"pack": spec, "window_bytes": 300, "format": "torch",
                               "shuffle": True, "seed": 2, "workers": 2}
    whole = torch.cat([b["tokens"] for b in load(shards, None, collate, 4, **options)])
    first = load(shards, None, collate, 4, **options)
    it = iter(first)
    head = [next(it)["tokens"] for _ in range(7)]
    state = first.state_dict()
    del it
    second = load(shards, None, collate, 4, **options)
    second.load_state_dict(state)
    rest = [b["tokens"] for b in second]
    assert torch.equal(torch.cat(head + rest), whole)


@pytest.mark.heavy
def test_pack_benchmark_runs(tmp_path: Path) -> None:
    import math
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import bench_pack

    before = os.environ.get("UNDERTALE_DUCK_CACHE")
    results = bench_pack.main([
        "--shards", "2", "--rows", "300", "--longest", "64", "--lengths", "32,100",
        "--batch", "4", "--batches", "10", "--repeat", "1",
        "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    assert [e["length"] for e in results["entries"]] == [32, 100]
    for entry in results["entries"]:
        assert all(math.isfinite(v) and v > 0 for k, v in entry.items() if k != "length")
    assert (tmp_path / "out" / "pack.json").exists()
    # its fresh caches are removed: the process's own setting must be back
    assert os.environ.get("UNDERTALE_DUCK_CACHE") == before


def test_numpy_integers_in_the_spec_and_empty_batches(shards: Path) -> None:
    spec = Pack(column="tokens", length=np.int64(8), eod=np.int32(5))  # type: ignore[arg-type]
    assert type(spec.length) is int and type(spec.eod) is int
    ds = ParquetDataset(shards, pack=spec, format="numpy")
    assert len(ds.__getitems__([])) == 0
    assert ParquetDataset(shards, pack=spec).__getitems__([]) == []
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(TypeError):
        ds["0"]  # type: ignore[index]
    assert ds[-1]["tokens"].tolist() == ds[len(ds) - 1]["tokens"].tolist()



@pytest.mark.parametrize("fmt", ["python", "numpy", "torch"])
def test_block_indices_that_would_wrap_or_are_not_1d_are_refused(shards: Path, fmt: str) -> None:
    ds = ParquetDataset(shards, pack=Pack(column="tokens", length=8), format=fmt)  # type: ignore[arg-type]
    n = len(ds)
    # uint64 2**64 - 1 cast to int64 is -1: it served the last block
    for big in (np.array([2**64 - 1], dtype=np.uint64), np.array([0, n], dtype=np.uint32)):
        with pytest.raises(IndexError, match=r"block index \d+ out of range for \d+ blocks"):
            ds.__getitems__(big)  # type: ignore[arg-type]
    shaped = r"__getitems__: indices must be a 1-d sequence of integers"
    for bad in (np.zeros((2, 2), dtype=np.int64), torch.zeros((1, 2), dtype=torch.int64),
                np.array(1), torch.tensor(1), [[0, 1], [2]], None):
        with pytest.raises(TypeError, match=shaped):
            ds.__getitems__(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="indices is a tensor on the meta device"):
        ds.__getitems__(torch.arange(2, device="meta"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on the meta device"):
        ds[torch.tensor(1, device="meta")]  # type: ignore[index]
    last = ds.__getitems__(np.array([n - 1], dtype=np.uint64))[0]  # type: ignore[arg-type]
    assert str(last) == str(ds[n - 1])

def test_window_of_and_prefetch_speak_runs_of_blocks(shards: Path) -> None:
    ds = ParquetDataset(shards, pack=Pack(column="tokens", length=8), window_bytes=300)
    for k in (0, 5, len(ds) - 1, -1):
        run = ds.windows[ds.window_of(k)]
        assert run.offset <= k % len(ds) < run.offset + run.rows
    assert ds.window_of(np.int64(3)) == ds.window_of(3)
    ds.prefetch([len(ds.windows) - 1, 0])
    assert ds[0] == ParquetDataset(shards, pack=Pack(column="tokens", length=8))[0]
    with pytest.raises(IndexError):
        ds.prefetch([len(ds.windows)])
    with pytest.raises(TypeError, match="prefetch: run positions must be integers"):
        ds.prefetch([0.5])  # type: ignore[list-item]
    with pytest.raises(IndexError):
        ds.window_of(len(ds))
    ds.prefetch(None)


def test_blocks_over_a_query_view_with_a_computed_column(shards: Path) -> None:
    spec = Pack(column="head", length=5, eod=-1)
    ds = ParquetDataset(
        shards, pack=spec, window_bytes=300,
        query="SELECT tokens[1:3] AS head, id FROM dataset WHERE label IN (1, 4)",
    )
    heads = [doc(g)["tokens"][:3] for g in range(398) if g % 5 in (1, 4)]
    stream = [t for h in heads for t in [*h, -1]]
    assert len(ds) == len(stream) // 5
    assert [ds[k]["head"] for k in range(len(ds))] == [
        stream[k * 5 : (k + 1) * 5] for k in range(len(ds))
    ]


def test_disk_tier_and_refresh(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write(data, [40, 40], row_group=5)
    spec = Pack(column="tokens", length=6, eod=9)
    ds = ParquetDataset(data, pack=spec, window_bytes=200, disk=16,
                        disk_dir=tmp_path / "windows")
    assert [ds[k] for k in range(len(ds))] == as_rows(reference(data, spec))
    assert ds.disk_stats is not None
    write(data, [40, 70], row_group=5)
    ds.refresh()
    assert [ds[k] for k in range(len(ds))] == as_rows(reference(data, spec))
