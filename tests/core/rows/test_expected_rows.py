"""``prefetch(rows=)``: batches that ask for the declared rows are gathered a few at a time."""

from __future__ import annotations

import itertools
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck import ParquetDataset, collate

SIZES = [70, 33, 96]
TOTAL = sum(SIZES)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("expected-rows")
    datagen.write_shards(path, SIZES, row_group_size=[35, 33, 24])
    return path


def open_dataset(root: Path, fmt: str = "torch", **kw: Any) -> ParquetDataset:
    ds = ParquetDataset(root, columns=["id", "label", "score", "tokens"], format=fmt,
                        window_bytes=2500, **kw)
    assert len(ds.windows) >= 4
    return ds


def check_batch(batch: dict[str, Any], indices: list[int]) -> None:
    """Every value of the batch is that of the row its index names."""
    assert batch["id"] == [f"row-{i:08d}" for i in indices]
    assert batch["label"].tolist() == [i % 7 for i in indices]
    scores = batch["score"]  # a list where a row's score is null, else a tensor
    values = scores if isinstance(scores, list) else scores.tolist()
    for i, score in zip(indices, values, strict=True):
        if i % 11 == 0:
            assert score is None or np.isnan(score), (i, score)
        else:
            assert score == i / 4, (i, score)
    tokens = batch["tokens"]
    mask = batch.get("tokens_mask")  # none where the batch's lists have one length
    for k, i in enumerate(indices):
        want = datagen.row(i)["tokens"]
        if mask is None:
            assert tokens[k].tolist() == want
        else:
            assert tokens[k][: len(want)].tolist() == want
            assert int(mask[k].sum()) == len(want)


def window_runs(ds: ParquetDataset, seed: int) -> list[int]:
    """A locality-aware order: windows shuffled, rows shuffled inside each."""
    rng = random.Random(seed)
    windows = list(ds.windows)
    rng.shuffle(windows)
    order: list[int] = []
    for w in windows:
        rows = list(range(w.offset, w.end))
        rng.shuffle(rows)
        order += rows
    return order


def shared_pairs(batches: list[dict[str, Any]]) -> int:
    """How many consecutive batches share the buffer of their ``label`` column."""
    pointers = [b["label"].untyped_storage().data_ptr() for b in batches]
    return sum(a == b for a, b in itertools.pairwise(pointers))


def batches_of(order: list[int], n: int) -> list[list[int]]:
    return [order[a : a + n] for a in range(0, len(order), n)]


def test_declared_batches_are_cut_from_one_gather_and_right(root: Path) -> None:
    ds = open_dataset(root)
    order = window_runs(ds, 1)
    ds.prefetch(None, rows=np.asarray(order))
    kept = []  # held, so that no buffer is freed and its address reused
    for indices in batches_of(order, 5):
        batch = collate(ds.__getitems__(indices))
        check_batch(batch, indices)
        kept.append(batch)
    # batches gathered together are views of one buffer
    assert shared_pairs(kept) >= len(kept) // 3
    ds.close()


def test_without_declared_rows_each_batch_is_its_own(root: Path) -> None:
    ds = open_dataset(root)
    order = window_runs(ds, 1)
    kept = []
    for indices in batches_of(order, 5):
        batch = collate(ds.__getitems__(indices))
        check_batch(batch, indices)
        kept.append(batch)
    assert shared_pairs(kept) == 0
    ds.close()


