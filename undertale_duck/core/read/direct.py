"""Decode a window's row groups with pyarrow when ``pages.py`` allows it (DuckDB reads the rest)."""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import SourceError
from ..parquet import LeafVerdicts, ShardPages, fixed_lists, footers
from ..parquet import pages as parquet_pages
from ..runtime import failures, read_pool
from ..source import Shard, Window, window_row_groups

#: Most bytes a window read by pyarrow may decode when the dataset has no memory budget
#: (memory=0): larger windows go to DuckDB, whose ``memory_limit`` then applies.
UNBUDGETED_CAP = 1 << 30

#: Rows DuckDB decodes at once (its vector size): it decodes a row group in vectors from the
#: group's first row, so a window read by pyarrow decodes at least up to the end of the vector
#: holding its last row (a window it accepts is then one DuckDB accepts).
VECTOR_ROWS = 2048

#: Row-group readers kept open between window reads (one per stream of windows being read).
MAX_STREAMS = 4

#: Shards whose pyarrow verdicts (footer, leaves, row-group bounds) are kept: each holds its
#: footer, which the footer cache would otherwise free, so a pass over 100,000 shards held
#: all their footers. A shard dropped here is looked up again from the footer cache.
MAX_SHARD_PAGES = 64

#: Most bytes (by the page headers' bound) pyarrow decodes in one batch. Its readers grow a
#: batch's buffers by doubling, so a batch of tens of MiB is reallocated and faulted in
#: again several times over: a window of 63 MiB decoded as one batch cost twice the CPU of
#: the same rows in batches of one row group or less (and 150 MiB more peak RSS); the
#: batches of a window are then joined in one copy.
DECODE_BATCH_BYTES = 32 << 20


