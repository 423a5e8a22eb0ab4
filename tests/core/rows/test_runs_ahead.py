"""Runs that continue the last one are sliced several at a time: each comes once, right, apart."""

from __future__ import annotations

import itertools
import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, OutOfRangeError, ParquetDataset, collate
from undertale_duck.core.rows import AHEAD_BYTES, AHEAD_ROWS, RowBatch

SIZES = (130, 45, 300)
TOTAL = sum(SIZES)
WIDTH = 8


def tokens(i: int, width: int = WIDTH, shift: int = 0) -> list[int]:
    return [(i * 31 + k + shift) % 1000 for k in range(width)]


def table(start: int, stop: int, width: int = WIDTH, shift: int = 0) -> pa.Table:
    rows = range(start, stop)
    return pa.table({
        "id": pa.array([f"r-{i:05d}" for i in rows]),
        "tokens": pa.array([tokens(i, width, shift) for i in rows], pa.list_(pa.int32())),
        "ragged": pa.array([list(range(i % 4)) for i in rows], pa.list_(pa.int16())),
        "label": pa.array([i % 7 + shift for i in rows], pa.int64()),
    })


def write(directory: Path, sizes: tuple[int, ...], width: int = WIDTH, shift: int = 0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    start = 0
    for k, size in enumerate(sizes):
        pq.write_table(table(start, start + size, width, shift),
                       directory / f"part-{k}.parquet", row_group_size=32)
        start += size
    return directory


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("ahead") / "data", SIZES)


_OPEN: dict[tuple[Path, str, int], ParquetDataset] = {}


def dataset(root: Path, fmt: str, window_bytes: int) -> ParquetDataset:
    """One dataset per format and window size for the module (its runs carry over)."""
    key = (root, fmt, window_bytes)
    if key not in _OPEN:
        kw = {} if window_bytes == 0 else {"window_bytes": window_bytes}
        _OPEN[key] = ParquetDataset(root, format=fmt, **kw)  # type: ignore[arg-type]
    return _OPEN[key]


def check(rows: Any, indices: list[int], shift: int = 0) -> dict[str, Any]:
    """Assert a batch holds the rows at ``indices``; return it collated."""
    assert isinstance(rows, RowBatch) and len(rows) == len(indices)
    batch = collate(rows)
    assert np.asarray(batch["tokens"]).tolist() == [tokens(i, shift=shift) for i in indices]
    assert np.asarray(batch["label"]).tolist() == [i % 7 + shift for i in indices]
    assert batch["id"] == [f"r-{i:05d}" for i in indices]
    ragged = np.asarray(batch["ragged"]).tolist()
    assert [r[: i % 4] for r, i in zip(ragged, indices, strict=True)] == [
        list(range(i % 4)) for i in indices
    ]
    return batch


def storage(value: Any) -> int:
    """The address of the memory a tensor or array is a view of."""
    if isinstance(value, torch.Tensor):
        return int(value.untyped_storage().data_ptr())
    while value.base is not None:
        value = value.base
    return int(value.ctypes.data)


@st.composite
def walks(draw: st.DrawFn) -> list[list[int]]:
    """Calls as samplers make them: runs that follow, change size, jump back, repeat."""
    calls: list[list[int]] = []
    start = draw(st.integers(0, TOTAL - 1))
    size = draw(st.integers(1, 40))
    for _ in range(draw(st.integers(1, 25))):
        step = draw(st.sampled_from(["follow"] * 5 + ["size", "jump", "again", "back"]))
        if step == "size":  # a run of another size where the last ended
            size = draw(st.integers(1, 40))
        elif step == "jump":
            start = draw(st.integers(0, TOTAL - 1))
        elif step == "again" and calls:  # the last run asked again
            start = calls[-1][0]
        elif step == "back" and calls:  # where a run sliced ahead begins, another length
            start = calls[-1][-1] + 1 + size * draw(st.integers(0, 3))
            size = draw(st.integers(1, 40))
        start %= TOTAL
        calls.append(list(range(start, min(start + size, TOTAL))))
        start = calls[-1][-1] + 1
    return calls


