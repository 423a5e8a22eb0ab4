"""Gather a batch's rows column-wise from window tables, through numpy views kept per window."""

from __future__ import annotations

import functools
import weakref
from collections.abc import MutableSequence, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa

from .rows import Format, Row, RowBatch, Selection, _to_tensor, merge, select

View = np.ndarray[Any, Any]

#: Views of the windows in use, by ``id(table)``: each entry is dropped when its table is
#: garbage collected, so a view never keeps an evicted window's buffers alive.
_VIEWS: dict[int, tuple[weakref.ref[pa.Table], tuple[View | None, ...]]] = {}


def _forget(key: int, ref: weakref.ref[pa.Table]) -> None:
    entry = _VIEWS.get(key)
    if entry is not None and entry[0] is ref:
        del _VIEWS[key]


def _numeric(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_integer(dtype) or pa.types.is_floating(dtype))


def _view(array: pa.Array) -> View | None:
    """A zero-copy numpy view of a whole column: 1-d numbers, or 2-d equal-length lists.

    None for anything else (nulls, booleans, strings, nested or ragged lists), which the
    batch then converts the general way (:func:`rows.select`).
    """
    n = len(array)
    dtype = array.type
    if n == 0 or array.null_count:
        return None
    view: View
    if _numeric(dtype):
        view = array.to_numpy(zero_copy_only=True)
        return view
    if pa.types.is_fixed_size_list(dtype) and _numeric(dtype.value_type):
        flat = array.flatten()
        if flat.null_count or dtype.list_size == 0:
            return None
        view = flat.to_numpy(zero_copy_only=True).reshape(n, dtype.list_size)
        return view
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return None
    if not _numeric(dtype.value_type):
        return None
    offsets = array.offsets.to_numpy()
    base = int(offsets[0])
    width = int(offsets[1]) - base
    if width == 0 or int(offsets[-1]) - base != n * width:
        return None
    if not (np.diff(offsets) == width).all():
        return None
    values = array.values.slice(base, n * width)
    if values.null_count:
        return None
    view = values.to_numpy(zero_copy_only=True).reshape(n, width)
    return view


def views(table: pa.Table) -> tuple[View | None, ...]:
    """Return the numpy views of a window's columns (built once per table, then reused).

    Args:
        table: A window, one chunk per column.

    Returns:
        One view per column, None where the column has none.
    """
    key = id(table)
    entry = _VIEWS.get(key)
    if entry is not None and entry[0]() is table:
        return entry[1]
    built = tuple(
        _view(column.chunk(0)) if column.num_chunks == 1 else None for column in table.columns
    )
    ref = weakref.ref(table, functools.partial(_forget, key))
    _VIEWS[key] = (ref, built)
    return built


def _pick(view: View, sel: Selection) -> View:
    if isinstance(sel, slice):
        return np.array(view[sel], copy=True)
    return view.take(sel, axis=0)


def gather(
    tables: Sequence[pa.Table],
    selections: Sequence[Selection],
    places: Sequence[np.ndarray[Any, np.dtype[np.int64]]] | None,
    length: int,
    fmt: Format,
) -> MutableSequence[Row]:
    """Build one batch from rows of several windows, column by column.

    Columns every window has a view of, with one dtype and row shape, are copied straight
    into one array (a slice or a ``take`` per window); the others are converted per window
    by :func:`rows.select` and merged. Values equal what :func:`rows.select` gives.

    Args:
        tables: The windows, each touched by the batch.
        selections: The local rows taken from each window (a slice or an index array).
        places: For each window, the batch positions its rows go to; None when there is
            one window (its rows are the batch, in order).
        length: Rows in the batch.
        fmt: ``"numpy"`` or ``"torch"``.

    Returns:
        A :class:`RowBatch` of the rows in batch order.
    """
    names = tables[0].column_names
    whole: dict[str, Any] = {}
    values: dict[str, list[Any]] = {}
    if places is None:  # one window: the common sequential batch, kept short
        sel = selections[0]
        found = views(tables[0])
        if not any(v is None for v in found):
            torch = fmt == "torch"
            for name, view in zip(names, found, strict=True):
                out = _pick(view, sel)  # type: ignore[arg-type]
                whole[name] = _to_tensor(out) if torch else out
            return RowBatch(names, length, whole, values)
    per_table = [views(t) for t in tables]
    slow: list[int] = []
    for c, name in enumerate(names):
        column = [v[c] for v in per_table]
        first = column[0]
        if first is None or not all(
            v is not None and v.dtype == first.dtype and v.shape[1:] == first.shape[1:]
            for v in column
        ):
            slow.append(c)
            continue
        cols = cast(list[View], column)
        if places is None:
            out = _pick(first, selections[0])
        else:
            out = np.empty((length, *first.shape[1:]), dtype=first.dtype)
            for view, sel, place in zip(cols, selections, places, strict=True):
                out[place] = view[sel]
        whole[name] = _to_tensor(out) if fmt == "torch" else out
    if slow:
        parts = [
            select(t.select(slow), sel, fmt) for t, sel in zip(tables, selections, strict=True)
        ]
        if places is None:
            merged = parts[0]
        else:
            back = np.empty(length, dtype=np.int64)
            back[np.concatenate(places)] = np.arange(length, dtype=np.int64)
            merged = merge(parts, back)
        assert isinstance(merged, RowBatch)  # the numpy and torch formats always give one
        for c in slow:
            name = names[c]
            batched = merged.batched(name)
            if batched is not None:
                whole[name] = batched
            else:
                values[name] = merged.column(name)
    return RowBatch(names, length, whole, values)
