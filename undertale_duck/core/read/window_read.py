"""Decode one window into an Arrow table: by pyarrow when allowed, else by DuckDB; one guard."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import duckdb
import pyarrow as pa

from ...common.sizes import MIB
from ...common.text import first_line
from ...errors import CorruptShardError, MemoryBudgetError, ShardChangedError, SourceError
from ..bounds import NestedBound, ValueBound, read_bounded
from ..parquet import footers, pages
from ..runtime import (
    Connection,
    duckdb_path,
    failures,
    interruptible,
    lifecycle,
    read_pool,
    sqlfiles,
)
from ..source import (
    Shard,
    Source,
    Window,
    conform,
    drift_error,
    own_schema,
    touched_bytes,
    window_row_groups,
)
from .direct import DirectReader, Spare

#: Rows per Arrow record batch asked of DuckDB for a window (its vector size). Small batches
#: are cheaper for DuckDB to build than its 131072-row default, whose list buffers grow by
#: reallocation and keep spare capacity (measured on 512-token rows, paired A/B in one
#: process: workers=0 epoch to tensors 1.23x, 8 of 8 repeats). The batches are then copied
#: into one chunk per column.
ARROW_BATCH_ROWS = 2048

#: DuckDB queries kept open on row groups cut into windows. One: a query holds its row
#: group's buffers outside the cache's budget, and a pass reads one group at a time.
MAX_DUCK_STREAMS = 1

#: Most chunks per column a window decoded by pyarrow is kept in as decoded. Its batches
#: are sized to their rows (at most ``direct.DECODE_BATCH_BYTES`` each), so keeping them
#: spares the copy into one buffer per column: 1.3-1.5 us of CPU per row of 512 tokens and
#: 512 mask values, about an eighth of a first epoch (decision 0030). A batch's rows are
#: then sliced from the chunk that holds them (``gather.Parts``); past this many chunks
#: the window is copied into one, as DuckDB's are.
MAX_KEPT_CHUNKS = 16

#: Row groups remembered as having matching page checksums (each checked once per process).
MAX_CHECKSUMMED = 65_536


def _local_rows(shard: Shard, group: int) -> str:
    """``"local rows A..B"``: the shard-local rows of one of its row groups, for errors."""
    first = sum(rows for rows, _ in shard.row_groups[:group])
    return f"local rows {first}..{first + shard.row_groups[group][0] - 1}"


class OpenQuery:
    """A DuckDB query over the rest of one row group, kept open between window reads.

    A row group larger than a window is cut into several windows; reading each with its own
    query makes DuckDB decode the group's earlier rows again to find the window's, so the
    windows of a group read one after another continue one query instead: every row of the
    group is decoded once. Rows decoded past a window are held for the next.

    Args:
        cursor: A cursor of its own (closed with the query, and with the database before a
            fork or at exit).
        reader: The query's Arrow batches.
        start: The shard-local first source row of the query.
        stop: The shard-local row after the group's last.
        generation: The connection holder's generation when the cursor was opened.
    """

    def __init__(
        self, cursor: duckdb.DuckDBPyConnection, reader: pa.RecordBatchReader, start: int,
        stop: int, *, generation: int,
    ) -> None:
        #: The shard-local source row the query has reached (decoded, or served).
        self.at = start
        self.cursor = cursor
        self._reader = reader
        #: The connection holder's generation the cursor belongs to (another: it is closed).
        self.generation = generation
        #: The query's Arrow schema.
        self.schema = reader.schema
        self.end = stop
        self._held: deque[pa.RecordBatch] = deque()
        self._held_rows = 0

    @property
    def finished(self) -> bool:
        """Whether the query has served its row group's last window."""
        raise NotImplementedError

    def reaches(self, win: Window) -> bool:
        """Whether ``win`` is the window the query serves next."""
        raise NotImplementedError

    def _decode(self) -> pa.RecordBatch | None:
        """Decode the query's next batch and hold it (None: the query has ended)."""
        try:
            batch = self._reader.read_next_batch()
        except StopIteration:
            return None
        self._held.append(batch)
        self._held_rows += batch.num_rows
        return batch

    def _hand_out(self, rows: int) -> Iterator[pa.RecordBatch]:
        """Hand out the next ``rows`` held rows; the rest of a batch stays held."""
        left = rows
        while left and self._held:
            batch = self._held.popleft()
            n = batch.num_rows
            self._held_rows -= n
            if n > left:  # the rest belongs to the next window
                self._held.appendleft(batch.slice(left))
                self._held_rows += n - left
                batch = batch.slice(0, left)
                n = left
            left -= n
            if n:
                yield batch

    def close(self) -> None:
        """End the query and close its cursor."""
        self._held.clear()
        self._held_rows = 0
        self.release()

    def release(self) -> None:
        """Close the query's reader and cursor; where it reached is kept (see ``reaches``)."""
        # the connection may have been closed or reopened meanwhile: nothing to release
        with contextlib.suppress(duckdb.Error, pa.ArrowException, OSError):
            self._reader.close()
            self.cursor.close()


