"""Read windows through ``sql/read_window.sql`` into Arrow tables, through the window cache."""

from __future__ import annotations

import itertools
import threading
import warnings
from collections.abc import Iterable, Sequence
from typing import Protocol

import duckdb
import pyarrow as pa

from ..common.text import first_line
from ..errors import (
    CorruptShardError,
    MemoryBudgetError,
    MemoryBudgetWarning,
    ShardChangedError,
    SourceError,
)
from . import decoded, failures, sqlfiles
from .cache import WindowCache, table_bytes
from .connection import Connection
from .direct import DirectReader
from .duck import duckdb_path
from .readahead import ReadAhead
from .source import Shard, Source
from .windows import Window, max_touched_bytes, read_reserve, touched_bytes

#: Rows per Arrow record batch asked of DuckDB for a window (its vector size). Small batches
#: are cheaper for DuckDB to build than its 131072-row default, whose list buffers grow by
#: reallocation and keep spare capacity (measured on 512-token rows, paired A/B in one
#: process: workers=0 epoch to tensors 1.23x, 8 of 8 repeats). The batches are then copied
#: into one chunk per column.
ARROW_BATCH_ROWS = 2048

#: Fixed transient bytes of one window read besides its row groups and result (DuckDB's
#: vectors and per-query state, allocator slack): fitted on windows of 500 to 50,000 rows and
#: 0.06 to 62 MiB (DESIGN.md, "Notes from the memory budget").
READ_OVERHEAD_BYTES = 12 << 20
MIB = 1 << 20


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Give a DuckDB result the Arrow types pyarrow reads from the footer, where they differ.

    DuckDB returns, for example, plain strings for dictionary-encoded columns and its own
    integer types for unsigned or narrow Parquet types; casting back keeps ``as_py()`` values
    identical to pyarrow's. Dictionary types are decoded (values are what ``as_py`` sees).

    Args:
        table: A window as DuckDB returned it, columns in ``schema`` order.
        schema: The dataset's reference schema.

    Returns:
        The table with each column cast to the reference type where that cast is safe.
    """
    columns = []
    fields = []
    changed = False
    for column, field in zip(table.columns, schema, strict=True):
        target = field.type
        if pa.types.is_dictionary(target):
            target = target.value_type
        if column.type != target:
            try:
                column = column.cast(target)
                changed = True
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        columns.append(column)
        fields.append(pa.field(field.name, column.type, nullable=field.nullable))
    if not changed:
        return table
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


class ViewWindows(Protocol):
    """How a view's windows are read (implemented by ``view_index.IndexedView``)."""

    def window_query(self, window: Window) -> tuple[str, dict[str, object]]:
        """The SQL reading ``window``, and its parameters (they may override the window's)."""
        ...


