"""Ragged list columns of the numpy/torch formats: held end to end, padded in one step.

Every batch is checked against what collate made of the same rows one by one before
(the rows' dicts as a plain list: each row's own 1-d array or tensor, padded by torch),
and against values computed from the global row index.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import (
    ArgumentError,
    ChunkedLoader,
    ChunkedSampler,
    OutOfRangeError,
    ParquetDataset,
)
from undertale_duck.core.rows import Ragged, RowBatch
from undertale_duck.training.collate import collate

#: Arrow value types of the list columns, with a value each row index maps to.
TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "int8": (pa.int8(), lambda i, k: (i * 7 + k) % 120 - 60),
    "uint8": (pa.uint8(), lambda i, k: (i * 3 + k) % 250),
    "int16": (pa.int16(), lambda i, k: (i * 11 + k) % 30000 - 15000),
    "uint16": (pa.uint16(), lambda i, k: (i * 13 + k) % 65000),
    "int32": (pa.int32(), lambda i, k: i * 1000 + k),
    "uint32": (pa.uint32(), lambda i, k: (i * 1000 + k) * 7),
    "int64": (pa.int64(), lambda i, k: (i << 33) - k),
    "uint64": (pa.uint64(), lambda i, k: (i << 20) + k),
    "float16": (pa.float16(), lambda i, k: (i % 64) + k / 4),
    "float32": (pa.float32(), lambda i, k: i + k / 8),
    "float64": (pa.float64(), lambda i, k: i * 0.5 - k),
    "bool": (pa.bool_(), lambda i, k: (i + k) % 3 == 0),
}


def length_of(i: int, period: int) -> int:
    """Row ``i``'s list length: 0 to ``period - 1``, so runs of rows differ in length."""
    return (i * 7 + i // 3) % period


def write(root: Path, kind: str, rows: int, period: int, group: int = 37) -> Path:
    """One shard of ``rows`` rows: ``id``, ``x`` (a list of ``kind``) and ``label``."""
    typ, value = TYPES[kind]
    lists = [[value(i, k) for k in range(length_of(i, period))] for i in range(rows)]
    if kind == "float16":
        values = pa.array(np.array([v for row in lists for v in row], dtype=np.float16))
        offsets = pa.array(np.cumsum([0] + [len(r) for r in lists]).astype(np.int32))
        x = pa.ListArray.from_arrays(offsets, values)
    else:
        x = pa.array(lists, type=pa.list_(typ))
    table = pa.table({"id": [f"r{i}" for i in range(rows)], "x": x,
                      "label": pa.array(range(rows), pa.int64())})
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, root / "part-0.parquet", row_group_size=group)
    return root