class DuckStream(OpenQuery):
    """A plain dataset's :class:`OpenQuery` (arguments as its).

    Each source row is a row of the result; :attr:`at` is the row after the last decoded.
    """

    @property
    def start(self) -> int:
        """The shard-local row the next window read from this stream starts at."""
        return self.at - self._held_rows

    def reaches(self, win: Window) -> bool:
        """Whether ``win`` starts where the query stands."""
        return self.start == win.start

    @property
    def finished(self) -> bool:
        """Whether every row of the query has been handed out."""
        return self.start >= self.end

    def pull(self, stop: int) -> Iterator[pa.RecordBatch]:
        """Hand out the rows up to ``stop`` (shard-local), decoding as needed."""
        while self.at < stop:
            batch = self._decode()
            if batch is None:
                raise ValueError(
                    f"DuckDB's query ended at local row {self.at}, before {self.end}"
                )
            self.at += batch.num_rows
        yield from self._hand_out(max(0, stop - self.start))


class ViewStream(OpenQuery):
    """A view's :class:`OpenQuery` (arguments as its): the view keeps some source rows.

    Each window takes the next ``window.rows`` rows of the query's result (in source order:
    the view is a scan), and the caller checks their source row numbers; :attr:`at` is the
    source row after the last window served.
    """

    #: The global offset of the window that continues the query (the view's next).
    next_offset: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the windows have reached the end of the row group."""
        return self.at >= self.end

    def reaches(self, win: Window) -> bool:
        """Whether ``win`` is the view's next window after the last one served."""
        return self.next_offset == win.offset

    def take(self, rows: int) -> Iterator[pa.RecordBatch]:
        """Hand out the query's next ``rows`` rows, decoding as needed."""
        while self._held_rows < rows:
            if self._decode() is None:
                raise ValueError(f"the view's query ended {rows - self._held_rows} rows short")
        yield from self._hand_out(rows)


Q = TypeVar("Q", bound=OpenQuery)


class ViewWindows(Protocol):
    """How a view's windows are read (implemented by ``view_index.IndexedView``)."""

    def window_query(self, window: Window) -> tuple[str, dict[str, object]]:
        """The SQL reading ``window``, and its parameters (they may override the window's)."""
        ...

    def guarded(self, schema: pa.Schema, columns: Sequence[str]) -> dict[str, tuple[str, Any]]:
        """The view's window queries with a value bound in their scan, and the bound."""
        ...

    def reads(self, column: str) -> bool:
        """Whether the view's query reads a column of the dataset."""
        ...

    def check_unchanged(self) -> None:
        """Raise ShardChangedError if a side table changed since the view was indexed."""
        ...

    @property
    def streams(self) -> bool:
        """Whether the windows cut from one row group may be read by one query, in turn."""
        ...

    @property
    def order_column(self) -> str:
        """The result column holding each row's source row number."""
        ...

    def stream_query(
        self, window: Window, first: int, stop: int
    ) -> tuple[str, dict[str, object]] | None:
        """The SQL reading the view's rows from ``window`` to local row ``stop``, or None."""
        ...


def one_buffer(table: pa.Table) -> pa.Table:
    """``table`` copied into one exactly sized buffer per column, in the pool of our reads."""
    return pa.concat_tables([table, table.slice(0, 0)]).combine_chunks(memory_pool=read_pool())


