"""A ``workers=0`` ChunkedLoader hands out exactly what torch's own iterator would."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import datagen
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from undertale_duck import ChunkedSampler, Mixture, ParquetDataset, Stream, collate, load
from undertale_duck.training.loader import ChunkedLoader

STEP = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@pytest.fixture(scope="module")
def datasets(uneven: tuple[Path, int]) -> dict[str, ParquetDataset]:
    root, _ = uneven
    return {f: ParquetDataset(root, memory=1, format=f) for f in ("python", "numpy", "torch")}


def same(a: Any, b: Any) -> bool:
    """Whether two batches are equal value for value, type for type."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "dtype") and hasattr(a, "shape"):  # numpy
        return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return bool(a == b)


def ids(batch: Any) -> list[int]:
    rows = batch if isinstance(batch, list) else [dict(zip(batch, v, strict=True))
                                                   for v in zip(*batch.values(), strict=True)]
    return [int(r["id"][4:]) for r in rows]


def both(dataset: Any, batch: int, collate_fn: Callable[[Any], Any] | None,
         **sampler_options: Any) -> tuple[ChunkedLoader, DataLoader[Any]]:
    """Our loader and torch's over the same dataset, sampler settings and collator."""
    def make(cls: type[DataLoader[Any]]) -> Any:
        sampler = ChunkedSampler(dataset, batch, 0, **sampler_options)
        return cls(dataset, batch_size=batch, sampler=sampler, collate_fn=collate_fn,
                   drop_last=False)
    return make(ChunkedLoader), make(DataLoader)


def inner(loader: ChunkedLoader) -> Any:
    """A fresh epoch's iterator: ours (which counts its batches), or torch's inside a wrapper."""
    iterator = iter(loader)
    return getattr(iterator, "_inner", iterator)


def to_list(rows: Any) -> Any:
    return list(rows)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(["python", "numpy", "torch"]),
    batch=st.integers(1, 90),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    drop_last=st.booleans(),
    ranks=st.sampled_from([(None, None), (2, 0), (2, 1), (3, 2)]),
    collator=st.sampled_from(["collate", "list", "none"]),
)
def test_every_epoch_equals_torchs_iterator(
    datasets: dict[str, ParquetDataset], fmt: str, batch: int, shuffle: bool, seed: int,
    drop_last: bool, ranks: tuple[int | None, int | None], collator: str,
) -> None:
    collate_fn = {"collate": collate, "list": to_list, "none": None}[collator]
    if collator == "none" and fmt == "python":
        collate_fn = None  # torch's default_collate: python rows with None values fail alike
    ours, theirs = both(datasets[fmt], batch, collate_fn, shuffle=shuffle, seed=seed,
                        drop_last=drop_last, ranks=ranks[0], rank=ranks[1])
    assert type(inner(ours)).__name__ == "_Batches"  # the lean path is the one tested here
    for epoch in (0, 1):
        ours.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        theirs.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        try:
            expected = list(theirs)
        except Exception as exc:  # whatever torch's path raises, ours must raise too
            with pytest.raises(type(exc)):
                list(ours)
            return
        mine = list(ours)
        assert len(mine) == len(expected) == len(ours)
        assert all(same(a, b) for a, b in zip(mine, expected, strict=True))


def test_a_mixture_epoch_equals_torchs_iterator(uneven: tuple[Path, int], tmp_path: Path) -> None:
    root, _ = uneven
    datagen.write_shards(tmp_path / "other", [40, 25], row_group_size=9)
    mixture = Mixture([Stream(root, proportion=2), Stream(tmp_path / "other", proportion=1)],
                      epoch_size=120, memory=1)
    ours, theirs = both(mixture, 16, to_list, shuffle=True, seed=3)
    assert type(inner(ours)).__name__ == "_Batches"
    assert [ids(b) for b in ours] == [ids(b) for b in theirs]


@pytest.mark.parametrize("generator", [None, 11])
def test_an_epoch_draws_the_random_numbers_torchs_draws(
    datasets: dict[str, ParquetDataset], generator: int | None,
) -> None:
    # torch's iterator draws one number per epoch (its workers' base seed) from the loader's
    # generator or the global one: a training step's dropout after the epoch depends on it
    def after_an_epoch(cls: type[DataLoader[Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(1234)
        gen = None if generator is None else torch.Generator().manual_seed(generator)
        ds = datasets["torch"]
        loader = cls(ds, batch_size=8, sampler=ChunkedSampler(ds, 8, 0), collate_fn=collate,
                     generator=gen)
        for _ in loader:
            pass
        return torch.rand(4), (torch.rand(4) if gen is None else torch.rand(4, generator=gen))

    ours, theirs = after_an_epoch(ChunkedLoader), after_an_epoch(DataLoader)
    assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
    torch.manual_seed(1234)
    untouched = torch.rand(4)
    # the draw happened: without it the next numbers would be the seed's first ones
    assert generator is not None or not torch.equal(ours[0], untouched)


def test_a_running_profiler_sees_every_batch_by_torchs_name(
    datasets: dict[str, ParquetDataset],
) -> None:
    def steps(loader: DataLoader[Any]) -> tuple[int, int]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the profiler's own notes on a CPU-only machine
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                batches = sum(1 for _ in loader)
        return batches, sum(1 for e in p.events() if e.name == STEP)

    ours, theirs = both(datasets["torch"], 50, collate)
    batches, seen = steps(ours)
    assert batches == len(ours) > 1
    # one per batch, and one for the call that ends the epoch, as torch's iterator records
    assert (batches, seen) == steps(theirs) == (batches, batches + 1)


def test_pinning_workers_and_a_timeout_keep_torchs_iterator(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    for options in ({"pin_memory": True}, {"workers": 1}):
        loader = load(root, None, to_list, 16, memory=1, **options)  # type: ignore[arg-type]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pin_memory without an accelerator: torch warns
            iterator = iter(loader)
            assert isinstance(iterator._inner, _BaseDataLoaderIter), options  # torch's own
            rows = [r for b in iterator for r in b]
        assert rows == datagen.expected(total)[: len(rows)] and len(rows) >= total - 16
    loader = load(root, None, to_list, 16, memory=1, timeout=5)
    with pytest.raises(AssertionError, match="timeout"):  # as torch's own iterator refuses
        iter(loader)


def test_a_collators_error_reaches_the_loop_unchanged(datasets: dict[str, ParquetDataset]) -> None:
    class Boom(RuntimeError):
        pass

    def explode(rows: Any) -> Any:
        raise Boom(f"collator got {len(rows)} rows")

    ours, theirs = both(datasets["python"], 7, explode)
    for loader in (ours, theirs):
        with pytest.raises(Boom, match="collator got 7 rows"):
            next(iter(loader))


def test_a_resumed_lean_epoch_serves_the_rest(datasets: dict[str, ParquetDataset]) -> None:
    ds = datasets["python"]
    make = functools.partial(load, ds, None, to_list, 9, shuffle=True, seed=5)
    whole = [ids(b) for b in make()]
    loader = make()
    it: Iterator[Any] = iter(loader)
    head = [ids(next(it)) for _ in range(4)]
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert head + [ids(b) for b in resumed] == whole
