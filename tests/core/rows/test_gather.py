from __future__ import annotations

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

from undertale_duck import ParquetDataset
from undertale_duck.core.rows import RowBatch


def shard(start: int, stop: int, width: int | None) -> pa.Table:
    """Rows start..stop-1; tokens of ``width`` values each (ragged when None)."""
    rows = range(start, stop)
    lengths = [width if width is not None else i % 4 for i in rows]
    return pa.table({
        "id": [f"r{i}" for i in rows],
        "tokens": pa.array([[(i * 13 + k) % 97 for k in range(n)] for i, n in zip(rows, lengths,
                                                                                 strict=True)],
                           pa.list_(pa.int16())),
        "u": pa.array(list(rows), pa.uint16()),
        "maybe": pa.array([None if i % 5 == 0 else i * 0.5 for i in rows], pa.float32()),
        "pair": pa.array([[i, -i] for i in rows], pa.list_(pa.int64(), 2)),
    })


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """185 rows in 4 shards of row groups of 15, ragged ``tokens`` in the third."""
    root = tmp_path_factory.mktemp("gather")
    start = 0
    for k, (size, width) in enumerate([(60, 8), (45, 4), (50, None), (30, 8)]):
        pq.write_table(shard(start, start + size, width), root / f"p{k}.parquet",
                       row_group_size=15)
        start += size
    return root


def dataset(root: Path, fmt: str) -> ParquetDataset:
    return ParquetDataset(root, format=fmt, window_bytes=600)  # type: ignore[arg-type]


_PYTHON: list[list[dict[str, Any]]] = []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-185, 184), min_size=1, max_size=70),
       st.sampled_from(["numpy", "torch"]))
def test_batches_across_windows_equal_the_python_rows(
    shards: Path, indices: list[int], fmt: str
) -> None:
    if not _PYTHON:
        _PYTHON.append(dataset(shards, "python").__getitems__(list(range(185))))
    expected = [_PYTHON[0][i] for i in indices]
    ds = dataset(shards, fmt)
    rows = ds.__getitems__(indices)
    assert isinstance(rows, RowBatch)
    assert [{k: plain(v) for k, v in r.items()} for r in rows] == expected
    again = ds.__getitems__(indices)  # the same batch from the windows' kept views
    batched = again.batched("u")
    assert batched is not None and plain(batched) == [r["u"] for r in expected]
    if fmt == "torch":
        assert isinstance(batched, torch.Tensor) and batched.dtype == torch.int64
    pair = again.batched("pair")
    assert pair is not None and plain(pair) == [r["pair"] for r in expected]
    widths = {len(r["tokens"]) for r in expected}
    if len(widths) == 1:  # one width: one matrix, whatever windows the rows came from
        tokens = again.batched("tokens")
        assert tokens is not None and tuple(tokens.shape) == (len(indices), widths.pop())


@pytest.mark.parametrize("fmt", ["python", "numpy", "torch"])
@pytest.mark.parametrize(
    "indices",
    [
        np.array([2**64 - 1], np.uint64),  # as int64: -1, the last row
        np.array([3, 2**64 - 185], np.uint64),  # as int64: -185, the first row
        [np.uint64(2**63)],
        [2**64 - 2],  # numpy reads a list of such Python ints as uint64
    ],
)
def test_unsigned_indices_of_2_63_or_more_are_out_of_range(
    shards: Path, indices: Any, fmt: str
) -> None:
    # they wrapped to negative int64 indices and served rows counted from the end
    with pytest.raises(IndexError, match=f"dataset index {int(max(indices))} out of range"):
        dataset(shards, fmt).__getitems__(indices)