class WindowDecoder:
    """Decode windows of a dataset: pyarrow for windows :mod:`pages` allows, DuckDB otherwise.

    Args:
        source: The dataset's shards and schema.
        windows: The window plan.
        connection: The process's DuckDB connection holder.
        schema: The rows' Arrow schema (a view's; default the source's).
        view: How a view's windows are read, or None for the plain dataset.
        read_limit: Most bytes one window read may decompress or decode (0: no limit).
        direct: Whether windows on the allow-list of :mod:`pages` are decoded by pyarrow
            (:mod:`direct`); views and remote shards always go through DuckDB.
        threads: Whether pyarrow may decode a window's columns in parallel.
    """

    def __init__(
        self,
        source: Source,
        windows: Sequence[Window],
        connection: Connection,
        *,
        schema: pa.Schema | None = None,
        view: ViewWindows | None = None,
        read_limit: int = 0,
        direct: bool = True,
        threads: bool = False,
    ) -> None:
        self.source = source
        self.windows = windows
        self.connection = connection
        self.schema = source.schema if schema is None else schema
        self.read_limit = read_limit
        self._view = view
        #: Whether a window pyarrow decodes may be kept in its decoded batches (at most
        #: :data:`MAX_KEPT_CHUNKS`) rather than copied into one buffer per column: only where
        #: batches slice it in order (the reader clears it under a read-ahead order, whose
        #: shuffled rows are taken from one buffer faster, and with a disk tier).
        self.keep_chunks = True
        #: pyarrow's reader for plain windows of local shards (None: DuckDB reads every one).
        self.direct: DirectReader | None = None
        if direct and view is None and source.store is None:
            self.direct = DirectReader(source.columns, self.schema, read_limit, threads=threads)
        columns = sqlfiles.column_list(source.columns)
        self._sql = sqlfiles.render("read_window", columns=columns, guard="")
        self._sql_file = sqlfiles.render("read_file", columns=columns, guard="")
        # string and binary values are bounded before DuckDB materialises them (decoded.py),
        # by the types each shard holds: a shard whose column drifted from text to numbers
        # has no string there to bound (and one drifted to text has)
        self._templates = {self._sql: "read_window", self._sql_file: "read_file"}
        self._shard_guards: dict[tuple[str, int], tuple[str, ValueBound] | None] = {}
        self._guarded: dict[str, tuple[str, ValueBound]] = {}
        # and strings nested in lists, structs and maps, from page headers (nested.py)
        # (a view: only the columns its query reads, as for the filter)
        nested = [c for c in source.columns if view is None or view.reads(c)]
        self._nested = NestedBound(source.schema, nested)
        if view is not None:  # a view's scan bounds the columns the view reads
            self._guarded.update(view.guarded(source.schema, list(source.columns)))
        #: DuckDB queries left open on row groups cut into windows, by (path, first row):
        #: :class:`DuckStream` for a plain dataset, :class:`ViewStream` for a view.
        self._open_queries: OrderedDict[tuple[str, int], OpenQuery] = OrderedDict()
        self._stream_lock = threading.Lock()
        self._pid = os.getpid()
        lifecycle.track_queries(self)  # closed before fork() (their cursors hold the database)
        #: The window the consumption order reads after each window (the reader's hint, set
        #: by a sampler's order; empty: none).
        self.order_next: dict[int, int] = {}
        #: The window the consumer moved to last, the one it was on before, and how many
        #: windows past it the read-ahead reads (set by the reader; None: no window yet).
        self.current: int | None = None
        self.previous: int | None = None
        self.reach = 1
        #: DuckDB queries begun on row groups cut into windows ("streams"), and windows
        #: read by continuing one ("continued").
        self.stream_stats = {"streams": 0, "continued": 0}
        #: Row groups whose recorded page checksums were found to match, by (local file,
        #: its mtime, group; -1: the file records none): each is checked once per process.
        self._checksummed: OrderedDict[tuple[str, int, int], None] = OrderedDict()
        self._checksum_lock = threading.Lock()

    def close(self) -> None:
        """Close the readers kept open on row groups between windows."""
        with self._stream_lock:
            streams, self._open_queries = list(self._open_queries.values()), OrderedDict()
            mine = self._pid == os.getpid()
        if mine:
            for stream in streams:
                stream.close()
        if self.direct is not None:
            self.direct.close()

    def close_queries(self) -> None:
        """Close the DuckDB queries kept open on row groups, before ``fork()``.

        Each holds a cursor that keeps the database alive past the connection's close, and
        a child dropping the parent's waited in the database's destructor for threads only
        the parent has (:func:`.lifecycle.track_queries`). They stay where they were, closed:
        the next window of their group begins a new query from there (:meth:`_resume`).
        """
        with self._stream_lock:
            streams = list(self._open_queries.values())
            mine = self._pid == os.getpid()
        if mine:
            for stream in streams:
                stream.release()

    def decode(self, position: int) -> pa.Table:
        """Read one window from disk: pyarrow when allowed, else DuckDB.

        Args:
            position: The window's position in the plan.

        Returns:
            The window's rows as an Arrow table.

        Raises:
            ShardChangedError: If the shard changed on disk since it was opened.
            MemoryBudgetError: If the window's row groups, or its rows once decoded, exceed
                the read limit (:attr:`read_limit`).
            UnsupportedShardError: If the shard uses a feature DuckDB or Arrow cannot read
                (``EncryptedShardError`` if it is encrypted).
            OutOfRangeError: If DuckDB cannot represent a value of the window.
            CorruptShardError: If the shard's data cannot be decoded.
            SourceError: If the shard lacks a column of the dataset.
        """
        return self.decode_with(position)[0]

    def _span(self, position: int) -> tuple[int, int] | None:
        """The shard-local rows of the row groups ``position`` overlaps (a read's scope).

        None when no other window shares them (the window is its row groups, or a view's).
        """
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        groups, skip = window_row_groups(shard.row_groups, win)
        if _whole_groups(shard, win, groups, skip):
            # decided from the footer's row counts the plan was cut from: the footer itself
            # (checked and parsed once per shard) is left to the read, off the consumer's
            # thread, rather than read here when read-ahead is scheduled
            return None
        if self.direct is not None:
            span = self.direct.spans(shard, win)
            if span is not None:
                return span
        if self._view is not None and not self._view.streams:
            return None
        if len(groups) != 1:  # whole row groups: no other window shares them
            return None
        return win.start - skip, win.start - skip + shard.row_groups[groups[0]][0]

    def _within(self, position: int, span: tuple[int, int], others: Iterable[int]) -> list[int]:
        """The leading ``others`` cut from the same row groups (``span``) as ``position``."""
        win = self.windows[position]
        lo, hi = span

        def within(p: int) -> bool:
            other = self.windows[p]
            return other.shard == win.shard and lo <= other.start and other.stop <= hi

        return list(itertools.takewhile(within, others))

    def neighbours(self, position: int) -> list[int]:
        """Later windows cut from the same row groups as ``position`` (read after it).

        A read of a window cut from a large row group (by pyarrow, or by DuckDB's query, a
        view's included) leaves the group's reader open where the window ends; the next
        windows continue it, one after the other (so read-ahead reads them one at a time).
        Empty for windows spanning whole row groups and views with side tables.
        """
        span = self._span(position)
        if span is None:
            return []
        return self._within(position, span, range(position + 1, len(self.windows)))

    def group_windows(self, position: int) -> list[int]:
        """Every window cut from the same row groups as ``position``, in order.

        Just ``position`` when it spans whole row groups, or is a view's (a view's windows
        are read one by one, each by its own query unless a pass in order reaches them).
        """
        span = None if self._view is not None else self._span(position)
        if span is None:
            return [position]
        before = self._within(position, span, range(position - 1, -1, -1))
        after = self._within(position, span, range(position + 1, len(self.windows)))
        return [*reversed(before), position, *after]

    def passed(self, position: int) -> list[int]:
        """Earlier windows whose rows a pyarrow read of ``position`` decodes on its way.

        A read decodes its row groups from the row where their open reader stands (the
        groups' first row when none is open at or before the window), so the windows before
        it from there are decoded anyway and may be kept (nearest first).
        """
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        if self.direct is None or _whole_groups(
            shard, win, *window_row_groups(shard.row_groups, win)
        ):
            return []
        span = self.direct.spans(shard, win)
        if span is None:
            return []
        start = self.direct.resumes_at(shard, win)
        if start is None or start >= win.start:
            return []
        before = self._within(position, span, range(position - 1, -1, -1))
        return [p for p in before if self.windows[p].start >= start]

    def decode_with(
        self, position: int, neighbours: Sequence[int] = (), room: int = 0
    ) -> tuple[pa.Table, dict[int, pa.Table]]:
        """Read one window, and the ``neighbours`` its read decodes anyway (see :meth:`decode`).

        Args:
            position: The window's position in the plan.
            neighbours: Positions from :meth:`passed` to keep as well.
            room: Most bytes the neighbours may hold while the window is read; past it
                they are dropped.

        Returns:
            The window's table, and the neighbours decoded whole (possibly none: only a
            read by pyarrow that succeeds gives any).
        """
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        what = f"rows {win.offset}..{win.end - 1} (local rows {win.start}..{win.stop - 1})"
        touched = touched_bytes(win, shard.row_groups)
        limit = self.read_limit
        if limit and touched > limit:
            touched = self._touched_columns(shard, win, touched)
        if limit and touched > limit:
            raise MemoryBudgetError(
                f"reading {what} of shard {shard.path} means decompressing row groups of "
                f"{touched / MIB:.4g} MiB (as its footer records), more than the memory budget "
                f"allows for one read ({limit / MIB:.4g} MiB); raise memory if the shard is "
                "trusted (a row group is the smallest unit DuckDB decodes)",
                shard.path,
                (win.offset, win.end),
            )
        spare = None
        if neighbours and room > 0:
            spare = Spare(
                {p: (self.windows[p].start, self.windows[p].stop) for p in neighbours}, room
            )
        # DuckDB reads the shard itself, or its copy in the shard cache (held while read),
        # or a file holding the row groups and columns the window needs, read by ranges
        groups = window_row_groups(shard.row_groups, win)[0]
        columns = list(self.source.columns) if self._view is None else None
        with shard.local(groups, columns) as local:
            table = self._read(position, local, what, touched, spare)
            more: dict[int, pa.Table] = {}
            if spare is not None:
                for p, got in spare.tables().items():
                    try:
                        more[p] = self._finish(p, got.select(list(self.source.columns)), True)
                    except (ValueError, KeyError, pa.ArrowException, SourceError):
                        continue  # read again when needed, by the usual path and its errors
            local.check_unchanged()
        return table, more

    def _read(
        self, position: int, local: Shard, what: str, touched: int, spare: Spare | None = None
    ) -> pa.Table:
        win = self.windows[position]
        local.check_unchanged()
        if self._view is not None:  # side tables are inputs like shards
            self._view.check_unchanged()
        table = self._read_direct(local, win, what, spare)
        direct = table is not None
        if table is None:
            self._check_page_checksums(local, win)
            table = self._read_duckdb(local, win, what, touched, position)
        local.check_unchanged()
        if self._view is not None:
            self._view.check_unchanged()
        if self._view is not None:  # drop the row-number columns the view carried
            table = table.select([n for n in table.column_names if not n.startswith("__ud_")])
        return self._finish(position, table, direct)

    def _finish(self, position: int, table: pa.Table, direct: bool) -> pa.Table:
        """Check a window's rows, conform them to the schema and own their buffers."""
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        # pyarrow's batches are sized to their rows and kept as decoded, unless the window
        # is part of them or is cut into many: then they are copied out like DuckDB's
        most = MAX_KEPT_CHUNKS if self.keep_chunks else 1
        exact = (
            direct
            and all(1 <= c.num_chunks <= most for c in table.columns)
            and table.get_total_buffer_size() <= table.nbytes + (table.nbytes >> 3) + 4096
        )
        if table.num_rows != win.rows:
            if win.kept is not None:
                raise ShardChangedError(
                    f"the view kept {table.num_rows} rows of local rows {win.start}.."
                    f"{win.stop - 1} of shard {shard.path} where its index promises {win.rows}; "
                    "a side table changed since the view was indexed: call refresh()",
                    shard.path,
                )
            raise CorruptShardError(
                f"shard {shard.path} returned {table.num_rows} rows for local rows "
                f"{win.start}..{win.stop - 1} where its footer promises {win.rows}",
                shard.path,
                (win.offset, win.end),
            )
        # a view's rows too: a window reads its shard with the shard's own types, and a
        # drifting column whose values do not fit the view's type was served uncast
        table = conform(table, self.schema, shard, view=self._view is not None)
        if not exact:
            # One contiguous, exactly sized buffer per column, owned by Arrow: rows are then
            # sliced or gathered without per-chunk work (gathers across DuckDB's 2048-row
            # batches cost the consumer 3-4x more CPU than this copy saves the reader, see
            # DESIGN.md), and the cache counts what is really held (not the whole row groups
            # a slice of pyarrow's batch points into). One copy per window read, into the
            # pool of our reads (see read_pool); the reader's own buffers are freed
            # right away.
            table = one_buffer(table)
        return table

    def _touched_columns(self, shard: Shard, win: Window, whole: int) -> int:
        """The footer bytes of the columns read of a window's row groups (``whole``: all).

        A dataset opened with ``columns=`` decodes only those columns' chunks
        (:func:`pages.read_chunks`), so a narrow read of a wide row group is weighed by them,
        not by the whole group. Only a plain dataset over local shards is narrowed; a view,
        or a remote shard, keeps ``whole``.
        """
        columns = self.source.columns
        if self._view is not None or type(shard) is not Shard:
            return whole
        if set(shard.schema.names) <= set(columns):
            return whole  # every column is read
        try:
            meta = footers.checked_metadata(shard.path, shard.size, shard.mtime_ns)
            total = sum(
                max(0, int(chunk.total_uncompressed_size))
                for group in window_row_groups(shard.row_groups, win)[0]
                for chunk in pages.read_chunks(meta, group, columns)
            )
        except (OSError, ValueError, IndexError, pa.ArrowException, SourceError):
            return whole
        return min(total, whole)

    def _check_page_checksums(self, local: Shard, win: Window) -> None:
        """Refuse a window whose row groups hold a page its recorded CRC-32 does not match.

        DuckDB does not check page checksums (pyarrow's path verifies them as it decodes,
        :mod:`direct`): without this a byte flipped on disk in a page that still
        decompresses is served as a wrong value. A file recording none costs one page
        header per column of the first row group read, once per process. Nor does DuckDB
        check gzip's own CRC-32: a GZIP page recording no CRC-32 is decompressed once more
        here, once per row group and process (:func:`pages.checksum_mismatch`).

        Raises:
            CorruptShardError: If a page's bytes do not match its checksum, or a GZIP
                page's do not decompress.
        """
        shard = self.source.shards[win.shard]
        groups, _ = window_row_groups(shard.row_groups, win)
        # keyed by the shard, not the file DuckDB reads: a remote shard read by range is a
        # new scratch file each time, and its groups would be checked at every window
        version = local.mtime_ns if local.path == shard.path else hash(
            (getattr(shard, "version", None), shard.size, shard.mtime_ns))
        with self._checksum_lock:
            if (shard.path, version, -1) in self._checksummed:
                return  # the file records no checksums
            todo = [g for g in groups if (shard.path, version, g) not in self._checksummed]
        if not todo:
            return
        try:
            meta = footers.checked_metadata(local.path, local.size, local.mtime_ns)
        except (OSError, ValueError, pa.ArrowException, SourceError):
            return  # DuckDB's read reports what is wrong with the file
        for group in todo:
            if group >= meta.num_row_groups:
                return
            try:
                bad, recorded = pages.checksum_mismatch(
                    local.path, meta, group, self.source.columns
                )
            except OSError:
                return
            if bad is not None:
                why = (
                    "does not decompress (its gzip data fails gzip's CRC-32 or length check, "
                    "or does not decode)"
                    if bad.gzip
                    else "does not match the CRC-32 checksum its header records"
                )
                raise CorruptShardError(
                    f"shard {shard.path} is corrupt: page {bad.page} of column {bad.column!r} "
                    f"in row group {bad.group} ({_local_rows(shard, bad.group)}) "
                    f"{why}: the file was damaged after it was written; restore or rewrite it",
                    shard.path,
                    (win.offset, win.end),
                )
            with self._checksum_lock:
                # a writer records checksums for a whole file or not at all: a file whose
                # first group read records none is not looked at again (group -1)
                self._checksummed[(shard.path, version, group if recorded else -1)] = None
                while len(self._checksummed) > MAX_CHECKSUMMED:
                    self._checksummed.popitem(last=False)

    def _read_direct(
        self, local: Shard, win: Window, what: str, spare: Spare | None = None
    ) -> pa.Table | None:
        """The window decoded by pyarrow, or None: DuckDB reads it (and gives any error).

        Only windows the footer and page headers put on the allow-list of :mod:`pages` are
        tried; any failure (a pyarrow error, the read limit, rows or columns not as the
        footer says) falls back to DuckDB, so errors and their classes are DuckDB's, except
        a page its codec refuses.

        Raises:
            CorruptShardError: If pyarrow's codec refuses a page the window's read decodes
                (gzip's CRC-32 fails, a compressed stream does not decode).
        """
        if self.direct is None or type(local) is not Shard:
            return None
        batches = self.direct.batches(local, win, spare)
        if batches is None:
            return None
        shard = self.source.shards[win.shard]
        try:
            table = collect(batches, self.read_limit, shard.path, what, win)
            if table.num_rows != win.rows or sorted(table.column_names) != sorted(
                self.source.columns
            ):
                raise ValueError("pyarrow read other rows or columns than the footer records")
            table = table.select(list(self.source.columns))
        except Exception as exc:  # any doubt: DuckDB reads the window (and reports it)
            if spare is not None:
                spare.parts.clear()  # nothing of a failed read is kept
            if failures.is_codec_failure(exc):
                # not DuckDB's to read: it checks less (not gzip's CRC-32), and would serve
                # the damaged bytes as values
                local.check_unchanged()
                raise self._undecompressible(exc, local, win, what) from None
            self.direct.stats["fallback"] += 1
            return None
        self.direct.stats["direct"] += 1
        return table

    def _undecompressible(
        self, exc: Exception, local: Shard, win: Window, what: str
    ) -> CorruptShardError:
        """The error for a window whose read met a page pyarrow's codec refuses (``exc``)."""
        shard = self.source.shards[win.shard]
        assert self.direct is not None
        found = self.direct.undecompressible(local, win)
        where = "a page"
        if found is not None:
            column, group = found
            where = (f"a page of column {column!r} in row group {group} "
                     f"({_local_rows(shard, group)})")
        return CorruptShardError(
            f"shard {shard.path} is corrupt: {what} cannot be read: {where} cannot be "
            f"decompressed ({failures.message(exc)}): the file was damaged after it was "
            "written; restore or rewrite it",
            shard.path,
            (win.offset, win.end),
        )

    def _claim(self, key: tuple[str, int]) -> OpenQuery | None:
        """Take the query left open on a row group, if any (this read alone then uses it)."""
        with self._stream_lock:
            if os.getpid() != self._pid:  # a forked child: the parent's queries are not ours
                self._open_queries = OrderedDict()
                self._pid = os.getpid()
            return self._open_queries.pop(key, None)

    def _resume(
        self, key: tuple[str, int], kind: type[Q], win: Window
    ) -> tuple[Q | None, bool]:
        """The query left open on ``key``'s group if it is a ``kind`` that serves ``win`` next.

        Returns:
            The query (else None: any other is closed), and whether one that served ``win``
            next was closed with the database since (a fork, or the dataset reopened): a new
            one may then continue the group from ``win``.
        """
        claimed = self._claim(key)
        if claimed is None:
            return None, False
        if isinstance(claimed, kind) and claimed.reaches(win):
            if claimed.generation == self.connection.generation:
                return claimed, False
            claimed.close()
            return None, True
        claimed.close()  # not where this window starts
        return None, False

    def _park(self, key: tuple[str, int], stream: OpenQuery) -> None:
        """Keep ``stream`` open for its group's next window, or close it at the group's end.

        At most :data:`MAX_DUCK_STREAMS` are kept: a query holds its row group's buffers
        outside the cache's budget.
        """
        if stream.finished:
            stream.close()
            return
        closing: list[OpenQuery] = []
        with self._stream_lock:
            old = self._open_queries.pop(key, None)
            if old is not None:
                closing.append(old)
            self._open_queries[key] = stream
            while len(self._open_queries) > MAX_DUCK_STREAMS:
                closing.append(self._open_queries.popitem(last=False)[1])
        for done in closing:
            done.close()

    def _guard(self, sql: str, shard: int) -> tuple[str, ValueBound] | None:
        """``sql`` with the bound on string values in its scan, and the bound (None: none).

        A plain read's scan reads the shard's own types; a view's queries carry their own
        (one per drifting shard, :meth:`ViewWindows.guarded`).
        """
        name = self._templates.get(sql)
        if name is None:
            return self._guarded.get(sql)
        key = (sql, shard)
        if key not in self._shard_guards:
            types = own_schema(self.source.shards[shard], self.source.schema)
            bound = ValueBound(types, list(self.source.columns))
            self._shard_guards[key] = None if not bound else (
                sqlfiles.render(
                    name, columns=sqlfiles.column_list(self.source.columns), guard=bound.guard()
                ),
                bound,
            )
        return self._shard_guards[key]

    def _begin(
        self, cursor: duckdb.DuckDBPyConnection, sql: str, query: dict[str, object], rows: int,
        shard: int,
    ) -> tuple[duckdb.DuckDBPyConnection, pa.RecordBatchReader, int]:
        """Start ``sql`` over the rest of a row group on a cursor of its own.

        Returns:
            The cursor, the query's Arrow batches and the connection's generation.
        """
        limit = self.read_limit
        guarded = self._guard(sql, shard) if limit else None
        if guarded is not None:
            sql, bound = guarded
            query = {**query, "cap": bound.cap(limit, rows)}
        private = cursor.cursor()
        generation = self.connection.generation
        try:
            reader = private.sql(sql, params=query).to_arrow_reader(ARROW_BATCH_ROWS)
        except BaseException:
            private.close()
            raise
        self.stream_stats["streams"] += 1
        return private, reader, generation

    def _group_of(self, win: Window) -> tuple[int, int] | None:
        """The shard-local rows of the one row group ``win`` is cut from (None: it is not)."""
        shard = self.source.shards[win.shard]
        groups, skip = window_row_groups(shard.row_groups, win)
        if len(groups) != 1:
            return None
        first = win.start - skip
        end = first + shard.row_groups[groups[0]][0]
        if win.start == first and win.stop == end:
            return None
        return first, end

    def _continue_group(
        self,
        local: Shard,
        win: Window,
        kind: type[Q],
        begin: Callable[[int, int, bool], Q | None],
        serve: Callable[[Q], pa.Table],
    ) -> pa.Table | None:
        """A window cut from one row group, read by continuing the group's open query.

        What the plain and the view's open queries share: ``begin(first, end, restart)``
        starts a ``kind`` of query at ``win`` over the group's shard-local rows ``[first,
        end)`` (None: none begins here), ``serve(query)`` takes the window's rows from it;
        the query is then kept for the group's next window, or closed at its end.

        Returns None where the window is not cut from one larger row group, no query serves
        it, or anything fails (the window's own query then reads it and reports any error).
        """
        group = self._group_of(win)
        if group is None:
            return None
        first, end = group
        key = (local.path, first)
        stream, restart = self._resume(key, kind, win)
        try:
            if stream is None:
                stream = begin(first, end, restart)
                if stream is None:
                    return None
            else:
                self.stream_stats["continued"] += 1
            table = serve(stream)
        except BaseException as exc:
            if stream is not None:
                stream.close()
            if not isinstance(exc, Exception):  # KeyboardInterrupt: the read's interrupt
                raise
            return None  # any doubt: the window's own query reads it, and reports
        self._park(key, stream)
        return table

    def _read_streamed(
        self, cursor: duckdb.DuckDBPyConnection, local: Shard, win: Window, what: str,
        params: dict[str, object],
    ) -> pa.Table | None:
        """A window cut from one row group, read by continuing the group's open query.

        Returns None where the window is not part of one larger row group, or anything fails
        (the usual per-window query then reads it and reports any error).
        """
        limit = self.read_limit
        shard = self.source.shards[win.shard]

        def begin(first: int, end: int, restart: bool) -> DuckStream | None:
            if win.start != first and not restart:
                # a window inside a group no open query reaches (random access): its own
                # query, kept nowhere, so random reads hold no group's buffers beyond it
                return None
            private, reader, generation = self._begin(
                cursor, self._sql, {**params, "stop": end}, win.rows, win.shard
            )
            return DuckStream(private, reader, win.start, end, generation=generation)

        def serve(stream: DuckStream) -> pa.Table:
            return interruptible(
                stream.cursor,
                lambda: collect(stream.pull(win.stop), limit, shard.path, what, win,
                                schema=self.schema),
            )

        return self._continue_group(local, win, DuckStream, begin, serve)

    def _in_order(self, position: int) -> bool:
        """Whether the window after ``position`` in the plan is likely read right after it.

        As the sampler's declared order says, else where the consumer is: none yet, or the
        window before or this one, or (a read ahead of the consumer in a pass in order) at
        most :attr:`reach` windows before, having come there from the window before it (a
        shuffled order of windows also moves to the next window now and then).
        """
        after = self.order_next.get(position)
        if after is not None:
            return after == position + 1
        current, previous = self.current, self.previous
        if current is None:
            return True
        return 0 <= position - current <= max(1, self.reach) and (
            previous is None or current - previous == 1
        )

    def _read_view_streamed(
        self, cursor: duckdb.DuckDBPyConnection, local: Shard, win: Window, what: str,
        position: int,
    ) -> pa.Table | None:
        """A view's window cut from one row group, read by continuing the group's open query.

        Returns None where the window is not part of one larger row group, no open query
        reaches it and it is not the group's first window of the view, the consumption
        order does not read the next window after it, or anything fails (the window's own
        query then reads it and reports any error).
        """
        view = self._view
        assert view is not None
        limit = self.read_limit
        shard = self.source.shards[win.shard]

        def begin(first: int, end: int, restart: bool) -> ViewStream | None:
            if not restart and not self._in_order(position):
                # a shuffled order visits the group's other windows later, each by its own
                # query: a query begun over the rest of the group would decode rows ahead
                # (DuckDB fills a streamed result in the background) for nothing
                return None
            found = view.stream_query(win, win.start if restart else first, end)
            if found is None:
                return None
            sql, extra = found
            private, reader, generation = self._begin(
                cursor, sql, {"path": duckdb_path(local.path), **extra}, win.rows, win.shard
            )
            # it ends at the group's last kept row: the query is closed once that row's
            # window is served, not held while later windows keep none of the group
            last = extra.get("stop", end)
            stop = min(end, last) if isinstance(last, int) else end
            return ViewStream(private, reader, win.start, stop, generation=generation)

        def serve(stream: ViewStream) -> pa.Table:
            table = interruptible(
                stream.cursor,
                lambda: collect(stream.take(win.rows), limit, shard.path, what, win,
                                schema=stream.schema),
            )
            # the rows taken are the window's kept rows: as many as the index counts, the
            # first and last inside the window (the windows of the view between the stream's
            # place and this one keep no row). Within them, source order is DuckDB's
            # insertion order, as for the window's own query; reading every row number
            # faulted in the column's pages (25-35 MiB more peak RSS at memory=64)
            order = table.column(view.order_column)
            if table.num_rows != win.rows or (
                win.rows and not (win.start <= order[0].as_py() <= order[-1].as_py() < win.stop)
            ):
                raise ValueError("the view's query served rows of another window")
            stream.at, stream.next_offset = win.stop, win.end
            return table

        return self._continue_group(local, win, ViewStream, begin, serve)

    def _read_duckdb(
        self, local: Shard, win: Window, what: str, touched: int, position: int
    ) -> pa.Table:
        shard = self.source.shards[win.shard]
        limit = self.read_limit
        params: dict[str, object] = {"path": duckdb_path(local.path)}
        sql = self._sql_file
        if self._view is not None:
            sql, extra = self._view.window_query(win)
            params.update(start=win.start, stop=win.stop)
            params.update(extra)
        elif win.start != 0 or win.stop != shard.rows:
            sql = self._sql
            params.update(start=win.start, stop=win.stop)
        try:
            cursor = self.connection.cursor()
        except duckdb.Error as exc:
            raise SourceError(f"DuckDB cannot be opened: {first_line(exc)}") from None
        if limit and self._nested:
            self._nested.check(local, win, limit, what)
        if self._view is None and sql == self._sql:
            streamed = self._read_streamed(cursor, local, win, what, params)
            if streamed is not None:
                return streamed
        if self._view is not None and self._view.streams:
            streamed = self._read_view_streamed(cursor, local, win, what, position)
            if streamed is not None:
                return streamed

        def fetch(relation: duckdb.DuckDBPyRelation) -> pa.Table:
            stream = relation.to_arrow_reader(ARROW_BATCH_ROWS)
            return collect(stream, limit, shard.path, what, win, schema=stream.schema)

        def read() -> pa.Table:
            found = self._guard(sql, win.shard) if limit else None
            if found is not None:
                guarded, bound = found
                return read_bounded(
                    cursor,
                    bound,
                    (guarded, sql),
                    params,
                    fetch,
                    limit=limit,
                    rows=win.rows,
                    error=(shard.path, what, (win.offset, win.end)),
                )
            return fetch(cursor.sql(sql, params=params))

        try:
            # Ctrl-C interrupts the read at once (ds[i] and the CLI's head/row/batch run it
            # in the main thread), as KeyboardInterrupt rather than DuckDB's RuntimeError
            return interruptible(cursor, read)
        except duckdb.BinderException as exc:
            local.check_unchanged()
            why = "schema drift between shards" if len(self.source.shards) > 1 else (
                "a column type DuckDB reads differently from pyarrow"
            )
            raise SourceError(
                f"shard {shard.path} does not match the dataset's columns "
                f"{list(self.source.columns)} ({why}): {first_line(exc)}",
                shard.path,
            ) from None
        except (duckdb.Error, pa.ArrowException, OSError) as exc:  # OSError: from a batch
            if failures.is_interrupt(exc):
                raise KeyboardInterrupt from None
            drifted = drift_error(exc, [shard])  # a view's drifting value (convert.py)
            if drifted is not None:
                local.check_unchanged()
                raise drifted from None
            if failures.is_fatal(exc):
                self.connection.close()  # DuckDB invalidated the database: reopen on next use
            local.check_unchanged()
            culprits = pages.split_columns(exc, local.path, self.source.columns)
            raise failures.shard_error(
                exc, shard.path, what, (win.offset, win.end), memory=limit, footer_bytes=touched,
                columns=len(self.source.columns), culprits=culprits,
            ) from None


