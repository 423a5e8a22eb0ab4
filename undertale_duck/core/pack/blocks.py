"""Cutting blocks out of windows: one window's documents as a token stream, and block assembly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .plan import Int64Array, list_lengths
from .spec import Pack

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Stream:
    """One window's documents laid end to end (each followed by ``eod`` when set).

    Built from the window's Arrow list columns without copying their values: stream
    position ``p`` is token ``p - starts[d]`` of document ``d`` (or its ``eod``).

    Attributes:
        starts: Stream position of each document's first token, and the total at the end.
        lengths: Each document's token count (0 for a null list).
        offsets: For each packed column, where each document's values start in ``values``.
        values: For each packed column, its values (all documents of the window).
    """

    starts: Int64Array
    lengths: Int64Array
    offsets: list[Int64Array]
    values: list[Array]


def stream_of(table: pa.Table, spec: Pack) -> Stream:
    """The stream of one window (the table holds at least the packed columns)."""
    offsets = []
    values = []
    lengths = list_lengths(table.column(spec.column))
    for name in spec.inputs:
        column = table.column(name)
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        if not isinstance(array, pa.ListArray | pa.LargeListArray):
            array = array.cast(pa.list_(array.type.value_type))  # e.g. an empty chunked array
        offsets.append(np.asarray(array.offsets.to_numpy(), dtype=np.int64)[:-1])
        values.append(array.values.to_numpy(zero_copy_only=False))
    step = lengths + (0 if spec.eod is None else 1)
    starts = np.zeros(len(step) + 1, dtype=np.int64)
    np.cumsum(step, out=starts[1:])
    return Stream(starts, lengths, offsets, values)


@dataclass(frozen=True)
class Piece:
    """Part of a block cut from one window's stream.

    Attributes:
        columns: The packed columns' values (tokens first, then ``alongside``).
        positions: Each token's position in its document.
        documents: Each token's document, as a row index of the documents.
    """

    columns: list[Array]
    positions: Int64Array
    documents: Int64Array


def cut(stream: Stream, start: int, stop: int, first_document: int, spec: Pack) -> Piece:
    """Stream positions ``[start, stop)`` of one window.

    Args:
        stream: The window's stream.
        start: First stream position.
        stop: End stream position (exclusive).
        first_document: The row index (in the documents) of the window's first document.
        spec: The packing spec.

    Returns:
        The piece.
    """
    where = np.arange(start, stop, dtype=np.int64)
    document = np.searchsorted(stream.starts, where, side="right") - 1
    position = where - stream.starts[document]
    columns = []
    if spec.eod is None:
        for offsets, values in zip(stream.offsets, stream.values, strict=True):
            columns.append(values[offsets[document] + position])
    else:
        end = position >= stream.lengths[document]
        for k, (offsets, values) in enumerate(zip(stream.offsets, stream.values, strict=True)):
            at = offsets[document] + position
            at[end] = 0
            out = values[at] if len(values) else np.zeros(len(at), dtype=values.dtype)
            out[end] = spec.eod if k == 0 else spec.fill
            columns.append(out)
    return Piece(columns, position, document + first_document)


def assemble(pieces: Sequence[Piece], spec: Pack, dtypes: Sequence[np.dtype[Any]]) -> list[Array]:
    """One block from its pieces, padded to ``spec.length`` when it is the short last one.

    Args:
        pieces: The block's pieces in stream order.
        spec: The packing spec.
        dtypes: The packed columns' value types (tokens first).

    Returns:
        The block's arrays in ``spec.outputs`` order.
    """
    size = spec.length
    real = sum(len(p.positions) for p in pieces)
    columns = []
    for k, dtype in enumerate(dtypes):
        out = np.full(size, spec.pad if k == 0 else spec.fill, dtype=dtype)
        if pieces:
            np.concatenate([p.columns[k] for p in pieces], out=out[:real])
        columns.append(out)
    result = [columns[0]]
    if spec.position_ids:
        positions = np.zeros(size, dtype=np.int64)
        if pieces:
            np.concatenate([p.positions for p in pieces], out=positions[:real])
        result.append(positions)
    if spec.segment_ids:
        segments = np.zeros(size, dtype=np.int64)
        if real:
            documents = np.concatenate([p.documents for p in pieces])
            segments[0] = 1
            np.cumsum(documents[1:] != documents[:-1], out=segments[1:real])
            segments[1:real] += 1
        result.append(segments)
    return result + columns[1:]