def one_by_one(batch: RowBatch, **options: Any) -> dict[str, Any]:
    """What collate made of these rows before: each row's dict, padded row by row."""
    return collate([dict(row) for row in batch], **options)


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert isinstance(got[key], torch.Tensor), key
            assert got[key].dtype == value.dtype, key
            assert got[key].shape == value.shape, key
            assert torch.equal(got[key], value), key
        else:
            assert got[key] == value, key


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(sorted(TYPES)),
    fmt=st.sampled_from(["numpy", "torch"]),
    period=st.integers(1, 9),
    picks=st.lists(st.integers(0, 119), min_size=1, max_size=40),
    run=st.booleans(),
    padding=st.sampled_from([0, 1, -1, 7]),
)
def test_a_ragged_batch_collates_as_its_rows_did_one_by_one(
    tmp_path_factory: pytest.TempPathFactory, kind: str, fmt: str, period: int,
    picks: list[int], run: bool, padding: int,
) -> None:
    root = write(tmp_path_factory.mktemp("ragged"), kind, 120, period)
    ds = ParquetDataset(root, format=fmt)  # type: ignore[arg-type]
    indices = list(range(picks[0], min(120, picks[0] + len(picks)))) if run else picks
    batch = ds.__getitems__(indices)
    assert isinstance(batch, RowBatch)
    lengths = [length_of(i, period) for i in indices]
    # rows of unequal lengths are held end to end; equal ones as one 2-d array as before
    assert (batch.ragged("x") is not None) == (len(set(lengths)) > 1)
    options = {"padding_value": padding}
    try:
        want = one_by_one(batch, **options)
    except ArgumentError as exc:  # the padding does not fit the dtype: the same refusal
        with pytest.raises(ArgumentError) as fresh:
            collate(ds.__getitems__(indices), **options)
        assert str(fresh.value) == str(exc)
        return
    got = collate(ds.__getitems__(indices), **options)
    assert_same(got, want)
    # and the values are the rows' own (a function of the row index), in request order
    _, value = TYPES[kind]
    tensor = got["x"]
    width = max(lengths)
    assert tensor.shape == (len(indices), width)
    mask = got.get("x_mask")
    assert (mask is None) == (len(set(lengths)) == 1)
    for row, i in enumerate(indices):
        expect = [value(i, k) for k in range(lengths[row])]
        if kind == "float16":
            expect = np.array(expect, dtype=np.float16).tolist()
        assert tensor[row, :lengths[row]].tolist() == expect
        if mask is not None:
            assert mask[row].tolist() == [k < lengths[row] for k in range(width)]
            assert tensor[row, lengths[row]:].tolist() == [padding] * (width - lengths[row])
    assert got["label"].tolist() == indices


def test_a_batch_holds_a_ragged_column_end_to_end_until_a_row_is_read(tmp_path: Path) -> None:
    ds = ParquetDataset(write(tmp_path / "d", "int32", 50, 6), format="torch")
    batch = ds.__getitems__(list(range(3, 20)))
    ragged = batch.ragged("x")
    assert isinstance(ragged, Ragged) and len(ragged) == 17
    assert ragged.lengths.tolist() == [length_of(i, 6) for i in range(3, 20)]
    assert ragged.nbytes() == 4 * sum(length_of(i, 6) for i in range(3, 20))
    assert batch.ragged("label") is None and batch.ragged("id") is None
    assert batch.nbytes() == ragged.nbytes() + 8 * 17 + sum(len(f"r{i}") for i in range(3, 20))
    # reading a row builds the per-row views (of the flat values): collate then uses them
    first = batch[0]["x"]
    assert first.tolist() == [3000 + k for k in range(length_of(3, 6))]
    assert batch.ragged("x") is None


def test_a_row_value_replaced_after_reading_is_what_collate_pads(tmp_path: Path) -> None:
    ds = ParquetDataset(write(tmp_path / "d", "int32", 50, 6), format="torch")
    batch = ds.__getitems__(list(range(10)))
    batch[2]["x"] = torch.tensor([9, 9, 9, 9, 9, 9, 9, 9], dtype=torch.int32)
    out = collate(batch)
    assert out["x"].shape == (10, 8)
    assert out["x"][2].tolist() == [9] * 8
    # the same through the columnar accessor: a value replaced in column() is seen too
    batch = ds.__getitems__(list(range(10)))
    batch.column("x")[1] = torch.tensor([5], dtype=torch.int32)
    assert collate(batch)["x"][1].tolist()[:1] == [5]
    assert collate(batch)["x_mask"][1].tolist()[:2] == [True, False]


def test_a_group_cut_into_batches_collates_each_part_as_its_rows_alone(tmp_path: Path) -> None:
    ds = ParquetDataset(write(tmp_path / "d", "int16", 60, 6), format="torch")
    whole = ds.__getitems__(list(range(60)))
    assert whole.ragged("x") is not None
    sizes = [1, 7, 2, 20, 30]  # a one-row part is stacked: no mask, as before
    parts = whole.split(sizes)
    assert parts is not None
    start = 0
    for size, part in zip(sizes, parts, strict=True):
        alone = ds.__getitems__(list(range(start, start + size)))
        assert_same(collate(part), one_by_one(alone))
        start += size
    assert "x_mask" not in collate(parts[0])


