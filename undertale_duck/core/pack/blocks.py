"""Building blocks from windows: where each block's pieces lie, and gathering them at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .plan import BlockPlan, Int64Array, list_lengths
from .spec import Pack

Array = np.ndarray[Any, Any]


def stream_starts(table: pa.Table, spec: Pack) -> Int64Array:
    """Where each document of a window starts in the window's stream, and the total at the end.

    The stream is the window's documents laid end to end, each followed by ``eod`` when set.
    """
    step = list_lengths(table.column(spec.column))
    if spec.eod is not None:
        step += 1
    starts = np.zeros(len(step) + 1, dtype=np.int64)
    np.cumsum(step, out=starts[1:])
    return starts


@dataclass(frozen=True)
class Pieces:
    """The pieces of a batch of blocks: one per (block, window) pair, grouped by window.

    Attributes:
        windows: The windows read, ascending, once each.
        groups: For each window, the indices into the arrays below of its pieces.
        rows: The batch row (block) of each piece.
        starts: Each piece's first stream position in its window.
        stops: Each piece's end stream position (exclusive) in its window.
        places: Each piece's first position in its block.
    """

    windows: list[int]
    groups: list[Int64Array]
    rows: Int64Array
    starts: Int64Array
    stops: Int64Array
    places: Int64Array


def pieces(plan: BlockPlan, blocks: Int64Array) -> Pieces:
    """Where the given blocks lie: their pieces in each window, found without a Python loop."""
    size = plan.spec.length
    a = blocks * size
    b = np.minimum(a + size, plan.total)
    first = np.searchsorted(plan.starts, a, side="right") - 1
    last = np.searchsorted(plan.starts, b - 1, side="right") - 1
    count = last - first + 1
    rows = np.repeat(np.arange(len(blocks), dtype=np.int64), count)
    begin = np.repeat(np.cumsum(count) - count, count)
    window = np.repeat(first, count) + (np.arange(len(rows), dtype=np.int64) - begin)
    lo = plan.starts[window]
    hi = plan.starts[window + 1]
    ra = a[rows]
    start = np.maximum(ra, lo)
    stop = np.minimum(b[rows], hi)
    keep = stop > start  # windows without tokens inside a block
    rows, window, start, stop, lo, ra = (x[keep] for x in (rows, window, start, stop, lo, ra))
    order = np.argsort(window, kind="stable")
    sorted_windows = window[order]
    cuts = np.flatnonzero(np.diff(sorted_windows)) + 1
    return Pieces(
        np.unique(sorted_windows).tolist(),
        np.split(order, cuts) if len(order) else [],
        rows,
        start - lo,
        stop - lo,
        start - ra,
    )


def gather(
    plan: BlockPlan,
    blocks: Int64Array,
    window: Callable[[int], tuple[pa.Table, Int64Array]],
    offsets: Sequence[int],
    dtypes: Sequence[np.dtype[Any]],
) -> list[Array]:
    """Blocks as ``[len(blocks), length]`` arrays, each window they span read once.

    Args:
        plan: The block plan.
        blocks: Block indices (in range).
        window: A window's table and its stream starts (:func:`stream_starts`).
        offsets: The documents' row index of each window's first row.
        dtypes: The packed columns' value types (tokens first).

    Returns:
        The arrays in ``spec.outputs`` order.
    """
    spec = plan.spec
    n, size = len(blocks), spec.length
    columns = [
        np.full((n, size), spec.pad if k == 0 else spec.fill, dtype=dtype)
        for k, dtype in enumerate(dtypes)
    ]
    positions = np.zeros((n, size), dtype=np.int64)
    documents = np.full((n, size), -1, dtype=np.int64)
    found = pieces(plan, blocks)
    eod = 0 if spec.eod is None else 1
    for j, group in zip(found.windows, found.groups, strict=True):
        table, starts = window(j)
        lengths = found.stops[group] - found.starts[group]
        shift = np.repeat(np.cumsum(lengths) - lengths, lengths)
        within = np.arange(int(lengths.sum()), dtype=np.int64) - shift
        where = np.repeat(found.starts[group], lengths) + within
        flat = np.repeat(found.rows[group] * size + found.places[group], lengths) + within
        document = np.searchsorted(starts, where, side="right") - 1
        position = where - starts[document]
        end = position >= (starts[document + 1] - starts[document] - eod) if eod else None
        for k, name in enumerate(spec.inputs):
            array = _list_array(table.column(name))
            values = array.values.to_numpy(zero_copy_only=False)
            at = np.asarray(array.offsets)[document] + position  # int32 or int64 offsets
            if end is not None:
                at[end] = 0
                taken = values[at] if len(values) else np.zeros(len(at), dtype=dtypes[k])
                taken[end] = spec.eod if k == 0 else spec.fill
            else:
                taken = values[at]
            columns[k].reshape(-1)[flat] = taken
        positions.reshape(-1)[flat] = position
        documents.reshape(-1)[flat] = document + offsets[j]
    out = [columns[0]]
    if spec.position_ids:
        out.append(positions)
    if spec.segment_ids:
        out.append(segments(documents))
    return out + columns[1:]


def segments(documents: Int64Array) -> Int64Array:
    """Each token's document number within its block, from 1; 0 where ``documents`` is -1."""
    real = documents >= 0
    change = np.ones(documents.shape, dtype=bool)
    change[:, 1:] = documents[:, 1:] != documents[:, :-1]
    out = np.cumsum(change & real, axis=1, dtype=np.int64)
    out[~real] = 0
    return out


def _list_array(column: pa.ChunkedArray) -> pa.ListArray | pa.LargeListArray:
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if column.num_chunks == 0:
        array = pa.array([], column.type)
    return array
