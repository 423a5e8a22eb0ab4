"""Row access for the core dataset: indices to windows to rows, in one of three formats."""

from __future__ import annotations

import bisect
import os
from collections.abc import MutableSequence, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ...common.arrays import int64_array
from ...errors import OutOfRangeError
from ..read import AccessMonitor, WindowReader
from ..source import windows as win
from .gather import gather
from .indices import index_array
from .row_batch import Row, RowBatch
from .rows import ConversionFailure, Format, Selection, TensorRangeError, merge, select

if TYPE_CHECKING:
    from ..source import Source

#: The most rows and bytes one slice serves to the runs that follow it (several small
#: batches of a sequential epoch): past about 1,024 rows cutting it costs more per batch
#: than the slice saves, and past 1 MiB its copies land on fresh pages (a fault per page)
#: and outgrow the CPU's cache, costing more per row than they save per batch.
AHEAD_ROWS = 1024
AHEAD_BYTES = 1 << 20

#: False: every run is sliced alone (``benchmarks/bench_small_batches.py --ahead-ab``).
SLICE_AHEAD = True


class RowAccess:
    """``__getitem__`` and ``__getitems__`` of :class:`~.dataset.ShardDataset`.

    Kept apart from the dataset's set-up: this is the hot path from indices to rows (one
    slice or one gather per window, column-wise for ``numpy``/``torch``). The attributes
    below are set by the dataset.
    """

    format: Format
    source: Source
    windows: list[win.Window]
    _length: int
    _starts: list[int]
    _starts_array: np.ndarray[Any, np.dtype[np.int64]]
    _reader: WindowReader | None
    _monitor: AccessMonitor | None
    #: runs sliced ahead, by first index (see ``_run_of``); where the last run ended; the
    #: last window's decoded bytes a row
    _ahead: dict[int, MutableSequence[Row]]
    _follows: int
    _row_bytes: tuple[int, int]
    #: the row indices this process's batches were declared to ask for (``prefetch(rows=)``),
    #: the process that declared them, and where the next batch is expected in them; the
    #: batches gathered ahead from them, by their indices, each with where it ends
    _expected: np.ndarray[Any, np.dtype[np.int64]] | None
    _expected_pid: int
    _expected_at: int
    #: the rows were declared by a worker plan: a batch that leaves them drops the plan
    _expected_planned: bool
    _ahead_batches: dict[tuple[int, ...], tuple[MutableSequence[Row], int]]
    #: an order declared lazily, applied by ``reader`` (see the dataset's ``prefetch``)
    _pending_order: object | None
    #: a plan forked DataLoader workers apply at their first read (see the dataset's
    #: ``prefetch_in_workers``)
    _worker_plan: object | None

    if TYPE_CHECKING:

        @property
        def reader(self) -> WindowReader:
            """The process's window reader."""

        def __len__(self) -> int:
            """Rows in the dataset."""

        def locate_many(self, indices: Sequence[int]) -> list[tuple[str, int]]:
            """The shard and local row of each of many global indices."""

    def _forget_runs(self) -> None:
        """Drop the runs sliced ahead (the dataset was opened, reopened or closed)."""
        self._ahead = {}
        self._ahead_batches = {}
        self._follows = -1
        self._row_bytes = (-1, 0)

    def __getitem__(self, index: int) -> Row:
        """Return one row as ``{column: value}`` with the values pyarrow's ``as_py()`` gives.

        Args:
            index: Global row index; negative indices count from the end.

        Returns:
            The row.

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
            SourceError: If the shard changed on disk or cannot be decoded.
        """
        i = win.normalize_index(index, len(self))
        position = win.locate(self._starts, i)
        table = self.reader.window(position)
        local = i - self.windows[position].offset
        row = self._select(position, table, slice(local, local + 1))[0]
        self._watch(1)
        return row

    def __getitems__(self, indices: Sequence[int]) -> MutableSequence[Row]:
        """Return many rows, reading each window they touch once (torch's batched fetch).

        Args:
            indices: Global row indices, in any order, repeats allowed.

        Returns:
            The rows in the order of ``indices``: a list in the ``python`` format; in the
            ``numpy``/``torch`` formats a :class:`RowBatch` (a list-like sequence that keeps
            the batch column-wise for :func:`undertale_duck.collate`).

        Raises:
            IndexError: If an index is out of range.
            TypeError: If an index is not an integer.
            SourceError: If a shard changed on disk or cannot be decoded.
        """
        rows = self._rows_of(indices)
        self._watch(len(rows))
        return rows

    def _watch(self, rows: int) -> None:
        monitor = self._monitor
        if monitor is not None and monitor.active and self._reader is not None:
            monitor.served(rows, self._reader.cache)

    def _expect_rows(
        self, rows: np.ndarray[Any, np.dtype[np.int64]] | None, *, planned: bool = False
    ) -> None:
        """Declare the row indices this process's batches will ask for, in order (or None)."""
        self._expected = rows
        self._expected_pid = os.getpid()
        self._expected_at = 0
        self._expected_planned = planned
        self._ahead_batches = {}

    def _leave_plan(self) -> None:
        """Drop what a worker plan declared (the dataset drops its window order too)."""
        self._expect_rows(None)

    def _rows_of(self, indices: Sequence[int]) -> MutableSequence[Row]:
        if self._pending_order is not None or self._worker_plan is not None:
            _ = self.reader  # getting the process's reader applies a declaration before a batch
        run = self._run_of(indices)
        if run is not None:
            if self._expected is not None:
                self._passed(indices)
            return run
        if self._expected is not None:
            part = self._expected_part(indices)
            if part is not None:
                return part
        index = self._normalize(indices)
        if len(index) == 0:
            return []
        positions = np.searchsorted(self._starts_array, index, side="right") - 1
        if positions[0] == positions[-1] and (positions == positions[0]).all():
            return self._window_part(int(positions[0]), index)
        order = np.argsort(positions, kind="stable")
        cuts = np.flatnonzero(np.diff(positions[order])) + 1
        if self.format != "python":
            return self._gather(index, positions[order], order, cuts)
        groups = np.split(order, cuts)
        heads = [int(positions[m[0]]) for m in groups]
        last = len(groups) - 1
        if last and self.reader.cache.maps_windows:  # with a disk tier: see _gather
            self.reader.want(heads)
        parts: list[MutableSequence[Row]] = [[] for _ in groups]
        for step, k in enumerate(self._read_order(heads)):
            parts[k] = self._window_part(
                heads[k], index[groups[k]], advance=step == last, first=heads[0]
            )
        return merge(parts, np.argsort(order, kind="stable"))

    def _read_order(self, heads: list[int]) -> list[int]:
        """The order to read a batch's windows in (indices into ``heads``, ascending windows).

        The window the consumer is on first, then the others in ascending order: a budget
        that holds one window (a small ``memory``, a shuffled epoch whose batch crosses from
        one window into another that comes before it) would otherwise evict the window being
        consumed to read the new one, then read it again for this batch and the new one
        again for the next.
        """
        everything = list(range(len(heads)))
        current = self.reader.current
        if len(heads) < 2 or current is None or current == heads[0]:
            return everything
        try:
            k = heads.index(current)
        except ValueError:
            return everything
        return [k, *everything[:k], *everything[k + 1:]]

    def _gather(
        self,
        index: np.ndarray[Any, np.dtype[np.int64]],
        sorted_positions: np.ndarray[Any, np.dtype[np.int64]],
        order: np.ndarray[Any, np.dtype[np.int64]],
        cuts: np.ndarray[Any, np.dtype[np.int64]],
    ) -> MutableSequence[Row]:
        """The rows of a batch touching several windows (numpy and torch formats)."""
        local = index[order] - self._starts_array[sorted_positions]
        bounds = [0, *cuts.tolist(), len(order)]
        heads = sorted_positions[bounds[:-1]].tolist()
        last = len(heads) - 1
        tables = []
        selections: list[Selection] = []
        places = []
        reader = self.reader
        cache = reader.cache
        # A batch holds every window it touches until it is built: past what the cache can
        # hold (uniform random access over more data than the budget), each window is cut
        # down to the batch's rows as soon as it is read, so the batch never holds more
        # than its own rows beside the cache (mapped windows of the disk tier cost nothing)
        mapped = cache.maps_windows
        if mapped and len(heads) > 1:
            reader.want(heads)  # with a disk tier: their row groups decoded in parallel
        cut: list[Selection] = []
        read = self._read_order(heads)
        for step, k in enumerate(read):
            position = heads[k]
            a, b = bounds[k], bounds[k + 1]
            table = reader.window(position, advance=step == last, first=heads[0])
            many = not mapped and len(heads) * reader.largest_window > cache.limit
            if b - a == 1:
                start = int(local[a])
                sel: Selection = slice(start, start + 1)
            else:
                sel = _local(local[a:b])
            selections.append(sel)
            if not isinstance(sel, slice):  # rows out of order: from one buffer per column
                table = reader.joined(position, table)
            if many or (not mapped and position not in cache):
                rows = np.arange(sel.start, sel.stop) if isinstance(sel, slice) else sel
                table = table.take(int64_array(rows))
                sel = slice(0, b - a)
            cut.append(sel)
            tables.append(table)
            places.append(order[a:b])
        try:
            return gather(tables, cut, places, len(index), self.format)
        except (ConversionFailure, TensorRangeError):  # per window: names the shard and row
            parts = [
                self._select(heads[k], reader.window(heads[k], advance=False), sel)
                for k, sel in zip(read, selections, strict=True)
            ]
            back = np.empty(len(index), dtype=np.int64)
            back[np.concatenate(places)] = np.arange(len(index), dtype=np.int64)
            return merge(parts, back)

    def _run_of(self, indices: Sequence[int]) -> MutableSequence[Row] | None:
        """The rows of a list of consecutive ascending indices inside one window, else None.

        The common batch (a sequential or ``ChunkedSampler`` order hands torch's batch
        sampler's lists of ints): recognised with one list comparison, served by one slice.
        A run that begins where the last one ended (a sequential epoch through a plain
        ``DataLoader``) is served with the next runs of its size from one slice
        (:data:`AHEAD_ROWS`, :data:`AHEAD_BYTES`): those wait, cut apart, for their own
        calls, so a batch of them costs a lookup instead of a slice and its copies.
        """
        if type(indices) is not list or not indices:
            return None
        start = indices[0]
        n = len(indices)
        if type(start) is not int or start < 0 or indices != list(range(start, start + n)):
            return None
        if len(set(map(type, indices))) > 1:  # [3, 4.0] or [0, True] equal a run of ints
            return None
        # a part is claimed by one atomic pop: a caller on another thread asking for the same
        # rows at once does not get the same tensors
        part = self._ahead.pop(start, None)
        follows = start == self._follows
        self._follows = start + n
        if part is not None and len(part) == n:
            return part
        starts = self._starts
        position = bisect.bisect_right(starts, start) - 1
        end = starts[position + 1] if position + 1 < len(starts) else self._length
        if position < 0 or start + n > end:
            return None
        table = self.reader.window(position)
        offset = starts[position]
        local = slice(start - offset, start - offset + n)
        if self.format == "python":
            return self._select(position, table, local)
        count = self._ahead_count(position, table, n, end - start) if follows and SLICE_AHEAD else 1
        try:
            rows = gather(
                [table], [slice(local.start, local.start + count * n)], None, count * n,
                self.format,
            )
        except (ConversionFailure, TensorRangeError):
            return self._select(position, table, local)  # names the shard and row
        if count == 1 or not isinstance(rows, RowBatch):
            return rows
        parts = rows.split([n] * count)
        if parts is None:
            return None
        self._ahead = {start + k * n: parts[k] for k in range(1, count)}
        return parts[0]

    def _expected_part(self, indices: Sequence[int]) -> MutableSequence[Row] | None:
        """The rows of a batch that asks for the next declared rows, else None.

        A shuffled epoch's small batches (``prefetch(rows=)``, which a ``ChunkedSampler``
        without workers declares): the batch is gathered with the batches that follow it in
        the declared rows inside its window, up to :data:`AHEAD_ROWS` rows and
        :data:`AHEAD_BYTES`, and those wait, cut apart, for their own calls, found by their
        exact indices. Only lists of Python ints (``[1.0, 2.0]`` hashes as ``[1, 2]``).
        """
        if type(indices) is not list or not indices or self.format == "python":
            return None
        expected = self._expected
        if expected is None or self._expected_pid != os.getpid():  # a forked copy's
            return None
        if type(indices[0]) is not int or len(set(map(type, indices))) > 1:
            return None
        n = len(indices)
        key = tuple(indices)
        # claimed by one atomic pop: a caller on another thread does not get the same tensors
        ready = self._ahead_batches.pop(key, None)
        if ready is not None:
            self._expected_at = ready[1]
            return ready[0]
        at = self._expected_at
        if not self._next_expected(expected, indices):
            if self._expected_planned:  # a stale plan: its order would read the wrong windows
                self._leave_plan()
            return None
        self._expected_at = at + n  # this batch is served either way
        if n > AHEAD_ROWS // 2:
            return None
        starts = self._starts_array
        position = int(np.searchsorted(starts, indices[0], side="right")) - 1
        offset = int(starts[position])
        end = int(starts[position + 1]) if position + 1 < len(starts) else self._length
        span = expected[at : at + min(AHEAD_ROWS // n, (len(expected) - at) // n) * n]
        outside = np.flatnonzero((span < offset) | (span >= end))
        count = (int(outside[0]) if len(outside) else len(span)) // n
        if count < 2:  # this batch alone, or not in one window: as any batch
            return None
        table = self.reader.window(position)
        count = self._ahead_count(position, table, n, count * n)
        if count < 2:
            return None
        rows = span[: count * n]
        sel = _local(rows - offset)
        if not isinstance(sel, slice):  # rows out of order: from one buffer per column
            table = self.reader.joined(position, table)
        try:
            batch = gather([table], [sel], None, count * n, self.format)
        except (ConversionFailure, TensorRangeError):
            return None  # the batch alone names the shard and row
        parts = batch.split([n] * count) if isinstance(batch, RowBatch) else None
        if parts is None:
            return None
        self._ahead_batches = {
            tuple(rows[k * n : (k + 1) * n].tolist()): (parts[k], at + (k + 1) * n)
            for k in range(1, count)
        }
        return parts[0]

    def _passed(self, indices: Sequence[int]) -> None:
        """Step past the declared rows a batch served as a run (consecutive rows) asked for.

        Else the next batch would be compared with these rows, found to differ and, under a
        worker's plan, taken for a stale plan (its window order dropped with it).
        """
        expected = self._expected
        if expected is None or self._expected_pid != os.getpid():
            return
        if self._next_expected(expected, indices):
            self._expected_at += len(indices)

    def _next_expected(
        self, expected: np.ndarray[Any, np.dtype[np.int64]], indices: Sequence[int]
    ) -> bool:
        """Whether ``indices`` are the declared rows that come next."""
        at = self._expected_at
        return at + len(indices) <= len(expected) and np.array_equal(
            expected[at : at + len(indices)], indices
        )

    def _ahead_count(self, position: int, table: pa.Table, n: int, left: int) -> int:
        """How many runs of ``n`` rows to slice at once, ``left`` rows to the window's end."""
        most = min(AHEAD_ROWS, left) // n
        if most < 2:
            return 1
        known, row_bytes = self._row_bytes
        if known != position:  # once a window: pyarrow sums the bytes its rows use
            row_bytes = max(1, -(-table.nbytes // max(1, table.num_rows)))
            self._row_bytes = (position, row_bytes)
        return max(1, min(most, AHEAD_BYTES // row_bytes // n))

    def _normalize(self, indices: Sequence[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Check and normalize many indices at once (negative ones count from the end)."""
        n = len(self)
        array = index_array(indices)
        if array.dtype.kind not in "iu":
            return np.fromiter(
                (win.normalize_index(i, n) for i in array.tolist()), dtype=np.int64,
                count=len(array),
            )
        if array.dtype.kind == "u" and array.size and int(array.max()) >= n:
            # checked before the int64 cast: 2**63 or more would wrap to a negative index
            bad = next(int(i) for i in array if i >= n)
            raise IndexError(f"dataset index {bad} out of range for {n} rows")
        index = array.astype(np.int64, copy=False)
        if index.size and (index.min() < -n or index.max() >= n):
            bad = next(int(i) for i in index if not -n <= i < n)
            raise IndexError(f"dataset index {bad} out of range for {n} rows")
        return np.where(index < 0, index + n, index)

    def _window_part(
        self,
        position: int,
        index: np.ndarray[Any, np.dtype[np.int64]],
        *,
        advance: bool = True,
        first: int | None = None,
    ) -> MutableSequence[Row]:
        """The rows at global ``index`` (all in window ``position``): one slice or one take."""
        table = self.reader.window(position, advance=advance, first=first)
        sel = _local(index - self.windows[position].offset)
        if not isinstance(sel, slice):  # rows out of order: from one buffer per column
            table = self.reader.joined(position, table)
        if self.format == "python":
            return self._select(position, table, sel)
        try:
            return gather([table], [sel], None, len(index), self.format)
        except (ConversionFailure, TensorRangeError):
            return self._select(position, table, sel)  # names the shard and row

    def _select(self, position: int, table: pa.Table, sel: Selection) -> MutableSequence[Row]:
        """:func:`rows.select`, with a value that cannot be converted named by shard and row."""
        try:
            return select(table, sel, self.format)
        except ConversionFailure as exc:
            window = self.windows[position]
            local = sel.start + exc.row if isinstance(sel, slice) else int(sel[exc.row])
            shard = self.source.shards[window.shard].path
            row = window.offset + local
            # a view's window holds only the rows it keeps: its index finds the source row
            source_row = self.locate_many([row])[0][1]
            raise OutOfRangeError(
                f"shard {shard}, row {row} (local row {source_row}): column "
                f"{exc.column!r} {exc.reason}",
                shard,
                (row, row + 1),
                exc.column,
            ) from None


def _local(local: np.ndarray[Any, np.dtype[np.int64]]) -> Selection:
    """Local rows as a slice when they are consecutive and ascending, else as the array."""
    start = int(local[0])
    if int(local[-1]) - start == len(local) - 1 and (
        len(local) < 2 or bool((np.diff(local) == 1).all())
    ):
        return slice(start, start + len(local))
    return local
