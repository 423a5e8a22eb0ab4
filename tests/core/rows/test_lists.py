"""Rows of list-of-number columns gathered from windows' buffers equal Arrow's take of them.

The reference is the general path the gather replaces: Arrow's ``take`` of each window's
rows, joined in batch order, converted by ``rows._convert``. Values are functions of the
global row index, so a row taken from the wrong place or window shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck.core.rows import Ragged
from undertale_duck.core.rows.lists import take_lists
from undertale_duck.core.rows.rows import _convert, gathered_lists

CHILDREN = [pa.int8(), pa.uint8(), pa.int16(), pa.int32(), pa.uint32(), pa.int64(),
            pa.uint64(), pa.float16(), pa.float32(), pa.float64()]


def window(start: int, rows: int, lengths: list[int], child: pa.DataType, large: bool,
           lead: int) -> pa.Array:
    """Rows ``start..start+rows`` of a list column (row i's k-th value a function of i, k).

    ``lead`` rows are built before them and sliced off, so the array has an offset and its
    values buffer starts before its first row.
    """
    lists = [[(i * 31 + k) % 100 for k in range(lengths[i % len(lengths)])]
             for i in range(start - lead, start + rows)]
    flat = np.array([v for row in lists for v in row], dtype=child.to_pandas_dtype())
    bounds = np.cumsum([0] + [len(r) for r in lists])
    offsets = pa.array(bounds.astype(np.int64 if large else np.int32))
    make = pa.LargeListArray if large else pa.ListArray
    return make.from_arrays(offsets, pa.array(flat, type=child)).slice(lead)


def reference(arrays: list[pa.Array], selections: list[Any], places: list[Any] | None,
              length: int, fmt: str) -> Any:
    """Arrow's take per window, rows put in batch order, converted the general way."""
    taken = []
    for array, sel in zip(arrays, selections, strict=True):
        rows = np.arange(sel.start, sel.stop) if isinstance(sel, slice) else sel
        taken.append(array.take(pa.array(rows, pa.int64())))
    joined = pa.chunked_array(taken, type=arrays[0].type)
    if places is not None:
        order = np.empty(length, dtype=np.int64)
        order[np.concatenate(places)] = np.arange(length)
        joined = joined.take(pa.array(order, pa.int64()))
    return _convert("x", joined, fmt)  # type: ignore[arg-type]


def assert_equal(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    if isinstance(want, Ragged):
        assert np.array_equal(got.offsets, want.offsets)
        assert type(got.flat) is type(want.flat)
        assert got.flat.dtype == want.flat.dtype
        assert np.array_equal(np.asarray(got.flat), np.asarray(want.flat))
        assert not got.built
    else:
        assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
        assert np.array_equal(np.asarray(got), np.asarray(want))


@settings(max_examples=150, deadline=None)
@given(
    child=st.sampled_from(CHILDREN),
    large=st.booleans(),
    lengths=st.lists(st.integers(0, 150), min_size=1, max_size=6),
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4),
    lead=st.integers(0, 5),
    data=st.data(),
    fmt=st.sampled_from(["numpy", "torch"]),
)
def test_gathered_rows_equal_arrows_take_in_batch_order(
    child: pa.DataType, large: bool, lengths: list[int], sizes: list[int], lead: int,
    data: st.DataObject, fmt: str,
) -> None:
    arrays, selections = [], []
    start = 0
    for rows in sizes:
        arrays.append(window(start, rows, lengths, child, large, lead))
        start += rows
        if data.draw(st.booleans(), label="slice"):
            a = data.draw(st.integers(0, rows - 1), label="from")
            b = data.draw(st.integers(a + 1, rows), label="to")
            selections.append(slice(a, b))
        else:
            picks = data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=40),
                              label="picks")
            selections.append(np.array(picks, dtype=np.int64))
    counts = [s.stop - s.start if isinstance(s, slice) else len(s) for s in selections]
    length = sum(counts)
    places: list[Any] | None = None
    if len(arrays) > 1:
        spread = np.array(data.draw(st.permutations(range(length)), label="places"))
        places = np.split(spread, np.cumsum(counts)[:-1])
    elif data.draw(st.booleans(), label="identity places"):
        places = [np.arange(length, dtype=np.int64)]
    got = gathered_lists(arrays, selections, places, length, fmt)  # type: ignore[arg-type]
    want = reference(arrays, selections, places, length, fmt)
    assert_equal(got, want)
    # the batch owns its values: writable, and sharing no byte with any window
    flat = got.flat if isinstance(got, Ragged) else got
    values = np.asarray(flat)
    assert values.flags.writeable
    for array in arrays:
        assert not np.shares_memory(values, np.asarray(array.values))