def test_batches_that_leave_the_declared_rows_get_their_own_rows(root: Path) -> None:
    ds = open_dataset(root)
    order = window_runs(ds, 2)
    ds.prefetch(None, rows=order)
    batches = batches_of(order, 4)
    check_batch(collate(ds.__getitems__(batches[0])), batches[0])  # batches 1.. gathered
    check_batch(collate(ds.__getitems__(batches[0])), batches[0])  # asked again
    check_batch(collate(ds.__getitems__(batches[2])), batches[2])  # one skipped
    check_batch(collate(ds.__getitems__([5, 3, 1, 0])), [5, 3, 1, 0])  # foreign rows
    floats = [float(i) for i in batches[1]]  # hashes as the ints of a waiting batch
    with pytest.raises(TypeError):
        ds.__getitems__(floats)  # type: ignore[arg-type]
    check_batch(collate(ds.__getitems__(batches[1])), batches[1])
    for indices in batches[3:]:
        check_batch(collate(ds.__getitems__(indices)), indices)
    ds.close()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 40),
    scattered=st.booleans(),
    steps=st.lists(st.sampled_from(["next", "next", "next", "again", "skip", "foreign",
                                    "reopen"]), max_size=60),
    fmt=st.sampled_from(["torch", "numpy"]),
)
def test_any_walk_over_declared_rows_serves_the_rows_asked_for(
    root: Path, seed: int, n: int, scattered: bool, steps: list[str], fmt: str
) -> None:
    ds = open_dataset(root, fmt)
    order = window_runs(ds, seed)
    if scattered:
        random.Random(seed).shuffle(order)
    ds.prefetch(None, rows=order)
    batches = batches_of(order, n)
    k = 0
    rng = random.Random(seed)
    for step in [*steps, *["next"] * len(batches)]:
        if step == "reopen":
            ds.close()
            continue
        if step == "foreign":
            indices = rng.sample(range(TOTAL), min(n, TOTAL))
        else:
            k = max(0, k - 1) if step == "again" else k + (step == "skip")
            if k >= len(batches):
                break
            indices = batches[k]
            k += 1
        rows = ds.__getitems__(indices)
        if fmt == "torch":
            check_batch(collate(rows), indices)
        else:
            assert [int(r["label"]) for r in rows] == [i % 7 for i in indices]
            assert [r["id"] for r in rows] == [f"row-{i:08d}" for i in indices]
            assert [list(r["tokens"]) for r in rows] == [datagen.row(i)["tokens"] for i in indices]
    ds.close()


def test_a_view_gathers_its_declared_batches_too(root: Path) -> None:
    ds = open_dataset(root, where="label <> 3")
    kept = [i for i in range(TOTAL) if i % 7 != 3]
    assert len(ds) == len(kept)
    order = window_runs(ds, 4)
    ds.prefetch(None, rows=order)
    for indices in batches_of(order, 6):
        batch = collate(ds.__getitems__(indices))
        check_batch(batch, [kept[i] for i in indices])
    ds.close()


def test_python_rows_are_served_as_always(root: Path) -> None:
    ds = open_dataset(root, "python")
    order = window_runs(ds, 5)
    ds.prefetch(None, rows=order)
    for indices in batches_of(order, 7):
        assert [r["label"] for r in ds.__getitems__(indices)] == [i % 7 for i in indices]
    ds.close()


def test_declared_rows_stay_with_the_declaring_process(root: Path) -> None:
    ds = open_dataset(root)
    order = window_runs(ds, 6)
    ds.prefetch(None, rows=order)
    copy = pickle.loads(pickle.dumps(ds))  # as a spawned worker gets it
    kept = []
    for indices in batches_of(order, 5):
        batch = collate(copy.__getitems__(indices))
        check_batch(batch, indices)
        kept.append(batch)
    assert shared_pairs(kept) == 0  # each batch its own: nothing declared in the copy
    copy.close()
    ds.close()


@pytest.mark.parametrize(
    ("rows", "error", "words"),
    [
        ("0123", TypeError, "rows must be"),
        ({1, 2}, TypeError, "rows must be"),
        (np.zeros((2, 2), dtype=np.int64), TypeError, "shape"),
        ([0.5, 1.0], TypeError, "integer row indices"),
        ([0, TOTAL], IndexError, f"row {TOTAL} out of range"),
        (np.array([-1, 2]), IndexError, "row -1 out of range"),
    ],
)
def test_rows_that_are_no_row_indices_are_refused(
    root: Path, rows: object, error: type[Exception], words: str
) -> None:
    ds = open_dataset(root)
    with pytest.raises(error, match=words):
        ds.prefetch(None, rows=rows)  # type: ignore[arg-type]
    with pytest.raises(error, match=words):
        ds.prefetch(None, lazy=True, rows=rows)  # type: ignore[arg-type]
    ds.prefetch(None, rows=[])  # nothing declared: fine
    assert ds[0]["label"] == 0
    ds.close()
