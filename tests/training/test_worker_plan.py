"""Forked DataLoader workers of a shuffled pass each declare their own windows and rows."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from support.first_use import first_use
from torch.utils.data import DataLoader, get_worker_info

from undertale_duck import ChunkedSampler, ParquetDataset

SIZES = [90, 47, 120, 61]
TOTAL = sum(SIZES)
BATCH = 8


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("worker-plan")
    datagen.write_shards(path, SIZES, row_group_size=[30, 47, 40, 20])
    return path


def open_dataset(root: Path, fmt: str = "numpy") -> ParquetDataset:
    ds = ParquetDataset(root, window_bytes=1500, columns=["id", "label"], format=fmt)
    assert len(ds.windows) >= 8
    return ds


def share(order: list[int], batch: int, workers: int, worker: int) -> list[int]:
    """The rows a DataLoader gives ``worker``: batch ``k`` of ``order`` goes to ``k % workers``."""
    batches = [order[a:a + batch] for a in range(0, len(order), batch)]
    return [i for k, b in enumerate(batches) if k % workers == worker for i in b]


def seen_by_worker(rows: Any) -> dict[str, Any]:
    """A collate run in the worker: the batch's rows and what its dataset declared."""
    info = get_worker_info()
    assert info is not None
    ds = info.dataset
    ids = [int(row["id"][4:]) for row in rows]
    assert [int(row["label"]) for row in rows] == [i % 7 for i in ids]
    order = ds.reader_settings().order
    expected = ds._expected
    return {"worker": info.id, "rows": ids, "order": None if order is None else list(order),
            "declared": None if expected is None else expected.tolist(),
            "at": ds._expected_at}


def epoch(ds: ParquetDataset, sampler: ChunkedSampler, workers: int, **options: Any) -> list[Any]:
    options.setdefault("multiprocessing_context", "fork")
    return list(DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=workers,
                           collate_fn=seen_by_worker, **options))


@pytest.mark.parametrize(("workers", "fmt"), [(1, "numpy"), (2, "torch"), (3, "numpy")])
def test_each_worker_declares_its_share_of_a_shuffled_pass(
    root: Path, workers: int, fmt: str
) -> None:
    ds = open_dataset(root, fmt)
    sampler = ChunkedSampler(ds, BATCH, workers, shuffle=True, seed=4, drop_last=False)
    for n in (0, 1):
        sampler.set_epoch(n)
        assert ds[n]["label"] == n % 7  # a read here keeps the plan for the next workers
        batches = epoch(ds, sampler, workers)
        order = sampler.order(n).tolist()
        assert [i for b in batches for i in b["rows"]] == order  # every row, in the pass's order
        for w in range(workers):
            mine = [b for b in batches if b["worker"] == w]
            rows = share(order, BATCH, workers, w)
            assert [i for b in mine for i in b["rows"]] == rows
            assert mine[0]["order"] == first_use(ds, rows)
            assert mine[0]["declared"] == rows
        if workers > 1:  # a sampler for one worker declares lazily here too (read above)
            assert ds.reader_settings().order is None


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_a_plan_holds_through_batches_of_consecutive_rows(root: Path, batch: int) -> None:
    # small batches of a shuffled pass are often consecutive rows, served as a run: the
    # plan must step past them, else the next batch looks stale and the plan is dropped
    for seed in range(4):
        ds = open_dataset(root)
        sampler = ChunkedSampler(ds, batch, 2, shuffle=True, seed=seed, drop_last=False)
        batches = list(DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=2,
                                  collate_fn=seen_by_worker, multiprocessing_context="fork"))
        order = sampler.order().tolist()
        assert [i for b in batches for i in b["rows"]] == order
        for w in (0, 1):
            mine = [b for b in batches if b["worker"] == w]
            served = 0
            for b in mine:
                served += len(b["rows"])
                assert b["declared"] == share(order, batch, 2, w)  # never dropped
                assert b["at"] == served  # the plan's position follows every batch
                assert b["order"] == mine[0]["order"] is not None


def test_a_resumed_pass_plans_from_where_it_resumes(root: Path) -> None:
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, 2, shuffle=True, seed=7, drop_last=False)
    start = 5 * BATCH
    state = sampler.state_dict(consumed=start)
    again = ChunkedSampler(open_dataset(root), BATCH, 2, shuffle=True, seed=7, drop_last=False)
    again.load_state_dict(state)
    batches = epoch(again.dataset, again, 2)
    rest = sampler.order().tolist()[start:]
    assert [i for b in batches for i in b["rows"]] == rest
    for w in (0, 1):
        first = next(b for b in batches if b["worker"] == w)
        assert first["declared"] == share(rest, BATCH, 2, w)


def test_spawned_workers_plan_from_a_copy_of_the_sampler(root: Path) -> None:
    ds = open_dataset(root, "torch")
    sampler = ChunkedSampler(ds, BATCH, 2, shuffle=True, seed=5, drop_last=False)
    next(iter(sampler))  # a pass begun here: neither it nor its order travels
    copied = pickle.loads(pickle.dumps(ds))._worker_plan[1]._sampler
    assert sampler._live is not None and sampler._memo is not None
    assert copied._memo is None and copied._live is None
    sampler.set_epoch(1)
    start = 3 * BATCH
    sampler.load_state_dict(sampler.state_dict(consumed=start))
    order = sampler.order().tolist()
    batches = epoch(ds, sampler, 2, multiprocessing_context="spawn")
    rest = order[start:]
    assert [i for b in batches for i in b["rows"]] == rest
    for w in (0, 1):
        mine = [b for b in batches if b["worker"] == w]
        rows = share(rest, BATCH, 2, w)
        assert [i for b in mine for i in b["rows"]] == rows
        assert mine[0]["declared"] == rows
        assert mine[0]["order"] == first_use(ds, rows)