class DirectReader:
    """Read plain windows of local shards with pyarrow, within the read limit.

    Args:
        columns: The dataset's columns, in order.
        schema: The dataset's Arrow schema.
        limit: The read limit in bytes (0: none, then :data:`UNBUDGETED_CAP`).
        threads: Whether pyarrow may decode columns in parallel.
    """

    def __init__(
        self, columns: Sequence[str], schema: pa.Schema, limit: int, *, threads: bool
    ) -> None:
        self.columns = list(columns)
        self.schema = schema
        self.cap = limit or UNBUDGETED_CAP
        self.threads = threads
        self._shards: OrderedDict[str, ShardPages | None] = OrderedDict()
        self._verdicts = LeafVerdicts(self.columns, schema)
        # DuckDB refuses strings that are not UTF-8; pyarrow checks them only when asked.
        # The types by name once: schema.names builds a new list on every call.
        types: dict[str, pa.DataType] = {}
        for field in schema:
            types.setdefault(field.name, field.type)
        self._text = [
            name for name in self.columns if name in types and _has_text(types[name])
        ]
        #: Windows read by pyarrow, windows that fell back to DuckDB after trying, and
        #: decodes of row groups begun ("streams": a group cut into windows is decoded once
        #: per stream, its windows handed out as the consumer reaches them); "fixed_lists":
        #: columns of such decodes whose lists core/parquet/fixed_lists.py decoded whole (a
        #: window that is its groups); "streamed_lists": those it decoded page by page (a
        #: window cut from them), "lists_declined" those of them pyarrow took over part-way.
        self.stats = {"direct": 0, "fallback": 0, "streams": 0, "fixed_lists": 0,
                      "streamed_lists": 0, "lists_declined": 0}
        # open readers of row groups cut into windows, by (path, groups): a window read
        # continues the decode where the previous window of the same groups stopped
        self._streams: OrderedDict[tuple[str, tuple[int, ...]], _GroupStream] = OrderedDict()
        self._guard = threading.Lock()
        self._pid = os.getpid()
        #: Most bytes of decoded rows the open readers may hold between window reads (rows
        #: decoded past a window, for the next one); past it the oldest are closed. Set by
        #: the window reader, which reserves it in the budget (None: no bound).
        self.park_cap: int | None = None

    def _pages(self, shard: Shard) -> ShardPages | None:
        key = shard.path
        with self._guard:
            if key in self._shards:
                self._shards.move_to_end(key)
                return self._shards[key]
        pages = None
        try:
            # the file may have been replaced since it was opened: its columns' metadata
            # is touched only once the footer is known to hold no encrypted column and
            # no unknown codec or type (pyarrow aborts the process on those), as at open
            meta = footers.checked_metadata(shard.path, shard.size, shard.mtime_ns)
            same = meta.num_row_groups == len(shard.row_groups) and all(
                meta.row_group(g).num_rows == rows
                for g, (rows, _) in enumerate(shard.row_groups)
            )
            if same:
                pages = ShardPages(
                    shard.path, meta, self.columns, self.schema, verdicts=self._verdicts
                )
        except (OSError, ValueError, pa.ArrowException, SourceError):
            pages = None
        with self._guard:
            self._shards[key] = pages
            while len(self._shards) > MAX_SHARD_PAGES:
                self._shards.popitem(last=False)
        return pages

    def spans(self, shard: Shard, window: Window) -> tuple[int, int] | None:
        """The shard-local rows a pyarrow read of ``window`` decodes, or None (DuckDB reads it).

        A read decodes every row of the row groups the window overlaps; a window cut from a
        large row group shares them with the other windows cut from it.
        """
        found = self._groups(shard, window)
        if found is None:
            return None
        _, _, first, rows = found
        return first, first + rows

    def _groups(
        self, shard: Shard, window: Window
    ) -> tuple[ShardPages, list[int], int, int] | None:
        """What a pyarrow read of ``window`` decodes, or None (not on the allow-list).

        Returns:
            The shard's pages, the row groups, the shard-local first row of the first group
            and the groups' rows.
        """
        pages = self._pages(shard)
        if pages is None or pages.leaves is None or not window.rows:
            return None
        groups, skip = window_row_groups(shard.row_groups, window)
        return pages, groups, window.start - skip, sum(shard.row_groups[g][0] for g in groups)

    def batches(
        self, shard: Shard, window: Window, spare: Spare | None = None
    ) -> Iterator[pa.RecordBatch] | None:
        """The window's rows as record batches decoded by pyarrow, or None (DuckDB reads it).

        The caller checks that the shard is unchanged before and after, counts the batches
        against the read limit, and falls back to DuckDB on any exception.

        Args:
            shard: The window's (local, unchanged) shard.
            window: The window.
            spare: Where rows of other windows that the read decodes anyway are kept.

        Returns:
            An iterator of batches holding exactly the window's rows (if the file is as its
            pages say), or None when the window is not on the allow-list or its bound
            exceeds the read limit.
        """
        found = self._groups(shard, window)
        if found is None:
            return None
        pages, groups, first, expected = found
        total = self._bound(pages, groups, weigh=False)
        # the bound decides two things: whether pyarrow may read the window (the cap) and
        # its batches (_batch_rows, which only shrink as the bound grows); a looser bound
        # that decides both as the least bound would is used as it is, and the dictionaries
        # of strings are read to weigh their values only when it does not (each a read and
        # a decompression per row group: about 0.1 ms a shard of 1,000 rows)
        least = _batch_rows(window, first, expected, 0)  # the batches of the least bound
        if total is not None and (
            total > self.cap or _batch_rows(window, first, expected, total) != least
        ):
            total = self._bound(pages, groups, weigh=True)
        if not groups or total is None or total > self.cap:
            return None
        return self._iterate(pages, groups, window, first, expected, total, spare)

    @staticmethod
    def _bound(pages: ShardPages, groups: list[int], *, weigh: bool) -> int | None:
        """The groups' decode bound (:meth:`ShardPages.bound`), or None if one has none."""
        total = 0
        for group in groups:
            bound = pages.bound(group, weigh=weigh)
            if bound is None:
                return None
            total += bound
        return total

    def _iterate(
        self, pages: ShardPages, groups: list[int], window: Window, first: int, expected: int,
        bound: int, spare: Spare | None,
    ) -> Iterator[pa.RecordBatch]:
        key = (pages.path, tuple(groups))
        with self._guard:
            if os.getpid() != self._pid:  # a forked child: the parent's readers are not ours
                self._streams = OrderedDict()
                self._pid = os.getpid()
            # claimed by this read alone; a read of the same groups at the same moment opens
            # its own (read-ahead never schedules two windows of one stream at once)
            stream = self._streams.pop(key, None)
        if stream is not None and stream.start > window.start:
            stream.close()  # it went past this window: decode the groups again
            stream = None
        if stream is None:
            stream = _GroupStream(
                pages, groups, self.columns, self._text, first, expected,
                batch_rows=_batch_rows(window, first, expected, bound),
                threads=self.threads,
                # the window is its groups: their lists are its own rows, within the cap
                whole=window.start == first and window.rows == expected,
            )
            self.stats["streams"] += 1
            self.stats["fixed_lists"] += stream.fast_columns
            self.stats["streamed_lists"] += stream.streamed_columns
        declined = stream.declined_columns
        # DuckDB decodes a row group in vectors of VECTOR_ROWS rows from its start, and
        # checks the pages it decodes: the stream decodes (and checks) at least up to the
        # end of the vector holding the window's last row, so a window this read accepts
        # is one DuckDB accepts (else DuckDB reads it, and reports); the rows past the
        # window are held for the next one. Windows spanning whole groups decode them all.
        target = first + expected
        if len(groups) == 1:
            target = min(target, first + -(-(window.stop - first) // VECTOR_ROWS) * VECTOR_ROWS)
        done = False
        try:
            for batch, at in stream.pull(window.stop, target):
                if spare is not None:
                    spare.offer(batch, at)
                n = batch.num_rows
                a, b = max(window.start, at), min(window.stop, at + n)
                if a < b:
                    yield batch if b - a == n else batch.slice(a - at, b - a)
            done = True
        finally:
            self.stats["lists_declined"] += stream.declined_columns - declined
            if done and not stream.finished:
                self._park(key, stream)
            else:  # finished, or failed part-way (nothing of it is trusted again)
                stream.close()

    def _park(self, key: tuple[str, tuple[int, ...]], stream: _GroupStream) -> None:
        """Keep ``stream`` open for the next window of its groups, within the bounds.

        Its rows decoded past the window (up to the end of its DuckDB vector or group) are
        outside the cache, and are what the next window of a sequential pass reads: the
        stream just used is always kept. The others, left by earlier windows, are at most
        :data:`MAX_STREAMS` and hold at most ``park_cap`` bytes of such rows together (uniform
        random reads of groups cut into windows left four groups' halves there, beyond the
        budget); the oldest are closed first (a group is decoded again if needed).
        """
        cap = self.park_cap
        closing: list[_GroupStream] = []
        with self._guard:
            old = self._streams.pop(key, None)
            if old is not None:
                closing.append(old)
            held = sum(s.held_bytes for s in self._streams.values())
            while self._streams and (
                len(self._streams) >= MAX_STREAMS or (cap is not None and held > cap)
            ):
                _, oldest = self._streams.popitem(last=False)
                held -= oldest.held_bytes
                closing.append(oldest)
            self._streams[key] = stream
        for done in closing:
            done.close()

    def close(self) -> None:
        """Close the row-group readers kept open between windows."""
        with self._guard:
            streams, self._streams = list(self._streams.values()), OrderedDict()
        if self._pid == os.getpid():
            for stream in streams:
                stream.close()

    def undecompressible(self, shard: Shard, window: Window) -> tuple[str, int] | None:
        """The column and row group of ``window``'s read holding a page its codec refuses.

        Each column of each row group the read decodes is decoded alone, in order, after
        the read failed (no cost otherwise).

        Returns:
            ``(column, group)``, or None where no page is found (the file changed, or the
            failure needs columns together).
        """
        found = self._groups(shard, window)
        if found is None:
            return None
        pages, groups, _, _ = found
        leaves = [index for index, _ in pages.leaves or ()]
        for group in groups:
            for name, leaf in zip(self.columns, leaves, strict=False):
                reader = _open_reader(pages)
                try:
                    for _ in reader.iter_batches(
                        VECTOR_ROWS, row_groups=[group], column_indices=[leaf], use_threads=False
                    ):
                        pass
                except (OSError, pa.ArrowException) as exc:
                    if failures.is_codec_failure(exc):
                        return name, group
                finally:
                    reader.close()
        return None

    def resumes_at(self, shard: Shard, window: Window) -> int | None:
        """The shard-local row a read of ``window`` starts decoding at (None: not pyarrow's).

        The row after the rows already decoded when a reader of its row groups is open at
        or before the window (the consumer moved on sequentially), else the groups' first.
        """
        found = self._groups(shard, window)
        if found is None:
            return None
        _, groups, first, _ = found
        with self._guard:
            stream = self._streams.get((shard.path, tuple(groups)))
            if stream is not None and stream.start <= window.start and self._pid == os.getpid():
                return stream.start
        return first


def _batch_rows(window: Window, first: int, expected: int, bound: int) -> int:
    """Rows per batch of a read of row groups for ``window``.

    ``first`` is the groups' first shard-local row, ``expected`` their rows and ``bound``
    the page headers' bound of their decoded bytes.

    The window's rows when the windows cut from the groups line up with them (equal pieces
    from the groups' first row) and that many rows fit in :data:`DECODE_BATCH_BYTES`: each
    window is then one batch, kept as decoded rather than copied out of two. Else batches of
    at most that many bytes (at least :data:`VECTOR_ROWS` rows), joined into the window.
    """
    per_row = bound / expected if expected else 0.0
    fit = int(DECODE_BATCH_BYTES // per_row) if per_row > 0 else window.rows
    aligned = (window.start - first) % window.rows == 0
    if aligned and window.rows <= fit:
        return window.rows
    return max(VECTOR_ROWS, min(fit, window.rows)) if aligned else VECTOR_ROWS


class _GroupStream:
    """An open pyarrow reader of row groups, decoding each row once as windows ask for rows.

    Args:
        pages: The shard's pages.
        groups: The row groups, in order.
        columns: The columns to decode.
        text: The string columns whose UTF-8 is checked.
        first: The shard-local first row of the first group.
        expected: The groups' rows (from the footer).
        batch_rows: Rows per decoded batch.
        threads: Whether pyarrow may decode columns in parallel.
        whole: Whether one window is the groups' rows: its fixed-length numeric lists are
            then decoded by :mod:`fixed_lists` where their pages allow.
    """

    def __init__(
        self, pages: ShardPages, groups: list[int], columns: list[str], text: list[str],
        first: int, expected: int, *, batch_rows: int, threads: bool, whole: bool = False,
    ) -> None:
        self._file = _open_reader(pages)  # CRC-32s checked, into read_pool()
        # the allow-list found one leaf per column (pages.leaves, in the columns' order)
        leaves = [index for index, _ in pages.leaves or ()]
        if len(leaves) != len(columns):
            self._file.close()
            raise ValueError("the shard's leaves do not match the columns")
        self._fields = [self._file.schema_arrow.field(name) for name in columns]
        self._schema = pa.schema(self._fields)
        # columns of fixed-length numeric lists whose pages decode without their levels
        # (core/parquet/fixed_lists.py); pyarrow decodes the others
        self._fast = (
            _fixed_lists(pages, groups, leaves, self._fields, expected)
            if whole and FIXED_LISTS else {}
        )
        # a window cut from the groups: their lists decoded page by page as rows are asked
        # for, each batch in a buffer of its own (so windows share none)
        self._streamed = (
            _streamed_lists(pages, groups, leaves, self._fields, batch_rows=batch_rows,
                            threads=threads)
            if not whole and FIXED_LISTS else {}
        )
        #: How many columns :mod:`fixed_lists` decoded whole (pyarrow decodes the others).
        self.fast_columns = len(self._fast)
        #: How many columns :mod:`fixed_lists` decodes page by page (pyarrow the others).
        self.streamed_columns = len(self._streamed)
        rest = [
            leaf for i, leaf in enumerate(leaves) if i not in self._fast and i not in self._streamed
        ]
        self._batch_rows = batch_rows
        self._first_row = first
        self._batches: Iterator[pa.RecordBatch] = (
            self._joined(self._file.iter_batches(
                batch_rows, row_groups=groups, column_indices=rest, use_threads=threads,
            ) if rest else None, first + expected)
            if self._fast or self._streamed
            else self._file.iter_batches(
                batch_rows, row_groups=groups, column_indices=leaves, use_threads=threads
            )
        )
        self._text = text
        self.first = first
        self.end = first + expected
        self._at = first  # the shard-local row after the last one decoded
        self._held: deque[pa.RecordBatch] = deque()  # decoded, not yet handed out
        self._held_rows = 0
        #: Whether every row has been handed out (the reader is then closed).
        self.finished = False

    def _joined(
        self, rest: Iterator[pa.RecordBatch] | None, end: int
    ) -> Iterator[pa.RecordBatch]:
        """Pyarrow's batches of the other columns with the fixed-length lists' rows beside."""
        at = self._first_row
        while True:
            if rest is not None:
                batch = next(rest, None)
                if batch is None:
                    return
                n = batch.num_rows
            elif at < end:
                batch, n = None, min(self._batch_rows, end - at)
            else:
                return
            arrays = []
            for i, field in enumerate(self._fields):
                streamed = self._streamed.get(i)
                if streamed is not None:
                    arrays.append(streamed.take(n))
                    continue
                values = self._fast.get(i)
                if values is None:
                    assert batch is not None
                    arrays.append(batch.column(field.name))
                    continue
                rows = values[at - self._first_row:at - self._first_row + n]
                if len(rows) != n:
                    raise ValueError("the row groups hold fewer rows than their lists")
                arrays.append(_list_array(field, rows))
            yield pa.RecordBatch.from_arrays(arrays, schema=self._schema)
            at += n

    @property
    def held_bytes(self) -> int:
        """Arrow bytes of the rows decoded and not yet handed out (slices counted as such)."""
        return sum(batch.nbytes for batch in self._held)

    @property
    def start(self) -> int:
        """The shard-local row the next window read from this stream starts at."""
        return self._at - self._held_rows

    def pull(self, stop: int, target: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Hand out the rows before ``stop`` (with their first row); decode up to ``target``.

        Rows decoded past ``stop`` are held for the next call.
        """
        while self._at < max(stop, target):
            batch = next(self._batches, None)
            if batch is None:
                break
            # every row decoded is checked, as DuckDB checks the pages it decodes
            for name in self._text:
                batch.column(name).validate(full=True)
            self._held.append(batch)
            self._held_rows += batch.num_rows
            self._at += batch.num_rows
        if self._at > self.end or (self._at < max(stop, target) and self._at != self.end):
            raise ValueError(
                f"pyarrow decoded {self._at - self.first} rows of row groups of "
                f"{self.end - self.first}"
            )
        if self._at == self.end and next(self._batches, None) is not None:
            raise ValueError("pyarrow decoded more rows than the row groups hold")
        while self._held and self.start < stop:
            at = self.start
            batch = self._held.popleft()
            n = batch.num_rows
            self._held_rows -= n
            if at + n > stop:  # the rest belongs to the next window
                self._held.appendleft(batch.slice(stop - at))
                self._held_rows += at + n - stop
                batch = batch.slice(0, stop - at)
            yield batch, at
        if self._at == self.end and not self._held:
            self.finished = True
            self.close()

    def close(self) -> None:
        """Drop what is held and close the files."""
        self._held.clear()
        self._held_rows = 0
        self._file.close()
        for streamed in self._streamed.values():
            streamed.close()

    @property
    def declined_columns(self) -> int:
        """Streamed list columns handed to pyarrow part-way (a page the module declined)."""
        return sum(streamed.declined for streamed in self._streamed.values())


#: Whether the fixed-length numeric lists of row groups are decoded by
#: core/parquet/fixed_lists.py: whole for a window that is its groups, page by page for
#: windows cut from them (False: pyarrow decodes every column, as before it).
FIXED_LISTS = True


def _fixed_lists(
    pages: ShardPages, groups: list[int], leaves: list[int], fields: list[pa.Field],
    expected: int,
) -> dict[int, np.ndarray[Any, Any]]:
    """The columns of ``groups`` decoded by :mod:`fixed_lists`, by position (rows x length).

    Called for a window that is its row groups: each column is decoded whole, in one
    buffer the window then holds alone (a buffer shared by windows cut from the groups
    would outlive the cache's eviction of some of them).
    """
    if not any(pa.types.is_list(field.type) for field in fields):
        return {}
    meta = pages.meta
    wanted = _list_dtypes(pages, groups[0], leaves, fields)
    if not wanted:
        return {}
    found: dict[int, np.ndarray] = {}
    try:
        with open(pages.path, "rb") as fh:
            for i, dtype, per_row in wanted:
                leaf = leaves[i]
                # sized by the footer's values, which the allow-list found equal to the page
                # headers' and counted within the read limit (pages.ShardPages.bound).
                # decoded in place, group after group: one copy, the one the window holds;
                # in read_pool() as pyarrow's decodes (numpy's own large arrays ask for huge
                # pages, which cost more to fault in here: decision 0020)
                memory = pa.allocate_buffer(expected * per_row * dtype.itemsize,
                                            memory_pool=read_pool())
                out = np.frombuffer(memory, dtype=dtype).reshape(expected, per_row)
                at = 0
                for group in groups:
                    rg = meta.row_group(group)
                    chunk = rg.column(leaf)
                    start, end = parquet_pages.chunk_range(chunk)
                    part = fixed_lists.decode_pages(
                        fh, start, end, codec=chunk.compression, physical=chunk.physical_type,
                        dtype=dtype,
                        max_definition=meta.schema.column(leaf).max_definition_level,
                        rows=rg.num_rows, values=chunk.num_values,
                        out=out[at:at + rg.num_rows], pool=read_pool(),
                    )
                    if part is None:
                        break
                    at += rg.num_rows
                else:
                    if at == expected:
                        found[i] = out
    except (OSError, ValueError, TypeError, NotImplementedError, pa.ArrowException):
        return {}
    return found


def _list_dtypes(
    pages: ShardPages, group: int, leaves: list[int], fields: list[pa.Field],
) -> list[tuple[int, np.dtype[Any], int]]:
    """The list columns :mod:`fixed_lists` may decode: ``(column, value dtype, per row)``.

    Judged by ``group``'s chunks: a column whose rows cannot all be that long is pyarrow's.
    """
    first = pages.meta.row_group(group)
    wanted = []
    for i, field in enumerate(fields):
        if not pa.types.is_list(field.type):
            continue
        head = first.column(leaves[i])
        dtype = fixed_lists.value_dtype(field.type.value_type, head.physical_type)
        per_row, left = divmod(head.num_values, max(first.num_rows, 1))
        if dtype is not None and per_row and not left:
            wanted.append((i, dtype, per_row))
    return wanted


def _streamed_lists(
    pages: ShardPages, groups: list[int], leaves: list[int], fields: list[pa.Field],
    *, batch_rows: int, threads: bool,
) -> dict[int, _StreamedList]:
    """The list columns of ``groups`` to decode page by page (:class:`_StreamedList`)."""
    if not groups:
        return {}
    found: dict[int, _StreamedList] = {}
    try:
        for i, dtype, per_row in _list_dtypes(pages, groups[0], leaves, fields):
            found[i] = _StreamedList(pages, groups, leaves[i], fields[i], dtype, per_row,
                                     batch_rows=batch_rows, threads=threads)
    except (OSError, ValueError, IndexError, pa.ArrowException):
        for opened in found.values():  # pyarrow decodes them all, as before
            opened.close()
        return {}
    return found


class _StreamedList:
    """One fixed-length list column of row groups, decoded page by page as rows are taken.

    A window cut from a row group takes its rows (:meth:`take`) in a buffer of its own,
    filled by :class:`fixed_lists.ChunkStream` from the group's pages, one group after the
    other. From the first page the module declines (or a group whose lists are not all
    ``per_row`` long), pyarrow decodes the column instead: its reader of the column starts
    at the groups' first row and passes over the rows already handed out.

    Args:
        pages: The shard's pages.
        groups: The row groups, in order.
        leaf: The column's leaf.
        field: The column's Arrow field (a list).
        dtype: The numpy dtype of its values.
        per_row: Values per row.
        batch_rows: Rows per batch of pyarrow's reader, if it takes over.
        threads: Whether pyarrow may decode in parallel (its fallback reader).
    """

    def __init__(
        self, pages: ShardPages, groups: list[int], leaf: int, field: pa.Field,
        dtype: np.dtype[Any], per_row: int, *, batch_rows: int, threads: bool,
    ) -> None:
        self._pages = pages
        self._groups = list(groups)
        self._leaf = leaf
        self._field = field
        self._dtype = dtype
        self._per_row = per_row
        self._threads = threads
        self._batch_rows = max(1, batch_rows)
        self._next_group = 0
        self._chunk: fixed_lists.ChunkStream | None = None
        self._fh: io.BufferedReader | None = open(pages.path, "rb")  # noqa: SIM115
        self._taken = 0  # rows handed out
        self._fallback: Iterator[pa.RecordBatch] | None = None
        self._reader: pq.ParquetReader | None = None
        self._held: deque[pa.Array] = deque()  # the fallback's rows not handed out yet
        #: Whether pyarrow took over part-way.
        self.declined = False

    def take(self, n: int) -> pa.Array:
        """The next ``n`` rows, as a list array over a buffer of their own.

        Raises:
            ValueError: If the groups end before ``n`` more rows (as pyarrow reports it).
        """
        if not self.declined:
            memory = pa.allocate_buffer(n * self._per_row * self._dtype.itemsize,
                                        memory_pool=read_pool())
            rows = np.frombuffer(memory, dtype=self._dtype).reshape(n, self._per_row)
            if self._fill(rows):
                self._taken += n
                return _list_array(self._field, rows)
            self._decline()
        return self._from_pyarrow(n)

    def _fill(self, rows: np.ndarray[Any, Any]) -> bool:
        """Fill ``rows`` from the groups' pages; False once the module declines a page."""
        flat = rows.reshape(-1)
        done, want = 0, len(rows)
        while done < want:
            chunk = self._chunk
            if chunk is None or chunk.ended():
                chunk = self._open_next()
                if chunk is None:
                    return False
            got = chunk.fill(flat[done * self._per_row:])
            if chunk.declined or (got == 0 and not chunk.ended()):
                return False
            done += got
        return True

    def _open_next(self) -> fixed_lists.ChunkStream | None:
        """The next group's chunk stream (None: no more groups, or not this module's)."""
        if self._next_group >= len(self._groups) or self._fh is None:
            return None
        meta = self._pages.meta
        rg = meta.row_group(self._groups[self._next_group])
        self._next_group += 1
        chunk = rg.column(self._leaf)
        start, end = parquet_pages.chunk_range(chunk)
        stream = fixed_lists.ChunkStream(
            self._fh, start, end, codec=chunk.compression, physical=chunk.physical_type,
            dtype=self._dtype, max_definition=meta.schema.column(self._leaf).max_definition_level,
            rows=rg.num_rows, values=chunk.num_values, pool=read_pool(),
        )
        self._chunk = stream
        # the group's rows are all per_row long (its values per row, as the stream finds)
        return stream if stream.length == self._per_row else None

    def _decline(self) -> None:
        """Hand the column to pyarrow from the row after those handed out."""
        self.declined = True
        self._chunk = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        reader = _open_reader(self._pages)
        self._reader = reader
        self._fallback = reader.iter_batches(
            self._batch_rows, row_groups=self._groups,
            column_indices=[self._leaf], use_threads=self._threads,
        )
        self._pull(self._taken)  # the rows already handed out, passed over

    def _from_pyarrow(self, n: int) -> pa.Array:
        """The next ``n`` rows from pyarrow's reader of the column."""
        parts = self._pull(n)
        self._taken += n
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

    def _pull(self, n: int) -> list[pa.Array]:
        """The next ``n`` rows of pyarrow's reader, in pieces (rows past them held)."""
        assert self._fallback is not None
        parts: list[pa.Array] = []
        need = n
        while need:
            if not self._held:
                batch = next(self._fallback, None)
                if batch is None:
                    raise ValueError("the row groups hold fewer rows than their lists")
                self._held.append(batch.column(0))
                continue
            part = self._held.popleft()
            if len(part) > need:
                self._held.appendleft(part.slice(need))
                part = part.slice(0, need)
            parts.append(part)
            need -= len(part)
        return parts

    def close(self) -> None:
        """Close the files."""
        self._held.clear()
        self._chunk = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _open_reader(pages: ShardPages) -> pq.ParquetReader:
    """Open pyarrow's reader of a shard, decoding into ``read_pool()`` (decision 0022).

    Pages that record a CRC-32 are checked as they are decoded: a mismatch fails the read,
    and DuckDB's path then checks the group and names the page (window_read.py).
    """
    reader = pq.ParquetReader(memory_pool=read_pool())
    reader.open(
        pages.path, metadata=pages.meta, buffer_size=1 << 16, pre_buffer=False,
        page_checksum_verification=True,
    )
    return reader


def _list_array(field: pa.Field, rows: np.ndarray[Any, Any]) -> pa.Array:
    """A list array of ``field``'s type over ``rows`` (rows x values, C-contiguous)."""
    n, width = rows.shape
    # built from buffers: pa.array() of a numpy array imports pandas (decision 0019)
    offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * width)
    items = pa.Array.from_buffers(field.type.value_type, rows.size, [None, pa.py_buffer(rows)])
    return pa.Array.from_buffers(field.type, n, [None, offsets], children=[items])


class Spare:
    """Rows of other windows that one window's read decodes anyway, kept within a cap.

    A window cut from a large row group is read by decoding the whole group; the other
    windows cut from it are collected here, so that the group is decoded once rather than
    once per window. Past ``cap`` bytes (the batches the kept rows hold on to) everything
    collected is dropped and the windows are read again when needed: the cap is room made
    in the cache beforehand.

    Args:
        ranges: For each window position wanted, its shard-local ``(start, stop)`` rows.
        cap: Most bytes to hold.
    """

    def __init__(self, ranges: dict[int, tuple[int, int]], cap: int) -> None:
        self.ranges = ranges
        self.cap = cap
        self.parts: dict[int, list[pa.RecordBatch]] = {p: [] for p in ranges}
        self.held = 0

    def offer(self, batch: pa.RecordBatch, at: int) -> None:
        """Keep the rows of ``batch`` (whose first row is shard-local row ``at``) wanted."""
        if not self.parts:
            return
        n = batch.num_rows
        counted = False
        for position, (start, stop) in self.ranges.items():
            a, b = max(start, at), min(stop, at + n)
            if a < b:
                if not counted:  # a slice keeps its whole batch alive: count the batch
                    counted = True
                    self.held += batch.get_total_buffer_size()
                    if self.held > self.cap:
                        self.parts.clear()
                        return
                self.parts[position].append(batch if b - a == n else batch.slice(a - at, b - a))

    def tables(self) -> dict[int, pa.Table]:
        """The windows collected whole, as tables (none once past the cap)."""
        out: dict[int, pa.Table] = {}
        for position, parts in self.parts.items():
            start, stop = self.ranges[position]
            if parts and sum(p.num_rows for p in parts) == stop - start:
                out[position] = pa.Table.from_batches(parts)
        return out


def _has_text(typ: pa.DataType) -> bool:
    if pa.types.is_dictionary(typ) or pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ = typ.value_type
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ))


__all__ = ["DirectReader", "Spare"]
