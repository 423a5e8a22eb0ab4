"""A ``ChunkedSampler`` read without workers declares its pass's window order to the reader."""

from __future__ import annotations

import itertools
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

from undertale_duck import ChunkedSampler, Pack, ParquetDataset, load
from undertale_duck.training.order import worker_windows

SIZES = [90, 47, 120, 61]
TOTAL = sum(SIZES)
BATCH = 8


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sampler-hint")
    datagen.write_shards(path, SIZES, row_group_size=[30, 47, 40, 20])
    return path


def open_dataset(root: Path) -> ParquetDataset:
    ds = ParquetDataset(root, window_bytes=1500, columns=["id", "label"])
    assert len(ds.windows) >= 8  # enough windows for an order to say something
    return ds


def ids(rows: list[dict[str, Any]]) -> list[int]:
    """The rows' global indices, each row checked against its index."""
    out = []
    for row in rows:
        i = int(row["id"][4:])
        assert row["label"] == i % 7
        out.append(i)
    return out


def declared(ds: ParquetDataset) -> list[int] | None:
    order = ds.reader_settings().order
    return None if order is None else list(order)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_shuffled_pass_through_a_plain_dataloader_declares_its_windows(
    root: Path, workers: int
) -> None:
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, workers, shuffle=True, seed=3, drop_last=False)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=ids)
        batches = iter(loader)
        got = next(batches)
        expected = sampler.order(epoch).tolist()
        assert got == expected[:BATCH]
        assert declared(ds) == first_use(ds, expected)
        got += [i for batch in batches for i in batch]
        assert got == expected


def test_a_resumed_pass_declares_the_windows_it_has_left(root: Path) -> None:
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, 0, shuffle=True, seed=9, drop_last=False)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=ids)
    batches = iter(loader)
    head = [next(batches) for _ in range(11)]
    state = sampler.state_dict(consumed=11 * BATCH)
    del batches
    again = ChunkedSampler(open_dataset(root), BATCH, 0, shuffle=True, seed=9, drop_last=False)
    again.load_state_dict(state)
    rest = [i for batch in DataLoader(again.dataset, batch_size=BATCH, sampler=again,
                                      collate_fn=ids) for i in batch]
    order = sampler.order().tolist()
    assert [i for b in head for i in b] + rest == order
    assert declared(again.dataset) == first_use(ds, order[11 * BATCH:])


def test_a_pass_in_order_clears_an_order_a_shuffled_pass_declared(root: Path) -> None:
    ds = open_dataset(root)
    shuffled = ChunkedSampler(ds, BATCH, 0, shuffle=True, seed=1, drop_last=False)
    list(DataLoader(ds, batch_size=BATCH, sampler=shuffled, collate_fn=ids))
    assert declared(ds) is not None
    in_order = ChunkedSampler(ds, BATCH, 0, drop_last=False)
    rows = [i for b in DataLoader(ds, batch_size=BATCH, sampler=in_order, collate_fn=ids)
            for i in b]
    assert rows == list(range(TOTAL))
    assert declared(ds) is None


def test_load_without_workers_reads_with_the_passes_order(root: Path) -> None:
    ds = open_dataset(root)
    loader = load(ds, None, ids, BATCH, shuffle=True, seed=5, drop_last=False)
    for epoch in (0, 1):
        loader.sampler.set_epoch(epoch)
        rows = [i for b in loader for i in b]
        order = loader.sampler.order(epoch).tolist()
        assert rows == order
        assert declared(ds) == first_use(ds, order)


def order_seen_by_worker(rows: list[dict[str, Any]]) -> list[int] | None:
    """A collate run in the worker: the order its copy of the dataset reads ahead by."""
    info = get_worker_info()
    assert info is not None
    ids(rows)
    order = info.dataset.reader_settings().order
    return None if order is None else list(order)


