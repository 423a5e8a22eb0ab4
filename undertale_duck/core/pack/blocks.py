"""Building blocks from windows: where each block's pieces lie, and gathering them at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ...common.arrays import numpy_of
from .plan import BlockPlan, Int64Array, list_lengths
from .spec import Pack

Array = np.ndarray[Any, Any]


def stream_starts(table: pa.Table, spec: Pack) -> Int64Array:
    """Where each document of a window starts in the window's stream, and the total at the end.

    The stream is the window's documents laid end to end, each followed by ``eod`` when set.
    """
    step = list_lengths(table.column(spec.column))
    if spec.eod is not None:
        step = step + 1  # a new array: a large list's lengths are Arrow's, read-only
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
    heads = np.concatenate([[0], cuts]).astype(np.int64) if len(order) else cuts
    return Pieces(
        sorted_windows[heads].tolist(),
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
    # each block built once, in ascending order (a block asked for twice, as an upsampled
    # mixture may, would break the contiguous fill below); rows put back at the end
    wanted, back = np.unique(blocks, return_inverse=True)
    n, size = len(wanted), spec.length
    out = Outputs(
        [
            np.full((n, size), spec.pad if k == 0 else spec.fill, dtype=dtype)
            for k, dtype in enumerate(dtypes)
        ],
        np.zeros((n, size), dtype=np.int64) if spec.position_ids else None,
        np.zeros((n, size), dtype=np.int64) if spec.segment_ids else None,
        np.zeros(n, dtype=np.int64),
    )
    # built in ascending block order, where the pieces of each window fill one contiguous
    # range of the flattened arrays; rows are put in the order asked for at the end
    found = pieces(plan, wanted)
    for j, group in zip(found.windows, found.groups, strict=True):
        table, starts = window(j)
        sources = [_list_array(table.column(name)) for name in spec.inputs]
        cut = _segments_of(starts, found.starts[group], found.stops[group])
        first = int(found.rows[group[0]] * size + found.places[group[0]])
        _copy_tokens(spec, cut, starts, sources, first, found.rows[group], out)
    result = [out.columns[0]]
    if out.positions is not None:
        result.append(out.positions)
    if out.segments is not None:
        result.append(out.segments)
    result += out.columns[1:]
    if n != len(blocks) or bool((blocks[1:] < blocks[:-1]).any()):
        result = [a[back.reshape(-1)] for a in result]
    return result


@dataclass(frozen=True)
class Outputs:
    """The arrays of a batch being built (``[n, length]`` each).

    Attributes:
        columns: The packed columns (tokens first).
        positions: ``position_ids``, or None when not asked for.
        segments: ``segment_ids``, or None when not asked for.
        seen: For each block, the document segments already copied into it (from earlier
            windows), so that segment ids continue across windows.
    """

    columns: list[Array]
    positions: Int64Array | None
    segments: Int64Array | None
    seen: Int64Array


@dataclass(frozen=True)
class Segments:
    """Pieces of one window's stream cut at its documents' bounds.

    Attributes:
        pieces: The piece (an index into the group's pieces) of each segment.
        documents: The window's document of each segment.
        starts: Each segment's first stream position in the window.
        stops: Each segment's end stream position (exclusive).
    """

    pieces: Int64Array
    documents: Int64Array
    starts: Int64Array
    stops: Int64Array


def _segments_of(starts: Int64Array, first: Int64Array, stop: Int64Array) -> Segments:
    """The documents each piece ``[first, stop)`` of a window's stream covers, and where."""
    low = np.searchsorted(starts, first, side="right") - 1
    high = np.searchsorted(starts, stop - 1, side="right") - 1
    count = high - low + 1
    piece = np.repeat(np.arange(len(first), dtype=np.int64), count)
    document = np.repeat(low, count) + (
        np.arange(len(piece), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    )
    a = np.maximum(starts[document], first[piece])
    b = np.minimum(starts[document + 1], stop[piece])
    keep = b > a  # documents with no token (empty, without eod) inside a piece
    return Segments(piece[keep], document[keep], a[keep], b[keep])


def _copy_tokens(
    spec: Pack,
    cut: Segments,
    starts: Int64Array,
    sources: Sequence[pa.ListArray | pa.LargeListArray],
    first: int,
    rows: Int64Array,
    out: Outputs,
) -> None:
    """Copy the segments of one window into the batch with numpy gathers over every token.

    The segments (of blocks in ascending order) fill the flattened arrays from ``first``
    on without a gap, so every write is one contiguous slice; an ``eod`` is written per
    segment afterwards. Faster here than a memory copy per segment in a Python loop even
    for documents of hundreds of tokens (NOTES.md).

    Args:
        spec: The packing spec.
        cut: The window's segments.
        starts: The window's stream starts.
        sources: The window's packed list columns.
        first: Where the window's first segment starts in the flattened batch.
        rows: The batch row of each of the group's pieces.
        out: The batch's arrays.
    """
    lengths = cut.stops - cut.starts
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    span = slice(first, first + total)
    ramp = np.arange(total, dtype=np.int64)
    before = ends - lengths  # each segment's place among the window's tokens
    begin = cut.starts - starts[cut.documents]  # its first position in its document
    for k, array in enumerate(sources):
        values = numpy_of(array.values)
        column = out.columns[k].reshape(-1)
        if len(values):
            at = np.repeat(numpy_of(array.offsets)[cut.documents] + begin - before, lengths)
            at += ramp
            np.take(values, at, mode="clip", out=column[span])  # an eod's place: below
        if spec.eod is not None:  # a segment reaching its document's end ends with eod
            column[first + (ends - 1)[cut.stops == starts[cut.documents + 1]]] = (
                spec.eod if k == 0 else spec.fill
            )
    if out.positions is not None:
        positions = out.positions.reshape(-1)[span]
        np.add(np.repeat(begin - before, lengths), ramp, out=positions)
    if out.segments is not None:
        count = np.bincount(cut.pieces, minlength=len(rows))
        ordinal = np.arange(len(cut.pieces), dtype=np.int64) - (np.cumsum(count) - count)[
            cut.pieces
        ]
        number = out.seen[rows][cut.pieces] + ordinal + 1
        out.segments.reshape(-1)[span] = np.repeat(number, lengths)
        out.seen[rows] += count


def _list_array(column: pa.ChunkedArray) -> pa.ListArray | pa.LargeListArray:
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if column.num_chunks == 0:
        array = pa.nulls(0, column.type)  # pa.array([]) would import pandas
    return array
