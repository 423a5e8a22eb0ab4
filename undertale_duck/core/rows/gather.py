"""Gather a batch's rows column-wise from window tables, through numpy views kept per window."""

from __future__ import annotations

import bisect
import functools
import itertools
import weakref
from collections.abc import MutableSequence, Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
from torch import from_numpy as torch_from_numpy

from ...common.arrays import int64_array, numpy_of
from .ragged import Ragged
from .row_batch import Row, RowBatch
from .rows import Format, Selection, _convert, gathered_lists, merge, select, to_tensor

View = np.ndarray[Any, Any]


class _Spans:
    """Where the chunks of a column start, and which chunk holds a row.

    Args:
        lengths: The chunks' rows, in order, none 0.
    """

    def __init__(self, lengths: Sequence[int]) -> None:
        self._starts = [0, *itertools.accumulate(lengths)]
        self._last = 0

    def _chunk_of(self, row: int) -> int:
        """The chunk holding ``row`` (0 <= row < the rows; the last chunk past them)."""
        starts = self._starts
        k = self._last  # a pass slices one chunk after another: try the last one first
        if not starts[k] <= row < starts[k + 1]:
            k = min(bisect.bisect_right(starts, row) - 1, len(starts) - 2)
            self._last = k
        return k


class Parts(_Spans):
    """The numpy views of a column held in several chunks, read as one array of rows.

    A window decoded by pyarrow is kept as its decoded batches (one chunk each) rather than
    copied into one buffer per column (see ``window_read.MAX_KEPT_CHUNKS``); a batch's rows
    are sliced or taken from the chunks that hold them. Reads return new arrays or views of
    one chunk, as reads of a :data:`View` do.

    Args:
        parts: The chunks' views, in order: equal dtypes and row shapes, none empty.
    """

    def __init__(self, parts: Sequence[View]) -> None:
        self.parts = list(parts)
        super().__init__([len(part) for part in self.parts])
        starts = self._starts
        self._edges = np.asarray(starts[1:-1], dtype=np.int64)
        self.dtype: np.dtype[Any] = self.parts[0].dtype
        self.shape: tuple[int, ...] = (starts[-1], *self.parts[0].shape[1:])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, sel: Selection) -> View:
        if not isinstance(sel, slice):
            return self.take(sel)
        start, stop, step = sel.start, sel.stop, sel.step
        if step is not None or type(start) is not int or type(stop) is not int or not (
            0 <= start <= stop <= self.shape[0]
        ):
            start, stop, step = sel.indices(self.shape[0])
            if step != 1 or stop < start:
                return self.take(np.arange(start, stop, step, dtype=np.int64))
        starts = self._starts
        k = self._chunk_of(start)
        if stop <= starts[k + 1]:  # the common case: one chunk holds the rows
            return self.parts[k][start - starts[k]:stop - starts[k]]
        pieces = []
        while k < len(self.parts) and starts[k] < stop:
            pieces.append(self.parts[k][max(start, starts[k]) - starts[k]:stop - starts[k]])
            k += 1
        return np.concatenate(pieces)

    def rows(self, start: int, stop: int) -> View:
        """Rows ``start:stop`` (0 <= start <= stop <= ``len(self)``) as a new array."""
        k = self._chunk_of(start)
        first = self._starts[k]
        if stop <= self._starts[k + 1]:
            return self.parts[k][start - first:stop - first].copy()
        return self[start:stop]  # across chunks: joined into a new array already

    def take(self, index: np.ndarray[Any, Any], axis: int = 0) -> View:
        """The rows at ``index`` (0 <= each < ``len(self)``), in that order, as a new array."""
        if axis != 0:
            raise ValueError("Parts.take takes rows (axis 0) only")
        index = np.asarray(index, dtype=np.int64)
        n = self.shape[0]
        if index.size == 0:
            return self.parts[0][:0].copy()
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= n:
            raise IndexError(f"row index {low if low < 0 else high} out of range for {n} rows")
        starts = self._starts
        k = self._chunk_of(low)
        if high < starts[k + 1]:  # one chunk holds them all (a row, a run, a window's part)
            return self.parts[k].take(index - starts[k], axis=0)
        which = np.searchsorted(self._edges, index, side="right")
        order = np.argsort(which, kind="stable")
        counts = np.bincount(which, minlength=len(self.parts)).tolist()
        out = np.empty((len(index), *self.shape[1:]), dtype=self.dtype)
        at = 0
        for k, count in enumerate(counts):
            if count:
                rows = order[at:at + count]
                out[rows] = self.parts[k].take(index[rows] - starts[k], axis=0)
                at += count
        return out