@settings(max_examples=60, deadline=None)
@given(walks(), st.sampled_from(["numpy", "torch"]), st.sampled_from([0, 3000]))
def test_every_call_serves_its_rows_in_memory_no_other_batch_shares(
    root: Path, calls: list[list[int]], fmt: str, window_bytes: int
) -> None:
    ds = dataset(root, fmt, window_bytes)
    served: list[tuple[list[int], dict[str, Any]]] = []
    for indices in calls:
        batch = check(ds.__getitems__(indices), indices)
        served.append((indices, batch))
        # a caller may write into its batch: no row of another batch, served or to come,
        # may change with it
        batch["tokens"][:] = -1
        batch["label"][:] = -1
    ranges = sorted(
        (value.data_ptr(), value.data_ptr() + value.numel() * value.element_size())
        for _, batch in served for value in (batch["tokens"], batch["label"])
    )
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
    for indices, _ in served:  # every batch's rows as they are, though all were written to
        check(ds.__getitems__(indices), indices)


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
@pytest.mark.parametrize("batch", [1, 3, 64])
def test_a_sequential_epoch_through_a_dataloader_is_sliced_ahead(
    root: Path, fmt: str, batch: int
) -> None:
    ds = ParquetDataset(root, format=fmt)  # type: ignore[arg-type]
    for sampler in (None, ChunkedSampler(ds, batch, workers=0)):
        made = list(DataLoader(ds, batch_size=batch, sampler=sampler, collate_fn=as_is))
        assert [i for rows in made for i in ids(rows)] == list(range(TOTAL))
        for rows in made:
            check(rows, ids(rows))
        # the feature is on: past a window's first runs, the next share one copy
        shared = sum(storage(a.batched("tokens")) == storage(b.batched("tokens"))
                     for a, b in itertools.pairwise(made))
        assert shared >= len(made) - 3 * (len(SIZES) + 1) if batch < 64 else shared > 0


def as_is(rows: Any) -> Any:
    return rows


def ids(rows: Any) -> list[int]:
    return [int(s[2:]) for s in collate(rows)["id"]]


@pytest.mark.parametrize("width", [4096, 300_000])
def test_a_slice_ahead_stays_within_its_bytes(tmp_path: Path, width: int) -> None:
    # 16 KiB rows: a run of 8 with at most 1 MiB ahead; 1.2 MB rows: none ahead
    root = write(tmp_path / "wide", (40,), width=width)
    ds = ParquetDataset(root, format="torch")
    ptrs, kept = [], []  # kept alive: a freed buffer's address may come again
    for start in range(0, 40, 8):
        rows = ds.__getitems__(list(range(start, start + 8)))
        values = rows.batched("tokens")
        assert values is not None
        assert values.tolist() == [tokens(i, width) for i in range(start, start + 8)]
        assert values.untyped_storage().nbytes() <= max(AHEAD_BYTES, values.nbytes)
        ptrs.append(storage(values))
        kept.append(values)
    if width == 4096:
        assert len(set(ptrs)) < len(ptrs)  # some runs shared one slice
    else:
        assert len(set(ptrs)) == len(ptrs)


def test_no_more_than_the_rows_cap_is_sliced_ahead(tmp_path: Path) -> None:
    root = write(tmp_path / "long", (3000,), width=1)
    ds = ParquetDataset(root, format="numpy")
    batches = [ds.__getitems__(list(range(a, a + 10))) for a in range(0, 3000, 10)]
    for a, rows in zip(range(0, 3000, 10), batches, strict=True):
        check_tokens = rows.batched("tokens")
        assert check_tokens is not None
        assert check_tokens.tolist() == [tokens(i, 1) for i in range(a, a + 10)]
        base = check_tokens.base if check_tokens.base is not None else check_tokens
        assert len(base) <= AHEAD_ROWS
    assert len({storage(r.batched("label")) for r in batches}) < len(batches) // 2