def collect(
    batches: Iterable[pa.RecordBatch],
    limit: int,
    path: str,
    what: str,
    win: Window,
    *,
    schema: pa.Schema | None = None,
) -> pa.Table:
    """Gather a window's record batches, stopping once they outgrow ``limit``: THE guard.

    Both readers (DuckDB's Arrow stream and pyarrow's batches) go through this one check. A
    file can decode to far more than its footer records (a small dictionary page repeated
    by every row, or pages that understate their sizes), so the result is counted as it
    arrives rather than trusted to fit. The batches' source is closed on return.

    Args:
        batches: The window's batches as they are decoded.
        limit: The read limit in bytes (0: none).
        path: The shard, for the message.
        what: What is read, for the message.
        win: The window.
        schema: The batches' schema (needed when there may be none).

    Returns:
        The batches as one table.

    Raises:
        MemoryBudgetError: If the batches outgrow ``limit``.
    """
    kept: list[pa.RecordBatch] = []
    total = 0
    try:
        for batch in batches:
            total += batch.nbytes
            if limit and total > limit:
                raise MemoryBudgetError(
                    f"reading {what} of shard {path} decodes to more than the memory budget "
                    f"allows for one read ({limit / MIB:.4g} MiB) after {_rows(kept)} rows, "
                    "far more than its footer records (a decompression bomb, or rows "
                    "far larger than the budget): raise memory if the shard is trusted, or "
                    "pass a smaller window_bytes",
                    path,
                    (win.offset, win.end),
                )
            kept.append(batch)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()
    return pa.Table.from_batches(kept, schema=schema)


def _whole_groups(shard: Shard, win: Window, groups: list[int], skip: int) -> bool:
    """Whether ``win`` spans exactly the row groups it overlaps (no other window shares one).

    ``groups`` and ``skip`` are :func:`window_row_groups` of the window.
    """
    spanned = sum(shard.row_groups[g][0] for g in groups)
    return bool(groups) and skip == 0 and spanned == win.stop - win.start


def _rows(batches: list[pa.RecordBatch]) -> int:
    return sum(batch.num_rows for batch in batches)


__all__ = ["ARROW_BATCH_ROWS", "ViewWindows", "WindowDecoder", "collect"]
