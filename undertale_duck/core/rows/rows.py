"""Turn window tables into rows: exact ``as_py()`` dicts, or column-wise numpy/torch batches."""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import torch

from ...common.arrays import int64_array, numpy_of, pylist_of
from .lists import Selection, take_lists
from .ragged import Ragged
from .row_batch import Row, RowBatch

__all__ = [
    "ROW_FORMATS", "ConversionFailure", "Format", "Selection", "TensorRangeError", "gathered_lists",
    "merge", "select", "to_tensor"
]

#: What ``ParquetDataset(format=...)`` accepts.
Format = Literal["python", "numpy", "torch"]
ROW_FORMATS: tuple[str, ...] = ("python", "numpy", "torch")

_NUMERIC = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)

#: Smallest unsigned 64-bit value torch's int64 cannot hold.
_INT64_OVERFLOW = 1 << 63


class ConversionFailure(Exception):
    """A value of a window cannot be returned in the requested format.

    Raised by :func:`select`; the dataset turns it into an ``OutOfRangeError`` naming the
    shard and the global row.

    Attributes:
        column: The column holding the value.
        row: The value's position among the rows selected.
        reason: What is wrong, for the message.
    """

    def __init__(self, column: str, row: int, reason: str) -> None:
        super().__init__(f"column {column!r}: {reason}")
        self.column = column
        self.row = row
        self.reason = reason


class TensorRangeError(ValueError):
    """Unsigned 64-bit integers of 2**63 or more, which no torch integer type holds."""


def _is_numeric(dtype: pa.DataType) -> bool:
    return any(check(dtype) for check in _NUMERIC)


def _part(data: pa.Table | pa.ChunkedArray, sel: Selection) -> Any:
    if isinstance(sel, slice):
        return data.slice(sel.start, sel.stop - sel.start)
    return data.take(int64_array(sel))


def select(table: pa.Table, sel: Selection, fmt: Format) -> MutableSequence[Row]:
    """Rows ``sel`` (a slice or local indices) of a window, converted column by column.

    Raises:
        ConversionFailure: If a value has no Python or torch counterpart (a date beyond
            ``datetime``'s range, an unsigned 64-bit integer of 2**63 or more for torch).
    """
    names = table.column_names
    if fmt == "python":
        part = _part(table, sel)
        columns = [
            _pylist(name, part.column(i)) for i, name in enumerate(part.column_names)
        ]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
    whole: dict[str, Any] = {}
    values: dict[str, list[Any] | Ragged] = {}
    length = sel.stop - sel.start if isinstance(sel, slice) else len(sel)
    for name, chunked in zip(names, table.columns, strict=True):
        try:
            converted = _gather(chunked, sel, fmt)
            if converted is None:
                converted = _convert(name, _part(chunked, sel), fmt)
        except TensorRangeError:
            raise ConversionFailure(
                name,
                _first_too_large(_part(chunked, sel)),
                "holds an unsigned 64-bit integer of 2**63 or more, which no torch integer "
                'type holds (format="torch" widens unsigned integers to int64); use '
                'format="numpy" (uint64 arrays) or format="python"',
            ) from None
        if isinstance(converted, list | Ragged):
            values[name] = converted
        else:
            whole[name] = converted
    return RowBatch(list(names), length, whole, values)