class ListedParts(_Spans):
    """A column without a numpy view held in several chunks, sliced where its rows lie.

    Args:
        chunks: The column's chunks, none empty.
    """

    def __init__(self, chunks: Sequence[pa.Array]) -> None:
        self.chunks = list(chunks)
        super().__init__([len(chunk) for chunk in self.chunks])

    def slice(self, start: int, length: int) -> pa.Array | pa.ChunkedArray:
        """Rows ``start:start + length``: a slice of one chunk, or of several chunked."""
        starts = self._starts
        k = self._chunk_of(start)
        if start + length <= starts[k + 1]:
            return self.chunks[k].slice(start - starts[k], length)
        return pa.chunked_array(self.chunks, type=self.chunks[0].type).slice(start, length)


#: A column's rows as numpy reads them: one view, or the views of its chunks.
Column = View | Parts


class Views(NamedTuple):
    """The numpy views of a window's columns, and what a batch needs to join them."""

    #: One view per column (or per chunk, :class:`Parts`), None where the column has none.
    arrays: tuple[Column | None, ...]
    #: Per column ``(dtype, row shape)`` of its view, or None: windows whose signatures
    #: are equal have their columns joined directly.
    signature: tuple[tuple[np.dtype[Any], tuple[int, ...]] | None, ...]
    #: Whether every column has a view.
    complete: bool
    #: The window's column names.
    names: list[str]
    #: Per column, the column (its one chunk, or its chunks) where it has no view and its
    #: rows are exactly their ``to_pylist()`` values (strings, binary, dates, ...), else None.
    listed: tuple[pa.Array | ListedParts | None, ...]
    #: Whether every column has a view or a listed chunk: a slice of the window is then one
    #: copy or one ``to_pylist()`` per column, with no other conversion.
    simple: bool

#: Views of the windows in use, by ``id(table)``: each entry is dropped when its table is
#: garbage collected, so a view never keeps an evicted window's buffers alive.
_VIEWS: dict[int, tuple[weakref.ref[pa.Table], Views]] = {}


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
        view = numpy_of(array)
        return view
    if pa.types.is_fixed_size_list(dtype) and _numeric(dtype.value_type):
        flat = array.flatten()
        if flat.null_count or dtype.list_size == 0:
            return None
        view = numpy_of(flat).reshape(n, dtype.list_size)
        return view
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return None
    if not _numeric(dtype.value_type):
        return None
    offsets = numpy_of(array.offsets)
    base = int(offsets[0])
    width = int(offsets[1]) - base
    if width == 0 or int(offsets[-1]) - base != n * width:
        return None
    if not (np.diff(offsets) == width).all():
        return None
    values = array.values.slice(base, n * width)
    if values.null_count:
        return None
    view = numpy_of(values).reshape(n, width)
    return view


def views(table: pa.Table) -> Views:
    """Return the numpy views of a window's columns (built once per table, then reused).

    Args:
        table: A window: one chunk per column, or the batches pyarrow decoded it in.

    Returns:
        The views and their signature.
    """
    key = id(table)
    entry = _VIEWS.get(key)
    if entry is not None and entry[0]() is table:
        return entry[1]
    arrays = tuple(_column_view(column) for column in table.columns)
    listed = tuple(
        None if view is not None or not _listed(column.type) else _listed_column(column)
        for view, column in zip(arrays, table.columns, strict=True)
    )
    built = Views(
        arrays,
        tuple(None if v is None else (v.dtype, v.shape[1:]) for v in arrays),
        all(v is not None for v in arrays),
        table.column_names,
        listed,
        all(v is not None or c is not None for v, c in zip(arrays, listed, strict=True)),
    )
    ref = weakref.ref(table, functools.partial(_forget, key))
    _VIEWS[key] = (ref, built)
    return built


