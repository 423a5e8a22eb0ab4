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

#: Rows per index gather of short rows: its int64 index arrays stay under 4 MiB each.
_BLOCK = 8192

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
        places: For each window, the batch positions its rows go to; None when there is
            one window and its rows are the batch, in order.
        length: Rows in the batch.

    Returns:
        The values, or None for what this does not gather (other types, null lists or
        values, no rows, windows of different types): the caller's general path.
    """
    if length == 0 or not arrays or (places is None and len(arrays) > 1):
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
    if total >= _SHORT * length:  # long rows: one slice each, joined by one copy
        ends = (starts + lengths).tolist()
        which = [0] * length if source is None else source.tolist()
        flat = np.concatenate([
            values[k][a:b] for k, a, b in zip(which, starts.tolist(), ends, strict=True)
        ])
    else:
        flat = np.empty(total, dtype=values[0].dtype)
        if source is None:
            _short(flat, values[0], starts, lengths, bounds[:-1], contiguous=True)
        else:
            for k, window in enumerate(values):
                rows = np.flatnonzero(source == k)
                _short(flat, window, starts[rows], lengths[rows], bounds[rows], contiguous=False)
    if (lengths == lengths[0]).all():
        return flat.reshape(length, int(lengths[0]))
    return Ragged(flat, bounds)


def _short(
    out: np.ndarray[Any, Any],
    values: np.ndarray[Any, Any],
    starts: np.ndarray[Any, np.dtype[np.int64]],
    lengths: np.ndarray[Any, np.dtype[np.int64]],
    at: np.ndarray[Any, np.dtype[np.int64]],
    *,
    contiguous: bool,
) -> None:
    """Copy row ``k`` (``lengths[k]`` values from ``starts[k]``) to ``out[at[k]:]``.

    One index gather per block of :data:`_BLOCK` rows, so the index arrays stay small
    whatever the batch; ``contiguous``: each row begins where the one before it ends.
    """
    for a in range(0, len(starts), _BLOCK):
        count = lengths[a:a + _BLOCK]
        ends = np.cumsum(count)
        if not ends[-1]:  # every row of the block empty (a block has one row or more)
            continue
        # value j of the block goes from its row's start + (j - where its row begins)
        step = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - count, count)
        taken = values[np.repeat(starts[a:a + _BLOCK], count) + step]
        if contiguous:
            first = int(at[a])
            out[first:first + len(taken)] = taken
        else:
            out[np.repeat(at[a:a + _BLOCK], count) + step] = taken