def _gather(chunked: pa.ChunkedArray, sel: Selection, fmt: Format) -> Any | None:
    """Numbers and equal-length lists of numbers straight from the window's buffers, or None.

    Arrow's ``take`` on list columns is slow (it takes every list element one by one); a
    numpy gather on the window's values copies just the selected rows.
    """
    if chunked.num_chunks != 1:
        return None
    array = chunked.chunk(0)
    dtype = array.type
    if array.null_count or pa.types.is_boolean(dtype):
        return None
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        data = np.array(numpy_of(array)[sel], copy=True)
        return to_tensor(data) if fmt == "torch" else data
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return None
    child = dtype.value_type
    if not (pa.types.is_integer(child) or pa.types.is_floating(child)):
        return None
    offsets = numpy_of(array.offsets)
    if isinstance(sel, slice):  # only the selected rows' lengths matter
        bounds = offsets[sel.start:sel.stop + 1]
        if len(bounds) < 2:
            return None
        width = int(bounds[1] - bounds[0])
        if not (np.diff(bounds) == width).all():
            return None
        flat = array.values.slice(int(bounds[0]), int(bounds[-1] - bounds[0]))
        if flat.null_count:
            return None
        matrix = numpy_of(flat).reshape(len(bounds) - 1, width)
        data = np.array(matrix, copy=True)
        return to_tensor(data) if fmt == "torch" else data
    if len(sel) == 0 or array.values.null_count:
        return None
    # Row k of a (rows, width) view of the values is right if row k starts at base + k*width
    # and holds width values: checked for the selected rows only (O(batch), not O(window)).
    base = int(offsets[0])
    starts = offsets[sel]
    width = int(offsets[sel[0] + 1] - starts[0])
    rows = len(array)
    if (
        int(offsets[-1]) - base != rows * width
        or not (offsets[sel + 1] - starts == width).all()
        or not (starts - base == sel * width).all()
    ):
        return gathered_lists([array], [sel], None, len(sel), fmt)
    values = numpy_of(array.values)[base:base + rows * width]
    data = np.array(values.reshape(rows, width)[sel], copy=True)
    return to_tensor(data) if fmt == "torch" else data


def gathered_lists(
    arrays: Sequence[pa.Array],
    selections: Sequence[Selection],
    places: Sequence[np.ndarray[Any, np.dtype[np.int64]]] | None,
    length: int,
    fmt: Format,
) -> Any | None:
    """:func:`.lists.take_lists` in ``fmt``: what :func:`_convert` makes of the taken rows.

    Raises:
        TensorRangeError: For ``"torch"``, if a uint64 value is 2**63 or more.
    """
    taken = take_lists(arrays, selections, places, length)
    if taken is None or fmt != "torch":
        return taken
    if isinstance(taken, Ragged):
        return Ragged(to_tensor(taken.flat), taken.offsets)
    return to_tensor(taken)


def merge(
    parts: list[MutableSequence[Row]], back: np.ndarray[Any, np.dtype[np.int64]]
) -> MutableSequence[Row]:
    """Join per-window rows (in window order) and put them back in request order."""
    if not all(isinstance(p, RowBatch) for p in parts):
        rows = [r for p in parts for r in p]
        return [rows[k] for k in back.tolist()]
    batches: list[RowBatch] = [p for p in parts if isinstance(p, RowBatch)]
    names = batches[0].keys()
    whole: dict[str, Any] = {}
    values: dict[str, list[Any] | Ragged] = {}
    for name in names:
        pieces: list[Any] = [b.batched(name) for b in batches]
        first = pieces[0]
        if first is not None and all(
            p is not None and type(p) is type(first) and p.shape[1:] == first.shape[1:]
            and p.dtype == first.dtype for p in pieces
        ):
            if isinstance(first, torch.Tensor):
                whole[name] = torch.cat(pieces)[torch.from_numpy(back)]
            else:
                whole[name] = np.concatenate(pieces)[back]
        else:
            column = [v for b in batches for v in b.column(name)]
            values[name] = [column[k] for k in back.tolist()]
    return RowBatch(names, len(back), whole, values)


def _convert(name: str, chunked: pa.ChunkedArray, fmt: Format) -> Any:
    """A column as one array/tensor (equal-shape numbers) or as a list of per-row values."""
    dtype = chunked.type
    if _is_numeric(dtype):
        return _scalars(_single(chunked), fmt)
    if (
        pa.types.is_list(dtype) or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    ) and _is_numeric(dtype.value_type):
        return _lists(_single(chunked), fmt)
    return _pylist(name, chunked)


