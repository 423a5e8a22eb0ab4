"""Runs of indices (a batch sampler's lists): the one-window slice path equals the general one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.datagen import plain
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, OutOfRangeError, ParquetDataset, collate
from undertale_duck.core.rows import RowBatch

SIZES = (70, 45, 90)
TOTAL = sum(SIZES)
WIDTH = 8


def row(i: int) -> dict[str, Any]:
    """The row at global index ``i``: the columns of a tokenized training set, and more."""
    return {
        "id": f"r-{i:05d}",
        "tokens": [(i * 31 + k) % 1000 for k in range(WIDTH)],
        "mask": [1 if k <= i % WIDTH else 0 for k in range(WIDTH)],
        "label": i % 7,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "note": None if i % 9 == 0 else f"n{i % 13}",
        "blob": bytes([i % 256] * (i % 3)),
    }


def table(start: int, stop: int) -> pa.Table:
    rows = [row(i) for i in range(start, stop)]
    types = {"id": pa.string(), "tokens": pa.list_(pa.int32()), "mask": pa.list_(pa.int8()),
             "label": pa.int64(), "day": pa.date32(), "note": pa.string(), "blob": pa.binary()}
    return pa.table({k: pa.array([r[k] for r in rows], t) for k, t in types.items()})


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("runs")
    start = 0
    for k, size in enumerate(SIZES):
        pq.write_table(table(start, start + size), directory / f"part-{k}.parquet",
                       row_group_size=16)
        start += size
    return directory


def open_ds(root: Path, fmt: str) -> ParquetDataset:
    # small windows: runs of a few dozen rows cross windows and shards
    return ParquetDataset(root, format=fmt, window_bytes=3000)  # type: ignore[arg-type]


def as_plain(rows: Any) -> list[dict[str, Any]]:
    return [{k: plain(v) for k, v in r.items()} for r in rows]


_DATASETS: dict[tuple[Path, str], ParquetDataset] = {}


def shared(root: Path, fmt: str) -> ParquetDataset:
    key = (root, fmt)
    if key not in _DATASETS:
        _DATASETS[key] = open_ds(root, fmt)
    return _DATASETS[key]


@st.composite
def runs(draw: st.DrawFn) -> list[int]:
    """Consecutive indices (inside or across windows), reversed, repeated or with negatives."""
    start = draw(st.integers(0, TOTAL - 1))
    length = draw(st.integers(1, min(80, TOTAL - start)))
    indices = list(range(start, start + length))
    kind = draw(st.sampled_from(["run", "run", "reversed", "repeated", "negative", "joined"]))
    if kind == "reversed":
        indices.reverse()
    elif kind == "repeated":
        at = draw(st.integers(0, length - 1))
        indices.insert(at, indices[at])
    elif kind == "negative":
        indices = [i - TOTAL for i in indices]
    elif kind == "joined":  # two runs back to back: a batch crossing an epoch's order
        other = draw(st.integers(0, TOTAL - 1))
        indices += list(range(other, min(other + draw(st.integers(1, 20)), TOTAL)))
    return indices


@settings(max_examples=60, deadline=None)
@given(runs(), st.sampled_from(["numpy", "torch"]))
def test_runs_equal_the_python_rows_and_the_generated_values(
    root: Path, indices: list[int], fmt: str
) -> None:
    expected = [row(i % TOTAL) for i in indices]
    assert shared(root, "python").__getitems__(indices) == expected
    rows = shared(root, fmt).__getitems__(indices)
    assert isinstance(rows, RowBatch)
    batch = collate(rows)
    assert plain(batch["tokens"]) == [r["tokens"] for r in expected]
    assert plain(batch["mask"]) == [r["mask"] for r in expected]
    assert plain(batch["label"]) == [r["label"] for r in expected]
    assert batch["id"] == [r["id"] for r in expected]
    assert batch["day"] == [r["day"] for r in expected]
    assert batch["note"] == [r["note"] for r in expected]
    assert batch["blob"] == [r["blob"] for r in expected]
    assert as_plain(shared(root, fmt).__getitems__(indices)) == expected


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_a_run_is_fresh_and_writable_and_collate_keeps_its_columns(root: Path, fmt: str) -> None:
    ds = open_ds(root, fmt)
    rows = ds.__getitems__(list(range(3, 13)))  # inside the first window
    assert isinstance(rows, RowBatch)
    tokens = rows.batched("tokens")
    assert tokens is not None
    if fmt == "numpy":
        assert tokens.flags.writeable and tokens.flags.owndata
    batch = collate(rows)
    if fmt == "torch":  # collate passes the batch's tensors through
        assert batch["tokens"] is tokens and batch["label"] is rows.batched("label")
    batch["tokens"][:] = -1
    batch["label"][:] = -1
    batch["id"][0] = "changed"
    again = collate(ds.__getitems__(list(range(3, 13))))
    assert plain(again["tokens"]) == [row(i)["tokens"] for i in range(3, 13)]
    assert plain(again["label"]) == [row(i)["label"] for i in range(3, 13)]
    assert again["id"][0] == row(3)["id"]


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_a_chunked_sampler_epoch_gives_every_row_once(root: Path, batch: int) -> None:
    ds = open_ds(root, "torch")
    for _ in range(2):  # the second epoch comes from the cache
        loader = DataLoader(ds, batch_size=batch, sampler=ChunkedSampler(ds, batch, workers=0),
                            collate_fn=collate)
        tokens, ids, days = [], [], []
        for made in loader:
            assert made["tokens"].shape[1:] == (WIDTH,) and made["tokens"].dtype == torch.int32
            tokens.append(made["tokens"].numpy())
            ids += made["id"]
            days += made["day"]
        assert ids == [row(i)["id"] for i in range(TOTAL)]
        assert days == [row(i)["day"] for i in range(TOTAL)]
        assert np.concatenate(tokens).tolist() == [row(i)["tokens"] for i in range(TOTAL)]


def test_a_value_python_cannot_hold_in_a_run_is_named(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    days = pa.array([0, 1, 3_000_000, 2], pa.date32())  # 3,000,000 days: year 10183
    pq.write_table(pa.table({"id": [0, 1, 2, 3], "d": days}), path)
    for fmt in ("numpy", "torch"):
        ds = ParquetDataset(path, format=fmt)  # type: ignore[arg-type]
        assert [r["d"] for r in ds.__getitems__([0, 1])] == [dt.date(1970, 1, 1),
                                                              dt.date(1970, 1, 2)]
        with pytest.raises(OutOfRangeError, match=r"row 2\b.*'d'") as info:
            ds.__getitems__([1, 2, 3])
        assert info.value.rows == (2, 3) and info.value.column == "d"