def _chunks(column: pa.ChunkedArray) -> list[pa.Array]:
    """A column's chunks that hold rows (a column of one chunk: that chunk, even empty)."""
    if column.num_chunks == 1:
        return [column.chunk(0)]
    return [chunk for chunk in column.chunks if len(chunk)]


def _column_view(column: pa.ChunkedArray) -> Column | None:
    """The numpy view of a column: of its one chunk, or :class:`Parts` of its chunks."""
    chunks = _chunks(column)
    if len(chunks) <= 1:
        return _view(chunks[0]) if chunks else None
    parts = [_view(chunk) for chunk in chunks]
    if any(part is None for part in parts):
        return None
    kept = cast(list[View], parts)
    if len({(part.dtype, part.shape[1:]) for part in kept}) != 1:
        return None  # lists whose widths differ from chunk to chunk: not one 2-d array
    return Parts(kept)


def _listed_column(column: pa.ChunkedArray) -> pa.Array | ListedParts | None:
    """A listed column: its one chunk, or its non-empty chunks (None: it has no rows)."""
    chunks = _chunks(column)
    if len(chunks) <= 1:
        return chunks[0] if chunks else None
    return ListedParts(chunks)


def _listed(dtype: pa.DataType) -> bool:
    """Whether :func:`rows.select` turns a column of ``dtype`` into its ``to_pylist()``.

    Numbers, booleans and lists of them are converted to arrays or tensors instead.
    """
    if _numeric(dtype) or pa.types.is_boolean(dtype):
        return False
    if (
        pa.types.is_list(dtype) or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    ):
        value = dtype.value_type
        return not (_numeric(value) or pa.types.is_boolean(value))
    return True


def _slice(found: Views, start: int, stop: int, length: int, torch: bool) -> RowBatch | None:
    """Rows ``start:stop`` of one window whose columns are all simple, or None on a failure.

    The common sequential batch: one copy per viewed column, one ``to_pylist()`` per listed
    one, nothing else per batch. A value ``to_pylist()`` cannot convert returns None, and
    the general path then names it.
    """
    whole: dict[str, Any] = {}
    values: dict[str, list[Any] | Ragged] = {}
    for name, view, chunk in zip(found.names, found.arrays, found.listed, strict=True):
        if view is not None:
            out = view.rows(start, stop) if isinstance(view, Parts) else view[start:stop].copy()
            whole[name] = _tensor(out) if torch else out
            continue
        try:
            listed = cast(pa.Array | ListedParts, chunk)
            values[name] = listed.slice(start, length).to_pylist()
        except (OverflowError, ValueError, pa.ArrowException):
            return None
    return RowBatch(found.names, length, whole, values)


def _pick(view: Column, sel: Selection) -> View:
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
    into one array (a slice or a ``take`` per window); the others are taken per window,
    joined and converted once. Values equal what :func:`rows.select` gives.

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
    whole: dict[str, Any] = {}
    values: dict[str, list[Any] | Ragged] = {}
    torch = fmt == "torch"
    found = views(tables[0])
    names = list(found.names)
    if places is None:  # one window: the common sequential batch, kept short
        sel = selections[0]
        if found.simple and isinstance(sel, slice):
            fast_batch = _slice(found, sel.start, sel.stop, length, torch)
            if fast_batch is not None:
                return fast_batch
        if found.complete:
            for name, view in zip(names, found.arrays, strict=True):
                out = _pick(view, sel)  # type: ignore[arg-type]
                whole[name] = _tensor(out) if torch else out
            return RowBatch(names, length, whole, values)
        fast = [c for c, v in enumerate(found.arrays) if v is not None]
        for c in fast:
            out = _pick(found.arrays[c], sel)  # type: ignore[arg-type]
            whole[names[c]] = _tensor(out) if torch else out
    else:
        per_table = [views(t) for t in tables]
        signature = per_table[0].signature
        if all(v.signature == signature for v in per_table):
            fast = [c for c, sig in enumerate(signature) if sig is not None]
        else:
            fast = [
                c for c, sig in enumerate(signature)
                if sig is not None and all(v.signature[c] == sig for v in per_table)
            ]
        if fast:
            # Rows in window order, then put back in batch order with one scatter.
            order = np.concatenate(places)
            for c in fast:
                joined = np.concatenate([
                    cast(Column, v.arrays[c])[sel]
                    for v, sel in zip(per_table, selections, strict=True)
                ])
                out = np.empty_like(joined)
                out[order] = joined
                whole[names[c]] = _tensor(out) if torch else out
    done = set(fast)
    slow = [c for c in range(len(names)) if c not in done]
    if slow:
        _convert_slow(tables, selections, places, length, fmt, slow, whole, values)
    return RowBatch(names, length, whole, values)