def test_short_and_long_rows_from_several_windows_land_in_their_places() -> None:
    # both ways of copying (an index gather for short rows, one slice per long row)
    for length in (3, 500):
        arrays = [window(0, 10, [length, length + 1], pa.int32(), False, 2),
                  window(10, 10, [length + 2, length], pa.int32(), False, 0)]
        selections = [np.array([9, 0, 4]), np.array([1, 1, 7])]
        places = [np.array([5, 0, 2]), np.array([1, 4, 3])]
        got = take_lists(arrays, selections, places, 6)
        assert isinstance(got, Ragged)
        rows = [list(r) for r in got.rows()]
        # window 0 row 9 goes to place 5, window 1 row 1 (global 11) to places 1 and 4 ...
        globals_ = {5: 9, 0: 0, 2: 4, 1: 11, 4: 11, 3: 17}
        lens = {0: length, 1: length + 1}
        for place, i in globals_.items():
            n = (lens[i % 2] if i < 10 else {0: length + 2, 1: length}[i % 2])
            assert rows[place] == [(i * 31 + k) % 100 for k in range(n)]


@pytest.mark.parametrize("case", [
    "null list", "null value", "bool", "string", "fixed size", "mixed types", "no rows",
    "scalars", "no places",
])
def test_what_it_does_not_gather_goes_the_general_way(case: str) -> None:
    arrays = [pa.array([[1, 2], [3], [4, 5, 6]], pa.list_(pa.int32()))]
    sel = np.array([2, 0], dtype=np.int64)
    if case == "null list":
        arrays = [pa.array([[1, 2], None, [4, 5, 6]], pa.list_(pa.int32()))]
    elif case == "null value":  # even when the null is in a row not selected
        arrays = [pa.array([[1, 2], [None], [4, 5, 6]], pa.list_(pa.int32()))]
    elif case == "bool":
        arrays = [pa.array([[True], [False, True], [True]], pa.list_(pa.bool_()))]
    elif case == "string":
        arrays = [pa.array([["a"], ["b", "c"], ["d"]], pa.list_(pa.string()))]
    elif case == "fixed size":
        arrays = [pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int32(), 2))]
    elif case == "mixed types":
        arrays = [arrays[0], pa.array([[1], [2, 3]], pa.list_(pa.int64()))]
    elif case == "scalars":
        arrays = [pa.array([1, 2, 3], pa.int32())]
    if case == "no rows":
        assert take_lists(arrays, [np.array([], dtype=np.int64)], None, 0) is None
        return
    elif case == "no places":  # two windows and no say where their rows go
        arrays = [arrays[0], arrays[0]]
    selections = [sel] * len(arrays)
    places = None if len(arrays) == 1 or case == "no places" else [
        np.array([0, 2]), np.array([1, 3])]
    assert take_lists(arrays, selections, places, 2 * len(arrays)) is None


def test_uint64_beyond_int64_is_refused_for_torch_not_wrapped() -> None:
    from undertale_duck.core.rows import TensorRangeError

    array = pa.array([[1], [2**63, 1], [3]], pa.list_(pa.uint64()))
    sel = [np.array([1, 0], dtype=np.int64)]
    with pytest.raises(TensorRangeError):
        gathered_lists([array], sel, None, 2, "torch")
    got = gathered_lists([array], sel, None, 2, "numpy")
    assert isinstance(got, Ragged) and got.flat.tolist() == [2**63, 1, 1]
    unsigned = gathered_lists([pa.array([[7], [8, 9]], pa.list_(pa.uint32()))],
                              [np.array([1, 0])], None, 2, "torch")
    assert isinstance(unsigned, Ragged) and unsigned.flat.dtype == torch.int64


@pytest.mark.parametrize("windows", [1, 3])
def test_a_batch_of_more_rows_than_one_index_gather_takes_is_gathered_whole(
    windows: int,
) -> None:
    # short rows (0 to 9 values) in a batch of several blocks of lists._BLOCK rows
    from undertale_duck.core.rows import lists

    rows = 2 * lists._BLOCK + 123
    arrays = [window(k * rows, rows, [3, 0, 9, 1, 5, 7, 2], pa.int16(), False, 1)
              for k in range(windows)]
    rng = np.random.default_rng(windows)
    selections = [rng.integers(0, rows, rows + 17) for _ in arrays]
    length = sum(len(s) for s in selections)
    places = None
    if windows > 1:
        places = np.split(rng.permutation(length), np.cumsum([len(s) for s in selections])[:-1])
    got = take_lists(arrays, selections, places, length)
    assert isinstance(got, Ragged)
    assert_equal(got, reference(arrays, selections, places, length, "numpy"))