def test_where_workers_read_the_iterating_process_reads_nothing_ahead(root: Path) -> None:
    # a sampler built for one worker is iterated in this process, read in the worker
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, 1, shuffle=True, seed=2, drop_last=False)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=1,
                        collate_fn=order_seen_by_worker, multiprocessing_context="fork")
    seen = list(loader)
    assert len(seen) == -(-TOTAL // BATCH)
    assert declared(ds) is None  # never read here, so never applied here
    assert all(order is None for order in seen)  # forked before the pass declared it


def test_a_lazy_order_is_taken_only_by_the_process_that_declared_it(root: Path) -> None:
    ds = open_dataset(root)
    hint = list(range(len(ds.windows)))[::-1]
    ds.prefetch(hint, lazy=True)
    assert declared(ds) is None  # nothing read yet: nothing applied, no reader begun
    copy = pickle.loads(pickle.dumps(ds))  # as a spawned worker gets it
    assert copy[5]["label"] == 5 % 7
    assert declared(copy) is None
    # a forked worker that reads: it does not take the parent's order either
    loader = DataLoader(ds, batch_size=BATCH, num_workers=1, collate_fn=order_seen_by_worker,
                        multiprocessing_context="fork")
    assert all(order is None for order in loader)
    assert ds[TOTAL - 1]["label"] == (TOTAL - 1) % 7
    assert declared(ds) == hint
    ds.prefetch(None, lazy=True)
    assert declared(ds) == hint  # cleared at the next read
    assert ds[0]["label"] == 0
    assert declared(ds) is None
    copy.close()
    ds.close()


def test_a_packed_dataset_passes_a_lazy_order_to_its_documents(tmp_path: Path) -> None:
    datagen.write_token_shards(tmp_path, [40, 40], group=10, width=7)
    packed = ParquetDataset(tmp_path, pack=Pack(column="tokens", length=16), window_bytes=300)
    runs = list(range(len(packed.windows)))[::-1]
    assert len(runs) > 1
    packed.prefetch(runs, lazy=True)
    assert packed.documents.reader_settings().order is None
    assert packed[0]["tokens"] == [t for i in (0, 1, 2) for t in datagen.tokens(i, 7)][:16]
    order = packed.documents.reader_settings().order
    assert order is not None and order[0] == packed.documents.window_of(79)
    packed.close()


def naive_worker_windows(order: list[int], starts: list[int], batch: int,
                         workers: int) -> list[list[int]]:
    """Each worker's windows in first-use order, worked out one row at a time."""
    workers = max(workers, 1)
    out: list[list[int]] = [[] for _ in range(workers)]
    for k, i in enumerate(order):
        window = max(p for p, s in enumerate(starts) if s <= i)
        mine = out[(k // batch) % workers]
        if window not in mine:
            mine.append(window)
    return out


@settings(max_examples=120, deadline=None)
@given(
    data=st.data(),
    windows=st.integers(1, 9),
    batch=st.integers(1, 7),
    workers=st.integers(0, 4),
)
def test_worker_windows_match_a_row_by_row_count(
    data: st.DataObject, windows: int, batch: int, workers: int
) -> None:
    sizes = data.draw(st.lists(st.integers(1, 6), min_size=windows, max_size=windows))
    starts = np.cumsum([0, *sizes[:-1]]).tolist()
    rows = sum(sizes)
    # runs of one window (as a locality-aware shuffle reads) and scattered rows alike
    order = data.draw(st.permutations(list(range(rows))))
    if data.draw(st.booleans()):
        order = sorted(order, key=lambda i: (max(p for p, s in enumerate(starts) if s <= i)))
    got = worker_windows(np.asarray(order, dtype=np.int64), starts, batch, workers)
    assert got == naive_worker_windows(order, starts, batch, workers)


def test_worker_windows_of_an_empty_order() -> None:
    assert worker_windows(np.asarray([], dtype=np.int64), [0, 4], 2, 0) == [[]]
    assert worker_windows(np.asarray([], dtype=np.int64), [0, 4], 2, 2) == [[], []]


def test_a_shuffled_pass_gathers_its_small_batches_a_few_at_a_time(root: Path) -> None:
    from undertale_duck import collate

    ds = ParquetDataset(root, window_bytes=1500, columns=["id", "label"], format="torch")
    sampler = ChunkedSampler(ds, 4, 0, shuffle=True, seed=8, drop_last=False)
    batches = list(DataLoader(ds, batch_size=4, sampler=sampler, collate_fn=collate))
    order = sampler.order().tolist()
    assert [int(i) for b in batches for i in b["label"]] == [i % 7 for i in order]
    assert [s for b in batches for s in b["id"]] == [f"row-{i:08d}" for i in order]
    # the batches of a group are views of one buffer (all held: no address is reused)
    pointers = [b["label"].untyped_storage().data_ptr() for b in batches]
    shared = sum(a == b for a, b in itertools.pairwise(pointers))
    assert shared >= len(batches) // 3
    ds.close()


def test_a_pass_torchdata_resumes_declares_the_windows_it_has_left(root: Path) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ds = open_dataset(root)
    sampler = ChunkedSampler(ds, BATCH, 0, shuffle=True, seed=11, drop_last=False)
    loader = stateful.StatefulDataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=ids)
    batches = iter(loader)
    head = [next(batches) for _ in range(7)]
    state = loader.state_dict()
    del batches
    again_ds = open_dataset(root)
    again = ChunkedSampler(again_ds, BATCH, 0, shuffle=True, seed=11, drop_last=False)
    resumed = stateful.StatefulDataLoader(again_ds, batch_size=BATCH, sampler=again,
                                          collate_fn=ids)
    resumed.load_state_dict(state)
    rest = [i for batch in resumed for i in batch]
    order = sampler.order().tolist()
    assert [i for b in head for i in b] + rest == order
    assert declared(again_ds) == first_use(again_ds, order[7 * BATCH:])