def _pylist(name: str, column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """``column.to_pylist()``, or :class:`ConversionFailure` naming the first bad row."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out: list[Any] = []
    for chunk in chunks:  # numbers and lists of numbers through numpy (same values, faster)
        got = pylist_of(chunk)
        if got is None:
            break
        if len(chunks) == 1:
            return got
        out += got
    else:
        return out
    try:
        return list(column.to_pylist())
    except (OverflowError, ValueError, pa.ArrowException) as exc:
        error = exc
    for k in range(len(column)):
        try:
            column[k].as_py()
        except (OverflowError, ValueError, pa.ArrowException) as exc:
            raise ConversionFailure(
                name,
                k,
                f"holds a {column.type} value with no Python counterpart ({exc}); read it "
                "with ds.sql (for example CAST(... AS VARCHAR)) or leave the column out "
                "with columns=[...]",
            ) from None
    raise ConversionFailure(name, 0, f"cannot be converted to Python values ({error})")


def _first_too_large(part: pa.ChunkedArray | pa.Array) -> int:
    """The first row of ``part`` holding an integer of 2**63 or more (0 if none is found)."""
    def large(value: Any) -> bool:
        if isinstance(value, list):
            return any(large(v) for v in value)
        return isinstance(value, int) and value >= _INT64_OVERFLOW

    for k, value in enumerate(part.to_pylist()):
        if large(value):
            return k
    return 0


def _single(chunked: pa.ChunkedArray) -> pa.Array:
    return chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()


def to_tensor(array: np.ndarray[Any, Any]) -> torch.Tensor:
    """A numpy array as a tensor; unsigned 16/32/64-bit integers widened to int64.

    torch lacks general unsigned 16/32/64-bit support, so those become int64, which holds
    every uint16 and uint32 value; a uint64 value of 2**63 or more would wrap to a negative
    number, so it is refused instead.

    Raises:
        TensorRangeError: If a uint64 value is 2**63 or more.
    """
    if array.dtype.kind == "u" and array.dtype.itemsize > 1:
        if array.dtype.itemsize == 8 and array.size and int(array.max()) >= _INT64_OVERFLOW:
            raise TensorRangeError("unsigned 64-bit integers of 2**63 or more")
        array = array.astype(np.int64)
    return torch.from_numpy(array)


def _with_nulls(values: list[Any], array: pa.Array) -> list[Any]:
    valid = numpy_of(array.is_valid())
    for k in np.flatnonzero(~valid).tolist():
        values[k] = None
    return values


def _scalars(array: pa.Array, fmt: Format) -> Any:
    """Numbers as one array/tensor; with nulls, a list of scalars and None."""
    nulls = array.null_count
    data = np.array(numpy_of(array, zero_nulls=True), copy=True)  # nulls: 0 (False) there
    whole: Any = to_tensor(data) if fmt == "torch" else data
    if not nulls:
        return whole
    values = list(whole.unbind(0)) if fmt == "torch" else list(data)
    return _with_nulls(values, array)


def _lists(array: pa.Array, fmt: Format) -> Any:
    """Lists of numbers: one 2-d array/tensor if equal lengths, else 1-d ones per row.

    The type of each row's value depends on that value alone, never on the other rows of
    the batch: a list of numbers is a 1-d array (tensor); a list holding a null element is
    its ``as_py()`` list (numpy and torch have no null); a null list is None. Unequal lists
    without nulls come as a :class:`~.ragged.Ragged` (their values end to end, split into
    rows only when one is asked for: ``collate`` pads them in one step).
    """
    n = len(array)
    if pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * size
    else:
        offsets = numpy_of(array.offsets).astype(np.int64, copy=False)
    first, last = int(offsets[0]), int(offsets[-1])
    flat = array.values.slice(first, last - first)
    holes = None  # rows whose list holds a null element
    if flat.null_count:
        missing = ~numpy_of(flat.is_valid())
        counts = np.concatenate(([0], np.cumsum(missing, dtype=np.int64)))
        local = offsets - first
        holes = np.flatnonzero(counts[local[1:]] - counts[local[:-1]])
    data = np.array(numpy_of(flat, zero_nulls=True), copy=True)
    lengths = np.diff(offsets)
    values: list[Any]
    if n and (lengths == lengths[0]).all():
        matrix = data.reshape(n, int(lengths[0]))
        whole: Any = to_tensor(matrix) if fmt == "torch" else matrix
        if not array.null_count and holes is None:
            return whole
        values = list(whole.unbind(0)) if fmt == "torch" else list(matrix)
    elif n:
        ragged = Ragged(to_tensor(data) if fmt == "torch" else data, offsets - first)
        if not array.null_count and holes is None:
            return ragged
        values = ragged.rows()
    else:
        values = []
    if holes is not None:
        for k in holes.tolist():
            values[k] = array[k].as_py()
    return _with_nulls(values, array) if array.null_count else values