WORKER: dict[str, Any] = {}  # one worker process's notes (each worker has its own copy)


def note_the_plan(worker_id: int) -> None:
    """Before the worker's first read: its plan, and whether the order came with it."""
    info = get_worker_info()
    assert info is not None
    plan = info.dataset._worker_plan[1]
    WORKER["plan"] = plan
    WORKER["inherited"] = plan._sampler._memo is not None


def after_the_plan(rows: Any) -> dict[str, Any]:
    return {"inherited": WORKER["inherited"], "kept": WORKER["plan"]._sampler._memo is not None,
            "rows": [int(row["id"][4:]) for row in rows]}


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_share_the_parents_order_and_keep_none(root: Path, context: str) -> None:
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, 2, shuffle=True, seed=9, drop_last=False)
    assert sampler._memo is None  # nothing worked out before the workers start
    batches = list(DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2,
                              collate_fn=after_the_plan, worker_init_fn=note_the_plan,
                              multiprocessing_context=context))
    assert [i for b in batches for i in b["rows"]] == sampler.order().tolist()
    # forked: the order was worked out once, before the fork, and read by every worker;
    # spawned: each works it out (the order does not travel); neither keeps it after
    assert all(b["inherited"] is (context == "fork") for b in batches)
    assert not any(b["kept"] for b in batches)


def test_persistent_workers_drop_a_stale_plan_at_the_next_epoch(root: Path) -> None:
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, 2, shuffle=True, seed=1, drop_last=False)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2,
                        collate_fn=seen_by_worker, persistent_workers=True,
                        multiprocessing_context="fork")
    first = list(loader)
    assert first[0]["declared"] == share(sampler.order(0).tolist(), BATCH, 2, 0)
    sampler.set_epoch(1)
    second = list(loader)  # the same workers: their plan was epoch 0's
    order = sampler.order(1).tolist()
    assert [i for b in second for i in b["rows"]] == order
    assert order != sampler.order(0).tolist()
    for w in (0, 1):
        mine = [b for b in second if b["worker"] == w]
        assert all(b["declared"] is None and b["order"] is None for b in mine)


@pytest.mark.parametrize("case", ["in order", "python rows", "other workers", "other batch",
                                  "cleared", "spawn, a plan of the user's"])
def test_no_plan_where_it_would_not_hold(root: Path, case: str) -> None:
    ds = open_dataset(root, "python" if case == "python rows" else "numpy")
    sampler = ChunkedSampler(ds, BATCH, 1 if case == "other workers" else 2,
                             shuffle=case != "in order", seed=3, drop_last=False)
    if case == "cleared":
        ds.prefetch_in_workers(None)
    context = "fork"
    if case.startswith("spawn"):  # a plan without ``travels`` stays (a lambda would not pickle)
        ds.prefetch_in_workers(lambda worker, workers: ([0], [worker]))
        context = "spawn"
    batch = BATCH * 2 if case == "other batch" else BATCH
    batches = list(DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=2,
                              collate_fn=seen_by_worker, multiprocessing_context=context))
    assert sorted(i for b in batches for i in b["rows"]) == list(range(TOTAL))
    assert all(b["declared"] is None and b["order"] is None for b in batches)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5),
    batch=st.integers(1, 9),
    workers=st.integers(1, 4),
    seed=st.integers(0, 50),
    start=st.integers(0, 200),
)
def test_a_plan_is_each_workers_share_row_by_row(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], batch: int, workers: int,
    seed: int, start: int,
) -> None:
    path = tmp_path_factory.mktemp("plan")
    datagen.write_shards(path, sizes, row_group_size=7)
    ds = ParquetDataset(path, window_bytes=400, columns=["id"], format="numpy")
    sampler = ChunkedSampler(ds, batch, workers, shuffle=True, seed=seed, drop_last=False)
    order = sampler.order().tolist()
    start = min(start, len(order) - 1)  # an ended epoch resumes at the next one
    if start:
        sampler.load_state_dict(sampler.state_dict(consumed=start))
    plan = ds._worker_plan
    assert plan is not None
    rest = order[start:]
    everything: list[int] = []
    for w in range(workers):
        hint = plan[1](w, workers)
        assert hint is not None
        windows, rows = hint
        assert list(rows) == share(rest, batch, workers, w)
        assert list(windows) == first_use(ds, list(rows))
        everything += list(rows)
    assert sorted(everything) == sorted(rest)
    travelled = pickle.loads(pickle.dumps(ds))._worker_plan  # what a spawned worker gets
    for w in range(workers):
        there, here = travelled[1](w, workers), plan[1](w, workers)
        assert list(there[0]) == list(here[0]) and list(there[1]) == list(here[1])
    assert plan[1](0, workers + 1) is None  # a loader with other workers: no plan
    np.testing.assert_array_equal(sampler.order(), order)  # the plan left the order alone
    ds.close()