def test_two_readers_taking_turns_get_right_rows_in_memory_of_their_own(root: Path) -> None:
    ds = ParquetDataset(root, format="torch")
    pairs: list[tuple[list[int], torch.Tensor, torch.Tensor]] = []
    for a in range(0, 120, 8):  # both read the same runs, turn about
        indices = list(range(a, a + 8))
        x = check(ds.__getitems__(indices), indices)["tokens"]
        y = check(ds.__getitems__(indices), indices)["tokens"]
        pairs.append((indices, x, y))
    for indices, x, y in pairs:
        x[:] = -1
        assert y.tolist() == [tokens(i) for i in indices]


def test_threads_reading_the_same_runs_each_get_every_row(root: Path) -> None:
    ds = ParquetDataset(root, format="torch")
    errors: list[BaseException] = []
    got: dict[int, list[torch.Tensor]] = {0: [], 1: []}

    def read(k: int) -> None:
        try:
            for a in range(0, 128, 4):
                got[k].append(check(ds.__getitems__(list(range(a, a + 4))),
                                    list(range(a, a + 4)))["tokens"])
        except BaseException as exc:  # reported below, with the thread's rows
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(got[0]) == len(got[1]) == 32
    for x, y in zip(got[0], got[1], strict=True):
        x[:] = -1
        assert y.min() >= 0  # no tensor handed to both


def test_refresh_and_close_drop_the_runs_sliced_ahead(tmp_path: Path) -> None:
    root = write(tmp_path / "changing", (200,))
    ds = ParquetDataset(root, format="torch")
    check(ds.__getitems__(list(range(0, 8))), list(range(0, 8)))
    check(ds.__getitems__(list(range(8, 16))), list(range(8, 16)))  # 16 on: sliced ahead
    write(root, (200,), shift=5)  # the shard rewritten: every value moves
    ds.refresh()
    check(ds.__getitems__(list(range(16, 24))), list(range(16, 24)), shift=5)
    check(ds.__getitems__(list(range(24, 32))), list(range(24, 32)), shift=5)
    assert ds._ahead  # the runs from 32 on wait
    ds.close()  # empties the cache: the runs sliced ahead too
    assert ds._ahead == {}
    write(root, (200,), shift=9)
    ds.refresh()
    check(ds.__getitems__(list(range(32, 40))), list(range(32, 40)), shift=9)


def test_a_pickled_dataset_carries_no_rows_sliced_ahead(root: Path) -> None:
    ds = ParquetDataset(root, format="torch")
    check(ds.__getitems__(list(range(0, 8))), list(range(0, 8)))
    check(ds.__getitems__(list(range(8, 16))), list(range(8, 16)))
    assert ds._ahead  # the runs from 16 on wait
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._ahead == {}
    check(copy.__getitems__(list(range(16, 24))), list(range(16, 24)))
    check(ds.__getitems__(list(range(16, 24))), list(range(16, 24)))


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_a_value_that_cannot_convert_is_raised_by_its_own_run(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "d.parquet"
    days = pa.array([3_000_000 * (i == 21) + i for i in range(40)], pa.date32())
    pq.write_table(pa.table({"id": list(range(40)), "d": days}), path)
    ds = ParquetDataset(path, format=fmt)  # type: ignore[arg-type]
    for a in (0, 8):  # the second run follows the first; its slice ahead holds row 21
        assert [r["id"] for r in ds.__getitems__(list(range(a, a + 8)))] == list(
            range(a, a + 8))
    with pytest.raises(OutOfRangeError, match=r"row 21\b.*'d'"):
        ds.__getitems__(list(range(16, 24)))
    assert [int(r["id"]) for r in ds.__getitems__(list(range(24, 32)))] == list(range(24, 32))