def _convert_slow(
    tables: Sequence[pa.Table],
    selections: Sequence[Selection],
    places: Sequence[np.ndarray[Any, np.dtype[np.int64]]] | None,
    length: int,
    fmt: Format,
    slow: list[int],
    whole: dict[str, Any],
    values: dict[str, list[Any] | Ragged],
) -> None:
    """Convert the columns without views exactly as :func:`rows.select` converts them.

    The batch's rows of the column are joined in batch order (one-row slices when the
    batch touches many windows, as uniform random access does; else one take or slice per
    window and one reorder), then converted once, into ``whole`` or ``values``.
    """
    names = tables[0].column_names
    order = np.arange(length, dtype=np.int64)
    rows: list[tuple[int, int]] | None = None
    if places is not None:
        order[np.concatenate(places)] = np.arange(length, dtype=np.int64)
        if length <= 8 * len(tables):
            source = np.empty(length, dtype=np.int64)
            local = np.empty(length, dtype=np.int64)
            for k, (sel, place) in enumerate(zip(selections, places, strict=True)):
                source[place] = k
                local[place] = np.arange(sel.start, sel.stop) if isinstance(sel, slice) else sel
            rows = list(zip(source.tolist(), local.tolist(), strict=True))
    for c in slow:
        name = names[c]
        columns = [t.column(c) for t in tables]
        kind = columns[0].type
        if any(col.type != kind for col in columns):  # windows decoded to different types
            pieces = [_rows(col, sel) for col, sel in zip(columns, selections, strict=True)]
            merged = merge([select(pa.table({name: p}), slice(0, len(p)), fmt) for p in pieces],
                           order)
            assert isinstance(merged, RowBatch)
            batched = merged.batched(name)
            if batched is not None:
                whole[name] = batched
            else:
                values[name] = merged.column(name)
            continue
        if all(col.num_chunks == 1 for col in columns) and not (
            places is None and isinstance(selections[0], slice)  # a slice converts as fast
        ):
            taken = gathered_lists(
                [col.chunk(0) for col in columns], selections, places, length, fmt
            )
            if taken is not None:
                if isinstance(taken, Ragged):
                    values[name] = taken
                else:
                    whole[name] = taken
                continue
        if places is None:
            column = _rows(columns[0], selections[0])
        elif rows is not None:
            arrays = [col.chunk(0) if col.num_chunks == 1 else col for col in columns]
            column = pa.chunked_array(
                [_chunk(arrays[k], i) for k, i in rows], type=kind
            )
        else:
            pieces = [_rows(col, sel) for col, sel in zip(columns, selections, strict=True)]
            column = pa.chunked_array([ch for p in pieces for ch in p.chunks], type=kind)
            column = column.take(int64_array(order))
        converted = _convert(name, column, fmt)
        if isinstance(converted, list | Ragged):
            values[name] = converted
        else:
            whole[name] = converted


def _chunk(array: pa.Array | pa.ChunkedArray, row: int) -> pa.Array:
    """Row ``row`` of an array as a one-row array."""
    if isinstance(array, pa.Array):
        return array.slice(row, 1)
    return array.slice(row, 1).combine_chunks()


def _rows(column: pa.ChunkedArray, sel: Selection) -> pa.ChunkedArray:
    if isinstance(sel, slice):
        return column.slice(sel.start, sel.stop - sel.start)
    return column.take(int64_array(sel))


def _tensor(array: View) -> Any:
    """:func:`rows.to_tensor`, without its checks for the common signed and float dtypes."""
    if array.dtype.kind in "if":
        return torch_from_numpy(array)
    return to_tensor(array)