def test_ragged_slices_share_the_flat_values_and_keep_request_order() -> None:
    flat = torch.arange(10, dtype=torch.int32)
    ragged = Ragged(flat, np.array([0, 3, 3, 7, 10], dtype=np.int64))
    part = ragged[1:3]
    assert isinstance(part, Ragged)
    assert [v.tolist() for v in part] == [[], [3, 4, 5, 6]]
    assert part.flat.data_ptr() == flat[3:].data_ptr()  # a view, no copy
    empty = ragged[5:2]
    assert isinstance(empty, Ragged) and len(empty) == 0 and list(empty) == []
    assert not ragged.built  # consecutive slices build no per-row views
    assert [v.tolist() for v in ragged[::2]] == [[0, 1, 2], [3, 4, 5, 6]]
    assert [v.tolist() for v in ragged] == [[0, 1, 2], [], [3, 4, 5, 6], [7, 8, 9]]
    assert ragged.rows() is ragged.rows()
    assert ragged.built
    numpy = Ragged(np.arange(5, dtype=np.uint8), np.array([0, 2, 5], dtype=np.int64))
    assert [v.tolist() for v in numpy[0:2]] == [[0, 1], [2, 3, 4]]
    assert numpy.nbytes() == 5


def test_uint64_beyond_int64_is_refused_by_collate_not_wrapped(tmp_path: Path) -> None:
    x = pa.array([[1, 2], [2**63 + 5], [3, 4, 5]], type=pa.list_(pa.uint64()))
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"x": x}), tmp_path / "d" / "p.parquet")
    ds = ParquetDataset(tmp_path / "d", format="numpy")
    batch = ds.__getitems__([0, 1, 2])
    assert batch.ragged("x") is not None
    with pytest.raises(OutOfRangeError, match="2\\*\\*63"):
        collate(batch)
    with pytest.raises(OutOfRangeError, match="2\\*\\*63"):
        collate([dict(r) for r in ds.__getitems__([0, 1, 2])])
    assert collate(ds.__getitems__([0, 2]))["x"].dtype == torch.int64


def test_lists_with_nulls_stay_rows_as_before(tmp_path: Path) -> None:
    x = pa.array([[1, 2], None, [3, None, 5], [6]], type=pa.list_(pa.int32()))
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"x": x}), tmp_path / "d" / "p.parquet")
    ds = ParquetDataset(tmp_path / "d", format="torch")
    batch = ds.__getitems__([0, 1, 2, 3])
    assert batch.ragged("x") is None
    values = batch.column("x")
    assert values[1] is None and values[2] == [3, None, 5]
    assert collate(batch)["x"] == [values[0], None, [3, None, 5], values[3]]


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_every_batch_of_an_epoch_matches_collating_its_rows_alone(
    tmp_path: Path, fmt: str,
) -> None:
    root = write(tmp_path / "d", "int32", 700, 40, group=150)
    ds = ParquetDataset(root, format=fmt)  # type: ignore[arg-type]
    pad = functools.partial(collate, padding_value=-3)
    for shuffle in (False, True):
        order = list(ChunkedSampler(ds, 16, 0, shuffle=shuffle, seed=1))
        loader = ChunkedLoader(ds, batch_size=16, collate_fn=pad,
                               sampler=ChunkedSampler(ds, 16, 0, shuffle=shuffle, seed=1))
        seen = []
        for k, batch in enumerate(loader):
            indices = order[k * 16:(k + 1) * 16]
            assert_same(batch, one_by_one(ds.__getitems__(indices), padding_value=-3))
            seen += batch["label"].tolist()
        assert seen == order


