"""Values at the edges: integers that would wrap, dates beyond Python's range, lists with nulls."""

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

from undertale_duck import OutOfRangeError, ParquetDataset, collate

BIG = 1 << 63


def _unsigned(path: Path) -> None:
    pq.write_table(
        pa.table(
            {
                "u64": pa.array([1, BIG - 1, BIG, 2**64 - 1], pa.uint64()),
                "u32": pa.array([1, 2**31, 2**32 - 1, 0], pa.uint32()),
                "u16": pa.array([1, 2**15, 2**16 - 1, 0], pa.uint16()),
                "lists": pa.array([[1], [BIG - 1], [2, BIG], []], pa.list_(pa.uint64())),
            }
        ),
        path,
        row_group_size=2,
    )


def test_torch_refuses_uint64_values_that_would_wrap(tmp_path: Path) -> None:
    path = tmp_path / "u.parquet"
    _unsigned(path)
    ds = ParquetDataset(path, format="torch", window_bytes=1)
    first = ds[1]
    assert first["u64"].dtype == torch.int64 and int(first["u64"]) == BIG - 1
    small = ParquetDataset(path, format="torch", columns=["u32", "u16"])
    assert int(first["u32"]) == 2**31 and int(small[2]["u32"]) == 2**32 - 1  # widened, exact
    assert small[2]["u32"].dtype == torch.int64 and int(small[2]["u16"]) == 2**16 - 1
    for index in (2, 3):
        with pytest.raises(OutOfRangeError, match="'u64'") as info:
            ds[index]
        assert info.value.rows == (index, index + 1) and info.value.column == "u64"
        assert info.value.path == str(path)
    with pytest.raises(OutOfRangeError, match=r"row 2\b"):
        ds.__getitems__([0, 1, 2])
    narrow = ParquetDataset(path, format="torch", columns=["lists"], window_bytes=1)
    assert narrow[1]["lists"].tolist() == [BIG - 1]
    with pytest.raises(OutOfRangeError, match="'lists'"):
        narrow[2]


def test_numpy_and_python_keep_uint64_exact(tmp_path: Path) -> None:
    path = tmp_path / "u.parquet"
    _unsigned(path)
    rows = ParquetDataset(path, format="numpy").__getitems__([0, 1, 2, 3])
    assert [int(r["u64"]) for r in rows] == [1, BIG - 1, BIG, 2**64 - 1]
    assert rows[3]["u64"].dtype == np.uint64
    assert [ParquetDataset(path)[i]["u64"] for i in range(4)] == [1, BIG - 1, BIG, 2**64 - 1]
    with pytest.raises(OutOfRangeError, match="'u64'"):
        collate(rows)  # numpy-format rows collated to tensors: refused, never wrapped
    assert collate(rows[:2])["u64"].tolist() == [1, BIG - 1]


def test_dates_beyond_python_range_give_our_error(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    days = pa.array([0, 3_000_000, 1], pa.date32())  # 3,000,000 days: year 10183
    pq.write_table(pa.table({"id": [0, 1, 2], "d": days}), path)
    for fmt in ("python", "numpy", "torch"):
        ds = ParquetDataset(path, format=fmt)  # type: ignore[arg-type]
        assert ds[0]["d"] == dt.date(1970, 1, 1) and ds[2]["d"] == dt.date(1970, 1, 2)
        with pytest.raises(OutOfRangeError, match=r"'d'.*date") as info:
            ds[1]
        assert info.value.rows == (1, 2) and str(path) in str(info.value)
        with pytest.raises(OutOfRangeError, match=r"row 1\b"):
            ds.__getitems__([2, 1])
    ds = ParquetDataset(path)
    assert ds.sql("SELECT year(d) AS y FROM dataset WHERE id = 1").to_pylist() == [{"y": 10183}]


def _lists_with_nulls(path: Path, rows: int) -> list[Any]:
    values: list[Any] = []
    for i in range(rows):
        if i % 7 == 3:
            values.append(None)
        elif i % 5 == 0:
            values.append([i, None, i + 1])
        else:
            values.append([i + k for k in range(i % 4)])
    table = pa.table({"id": list(range(rows)), "xs": pa.array(values, pa.list_(pa.int32()))})
    pq.write_table(table, path, row_group_size=8)
    return values


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


@pytest.fixture(scope="module")
def holes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    path = tmp_path_factory.mktemp("holes") / "h.parquet"
    return path, _lists_with_nulls(path, 40)


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_a_row_has_one_type_whatever_the_batch(holes: tuple[Path, list[Any]], fmt: str) -> None:
    path, values = holes
    ds = ParquetDataset(path, format=fmt, window_bytes=1)  # type: ignore[arg-type]
    array = np.ndarray if fmt == "numpy" else torch.Tensor
    assert isinstance(ds[2]["xs"], array) and isinstance(ds[1]["xs"], array)
    assert ds[5]["xs"] == [5, None, 6]  # a list holding a null: its Python list
    assert ds[3]["xs"] is None
    batch = ds.__getitems__([1, 2])
    assert isinstance(batch[1]["xs"], array) and batch[1]["xs"].tolist() == [2, 3]
    mixed = ds.__getitems__([5, 2])  # the same row beside a row holding a null
    assert isinstance(mixed[1]["xs"], array) and mixed[0]["xs"] == [5, None, 6]


@pytest.fixture(scope="module")
def hole_sets(holes: tuple[Path, list[Any]]) -> list[ParquetDataset]:
    return [
        ParquetDataset(holes[0], format=fmt, window_bytes=64)  # type: ignore[arg-type]
        for fmt in ("numpy", "torch")
    ]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=39), min_size=1, max_size=12))
def test_types_depend_only_on_the_row(
    holes: tuple[Path, list[Any]], hole_sets: list[ParquetDataset], indices: list[int]
) -> None:
    values = holes[1]
    for ds in hole_sets:
        batch = ds.__getitems__(indices)
        for i, row in zip(indices, batch, strict=True):
            single = ds[i]["xs"]
            assert _kind(row["xs"]) == _kind(single)
            got = row["xs"].tolist() if hasattr(row["xs"], "tolist") else row["xs"]
            assert got == values[i]
