"""Read windows through ``sql/read_window.sql`` into Arrow tables, through the window cache."""

from __future__ import annotations

import atexit
import itertools
import os
import threading
import warnings
import weakref
from collections import deque
from collections.abc import Hashable, Sequence

import duckdb
import pyarrow as pa

from ..errors import CorruptShardError, MemoryBudgetWarning, ShardChangedError, SourceError
from . import arrow_read, sqlfiles
from .cache import WindowCache, table_bytes
from .source import Connection, Source, duckdb_path
from .windows import Window, max_touched_bytes, read_reserve

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


class BudgetCache(WindowCache):
    """A :class:`WindowCache` inside a memory budget that also pays for the reads in flight.

    The budget is split: ``reserve`` bytes are kept free for the transient memory of window
    reads (DuckDB's decode buffers and Arrow result), and the cache holds at most
    ``budget - reserve`` bytes of windows. Room for a window about to be read is made
    before the read (:meth:`make_room`), so cached plus incoming windows stay in the limit.

    Args:
        limit: The whole budget in bytes (cache plus reserve).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.budget = limit
        self.reserve = 0

    def set_reserve(self, nbytes: int, floor: int = 0) -> None:
        """Keep ``nbytes`` of the budget free for reads, evicting windows beyond the rest.

        Args:
            nbytes: Transient bytes a read needs (see :func:`windows.read_reserve`).
            floor: The cache's share never drops below ``min(budget, floor)`` because of the
                reserve (one window: without it every batch would read its window again).
        """
        with self._lock:
            limit = max(self.budget - max(0, int(nbytes)), min(self.budget, int(floor)))
            self.reserve = self.budget - limit
            self.limit = limit
            self._trim(0)

    def _trim(self, nbytes: int, keep: Hashable | None = None) -> None:
        lru = self._lru
        while lru.currsize + nbytes > self.limit and len(lru) > (1 if keep in lru else 0):
            lru.popitem()

    def put(self, key: Hashable, table: pa.Table) -> bool:
        """Keep a table, evicting least recently used ones to stay within the cache's share.

        Args:
            key: The cache key.
            table: The table to keep.

        Returns:
            True if the table is now cached; False if it is larger than the cache's share.
        """
        with self._lock:
            size = table_bytes(table)
            if self.limit == 0 or size > self.limit:
                self._oversized += 1
                return False
            self._lru.pop(key, None)
            self._trim(size)
            self._lru[key] = table
            return True

    def make_room(self, nbytes: int, keep: Hashable | None = None) -> bool:
        """Evict least recently used windows until ``nbytes`` more would fit in the limit.

        Args:
            nbytes: Bytes about to be read.
            keep: A key never evicted for this (the window being consumed).

        Returns:
            True if ``nbytes`` now fits beside what is held.
        """
        with self._lock:
            lru = self._lru
            if keep is not None and keep in lru:
                lru.get(keep)  # mark most recently used so popitem takes the others first
            self._trim(nbytes, keep)
            return bool(lru.currsize + nbytes <= self.limit)


_READERS: weakref.WeakSet[WindowReader] = weakref.WeakSet()


def _stop_all_before_fork() -> None:
    # Registered after source.py's hook, so it runs first: no read-ahead thread may be inside
    # a DuckDB query when the connections close and the process forks.
    for reader in list(_READERS):
        reader.stop_read_ahead()


def _reset_all_in_child() -> None:
    for reader in list(_READERS):
        reader._reset_read_ahead()


os.register_at_fork(before=_stop_all_before_fork, after_in_child=_reset_all_in_child)
# A daemon read-ahead thread still inside a DuckDB query when the interpreter finalizes is
# torn down mid-C++ and aborts the process ("FATAL: exception not rethrown", exit 134).
atexit.register(_stop_all_before_fork)


class WindowReader:
    """Serve windows as Arrow tables: from the cache, or by one DuckDB query each.

    Read-ahead: while one window is consumed, the next one is read by a background thread
    (DuckDB decodes without the GIL, so this overlaps decoding with the consumer's work).
    "Next" is the successor in the order given to :meth:`set_order`, else ``p + 1`` when
    windows are being read sequentially (and after the first window read). A window is read
    ahead only if it fits in the cache beside the one being consumed; room is made by
    evicting least recently used windows *before* reading, so cached plus in-flight windows
    stay within the cache limit. The thread is stopped and joined before any ``fork()``.

    Args:
        source: The dataset's shards and schema.
        windows: The window plan.
        cache: Where window tables are kept.
        connection: The process's DuckDB connection holder.
        read_ahead: Whether to read the next window in the background.
        retained: Bytes DuckDB's allocator may keep between reads (see
            :func:`source.allocator_config`), added to the read reserve.
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
        view_sql: str | None = None,
        schema: pa.Schema | None = None,
    ) -> None:
        self.source = source
        self.schema = source.schema if schema is None else schema
        self._view_sql = view_sql
        self.retained = retained
        self.windows = windows
        self.cache = cache
        self.connection = connection
        self.read_ahead = read_ahead
        #: Decode windows of plain datasets with pyarrow (:mod:`arrow_read`), in parallel
        #: when ``threads > 1``; views and anything pyarrow cannot read go through DuckDB.
        self.direct = True
        self.threads = 1
        columns = sqlfiles.column_list(source.columns)
        self._sql = sqlfiles.render("read_window", columns=columns)
        self._sql_file = sqlfiles.render("read_file", columns=columns)
        self._next: dict[int, int] = {}
        self._row_bytes = 0.0
        groups = [shard.row_groups for shard in source.shards]
        self._max_rows = max((w.rows for w in windows), default=0)
        self._max_touched = max_touched_bytes(windows, groups)
        encoded = sum(max(b, 0) for g in groups for _, b in g)
        self._row_bytes_guess = encoded / max(1, source.rows)
        self._warned = False
        self._update_reserve()
        self._reset_read_ahead()
        _READERS.add(self)

    def _update_reserve(self) -> None:
        """Set aside, in a :class:`BudgetCache`, the transient memory of one window read.

        Warns once (:class:`MemoryBudgetWarning`) if the budget cannot hold the reserve and
        one window: the cache then keeps one window anyway and RSS exceeds the budget.
        """
        cache = self.cache
        if not isinstance(cache, BudgetCache) or cache.budget == 0:
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
    def _reset_read_ahead(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._row_lock = threading.Lock()
        self._queue: deque[int] = deque()
        self._in_flight: int | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._last: int | None = None
        self._keep: int | None = None
        self._pid = os.getpid()
        self.read_ahead_stats = {"scheduled": 0, "read": 0, "skipped": 0, "waited": 0}

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
        if not self.read_ahead or self._last == position:
            return
        previous, self._last = self._last, position
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
            self.read_ahead_stats["skipped"] += 1
            return
        with self._cond:
            if self._stopping or os.getpid() != self._pid:
                return
            if position == self._in_flight or position in self._queue:
                return
            self._queue.clear()  # only the newest hint matters
            self._queue.append(position)
            self._keep = current
            self.read_ahead_stats["scheduled"] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="undertale-duck-read-ahead", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    if not self._cond.wait(timeout=5.0) and not self._queue:
                        self._thread = None  # idle: exit; restarted on the next hint
                        return
                if self._stopping:
                    return
                position = self._queue.popleft()
                self._in_flight = position
                keep = self._keep
            try:
                if position not in self.cache:
                    self._make_room(position, keep)
                    table = self.read(position)
                    self.cache.put(position, table)
                    self.read_ahead_stats["read"] += 1
            except Exception:  # the consumer reads it again and gets the error itself
                pass
            finally:
                with self._cond:
                    self._in_flight = None
                    self._cond.notify_all()

    def _make_room(self, position: int, keep: int | None) -> None:
        if isinstance(self.cache, BudgetCache) and self._row_bytes:
            self.cache.make_room(self._estimate(position), keep)

    def _wait_in_flight(self, position: int) -> bool:
        """Wait if ``position`` is being read ahead (True); drop it from the queue otherwise."""
        with self._cond:
            if position in self._queue:
                self._queue.remove(position)
            if self._in_flight != position:
                return False
            self.read_ahead_stats["waited"] += 1
            while self._in_flight == position:
                self._cond.wait()
            return True

    def stop_read_ahead(self) -> None:
        """Stop the background thread and wait for its current read (run before ``fork()``)."""
        with self._cond:
            thread = self._thread
            self._stopping = True
            self._queue.clear()
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            self._thread = None
            self._stopping = False

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
        table = self.cache.get(position) if self._in_flight != position else None
        if table is None:
            if self._wait_in_flight(position):
                table = self.cache.get(position)
            if table is None:
                self._make_room(position, self._last)
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
            CorruptShardError: If the shard's data cannot be decoded.
            SourceError: If the shard lacks a column of the dataset.
        """
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        shard.check_unchanged()
        params: dict[str, object] = {"path": duckdb_path(shard.path)}
        sql = self._sql_file
        if self._view_sql is not None:
            sql = self._view_sql
            params.update(start=win.start, stop=win.stop)
        elif win.start != 0 or win.stop != shard.rows:
            sql = self._sql
            params.update(start=win.start, stop=win.stop)
        direct = None
        if self._view_sql is None and self.direct:
            direct = arrow_read.read(shard, win, self.source.columns, threads=self.threads > 1)
        try:
            table = direct
            if table is None:
                relation = self.connection.cursor().sql(sql, params=params)
                table = relation.to_arrow_table(ARROW_BATCH_ROWS)
        except duckdb.BinderException as exc:
            shard.check_unchanged()
            raise SourceError(
                f"shard {shard.path} does not match the dataset's columns "
                f"{list(self.source.columns)} (schema drift between shards): {_first_line(exc)}",
                shard.path,
            ) from None
        except duckdb.Error as exc:
            shard.check_unchanged()
            raise CorruptShardError(
                f"shard {shard.path} is corrupt: rows {win.offset}..{win.end - 1} "
                f"(local rows {win.start}..{win.stop - 1}) cannot be read: {_first_line(exc)}",
                shard.path,
                (win.offset, win.end),
            ) from None
        shard.check_unchanged()
        if self._view_sql is not None:  # drop the row-number columns the view carried
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
        # One contiguous, exactly sized buffer per column, owned by Arrow: rows are then
        # sliced or gathered without per-chunk work (gathers across DuckDB's 2048-row batches
        # cost the consumer 3-4x more CPU than this copy saves the reader, see DESIGN.md), and
        # the cache counts what is really held. One copy per window read; DuckDB's buffers
        # are freed right away.
        if direct is None:  # pyarrow's buffers are exactly sized already
            table = pa.concat_tables([table, table.slice(0, 0)]).combine_chunks()
        if table.num_rows:
            row_bytes = table_bytes(table) / table.num_rows
            with self._row_lock:  # the consumer and the read-ahead thread both read
                if row_bytes > self._row_bytes:
                    self._row_bytes = row_bytes
                    self._update_reserve()
        return table


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["BudgetCache", "MemoryBudgetWarning", "ShardChangedError", "WindowReader", "conform"]