def reference_pad(values: list[list[float]], padding: float) -> tuple[list[Any], list[Any]]:
    """The padded rows and mask, one value at a time."""
    width = max((len(v) for v in values), default=0)
    return ([list(v) + [padding] * (width - len(v)) for v in values],
            [[k < len(v) for k in range(width)] for v in values])


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=2, max_size=9).filter(
        lambda ls: len(set(ls)) > 1),
    dtype=st.sampled_from([torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                           torch.float16, torch.bfloat16, torch.float32, torch.float64,
                           torch.bool]),
    padding=st.sampled_from([0, 1]),
    grad=st.booleans(),
)
def test_rows_own_tensors_are_padded_exactly_by_numpy_or_torch(
    lengths: list[int], dtype: torch.dtype, padding: int, grad: bool,
) -> None:
    # bfloat16 has no numpy twin and a tensor that requires grad no numpy view: torch pads
    grad = grad and dtype.is_floating_point
    values = [[(r * 5 + k) % 7 if dtype != torch.bool else (r + k) % 2 == 0 for k in range(n)]
              for r, n in enumerate(lengths)]
    rows = [{"x": torch.tensor(v, dtype=dtype, requires_grad=grad)} for v in values]
    batch = collate(rows, padding_value=padding)
    want, mask = reference_pad(values, padding)
    assert batch["x"].dtype == dtype
    assert batch["x"].tolist() == torch.tensor(want, dtype=dtype).tolist()
    assert batch["x_mask"].tolist() == mask
    assert batch["x"].requires_grad == grad  # the padded batch stays in the graph
    # Python lists of the same numbers: int64, float64 or bool, padded alike
    plain = collate([{"x": v} for v in values], padding_value=padding)
    assert plain["x_mask"].tolist() == mask
    assert plain["x"].tolist() == torch.tensor(want, dtype=plain["x"].dtype).tolist()


def test_rows_of_several_dtypes_are_padded_in_the_promoted_one() -> None:
    rows = [{"x": torch.tensor([1, 2], dtype=torch.int8)},
            {"x": torch.tensor([300], dtype=torch.int32)},
            {"x": torch.tensor([0.5, 1.5, 2.5], dtype=torch.float32)}]
    batch = collate(rows, padding_value=-1)
    assert batch["x"].dtype == torch.float32
    assert batch["x"].tolist() == [[1.0, 2.0, -1.0], [300.0, -1.0, -1.0], [0.5, 1.5, 2.5]]


@pytest.mark.parametrize("odd", [
    None, "7", b"7", [7], (7,), np.array(7), np.array([7]), torch.tensor(7), {"v": 7},
    complex(7, 0),
])
def test_python_lists_holding_anything_but_numbers_stay_lists(odd: Any) -> None:
    rows = [{"x": [1, 2, 3]}, {"x": [4, odd]}, {"x": [5]}]
    assert collate(rows)["x"] == [[1, 2, 3], [4, odd], [5]]
    assert "x_mask" not in collate(rows)


@pytest.mark.parametrize(("values", "dtype"), [
    ([[1, 2, 3], [True], [np.int8(4), np.uint16(5)]], torch.int64),
    ([[1, 2.5], [np.float32(3)], [False, 4, 5]], torch.float64),
    ([[True, False], [np.bool_(True)]], torch.bool),
])
def test_python_lists_of_mixed_number_types_are_padded(values: list[Any], dtype: Any) -> None:
    batch = collate([{"x": v} for v in values], padding_value=0)
    want, mask = reference_pad([[float(x) for x in v] for v in values], 0)
    assert batch["x"].dtype == dtype
    assert batch["x"].tolist() == torch.tensor(want, dtype=dtype).tolist()
    assert batch["x_mask"].tolist() == mask


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6), min_size=2,
                max_size=6).filter(lambda rows: len({len(r) for r in rows}) > 1))
def test_python_ints_to_int64s_limits_are_padded_exactly(rows: list[list[int]]) -> None:
    # ints alone are read straight as int64: every value of int64's range comes back exact
    batch = collate([{"x": r} for r in rows], padding_value=-1)
    assert batch["x"].dtype == torch.int64
    width = max(len(r) for r in rows)
    assert batch["x"].tolist() == [r + [-1] * (width - len(r)) for r in rows]
    assert batch["x_mask"].tolist() == [[k < len(r) for k in range(width)] for r in rows]
