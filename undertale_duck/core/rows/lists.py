"""Gather rows of list-of-number columns from windows' buffers straight into one batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ...common.arrays import numpy_of
from .ragged import Ragged

__all__ = ["take_lists"]

#: Below this many values per selected row, one vectorised index gather beats a copy per
#: row (about 0.3 us of Python per row; measured over 2 to 2,048 values per row).
_SHORT = 64

Selection = slice | np.ndarray[Any, np.dtype[np.int64]]


def _gatherable(dtype: pa.DataType) -> bool:
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return False
    child = dtype.value_type
    return bool(pa.types.is_integer(child) or pa.types.is_floating(child))


def take_lists(
    arrays: Sequence[pa.Array],
    selections: Sequence[Selection],
    places: Sequence[np.ndarray[Any, np.dtype[np.int64]]] | None,
    length: int,
) -> np.ndarray[Any, Any] | Ragged | None:
    """Rows of a list-of-numbers column, from one or more windows, in batch order.

    Arrow's ``take`` of a list column copies element by element (2 us per row of 520
    int32 values, 18 us at 2,048) and the conversion copies the values again; this copies
    each selected row's values once, from the windows' buffers into the batch's. The result
    is what :func:`.rows._lists` makes of the taken rows: one 2-d array if every selected
    list is as long, else a :class:`Ragged` (numpy; the caller makes tensors of it).

    Args:
        arrays: Each window's column (one chunk each), all of one list type.
        selections: The local rows taken from each window (a slice or an index array).
        places: For each window, the batch positions its rows go to; None for one window.
        length: Rows in the batch.

    Returns:
        The values, or None for what this does not gather (other types, null lists or
        values, no rows, windows of different types): the caller's general path.
    """
    if length == 0 or not arrays:
        return None
    dtype = arrays[0].type
    if not _gatherable(dtype):
        return None
    starts = np.empty(length, dtype=np.int64)
    lengths = np.empty(length, dtype=np.int64)
    values = []
    source = np.zeros(length, dtype=np.int64) if len(arrays) > 1 else None
    for k, (array, sel) in enumerate(zip(arrays, selections, strict=True)):
        if array.type != dtype or array.null_count or array.values.null_count:
            return None
        offsets = numpy_of(array.offsets)
        if isinstance(sel, slice):
            first = offsets[sel.start:sel.stop]
            last = offsets[sel.start + 1:sel.stop + 1]
        else:
            first = offsets[sel]
            last = offsets[sel + 1]
        place: Any = slice(None) if places is None else places[k]
        starts[place] = first
        lengths[place] = last - first
        if source is not None:
            source[place] = k
        values.append(numpy_of(array.values))
    bounds = np.zeros(length + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    total = int(bounds[-1])
    if source is None:
        flat = _copy(values[0], starts, lengths, bounds, total)
    elif total < _SHORT * length:
        flat = np.empty(total, dtype=values[0].dtype)
        for k, window in enumerate(values):
            rows = np.flatnonzero(source == k)
            at = bounds[rows]
            count = lengths[rows]
            ends = np.cumsum(count)
            # value j of the window's rows (in batch order) goes from start + (j - begin)
            # to at + (j - begin), begin being where its row begins among them
            shift = np.repeat(ends - count, count)
            step = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - shift
            flat[np.repeat(at, count) + step] = window[np.repeat(starts[rows], count) + step]
    else:
        pieces = zip(source.tolist(), starts.tolist(), (starts + lengths).tolist(), strict=True)
        flat = np.concatenate([values[k][a:b] for k, a, b in pieces])
    if (lengths == lengths[0]).all():
        return flat.reshape(length, int(lengths[0]))
    return Ragged(flat, bounds)


def _copy(
    values: np.ndarray[Any, Any],
    starts: np.ndarray[Any, np.dtype[np.int64]],
    lengths: np.ndarray[Any, np.dtype[np.int64]],
    bounds: np.ndarray[Any, np.dtype[np.int64]],
    total: int,
) -> np.ndarray[Any, Any]:
    """One window's selected rows end to end (a new array the batch owns)."""
    length = len(starts)
    if total < _SHORT * length:
        step = np.arange(total, dtype=np.int64) - np.repeat(bounds[:-1], lengths)
        return values[np.repeat(starts, lengths) + step]
    ends = (starts + lengths).tolist()
    return np.concatenate([values[a:b] for a, b in zip(starts.tolist(), ends, strict=True)])
