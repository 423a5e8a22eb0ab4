"""Serve windows as Arrow tables through the window cache, with read-ahead and the reserve."""

from __future__ import annotations

import itertools
import queue
import threading
import warnings
from collections.abc import Sequence

import pyarrow as pa

from ...common.sizes import MIB
from ...errors import MemoryBudgetWarning
from ..runtime import Connection
from ..source import Source, Window, max_touched_bytes, read_reserve
from .cache import WindowCache, table_bytes
from .direct import DirectReader
from .readahead import ReadAhead
from .window_read import ViewWindows, WindowDecoder, one_buffer

#: Fixed transient bytes of one window read besides its row groups and result (DuckDB's
#: vectors and per-query state, allocator slack): fitted on windows of 500 to 50,000 rows and
#: 0.06 to 62 MiB (DESIGN.md, "Notes from the memory budget").
READ_OVERHEAD_BYTES = 12 << 20
#: Least bytes older open row-group readers may hold past their windows (``DirectReader.park_cap``;
#: a 32nd of the budget where that is less).
PARK_FLOOR_BYTES = 4 << 20


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
        read_depth: Most windows read ahead at once (None: two where the process may use
            two cores or more and the budget holds them, else one; one in DataLoader workers).
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
        read_depth: int | None = None,
        retained: int = 0,
        view: ViewWindows | None = None,
        schema: pa.Schema | None = None,
        read_limit: int = 0,
        direct: bool = True,
        threads: bool = False,
    ) -> None:
        self.source = source
        self.schema = source.schema if schema is None else schema
        self.retained = retained
        self.read_limit = read_limit
        self.windows = windows
        self.cache = cache
        self.connection = connection
        self.read_ahead = read_ahead
        #: Decodes one window (pyarrow or DuckDB); :meth:`read` adds the row-size bookkeeping.
        self.decoder = WindowDecoder(
            source, windows, connection, schema=schema, view=view,
            read_limit=read_limit, direct=direct, threads=threads,
        )
        # windows kept in pyarrow's batches are sliced in order cheaply but taken out of
        # order slowly: not with a disk tier (whose files are mapped and taken from)
        self.decoder.keep_chunks = not cache.maps_windows
        self._next: dict[int, int] = {}
        #: Row groups to read whole in the background (:meth:`want`), by their first window.
        self._group_reads: dict[int, list[int]] = {}
        self._row_bytes = 0.0
        groups = [shard.row_groups for shard in source.shards]
        self._max_rows = max((w.rows for w in windows), default=0)
        self._max_touched = max_touched_bytes(windows, groups)
        #: The dataset's bytes as windows are planned: the footers' sizes, or the decoded
        #: estimate where they understate it (bytes per row before any read).
        self.planned_bytes = sum(max(b, 0) for s in source.shards for _, b in s.planned_groups)
        self._row_bytes_guess = self.planned_bytes / max(1, source.rows)
        self._warned = False
        self._row_lock = threading.Lock()
        self.ahead = ReadAhead(self._fetch_ahead, running=read_ahead, depth=read_depth)
        #: Windows read ahead at once: the read-ahead's depth where the budget holds that
        #: many reads and windows, else 1 (set with the reserve).
        self._depth = 1
        self._reserved_for = 0
        #: The window the consumer read last when the cache could not keep it (``memory=0``,
        #: or a window larger than the cache's share): the batches that follow in it are
        #: served from it instead of decoding it again for each (see :meth:`window`).
        self._held: tuple[int, pa.Table] | None = None
        self._update_reserve()

    @property
    def direct(self) -> DirectReader | None:
        """The reader of plain windows of local shards by pyarrow (None: DuckDB reads all)."""
        return self.decoder.direct

    @direct.setter
    def direct(self, value: DirectReader | None) -> None:
        self.decoder.direct = value

    @property
    def read_depth(self) -> int:
        """Windows read ahead at once now (see ``read_depth``; 1 when the budget is tight)."""
        return self._depth

    @property
    def row_bytes(self) -> float:
        """The largest Arrow bytes per row measured in a window read so far (0 before any)."""
        return self._row_bytes

    @property
    def largest_window(self) -> int:
        """Estimated bytes of the plan's largest window (rows times bytes per row so far)."""
        return self._bytes(self._max_rows)

    def _bytes(self, rows: int) -> int:
        """Estimated Arrow bytes of ``rows`` rows: as measured so far, else as planned."""
        return int(rows * (self._row_bytes or self._row_bytes_guess)) + 1

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
        depth = self._reserved_for = self.ahead.depth if self.read_ahead else 1
        if cache.budget == 0:
            self._depth = self.decoder.reach = depth
            return
        row_bytes = self._row_bytes or self._row_bytes_guess
        window = self.largest_window
        one = read_reserve(self._max_rows, row_bytes, self._max_touched, 0)
        reserve = one + READ_OVERHEAD_BYTES + self.retained
        if self.direct is not None:
            # pyarrow's allocator keeps a read's freed buffers (pages, builders) for the next
            # read instead of returning them (handing them back after each read costs more
            # CPU than the decode saves): counted as one more read's transient memory; and
            # the rows that group readers left open by earlier windows decoded past them
            # are bounded by two windows (at least PARK_FLOOR_BYTES, or a 32nd of a small
            # budget: at memory=16 a fixed 4 MiB left the cache too few windows)
            park = max(2 * window, min(PARK_FLOOR_BYTES, cache.budget // 32))
            reserve += one + park
            self.direct.park_cap = park
        # Reading ahead more than one window at once: each concurrent read has its own
        # transient memory, and the cache must hold the windows read beside the current one
        # and the one consumed next; else one window at a time
        extra = (depth - 1) * (one + READ_OVERHEAD_BYTES)
        self._depth = depth if cache.budget >= reserve + extra + (depth + 2) * window else 1
        self.decoder.reach = self._depth  # how far ahead of the consumer a stream may begin
        if self._depth > 1:
            reserve += extra
        cache.set_reserve(reserve, floor=window)
        if cache.budget < reserve + window and not self._warned:
            self._warned = True
            warnings.warn(
                f"memory={cache.budget / MIB:.3g} MiB is below what reading this dataset "
                f"needs: its largest window holds about {window / MIB:.3g} MiB and a read "
                f"needs about {reserve / MIB:.3g} MiB more (DuckDB decodes whole row groups, "
                f"here up to {self._max_touched / MIB:.3g} MiB encoded); the process will use "
                f"about {(reserve + window) / MIB:.3g} MiB for data. Raise memory, or pass a "
                "smaller window_bytes (a row group is the smallest read).",
                MemoryBudgetWarning,
                stacklevel=2,
            )

    def resize(self, budget: int) -> None:
        """Give the cache a new whole budget in bytes and set the read reserve again."""
        if budget != self.cache.budget:
            self.cache.resize(budget)
            self._update_reserve()

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
        self.decoder.order_next = nxt
        # an order is a shuffle's: its rows are taken from each window out of order, which
        # one buffer per column serves faster than a window kept in its decoded batches
        if nxt:
            self.decoder.keep_chunks = False
        if order:
            self._schedule([int(order[0])], None)

    def _advance(self, position: int, table: pa.Table | None, first: int) -> None:
        """Note that ``position`` is being consumed; read its successors in the background.

        ``table`` is None when ``position`` is about to be read by the consumer: its
        successors are then read beside it, one fewer than the depth, so that no more than
        the depth's reads run at once.
        """
        if not self.read_ahead or self.ahead.last == position:
            return
        if self._reserved_for != self.ahead.depth:  # a forked worker reads one at a time
            self._update_reserve()
        depth = self._depth if table is not None else self._depth - 1
        if depth < 1:
            return
        previous, self.ahead.last = self.ahead.last, position
        sequential = previous is None or first - 1 <= previous < position
        # rows of windows read while access is sequential are sliced in order, which a
        # window kept in its decoded batches serves as fast as one buffer per column; other
        # windows are taken from out of order, which one buffer serves faster
        self.decoder.keep_chunks = sequential and not self._next and not self.cache.maps_windows
        hints: list[int] = []
        at = position
        for _ in range(depth):
            nxt = self._next.get(at)
            if nxt is None and sequential:
                nxt = at + 1 if at + 1 < len(self.windows) else None
            if nxt is None or nxt == position or nxt in hints:
                break
            hints.append(nxt)
            at = nxt
        if hints:
            if table is None:  # the window being read now continues into its group's next
                self._schedule(hints, position, self._bytes(self.windows[position].rows),
                               self.decoder.neighbours(position))
            else:
                self._schedule(hints, position, table_bytes(table))

    def _schedule(
        self, positions: list[int], current: int | None, current_bytes: int = 0,
        covered: Sequence[int] = (),
    ) -> None:
        if not self.read_ahead:
            return
        hints: list[int] = []
        skip = set(covered)  # windows an earlier read decodes anyway
        room = self.cache.limit - current_bytes
        for position in positions:
            if position in skip:
                continue
            if position in self.cache:
                # a disk tier's file not mapped yet (another process or an earlier run wrote
                # it): mapped and checked ahead, its pages read from disk off the consumer's
                # thread; they live in the page cache, outside the budget
                if self.cache.unopened(position):
                    hints.append(position)
                continue
            need = self._bytes(self.windows[position].rows) if self._row_bytes else 0
            if need > room:
                self.ahead.skipped()
                break  # later windows are needed later: never read past one that does not fit
            room -= need
            hints.append(position)
            skip.update(self.decoder.neighbours(position))
        if hints:
            self.ahead.schedule(hints, current)

    def want(self, positions: Sequence[int]) -> None:
        """Declare the windows one batch needs: with a disk tier, read them in the background.

        A batch of uniform random rows touches dozens of windows. With a disk tier each row
        group they lie in is decoded once, whole, by a read-ahead thread (up to the
        read-ahead depth the budget allows at once, each holding one window), every window
        written to its file as soon as it is decoded, while the consumer takes each window
        as it is written. Without a disk tier (the windows would not fit) nothing happens:
        the windows are read as they are asked for.

        Args:
            positions: The batch's windows, in the order they are consumed.
        """
        if not (self.read_ahead and self.cache.maps_windows):
            return
        covers: dict[int, list[int]] = {}
        seen: set[int] = set()
        for p in positions:
            if p in seen or self.ahead.reading(p) or p in self.cache:
                continue
            group = self.decoder.group_windows(p)
            seen.update(group)
            covers[group[0]] = group
        if covers:
            self._group_reads.update(covers)
            self.ahead.schedule_groups(covers, self.ahead.last, at_once=self._depth)

    def _fill(self, group: Sequence[int]) -> bool:
        """Decode the windows of one row group in order, writing each to the disk tier.

        A window is written by a thread of its own while the next one is decoded, when the
        cache (which, with a disk tier, holds no windows) has room for the two windows
        then held besides the one being decoded; else each is written before the next.
        """
        todo = [p for p in group if p not in self.cache]
        for p in group:
            if p not in todo:
                self.ahead.finished(p)
        if len(todo) > 1 and self.cache.limit - self.cache.held >= 2 * self.largest_window:
            self._fill_piped(todo)
            return True
        for p in todo:  # a skipped window's rows are decoded on the way to the next one
            try:
                self.cache.put(p, self._read_with(p, (), 0)[0])
                self.cache.missed()
            finally:
                self.ahead.finished(p)
        return True

    def _fill_piped(self, todo: Sequence[int]) -> None:
        """:meth:`_fill`, each window written while the next is decoded (one waits at most)."""
        waiting: queue.Queue[tuple[int, pa.Table] | None] = queue.Queue(maxsize=1)

        def write() -> None:
            while (item := waiting.get()) is not None:
                position, table = item
                try:
                    self.cache.put(position, table)
                except Exception:  # not written: the consumer reads it itself
                    pass
                finally:
                    del table, item
                    self.ahead.finished(position)

        writer = threading.Thread(target=write, name="undertale-duck-disk-writer", daemon=True)
        writer.start()
        try:
            for p in todo:
                try:
                    table = self._read_with(p, (), 0)[0]
                except BaseException:
                    self.ahead.finished(p)
                    raise
                self.cache.missed()
                waiting.put((p, table))
                del table
        finally:
            waiting.put(None)
            writer.join()

    def _fetch_ahead(self, position: int, keep: int | None) -> bool:
        """Read one window into the cache on the read-ahead thread (False: it was cached)."""
        group = self._group_reads.pop(position, None)
        if group is not None:
            return self._fill(group)
        if position in self.cache:
            return self.cache.open_ahead(position)  # a disk tier's file, mapped ahead
        self._load(position, keep)
        return True

    def _load(self, position: int, keep: int | None) -> pa.Table:
        """Read one window into the cache, with the windows its read decodes on its way.

        A window cut from a large row group is read by continuing the group's open reader
        where the previous window stopped; when there is none (the first window read, or
        random access), the group is decoded from its first row, and the windows passed on
        the way are kept too, as far as the cache has room beside ``keep`` (the window
        being consumed), so the group is decoded once, not once per window.
        """
        own = need = self._bytes(self.windows[position].rows)
        chosen: list[int] = []
        limit = self.cache.limit
        for p in self.decoder.passed(position) if limit else ():
            if p in self.cache or self.ahead.reading(p):
                continue
            more = self._bytes(self.windows[p].rows)
            if need + more > limit:
                break
            need += more
            chosen.append(p)
        room = 0
        if self._row_bytes or chosen:
            self.cache.make_room(need, keep)
            room = self.cache.limit - self.cache.held - own
        table, more_tables = self._read_with(position, chosen, room)
        self.cache.put(position, table)
        for p, got in more_tables.items():
            if p not in self.cache and not self.ahead.reading(p):
                self.cache.put(p, got)
        return self.cache.handed(position, table)

    @property
    def current(self) -> int | None:
        """The window the consumer moved to last (:meth:`window` with ``advance``), if any."""
        return self.decoder.current

    def drop_held(self) -> None:
        """Let go of the window held beside the cache (see :meth:`window`)."""
        self._held = None

    def stop_read_ahead(self) -> None:
        """Wait for the read in flight and end the read-ahead thread (a hint starts a new one)."""
        running = self.ahead.running
        self.ahead.stop()
        if running:
            self.ahead.start()

    def window(self, position: int, *, advance: bool = True, first: int | None = None) -> pa.Table:
        """Return the rows of one window, reading it unless it is cached or held.

        A window the cache cannot keep (``memory=0``, or one larger than the cache's share)
        is held after its read until the consumer reads another window, so the batches that
        follow in it do not decode it again.

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
        held = self._held
        if held is not None and held[0] == position:
            table: pa.Table | None = held[1]
        else:
            held = None  # this frame does not keep another window alive during a read
            table = None if self.ahead.reading(position) else self.cache.get(position)
        if table is None:
            if self.ahead.wait(position):
                table = self.cache.get(position)
            if table is None:
                keep = self.ahead.last
                if advance:  # what comes next is read beside this read, not after it
                    self._advance(position, None, position if first is None else first)
                self._held = None  # the window held before is freed during this read
                table = self._load(position, keep)
                if position not in self.cache:
                    # not kept (no budget, or larger than the cache's share): held for the
                    # batches that follow in it, until the consumer reads another window
                    self._held = (position, table)
        if advance:
            decoder = self.decoder
            if position != decoder.current:
                decoder.previous = decoder.current
            decoder.current = position
            self._advance(position, table, position if first is None else first)
        return table

    def joined(self, position: int, table: pa.Table) -> pa.Table:
        """Window ``position``'s ``table`` in one buffer per column, for rows taken out of order.

        A window read while access was sequential may be held in pyarrow's decoded batches
        (``window_read.MAX_KEPT_CHUNKS``), which serve slices in order as fast as one buffer
        but rows taken out of order (a shuffled or random batch) several times slower: the
        first such batch copies it into one buffer per column, and the cache holds the copy
        from then on (the copy a read out of order makes at once). A window the cache does
        not hold is not copied: its rows are taken across its chunks once.

        Args:
            position: The window's position in the plan.
            table: The window as :meth:`window` returned it.

        Returns:
            ``table`` itself when each column is one chunk or the cache does not hold it,
            else its copy.
        """
        if all(column.num_chunks <= 1 for column in table.columns):
            return table
        if not self.cache.holds(position, table):
            return table
        one = one_buffer(table)
        self.cache.swap(position, table, one)
        return one

    def read(self, position: int) -> pa.Table:
        """Read one window from disk, bypassing the cache (see :meth:`WindowDecoder.decode`).

        Args:
            position: The window's position in the plan.

        Returns:
            The window's rows as an Arrow table.
        """
        return self._read_with(position, (), 0)[0]

    def _read_with(
        self, position: int, neighbours: Sequence[int], room: int
    ) -> tuple[pa.Table, dict[int, pa.Table]]:
        table, more = self.decoder.decode_with(position, neighbours, room)
        if table.num_rows:
            row_bytes = table_bytes(table) / table.num_rows
            with self._row_lock:  # the consumer and the read-ahead thread both read
                if row_bytes > self._row_bytes:
                    self._row_bytes = row_bytes
                    self._update_reserve()
        return table, more


__all__ = ["WindowReader"]
