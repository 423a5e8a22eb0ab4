"""Every way torch and torchdata draw batches from a ChunkedSampler, ``drop_last=True`` too.

torch's ``BatchSampler(drop_last=True)`` zips ``batch`` references to one ``iter()`` of the
sampler; a pass whose ``iter()`` handed out a new iterator each time served no batch at all.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import BatchSampler, DataLoader

from undertale_duck import ChunkedLoader, ChunkedSampler, ParquetDataset

ROWS = 301


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("drop-last")
    pq.write_table(pa.table({"id": list(range(200))}), path / "a.parquet", row_group_size=64)
    pq.write_table(pa.table({"id": list(range(200, ROWS))}), path / "b.parquet",
                   row_group_size=17)
    return path


def ids_of(rows: list[dict[str, Any]]) -> list[int]:
    return [int(row["id"]) for row in rows]


def full_batches(order: list[int], batch: int) -> list[list[int]]:
    return [order[k:k + batch] for k in range(0, len(order) - batch + 1, batch)]


samplers = st.fixed_dictionaries({
    "length": st.integers(0, 300),
    "batch": st.integers(1, 40),
    "workers": st.integers(0, 3),
    "shuffle": st.booleans(),
    "seed": st.integers(0, 2**31),
    "epoch": st.integers(0, 3),
})


def build(spec: dict[str, Any]) -> ChunkedSampler:
    sampler = ChunkedSampler(range(spec["length"]), spec["batch"], spec["workers"],
                             shuffle=spec["shuffle"], seed=spec["seed"], chunk=23)
    sampler.set_epoch(spec["epoch"])
    return sampler


@settings(max_examples=80, deadline=None)
@given(spec=samplers)
def test_torchs_batch_sampler_serves_every_full_batch_with_drop_last(
    spec: dict[str, Any]
) -> None:
    sampler = build(spec)
    order = sampler.order().tolist()
    assert list(sampler) == order
    batch = spec["batch"]
    assert list(BatchSampler(sampler, batch, drop_last=True)) == full_batches(order, batch)
    assert list(BatchSampler(sampler, batch, drop_last=False)) == [
        order[k:k + batch] for k in range(0, len(order), batch)
    ]
    loader = DataLoader(range(spec["length"]), batch_size=batch, sampler=sampler,
                        drop_last=True, collate_fn=list)
    assert list(loader) == full_batches(order, batch)


ops = st.lists(st.tuples(st.sampled_from(["next", "islice", "zip", "iter-next"]),
                         st.integers(0, 30)), max_size=12)


@settings(max_examples=80, deadline=None)
@given(spec=samplers, steps=ops)
def test_every_way_of_drawing_from_a_pass_shares_one_position(
    spec: dict[str, Any], steps: list[tuple[str, int]]
) -> None:
    sampler = build(spec)
    order = sampler.order().tolist()
    it = iter(sampler)
    consumed = 0  # indices drawn from the pass, those a zip swallowed at the end included
    for op, count in steps:
        got: list[int] = []
        if op == "next":
            for _ in range(count):
                try:
                    got.append(next(it))
                except StopIteration:
                    break
        elif op == "islice":
            got = list(itertools.islice(iter(it), count))
        elif op == "zip":  # what BatchSampler(drop_last=True) does, one batch of `count`
            width = max(1, count)
            group = next(zip(*[it] * width, strict=False), None)
            if group is None:  # fewer than `width` were left: drawn and dropped, as torch does
                assert len(order) - consumed < width
                consumed = len(order)
            else:
                got = list(group)
        else:
            got = [i for _, i in zip(range(count), iter(it), strict=False)]
        assert got == order[consumed:consumed + len(got)]
        consumed += len(got)
        assert it.position == consumed  # type: ignore[attr-defined]
    state = json.loads(json.dumps(it.state_dict()))  # type: ignore[attr-defined]
    again = build(spec)
    again.load_state_dict(state)
    rest = list(again)
    if consumed < len(order) or not order:
        assert order[:consumed] + rest == order
    else:  # a state taken at the end of an epoch resumes at the start of the next
        assert again.epoch == spec["epoch"] + 1
        assert rest == again.order().tolist()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_chunked_loader_with_drop_last_serves_full_batches_and_resumes(
    root: Path, workers: int
) -> None:
    def loader() -> ChunkedLoader:
        ds = ParquetDataset(root, memory=1)
        sampler = ChunkedSampler(ds, 16, workers, shuffle=True, seed=9)
        return ChunkedLoader(ds, batch_size=16, sampler=sampler, num_workers=workers,
                             collate_fn=ids_of, drop_last=True)

    first = loader()
    sampler = first.chunked_sampler
    assert sampler is not None
    order = sampler.order(0).tolist()
    batches = list(first)
    assert batches == full_batches(order, 16) and len(batches) == ROWS // 16
    second = loader()
    seen: list[list[int]] = []
    for batch in second:
        seen.append(batch)
        if len(seen) == 5:
            break
    third = loader()
    third.load_state_dict(json.loads(json.dumps(second.state_dict())))
    assert seen + list(third) == batches
    third.sampler.set_epoch(1)  # type: ignore[attr-defined]
    assert list(third) == full_batches(sampler.order(1).tolist(), 16)


def test_torchdatas_loader_with_drop_last_serves_and_resumes_full_batches(root: Path) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def loader() -> Any:
        ds = ParquetDataset(root, memory=1)
        sampler = ChunkedSampler(ds, 16, 0, shuffle=True, seed=5)
        return stateful.StatefulDataLoader(ds, batch_size=16, sampler=sampler,
                                           collate_fn=ids_of, drop_last=True)

    order = ChunkedSampler(ParquetDataset(root), 16, 0, shuffle=True, seed=5).order(0).tolist()
    first = loader()
    assert list(first) == full_batches(order, 16)
    second = loader()
    seen = []
    for batch in second:
        seen.append(batch)
        if len(seen) == 7:
            break
    third = loader()
    third.load_state_dict(second.state_dict())
    assert seen + list(third) == full_batches(order, 16)