class WindowReader:
    """Serve windows as Arrow tables: from the cache, or by one DuckDB query each.

    Read-ahead: while one window is consumed, the next one is read by a background thread
    (DuckDB decodes without the GIL, so this overlaps decoding with the consumer's work).
    "Next" is the successor in the order given to :meth:`set_order`, else ``p + 1`` when
    windows are being read sequentially (and after the first window read). A window is read
    ahead only if it fits in the cache beside the one being consumed; room is made by
    evicting least recently used windows *before* reading, so cached plus in-flight windows
    stay within the cache limit. The thread (:class:`readahead.ReadAhead`) is stopped and
    joined before any ``fork()`` and at exit.

    Args:
        source: The dataset's shards and schema.
        windows: The window plan.
        cache: Where window tables are kept.
        connection: The process's DuckDB connection holder.
        read_ahead: Whether to read the next window in the background.
        retained: Bytes DuckDB's allocator may keep between reads (see
            :func:`duck.allocator_config`), added to the read reserve.
        read_limit: Most bytes one window read may decompress (row groups, from the
            footer) or decode (its Arrow result, counted as it arrives); beyond it the read
            stops with :class:`MemoryBudgetError`. 0: no limit.
        direct: Whether windows on the allow-list of :mod:`pages` are decoded by pyarrow
            (:mod:`direct`); views and remote shards always go through DuckDB.
        threads: Whether pyarrow may decode a window's columns in parallel.
    """

    def __init__(
        self,
        source: Source,
        windows: Sequence[Window],
        cache: WindowCache,
        connection: Connection,
        *,
        read_ahead: bool = True,
        retained: int = 0,
        view: ViewWindows | None = None,
        schema: pa.Schema | None = None,
        read_limit: int = 0,
        direct: bool = True,
        threads: bool = False,
    ) -> None:
        self.source = source
        self.schema = source.schema if schema is None else schema
        self._view = view
        self.retained = retained
        self.read_limit = read_limit
        self.windows = windows
        self.cache = cache
        self.connection = connection
        self.read_ahead = read_ahead
        #: pyarrow's reader for plain windows of local shards (None: DuckDB reads every one).
        self.direct: DirectReader | None = None
        if direct and view is None and source.store is None:
            self.direct = DirectReader(source.columns, self.schema, read_limit, threads=threads)
        columns = sqlfiles.column_list(source.columns)
        self._sql = sqlfiles.render("read_window", columns=columns)
        self._sql_file = sqlfiles.render("read_file", columns=columns)
        # string and binary values are bounded before DuckDB materialises them (decoded.py)
        self._bound = decoded.ValueBound(source.schema, list(source.columns))
        guard = self._bound.guard() if self._bound else ""
        self._guarded = {
            self._sql: sqlfiles.render("read_window_guarded", columns=columns, guard=guard),
            self._sql_file: sqlfiles.render("read_file_guarded", columns=columns, guard=guard),
        } if self._bound else {}
        self._next: dict[int, int] = {}
        self._row_bytes = 0.0
        groups = [shard.row_groups for shard in source.shards]
        self._max_rows = max((w.rows for w in windows), default=0)
        self._max_touched = max_touched_bytes(windows, groups)
        encoded = sum(max(b, 0) for g in groups for _, b in g)
        self._row_bytes_guess = encoded / max(1, source.rows)
        self._warned = False
        self._row_lock = threading.Lock()
        self._update_reserve()
        self.ahead = ReadAhead(self._fetch_ahead, running=read_ahead)

    @property
    def row_bytes(self) -> float:
        """The largest Arrow bytes per row measured in a window read so far (0 before any)."""
        return self._row_bytes

    @property
    def read_ahead_stats(self) -> dict[str, int]:
        """Read-ahead counters: hints scheduled, windows read, hints skipped, reads waited for.

        A hint is skipped when its window would not fit in the cache beside the current one.
        """
        return self.ahead.stats

    def _update_reserve(self) -> None:
        """Set aside, in the cache, the transient memory of one window read.

        Warns once (:class:`MemoryBudgetWarning`) if the budget cannot hold the reserve and
        one window: the cache then keeps one window anyway and RSS exceeds the budget.
        """
        cache = self.cache
        if cache.budget == 0:
            return
        row_bytes = self._row_bytes or self._row_bytes_guess
        window = int(self._max_rows * row_bytes) + 1
        reserve = read_reserve(
            self._max_rows, row_bytes, self._max_touched, READ_OVERHEAD_BYTES + self.retained
        )
        cache.set_reserve(reserve, floor=window)
        if cache.budget < reserve + window and not self._warned:
            self._warned = True
            warnings.warn(
                f"memory={cache.budget / MIB:.3g} MB is below what reading this dataset "
                f"needs: its largest window holds about {window / MIB:.3g} MiB and a read "
                f"needs about {reserve / MIB:.3g} MiB more (DuckDB decodes whole row groups, "
                f"here up to {self._max_touched / MIB:.3g} MiB encoded); the process will use "
                f"about {(reserve + window) / MIB:.3g} MiB for data. Raise memory, or pass a "
                "smaller window_bytes (a row group is the smallest read).",
                MemoryBudgetWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------ read-ahead
    def set_order(self, order: Sequence[int] | None) -> None:
        """Declare the order in which windows will be consumed (a read-ahead hint).

        While window ``order[k]`` is consumed, ``order[k + 1]`` is read in the background,
        and ``order[0]`` is read ahead now. Without an order (or for windows not in it),
        sequential access is detected: after window ``p``, ``p + 1`` is read ahead.

        Args:
            order: Window positions in consumption order, or None to clear the hint.

        Raises:
            IndexError: If a position is outside the window plan.
        """
        nxt: dict[int, int] = {}
        if order:
            items = [int(p) for p in order]
            bad = [p for p in items if not 0 <= p < len(self.windows)]
            if bad:
                raise IndexError(
                    f"window position {bad[0]} out of range for {len(self.windows)} windows"
                )
            nxt = dict(itertools.pairwise(items))
        self._next = nxt
        if order:
            self._schedule(int(order[0]), None)

    def _advance(self, position: int, table: pa.Table, first: int) -> None:
        """Note that ``position`` is being consumed; read its successor in the background."""
        if not self.read_ahead or self.ahead.last == position:
            return
        previous, self.ahead.last = self.ahead.last, position
        nxt = self._next.get(position)
        if nxt is None and (previous is None or first - 1 <= previous < position):
            nxt = position + 1 if position + 1 < len(self.windows) else None
        if nxt is not None:
            self._schedule(nxt, position, table_bytes(table))

    def _estimate(self, position: int) -> int:
        return int(self.windows[position].rows * self._row_bytes) + 1

    def _schedule(self, position: int, current: int | None, current_bytes: int = 0) -> None:
        if not self.read_ahead or position in self.cache:
            return
        if self._row_bytes and self._estimate(position) + current_bytes > self.cache.limit:
            self.ahead.skipped()
            return
        self.ahead.schedule(position, current)

    def _fetch_ahead(self, position: int, keep: int | None) -> bool:
        """Read one window into the cache on the read-ahead thread (False: it was cached)."""
        if position in self.cache:
            return False
        self._make_room(position, keep)
        self.cache.put(position, self.read(position))
        return True

    def _make_room(self, position: int, keep: int | None) -> None:
        if self._row_bytes:
            self.cache.make_room(self._estimate(position), keep)

    def stop_read_ahead(self) -> None:
        """Wait for the read in flight and end the read-ahead thread (a hint starts a new one)."""
        running = self.ahead.running
        self.ahead.stop()
        if running:
            self.ahead.start()

    def window(self, position: int, *, advance: bool = True, first: int | None = None) -> pa.Table:
        """Return the rows of one window, reading it unless it is cached.

        Args:
            position: The window's position in the plan.
            advance: Whether this access moves the consumer to ``position`` (and so may
                start reading the next window in the background).
            first: The lowest window the same batch touched (default ``position``): access
                is sequential if the previous window consumed lies just before it.

        Returns:
            An Arrow table of the window's rows in order.

        Raises:
            ShardChangedError: If the shard changed on disk since it was opened.
            CorruptShardError: If the shard's data cannot be decoded.
            SourceError: If the shard lacks a column of the dataset.
        """
        table = self.cache.get(position) if self.ahead.in_flight != position else None
        if table is None:
            if self.ahead.wait(position):
                table = self.cache.get(position)
            if table is None:
                self._make_room(position, self.ahead.last)
                table = self.read(position)
                self.cache.put(position, table)
        if advance:
            self._advance(position, table, position if first is None else first)
        return table

    def read(self, position: int) -> pa.Table:
        """Read one window from disk, bypassing the cache.

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
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        what = f"rows {win.offset}..{win.end - 1} (local rows {win.start}..{win.stop - 1})"
        touched = touched_bytes(win, shard.row_groups)
        limit = self.read_limit
        if limit and touched > limit:
            raise MemoryBudgetError(
                f"reading {what} of shard {shard.path} means decompressing row groups of "
                f"{touched / MIB:.4g} MiB (as its footer records), more than the memory budget "
                f"allows for one read ({limit / MIB:.4g} MiB); raise memory if the shard is "
                "trusted (a row group is the smallest unit DuckDB decodes)",
                shard.path,
                (win.offset, win.end),
            )
        # DuckDB reads the shard itself, or its copy in the shard cache (held while read)
        with shard.local() as local:
            return self._read(position, local, what, touched)

    def _read(self, position: int, local: Shard, what: str, touched: int) -> pa.Table:
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        local.check_unchanged()
        table = self._read_direct(local, win, what)
        # pyarrow's batches are one chunk per column and sized to their rows, unless the
        # window is part of them: then they are copied out like DuckDB's
        exact = (
            table is not None
            and all(c.num_chunks == 1 for c in table.columns)
            and table.get_total_buffer_size() <= table.nbytes + (table.nbytes >> 3) + 4096
        )
        if table is None:
            table = self._read_duckdb(local, win, what, touched)
        local.check_unchanged()
        if self._view is not None:  # drop the row-number columns the view carried
            table = table.select([n for n in table.column_names if not n.startswith("__ud_")])
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
        table = conform(table, self.schema)
        if not exact:
            # One contiguous, exactly sized buffer per column, owned by Arrow: rows are then
            # sliced or gathered without per-chunk work (gathers across DuckDB's 2048-row
            # batches cost the consumer 3-4x more CPU than this copy saves the reader, see
            # DESIGN.md), and the cache counts what is really held (not the whole row groups
            # a slice of pyarrow's batch points into). One copy per window read; the
            # reader's own buffers are freed right away.
            table = pa.concat_tables([table, table.slice(0, 0)]).combine_chunks()
        if table.num_rows:
            row_bytes = table_bytes(table) / table.num_rows
            with self._row_lock:  # the consumer and the read-ahead thread both read
                if row_bytes > self._row_bytes:
                    self._row_bytes = row_bytes
                    self._update_reserve()
        return table

    def _read_direct(self, local: Shard, win: Window, what: str) -> pa.Table | None:
        """The window decoded by pyarrow, or None: DuckDB reads it (and gives any error).

        Only windows the footer and page headers put on the allow-list of :mod:`pages` are
        tried; any failure (a pyarrow error, the read limit, rows or columns not as the
        footer says) falls back to DuckDB, so errors and their classes are DuckDB's.
        """
        if self.direct is None or type(local) is not Shard:
            return None
        batches = self.direct.batches(local, win)
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
        except Exception:  # any doubt: DuckDB reads the window (and reports what it finds)
            self.direct.stats["fallback"] += 1
            return None
        self.direct.stats["direct"] += 1
        return table

    def _read_duckdb(self, local: Shard, win: Window, what: str, touched: int) -> pa.Table:
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
        def fetch(relation: duckdb.DuckDBPyRelation) -> pa.Table:
            stream = relation.to_arrow_reader(ARROW_BATCH_ROWS)
            return collect(stream, limit, shard.path, what, win, schema=stream.schema)

        try:
            if limit and sql in self._guarded:
                return decoded.read_bounded(
                    cursor,
                    self._bound,
                    (self._guarded[sql], sql),
                    params,
                    fetch,
                    limit=limit,
                    rows=win.rows,
                    error=(shard.path, what, (win.offset, win.end)),
                )
            return fetch(cursor.sql(sql, params=params))
        except duckdb.BinderException as exc:
            local.check_unchanged()
            raise SourceError(
                f"shard {shard.path} does not match the dataset's columns "
                f"{list(self.source.columns)} (schema drift between shards): {first_line(exc)}",
                shard.path,
            ) from None
        except (duckdb.Error, pa.ArrowException, OSError) as exc:  # OSError: from a batch
            if failures.is_interrupt(exc):
                raise KeyboardInterrupt from None
            if failures.is_fatal(exc):
                self.connection.close()  # DuckDB invalidated the database: reopen on next use
            local.check_unchanged()
            raise failures.shard_error(
                exc, shard.path, what, (win.offset, win.end), memory=limit, footer_bytes=touched
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


def _rows(batches: list[pa.RecordBatch]) -> int:
    return sum(batch.num_rows for batch in batches)


__all__ = ["MemoryBudgetWarning", "ShardChangedError", "WindowReader", "collect", "conform"]
