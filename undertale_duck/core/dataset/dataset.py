"""``ShardDataset``: the core map-style torch Dataset over Parquet shards, read by window."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import duckdb
import numpy as np
import pyarrow as pa
from torch.utils.data import Dataset, get_worker_info

from ...common.sizes import DEFAULT_MEMORY, MIB, DefaultMemory
from ...errors import ArgumentError, QueryError, ShardChangedError
from ..query import SQL_FILES, QuerySession, SqlFiles
from ..read import (
    AccessMonitor,
    CacheStats,
    DiskStats,
    TieredCache,
    WindowReader,
    prepare_directory,
)
from ..rows import ROW_FORMATS, Format, Row, RowAccess, check_collection
from ..runtime import (
    TaskMap,
    default_duckdb_config,
    duckdb_path,
    fit_arrow_pool,
    nan_safe,
    sqlfiles,
)
from ..source import Source, SourceLike, StorageStats
from ..source import windows as win
from ..views import IndexedView, SideTable, index_view, side_tables
from ..views import check as view_check
from .arguments import (
    RowList,
    check_columns,
    check_duckdb_config,
    check_expected_rows,
    check_positions,
    check_read_ahead,
    check_sizes,
    view_query,
)
from .build import ReaderSettings, build_reader, process_budget
from .sql import SqlAccess

#: Logs under ``undertale_duck`` (silent unless the application configures logging).
_log = logging.getLogger(__name__)
#: How the view's errors name its query; a ``where=`` view's name the condition instead.
_VIEW_QUERY = "view query"
#: DuckDB's quote of the failed query, to the end of its message.


#: An order ``prefetch(lazy=True)`` declared: the declaring process, the windows, the rows.
PendingOrder = tuple[int, list[int] | None, np.ndarray[Any, np.dtype[np.int64]] | None]
#: What a DataLoader worker declares at its first read: ``plan(worker id, workers)`` gives its
#: windows in the order it will first read them and the rows its batches will ask for, in
#: order, or None for nothing (see ``prefetch_in_workers``).
WorkerPlan = Callable[[int, int], "tuple[Sequence[int], RowList] | None"]


@contextlib.contextmanager
def named_filter(where: str | None) -> Iterator[None]:
    """Errors of a ``where=`` view name the condition the user gave, not the query made of it.

    Args:
        where: The user's own condition (not a split's added to it); None: a ``query=``
            view, or none, whose errors name the view query.
    """
    try:
        yield
    except QueryError as exc:
        text = str(exc)
        if where is None or not text.startswith(_VIEW_QUERY):
            raise
        rest = text[len(_VIEW_QUERY):]  # DuckDB's quote of the query is left out there
        if rest.startswith(" must be"):  # the view's words for a statement after ';'
            rest = (" must be one SQL condition on the rows, without ';' (it is the filter of "
                    "SELECT * FROM dataset WHERE <condition>)")
        raise type(exc)(f"where={where!r}{rest}") from None


class ShardDataset(RowAccess, SqlAccess, Dataset[Row]):
    """A Parquet-backed dataset with random access through a byte-bounded window cache.

    Rows are read in *windows* (contiguous row ranges aligned to the shards' row groups), one
    DuckDB query per window, and windows are kept in an LRU cache. ``memory`` is the data
    budget of each process: part of it is kept free for the transient memory of reading a
    window (DuckDB decodes whole row groups; estimated from the footers and the windows
    read, see :func:`windows.read_reserve`), the rest caches windows. The shards are also
    attached as a DuckDB view named ``dataset`` for :meth:`sql`.

    Args:
        source: A Parquet file, a directory of shards (sorted by name; hidden files,
            ``_SUCCESS``, ``*.crc`` and non-Parquet files ignored), a glob, or a list of files.
        memory: Memory budget in megabytes, per process, for cached windows plus one window
            read in flight. If it cannot hold a read and one window, one window (if it fits
            in the budget at all) is cached anyway and a :class:`MemoryBudgetWarning` says
            how much is needed. A window larger than the whole budget is not cached: it is
            held while its batches are handed out (a pass in order reads it once) and
            dropped when another window is read; 0 caches nothing beyond that window. A
            read whose row groups (as the footer records them) or decoded rows exceed the
            budget (at least 64 MiB) stops with
            :class:`MemoryBudgetError`, and DuckDB's ``memory_limit`` is twice that unless
            ``duckdb_config`` sets it (a decompression bomb stops there); ``memory=0``
            turns these limits off. Left at its default (4096), the cache's budget is
            shared between a process's DataLoader workers (each gets ``4096 / workers``,
            at least 512 MiB); a number given is each process's own.
        columns: Columns to keep (in this order); None keeps all.
        window_bytes: Target decoded bytes per window; by default a sixteenth of
            ``memory`` between 1 MiB and 64 MiB. A row group counts as the larger of its
            footer's size and its Arrow size estimated from the footer's value counts.
        duckdb_config: DuckDB settings overriding :func:`default_duckdb_config`.
        format: How row values are returned. ``"python"`` (default): exactly pyarrow's
            ``as_py()`` values, as undertale's original dataset module did. ``"numpy"``:
            numeric columns become numpy scalars and lists of numbers 1-d numpy arrays;
            ``"torch"``: the same as tensors (0-d for scalars; unsigned integers widen to
            int64, and a uint64 value of 2**63 or more raises :class:`OutOfRangeError`
            rather than wrap). Both are built column-wise from one Arrow slice or take per
            window, without Python lists; other types (strings, structs, nested lists) keep
            their ``as_py()`` values, nulls are ``None``, and a list of numbers holding a
            null element is its ``as_py()`` list. A value's type depends on that value
            alone, never on the other rows of the batch. Arrays and tensors never share
            memory with the cache. A value with no Python counterpart (a date beyond
            ``datetime``'s range) raises :class:`OutOfRangeError` naming shard and row.
        read_ahead: Read the next windows in background threads while one is consumed
            (the next in the :meth:`prefetch` order, else the following windows when access
            is sequential), within the ``memory`` budget. True: two windows at once where
            the process may use two cores or more and the budget holds them (one in
            DataLoader workers, which are the parallelism there); an int: at most that many
            windows at once; False or 0: none.
        query: Make the dataset a *view*: SQL over ``dataset`` (every row of every shard)
            that can be answered row by row: computed columns, a ``WHERE`` filter, lookups
            joined from ``tables``. ``ds[i]`` is the i-th row of its result in shard and row
            order and ``len(ds)`` is exact; one indexing pass counts the rows each window
            keeps and is kept on disk (see docs/views.md).
        where: Shorthand for ``query="SELECT * FROM dataset WHERE <where>"``. With
            ``columns``, the filter may name columns ``columns`` leaves out: they are read
            for the filter only (the view is ``SELECT <columns> FROM dataset WHERE ...``).
        tables: Side tables a view joins: ``{name: Parquet/CSV path or pyarrow.Table}``.
        disk: Size in megabytes of a local disk tier, or None (default) for none. Each
            window decoded is written once, as an Arrow IPC file, to ``disk_dir`` and read
            back memory-mapped, so no window is decoded twice while its file is there and
            rows come from the operating system's page cache (shared by DataLoader workers,
            reclaimable; not counted in ``memory``, which then only pays for reads in
            flight). For uniform random access (``shuffle=True``) over data larger than
            ``memory``, which without it reads a window per row or two and warns once per
            process (:class:`~undertale_duck.errors.RandomAccessWarning`). The directory's
            window files are kept within ``disk`` megabytes (least recently used removed
            first); files of changed shards are never read.
        disk_dir: Directory of the disk tier; by default ``$UNDERTALE_DUCK_CACHE/windows``,
            else ``~/.cache/undertale_duck/windows``. Never inside, above or beside the
            dataset's directories.
        sql_files: What :meth:`sql` may read besides the view: ``"any"`` (default) file
            the process can read, or only the ``"dataset"``'s own shards (DuckDB refuses
            ``read_text('/etc/passwd')`` and every other path).
        storage_options: For a remote ``source`` (an fsspec URL such as
            ``s3://bucket/prefix/``, a glob URL or a list of URLs): options of the store's
            fsspec filesystem (credentials, ``endpoint_url`` ...); ignored for local paths.
            See docs/storage.md.
        cache_dir: Where a remote source's shards are cached, shared by every process of
            the node (default ``$UNDERTALE_DUCK_CACHE``, else ``~/.cache/undertale_duck/shards``).
        cache_limit: The shard cache's byte limit (an int, or a size such as ``"20GiB"``);
            default ``$UNDERTALE_DUCK_CACHE_LIMIT``, else the smaller of 64 GiB and 80% of
            the disk the cache can use.
        retries: Retries of a failed store request (timeouts, 5xx, throttling), with
            exponential backoff, before a ``StorageError`` (default 3).
        index_executor: Where a view's indexing pass runs (``query=``/``where=``): one
            task per shard through the executor's ``map`` (``RayExecutor``,
            ``TorchDistributedExecutor``, any ``core.runtime.TaskMap``); None (default)
            indexes here. Shards in object storage are indexed here. The index is the same.

    Raises:
        SourceError: If the source cannot be resolved or a shard's footer cannot be read
            (``NotParquetError``, ``CorruptShardError``, ``EncryptedShardError``,
            ``UnsupportedShardError`` and ``ColumnError`` are subclasses).
        ArgumentError: If ``memory`` or ``window_bytes`` is not a sensible number,
            ``columns`` is not a list of non-empty names, DuckDB refuses ``duckdb_config``,
            ``format`` is not one of ``"python"``, ``"numpy"``, ``"torch"``, ``sql_files``
            is not ``"any"`` or ``"dataset"``, ``disk`` is not a number of megabytes, or
            ``disk_dir`` overlaps the dataset or cannot be created.
        QueryError: If a view's query is not row by row (naming the construct) or fails.
    """

    def __init__(
        self,
        source: SourceLike,
        memory: float | str = DEFAULT_MEMORY,
        *,
        columns: Sequence[str] | None = None,
        window_bytes: int | str | None = None,
        duckdb_config: Mapping[str, Any] | None = None,
        format: Format = "python",
        read_ahead: bool | int = True,
        query: str | None = None,
        where: str | None = None,
        tables: Mapping[str, SideTable] | None = None,
        sql_files: SqlFiles = "any",
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        retries: int | None = None,
        disk: float | str | None = None,
        disk_dir: str | os.PathLike[str] | None = None,
        index_executor: TaskMap | None = None,
    ) -> None:
        query = view_query(query, where, tables)
        if index_executor is not None and not isinstance(index_executor, TaskMap):
            raise ArgumentError(
                "index_executor must be an executor with a map() method (RayExecutor(), "
                f"TorchDistributedExecutor() ...), not {type(index_executor).__name__}"
            )
        self._index_executor = index_executor
        self.query = query
        # where= alone (not query=): a filter that may need columns columns= leaves out
        self._where = where
        self._query_given = query
        self._tables = dict(tables or {})
        if format not in ROW_FORMATS:
            raise ArgumentError(f"format must be one of {list(ROW_FORMATS)}, got {format!r}")
        if sql_files not in SQL_FILES:
            raise ArgumentError(f"sql_files must be 'any' or 'dataset', got {sql_files!r}")
        self.sql_files: SqlFiles = sql_files
        self.format: Format = format
        #: Windows read ahead at once (None: chosen from the cores, see ``read_ahead``).
        self.read_depth = check_read_ahead(read_ahead)
        self.read_ahead = bool(read_ahead)
        self._order: list[int] | None = None
        #: An order ``prefetch(lazy=True)`` declared, and the process that declared it: it
        #: takes effect at that process's next read (see ``reader``)
        self._pending_order: PendingOrder | None = None
        #: A plan each DataLoader worker applies at its first read, and the process
        #: that gave it (see ``prefetch_in_workers``)
        self._worker_plan: tuple[int, WorkerPlan] | None = None
        self._expect_rows(None)
        sizes = check_sizes(memory, window_bytes, disk, disk_dir)
        #: The disk tier's size in MiB (None: no disk tier).
        self.disk = None if sizes.disk_bytes is None else sizes.disk_bytes / MIB
        self._disk_spec = disk_dir
        #: The memory budget in MiB, however it was given.
        self.memory = sizes.memory_bytes / MIB
        #: Whether ``memory`` was left at its default: then shared between the DataLoader
        #: workers of a process (never the window plan, cut from the whole budget).
        self.memory_shared = isinstance(memory, DefaultMemory)
        self.memory_bytes = sizes.memory_bytes
        # a small budget cannot also hold what pyarrow's allocator keeps of freed buffers
        fit_arrow_pool(self.memory_bytes)
        self._columns = check_columns(columns)
        self.window_bytes = sizes.window_bytes or win.default_window_bytes(self.memory_bytes)
        user = check_duckdb_config(duckdb_config)
        self.duckdb_config = {**default_duckdb_config(), **user}
        self._user_config = frozenset(user)
        self._remote: dict[str, Any] = {
            "storage_options": storage_options,
            "cache_dir": cache_dir,
            "cache_limit": cache_limit,
            "retries": retries,
        }
        self._open(source)

    def _check_source(self) -> None:
        """Refuse the opened source before a view over it is indexed (a subclass's checks)."""

    def _open(self, source: SourceLike) -> None:
        self._spec = source
        self.query = self._query_given
        self.source = Source(source, self._columns, **self._remote)
        self._check_source()
        with self._named_filter():
            if self._where is not None and self._columns is not None:
                self._read_filter_columns(source, self._where, self._columns)
            self._index_view()
        self._length = self.windows[-1].end if self.windows else 0
        self._starts = win.starts(self.windows)
        self._starts_array = np.asarray(self._starts, dtype=np.int64)
        self._reader: WindowReader | None = None
        self._reader_pid = os.getpid()
        self._sql_session: QuerySession | None = None
        self._monitor: AccessMonitor | None = None
        self._forget_runs()
        self.disk_dir: str | None = None
        if self.disk:
            self.disk_dir = prepare_directory(self._disk_spec, self.source.paths)
        _log.info(
            "opened %s: %d shards, %d rows, %d windows%s",
            self.source.spec, len(self.source.shards), self._length, len(self.windows),
            "" if self.view is None else f", view {self.view.query.text!r}",
        )

    def _index_view(self) -> None:
        """Plan the windows, and index the view's rows over them if there is a view."""
        shards = self.source.shards
        # windows are cut by each row group's decoded size where its footer understates it
        self.windows = win.plan(
            [s.planned_groups for s in shards],
            self.window_bytes,
            file_bytes=[s.size for s in shards],
        )
        self.view: IndexedView | None = None
        if self.query is not None:
            self.view = index_view(
                self.query,
                side_tables(self._tables),
                self.source.shards,
                self.source.columns,
                self.windows,
                self._connect,
                executor=self._index_executor,
                config=self.duckdb_config,
            )
            self.windows = self.view.windows

    def _named_filter(self) -> contextlib.AbstractContextManager[None]:
        """Errors of a ``where=`` view name the condition given (:func:`named_filter`)."""
        return named_filter(getattr(self, "_where_given", self._where))

    def _read_filter_columns(self, source: SourceLike, where: str, columns: list[str]) -> None:
        """Let ``where=`` filter by columns ``columns=`` leaves out, serving only ``columns``.

        The source then holds ``columns`` and the other columns the filter names, and the
        view selects ``columns`` (a window reads only those: the index knows the rows kept).
        """
        named = view_check.check(self.query or "").index_names  # lowercased
        if named is None:  # COLUMNS(*) and the like: over the columns given, as it always was
            return
        extra = [
            name for name in self.source.shards[0].schema.names
            if name not in columns and name.lower() in named
        ]
        if not extra:  # the filter reads only columns it is given: the plain where= view
            return
        self.source = Source(source, [*columns, *extra], **self._remote)
        self.query = f"SELECT {sqlfiles.column_list(columns)} FROM dataset WHERE {where}"

    # ------------------------------------------------------------------ lazy process state
    @property
    def reader(self) -> WindowReader:
        """The process's window reader (connection and cache), created on first use."""
        reader = self._reader  # one read: close() from another thread may reset it meanwhile
        if reader is None:
            reader, self._monitor = build_reader(self.reader_settings())
            self._reader, self._reader_pid = reader, os.getpid()
        elif self._reader_pid != os.getpid():  # a forked worker kept its parent's reader
            self._reader_pid = os.getpid()
            if self.memory_shared:
                reader.resize(process_budget(self.memory_bytes))
        if self._pending_order is not None:
            self._take_pending_order(reader)
        if self._worker_plan is not None:
            self._take_worker_plan(reader)
        return reader

    def _take_pending_order(self, reader: WindowReader) -> None:
        """Give ``reader`` the order ``prefetch(lazy=True)`` declared, if this process did."""
        pending, self._pending_order = self._pending_order, None
        if pending is not None and pending[0] == os.getpid():  # a forked child drops it
            self._expect_rows(pending[2])
            self._order = pending[1]
            reader.set_order(pending[1])

    def _take_worker_plan(self, reader: WindowReader) -> None:
        """Declare, in a DataLoader worker, what ``prefetch_in_workers``' plan gives it."""
        given = self._worker_plan
        if given is None or given[0] == os.getpid():  # the giving process keeps it for its forks
            return
        self._worker_plan = None  # once per worker process
        info = get_worker_info()
        if info is None or self.format == "python":
            return
        hint = given[1](info.id, info.num_workers)
        if hint is None:
            return
        order = check_positions(hint[0], len(self.windows))
        self._expect_rows(check_expected_rows(hint[1], len(self)), planned=True)
        self._order = order
        reader.set_order(order)

    def _leave_plan(self) -> None:
        """Drop a worker plan's declarations: a batch asked for rows it did not plan."""
        self._expect_rows(None)
        self._order = None
        if self._reader is not None:
            self._reader.set_order(None)

    def prefetch_in_workers(self, plan: WorkerPlan | None) -> None:
        """Let each DataLoader worker declare its own order and rows at its first read.

        For a sampler iterated in the main process while workers read: ``plan(worker id,
        number of workers)`` gives a worker its windows in the order it will first read them
        and the rows its batches will ask for, in order (as :meth:`prefetch` takes them), or
        None. A worker calls it once, at its first read, in ``numpy``/``torch`` datasets;
        the first batch that asks for other rows than planned drops what it declared (a
        stale plan: a persistent worker's next epoch, a resumed pass). Workers started by
        ``spawn``/``forkserver`` get the dataset pickled, and the plan with it only if it
        has a true ``travels`` attribute (else it is left out: a lambda would not pickle).
        A :class:`ChunkedSampler` built for workers gives one itself, which travels as a
        copy of the sampler's settings and position, not its order.

        Args:
            plan: The plan, or None to clear it.
        """
        self._worker_plan = None if plan is None else (os.getpid(), plan)

    def reader_settings(self) -> ReaderSettings:
        """A frozen copy of what this process's window reader is built from."""
        return ReaderSettings(
            source=self.source,
            windows=self.windows,
            schema=self.schema,
            columns=self.columns,
            rows=self._length,
            view=self.view,
            duckdb_config=dict(self.duckdb_config),
            user_config=self._user_config,
            memory=self.memory,
            memory_bytes=self.memory_bytes,
            memory_shared=self.memory_shared,
            disk=self.disk or 0,
            disk_dir=self.disk_dir,
            read_ahead=self.read_ahead,
            read_depth=self.read_depth,
            order=None if self._order is None else tuple(self._order),
        )

    def prefetch(
        self, windows: Sequence[int] | None, *, lazy: bool = False, rows: RowList | None = None
    ) -> None:
        """Tell this process's reader the order in which it will consume windows.

        A read-ahead hint for locality-aware orders that are not sequential (a sampler that
        shuffles windows): while window ``windows[k]`` is consumed, ``windows[k + 1]`` is read
        in the background, and ``windows[0]`` is read right away. Positions index
        :attr:`windows` (see :meth:`window_of`). The hint is kept when the dataset is pickled
        to workers; call it again to replace it, or with None to clear it. Without a hint,
        sequential access is detected by itself. A :class:`ChunkedSampler` iterated without
        DataLoader workers declares its pass's order itself (``lazy``).

        Args:
            windows: Window positions in the order they will be consumed, or None.
            lazy: Keep the hint until this process next reads a row, and apply it then: for
                an order declared where rows may not be read (a sampler is iterated in the
                main process, and a DataLoader's workers read), so nothing is read ahead
                there. A worker forked meanwhile, or a copy pickled to one, does not take it.
            rows: The row indices this process's batches will ask for, in order (an array is
                kept, not copied). A batch of a ``numpy``/``torch`` dataset that asks for the
                next of them is gathered with the batches after it in the same window (up to
                1,024 rows and 1 MiB), which then wait, cut apart, for their own calls: small
                shuffled batches pay the fixed cost of a fetch once per group. Batches that
                ask for other rows are served as always. Kept by this process only.

        Raises:
            IndexError: If a position or row is out of range.
            TypeError: If a position or row is not an integer.
        """
        order = None if windows is None else check_positions(windows, len(self.windows))
        expected = None if rows is None else check_expected_rows(rows, len(self))
        if lazy:
            self._pending_order = (os.getpid(), order, expected)
            return
        self._pending_order = None
        self._expect_rows(expected)
        self._order = order
        if self._reader is not None or order:
            self.reader.set_order(order)

    def window_of(self, index: int) -> int:
        """Return the position in :attr:`windows` of the window holding row ``index``.

        Args:
            index: A global row index (negative counts from the end).

        Returns:
            The window's position.

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
        """
        return win.locate(self._starts, win.normalize_index(index, len(self)))

    def _connect(
        self, setup: Callable[[duckdb.DuckDBPyConnection], None]
    ) -> duckdb.DuckDBPyConnection:
        """Open a database with the ``dataset`` view for one-off work (a view's indexing).

        Its scans see NaN whatever the footers' statistics say (:func:`nan_safe`).
        """
        return self.source.connection(nan_safe(self.duckdb_config), setup).cursor()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_reader"] = None
        state["_monitor"] = None
        state["_ahead"] = {}
        state["_sql_session"] = None
        state["_index_executor"] = None  # a process group does not travel; a copy indexes here
        state["_pending_order"] = None  # the declaring process's own (see ``prefetch``)
        plan = state.get("_worker_plan")  # travels only if it says so (``prefetch_in_workers``)
        state["_worker_plan"] = plan if plan and getattr(plan[1], "travels", False) else None
        state["_expected"] = None
        state["_ahead_batches"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def refresh(self) -> None:
        """Reopen the dataset as it is on disk now (re-reading footers, emptying the cache).

        Raises:
            SourceError: If the source can no longer be resolved or read.
        """
        self.close()
        self._open(self._spec)

    def close(self) -> None:
        """Close this process's DuckDB connection and empty the cache (reopened on next use).

        Safe from another thread: a running ``sql_batches`` stream then raises
        :class:`QueryError` when read on (never ends early), and a running read finishes or
        raises one of this package's errors.
        """
        session, reader = self._sql_session, self._reader
        self._reader = None  # the next use builds a new reader
        self._forget_runs()
        if session is not None:
            session.close()
        if reader is not None:
            reader.stop_read_ahead()
            reader.connection.close()
            reader.cache.clear()
            reader.drop_held()
            reader.decoder.close()  # the row-group readers kept open between windows

    # ------------------------------------------------------------------ metadata
    @property
    def columns(self) -> list[str]:
        """Names of the columns each row holds (a view's: those its query returns)."""
        return list(self.schema.names)

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of a row (the first shard's projected onto ``columns``, or the view's)."""
        return self.source.schema if self.view is None else self.view.schema

    @property
    def fingerprint(self) -> str:
        """A short stable hash of the query, the columns and every shard's identity.

        Equal fingerprints mean the same rows in the same order; a loader's saved state
        carries it, so resuming against other data is refused.
        """
        payload = {
            "query": None if self.view is None else self.view.query.sql,
            "sides": [] if self.view is None else [s.fingerprint for s in self.view.sides],
            "columns": self.columns,
            "shards": [
                [s.stable_path, s.rows, s.size, s.mtime_ns, list(s.inode),
                 getattr(s, "version", None)]
                for s in self.source.shards
            ],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def shards(self) -> list[str]:
        """Paths of the shards, in dataset order."""
        return self.source.paths

    @property
    def cache_stats(self) -> CacheStats:
        """Hit, miss and eviction counts and bytes held by this process's cache."""
        return self.reader.cache.stats()

    @property
    def disk_stats(self) -> DiskStats | None:
        """This process's disk tier counters (windows served, written, removed), or None."""
        cache = self.reader.cache
        return cache.tier.stats if isinstance(cache, TieredCache) else None

    @property
    def storage_stats(self) -> StorageStats | None:
        """What this process fetched from object storage (bytes, requests), or None.

        None for a dataset of local files. Counts range reads (footers, windows of shards
        not yet cached), whole-shard downloads and background downloads apart; DataLoader
        workers and ranks count their own.
        """
        store = self.source.store
        return None if store is None else cast(StorageStats, store.stats())

    def locate(self, index: int) -> tuple[str, int]:
        """Return the shard and local row number of a global index.

        Args:
            index: A global row index (negative counts from the end).

        Returns:
            ``(shard path, local row)``.

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
        """
        return self.locate_many([index])[0]

    def locate_many(self, indices: Sequence[int]) -> list[tuple[str, int]]:
        """The shard and local row of each of many global indices.

        A view's kept rows are looked up once per window, not once per index.

        Args:
            indices: Global row indices (negative ones count from the end), in a list, a
                1-d array or tensor, or any ordered iterable.

        Returns:
            ``(shard path, local row)`` per index, in order.

        Raises:
            IndexError: If an index is out of range.
            TypeError: If an index is not an integer, or ``indices`` is None, a string,
                bytes (read as byte values), a set (no order) or a dict.
        """
        check_collection(indices, "locate_many")
        found = [win.normalize_index(index, len(self)) for index in indices]
        out: list[tuple[str, int]] = []
        looked: dict[int, np.ndarray[Any, Any]] = {}  # a view's local rows per window, asked once
        for i in found:
            position = win.locate(self._starts, i)
            w = self.windows[position]
            shard = self.source.shards[w.shard]
            view = self.view
            if view is None:
                out.append((shard.path, w.start + (i - w.offset)))
                continue
            rows = looked.get(position)
            if rows is None:
                rows = self._view_rows(view, w)
                looked[position] = rows
            out.append((shard.path, int(rows[i - w.offset])))
        return out

    def _view_rows(self, view: IndexedView, w: win.Window) -> np.ndarray[Any, Any]:
        """The local row numbers a view keeps in one window, from its index or a query."""
        shard = self.source.shards[w.shard]
        known = view.kept_rows(w)
        if known is not None:
            return known
        params = {"path": duckdb_path(shard.path), "start": w.start, "stop": w.stop}
        rows = self.reader.connection.cursor().execute(
            view.locate_query(w.shard), params
        ).fetchall()
        if len(rows) != w.rows:
            raise ShardChangedError(
                f"the view keeps {len(rows)} rows of local rows {w.start}..{w.stop - 1} of "
                f"shard {shard.path} where its index says {w.rows}; call refresh()",
                shard.path,
            )
        return np.asarray([r[0] for r in rows], dtype=np.int64)

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        # what a user needs to recognise the dataset: where, what it serves, within what
        view = "" if self.view is None else f", query={self.view.query.text!r}"
        shown = ", ".join(self.columns[:8]) + (", ..." if len(self.columns) > 8 else "")
        return (
            f"{type(self).__name__}({self.source.spec!r}, memory={self.memory}{view}, "
            f"format={self.format!r}, rows={len(self)}, shards={len(self.source.shards)}, "
            f"columns=[{shown}], windows={len(self.windows)})"
        )
