"""The indexing pass of a view: how many rows of each window the query keeps, kept on disk."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ...common.arrays import numpy_of
from ...common.progress import Progress, progress_bar
from ...common.text import first_line
from ...errors import QueryError, SourceError
from ..parquet import pages
from ..runtime import (
    CacheUnwritableError,
    TaskMap,
    atomic_file,
    connect,
    duckdb_path,
    failures,
    interruptible,
    nan_safe,
    planned_as_configured,
    process_cache_dir,
    read_cached,
    sqlfiles,
    write_atomic,
)
from ..source import Conversions, Shard, Window, conversions, drift_error, own_schema
from .check import ORDER_COLUMN, RESERVED_PREFIX, ROW_COLUMN, ViewQuery
from .kept import BitmapWriter, KeptRows
from .sides import Side

#: Logs under ``undertale_duck`` (silent unless the application configures logging).
_log = logging.getLogger(__name__)

#: Bumped whenever the index format or the meaning of a count changes. 4: indexes counted
#: NaN rows whatever the footers' statistics say (earlier ones could miss them).
INDEX_VERSION = 4
#: Source rows fetched per batch while counting (bounds the pass's memory).
INDEX_BATCH_ROWS = 1 << 16

def index_key(
    view: ViewQuery,
    columns: Sequence[str],
    shards: Sequence[Shard],
    windows: Sequence[Window],
    sides: Sequence[Side],
    converted: Mapping[int, str] | None = None,
) -> str:
    """A stable hash of everything a view's row counts depend on.

    Args:
        view: The checked query.
        columns: The dataset's columns.
        shards: The shards, with their identities (path, size, mtime, inode, ctime).
        windows: The dataset's window plan.
        sides: The side tables.
        converted: How drifting shards are read (``Conversions.lists``), where any drift.

    Returns:
        A hex digest; equal keys mean equal counts.
    """
    payload = {
        "version": INDEX_VERSION,
        "query": view.index_sql,
        "columns": list(columns),
        "shards": [[s.rows, *s.identity] for s in shards],
        "windows": [[w.shard, w.start, w.stop] for w in windows],
        "sides": [[s.name, s.fingerprint] for s in sides],
    }
    if converted:  # a key without drift is the same as before drift was converted
        payload["converted"] = sorted([k, text] for k, text in converted.items())
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def load_counts(key: str, protected: list[str]) -> tuple[list[int], KeptRows | None] | None:
    """The counts (and kept-rows bitmap) stored for ``key``, or None when there are none.

    Unreadable or malformed records count as none (the view is then indexed again).
    """
    try:
        directory = process_cache_dir("views", protected)
    except CacheUnwritableError:  # warned about when the index is kept
        return None
    raw = read_cached(directory / f"{key}.json")
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict):  # absent, untrusted, or a JSON value of another shape
        return None
    counts = data.get("counts")
    if data.get("key") != key or not isinstance(counts, list):
        return None
    if not all(isinstance(c, int) and c >= 0 for c in counts):
        return None
    if data.get("check") != _record_check(key, counts, data.get("kept")):
        return None  # edited or damaged (or an earlier release's): indexed again
    return counts, KeptRows.from_json(directory, data.get("kept"))


def _record_check(key: str, counts: Sequence[int], kept: object) -> str:
    """The digest an index record carries of what it records.

    A count edited or damaged in place would otherwise be trusted by every later open
    (``refresh()`` included), each window then refused as a changed side table.
    """
    text = json.dumps([key, list(counts), kept], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def save_counts(
    key: str, counts: Sequence[int], protected: list[str], kept: KeptRows | None = None
) -> Path:
    """Store the counts (and the kept-rows bitmap's record) for ``key``, atomically."""
    record: dict[str, Any] = {"key": key, "counts": list(counts)}
    if kept is not None:
        record["kept"] = kept.to_json()
    record["check"] = _record_check(key, counts, record.get("kept"))
    directory = process_cache_dir("views", protected)
    return write_atomic(directory, f"{key}.json", json.dumps(record).encode())


def count_rows(
    cursor: duckdb.DuckDBPyConnection,
    view: ViewQuery,
    columns: Sequence[str],
    shards: Sequence[Shard],
    windows: Sequence[Window],
    progress: Progress | None = None,
    bitmaps: BitmapWriter | None = None,
    executor: TaskMap | None = None,
    sides: tuple[Side, ...] = (),
    config: Mapping[str, Any] | None = None,
    converts: Conversions | None = None,
) -> list[int]:
    """Run the indexing pass: for each window, how many of its source rows the view keeps.

    One query per shard reads only the columns the view's filter and joins need (of a
    remote shard not cached, only their column chunks are fetched, by range requests);
    source row numbers stream back in batches and are counted per window with numpy.

    Args:
        cursor: A connection with the side tables registered.
        view: The checked query.
        columns: The dataset's columns.
        shards: The shards.
        windows: The dataset's window plan.
        progress: Called once per shard indexed (see :mod:`common.progress`).
        bitmaps: Receives each shard's kept rows (one bool per source row), in shard order.
        executor: Runs one task per shard through its ``map`` (:class:`IndexTask`: the task
            opens its own database with the side tables); None, or shards in object
            storage, are indexed here on ``cursor``. The counts and rows are the same.
        sides: The side tables (for the tasks).
        config: DuckDB settings of a task's database.
        converts: How shards whose columns drift are read (converted to the dataset's
            types, as the plain dataset serves them); None: every shard as it is.

    Returns:
        One count per window, in plan order.

    Raises:
        QueryError: If the query fails or a join gives a source row more than once.
        SourceError: If a shard cannot be read.
    """
    plain = sqlfiles.column_list(columns)
    converted = Conversions({}) if converts is None else converts

    def sql_of(shard: int) -> str:  # drifting columns converted as the dataset reads them
        return sqlfiles.render(
            "view_index", columns=converted.columns(shard, plain), view=view.index_sql
        )

    needed = [c for c in columns if view.index_reads(c)]
    by_shard: dict[int, list[int]] = {}
    for k, w in enumerate(windows):
        by_shard.setdefault(w.shard, []).append(k)
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if executor is not None and all(type(s) is Shard for s in shards):  # local files
        tasks = [
            IndexTask(sql_of(s), shard, tuple(windows[k].start for k in by_shard[s]), sides,
                      dict(config or {}))
            for s, shard in enumerate(shards) if s in by_shard
        ]
        done = executor.map(index_task, tasks, progress)
        numbers = [s for s in range(len(shards)) if s in by_shard]
        for s, (kept_per_window, packed) in zip(numbers, done, strict=True):
            kept = np.unpackbits(packed, count=shards[s].rows).astype(bool)
            found[s] = (np.asarray(kept_per_window, dtype=np.int64), kept)
    counts = [0] * len(windows)
    for s, shard in enumerate(shards):
        if s not in by_shard:  # an empty shard has no window
            if bitmaps is not None:
                bitmaps.add(np.zeros(shard.rows, dtype=bool))
            continue
        positions = by_shard[s]
        if s in found:
            per_window, seen = found[s]
        else:
            if progress is not None:
                progress(os.path.basename(shard.path))
            starts = [windows[k].start for k in positions]
            per_window, seen = _count_remote(cursor, sql_of(s), shard, starts, needed)
        if bitmaps is not None:
            bitmaps.add(seen)
        for k, n in zip(positions, per_window.tolist(), strict=True):
            counts[k] = int(n)
    return counts


def _count_remote(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    shard: Shard,
    starts: Sequence[int],
    columns: Sequence[str],
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_count_shard` over a local file with the ``columns`` the query reads.

    A local shard is itself; a remote shard not cached is a file holding only those
    columns' chunks, fetched by range requests (counted in the store's traffic), without
    a background download of the whole shard (the index needs no more of it).
    """
    groups = range(len(shard.row_groups))
    with shard.local(groups, columns, behind=False) as local:
        return _count_shard(cursor, sql, shard, starts, local)


def _count_shard(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    shard: Shard,
    starts: Sequence[int],
    local: Shard | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One shard's indexing query: kept rows per window (from ``starts``), and which rows.

    ``local`` is the file DuckDB reads (by default the shard itself); errors name the shard
    (a drifting value that does not fit the dataset's type too: ``convert.py``).
    """
    local = shard if local is None else local
    bounds = np.asarray(starts, dtype=np.int64)
    seen = np.zeros(shard.rows, dtype=bool)
    local.check_unchanged()
    try:
        params = {"path": duckdb_path(local.path), "start": 0, "stop": shard.rows}
        # Ctrl-C stops the indexing query at once (core/interrupt.py)
        reader = _start(cursor, sql, params)
        per_window = np.zeros(len(starts), dtype=np.int64)
        while (batch := _next_batch(cursor, reader)) is not None:
            rows = numpy_of(batch.column(0)).astype(np.int64)
            if rows.size == 0:
                continue
            if rows.min() < 0 or rows.max() >= shard.rows:
                raise SourceError(
                    f"shard {shard.path} holds rows its footer does not count "
                    f"({shard.rows} rows); the file is inconsistent",
                    shard.path,
                )
            if seen[rows].any() or np.unique(rows).size != rows.size:
                raise QueryError(
                    f"view query returns a row of shard {shard.path} more than once: a "
                    "joined side table has several rows for one key; make the join key "
                    "unique in the side table"
                )
            seen[rows] = True
            which = np.searchsorted(bounds, rows, side="right") - 1
            per_window += np.bincount(which, minlength=len(starts))
    except (duckdb.Error, OSError) as exc:  # OSError: DuckDB's error from a batch
        local.check_unchanged()
        drifted = drift_error(exc, [shard])
        if drifted is not None:
            raise drifted from None
        # a codec or an encoding DuckDB does not read is the shard's fault, not the query's
        # (the columns the filter reads are not known here: any of the shard's is named)
        blamed = _shard_failure(exc, shard, shard.schema.names, read=local.path,
                                what="the view's filter")
        if blamed is not None:
            raise blamed from None
        # without DuckDB's quote of the query ("LINE 10: ... ^"): the user wrote only part
        # of it (a where= condition, a query over a table named dataset)
        text = first_line(Exception(str(exc).split("\nLINE ")[0]), limit=4000)
        raise QueryError(f"view query failed on shard {shard.path}: {text}") from None
    local.check_unchanged()
    return per_window, seen


@dataclass(frozen=True)
class IndexTask:
    """One shard's indexing query, as plain data a task in another process runs.

    Attributes:
        sql: ``sql/view_index.sql`` rendered for the view.
        shard: The shard (a local file; checked unchanged where the task runs).
        starts: The first local row of each of the shard's windows.
        sides: The view's side tables.
        config: DuckDB settings of the task's database.
    """

    sql: str
    shard: Shard
    starts: tuple[int, ...]
    sides: tuple[Side, ...]
    config: dict[str, Any]


def index_task(task: IndexTask) -> tuple[list[int], np.ndarray]:
    """Run one :class:`IndexTask` where it is: kept rows per window, and the kept-rows bits.

    Args:
        task: The task.

    Returns:
        The counts of the shard's windows, and its kept rows packed by ``np.packbits``.
    """
    con = connect(nan_safe(task.config))  # NaN rows whatever the statistics say
    try:
        for side in task.sides:
            side.register(con)
        per_window, seen = _count_shard(con, task.sql, task.shard, task.starts)
    finally:
        con.close()
    return per_window.tolist(), np.packbits(seen)


@dataclass(frozen=True)
class ShardQueries:
    """A view's queries over one shard whose columns drift, converted to the dataset's types.

    Attributes:
        columns: The select list reading the dataset's columns, drifting ones converted.
        window_sql: ``sql/view_window[_scan].sql`` over the converted columns.
        serve_sql: ``sql/view_window_kept[_scan].sql`` over them (empty without a filter).
        locate_sql: ``sql/view_index.sql`` over them.
        schema: The dataset's columns with the shard's own types (its scan reads them so:
            what the bound on string values weighs).
    """

    columns: str
    window_sql: str
    serve_sql: str
    locate_sql: str
    schema: pa.Schema


@dataclass(frozen=True)
class IndexedView:
    """A view ready to serve: the checked query, its side tables, windows and schema.

    Attributes:
        query: The checked query.
        sides: The side tables.
        windows: The view's windows (each keeps at least one row).
        schema: The Arrow schema of a view row.
        window_sql: ``sql/view_window.sql`` rendered for this view.
        locate_sql: ``sql/view_index.sql`` rendered for this view.
        reused: Whether the counts came from the on-disk index.
        serve_sql: ``sql/view_window_kept[_scan].sql`` rendered for this view (empty when
            the query has no filter).
        kept: The rows the view keeps, when the index has them.
        drifting: The queries of each shard (by index) whose columns DuckDB reads as other
            types than the first shard's: they convert them first (``source/convert.py``),
            so the view sees every shard's values as the plain dataset serves them.
    """

    query: ViewQuery
    sides: tuple[Side, ...]
    windows: list[Window]
    schema: pa.Schema
    window_sql: str
    locate_sql: str
    reused: bool
    serve_sql: str = ""
    kept: KeptRows | None = None
    drifting: Mapping[int, ShardQueries] = field(default_factory=dict)

    def _queries(self, shard: int) -> tuple[str, str]:
        """The window and kept-rows queries of shard number ``shard``."""
        own = self.drifting.get(shard)
        return (self.window_sql, self.serve_sql) if own is None else (
            own.window_sql, own.serve_sql
        )

    def locate_query(self, shard: int) -> str:
        """``sql/view_index.sql`` for shard number ``shard`` (the source rows it keeps)."""
        own = self.drifting.get(shard)
        return self.locate_sql if own is None else own.locate_sql

    def window_query(self, window: Window) -> tuple[str, dict[str, object]]:
        """How to read one window: the SQL, and parameters besides the path (and overrides).

        A window of a filtered view is read through the query without its filter,
        restricted to the source rows the index found kept (``$keep``, one bit per source
        row), so the columns only the filter needs are not read, and the filter is not run
        again in the reader's database, whose optimizers would drop NaN rows it keeps
        (:func:`nan_safe`), even where every row of the window is kept. Otherwise (no filter,
        or the bitmap unusable) the whole query is run over the window.
        """
        window_sql, serve_sql = self._queries(window.shard)
        rows = self.kept_rows(window) if serve_sql else None
        if rows is not None and rows.size:
            # from the first to the last kept row: row groups outside are not read
            first, last = int(rows[0]), int(rows[-1])
            flags = np.full(last - first + 1, ord("0"), dtype=np.uint8)
            flags[rows - first] = ord("1")
            keep = flags.tobytes().decode("ascii")
            return serve_sql, {"start": first, "stop": last + 1, "keep": keep}
        return window_sql, {}

    @property
    def streams(self) -> bool:
        """Whether the windows cut from one row group may be read by one query, in turn.

        A view without side tables is a scan (its rows come in source order without a
        sort); a filtered one also needs the index's kept rows, which say which window each
        row belongs to.
        """
        return not self.sides and (not self.serve_sql or self.kept is not None)

    @property
    def order_column(self) -> str:
        """The column of a window query's result that holds each row's source row number."""
        return ORDER_COLUMN

    def stream_query(
        self, window: Window, first: int, stop: int
    ) -> tuple[str, dict[str, object]] | None:
        """How to read the view's rows from ``window`` up to local row ``stop`` in one query.

        ``window`` is the first window of the view in its row group, rows ``[first, stop)``
        of its shard: the query then serves it and the group's later windows, one after the
        other, in source order (decoding each row of the group once, where a query per
        window decodes the group's earlier rows again).

        Returns:
            The SQL and its parameters besides the path, or None: the view is not a scan
            (:attr:`streams`), the kept rows are not known, or an earlier window of the view
            lies in ``[first, window.start)`` (random access: the window's own query).
        """
        if not self.streams:
            return None
        window_sql, serve_sql = self._queries(window.shard)
        if not serve_sql:
            if window.start != first:
                return None
            return window_sql, {"start": window.start, "stop": stop}
        assert self.kept is not None
        rows = self.kept.rows(window.shard, first, stop)
        if rows is None or not rows.size or int(rows[0]) < window.start:
            return None
        if int((rows < window.stop).sum()) != window.rows:
            return None
        lo, hi = int(rows[0]), int(rows[-1])
        flags = np.full(hi - lo + 1, ord("0"), dtype=np.uint8)
        flags[rows - lo] = ord("1")
        keep = flags.tobytes().decode("ascii")
        return serve_sql, {"start": lo, "stop": hi + 1, "keep": keep}

    def guarded(self, schema: pa.Schema, columns: Sequence[str]) -> dict[str, tuple[str, Any]]:
        """This view's window queries with a bound on the values of the columns it reads.

        Each scan reads its shard's own columns: the bound weighs the types the shard holds
        (a drifting shard's queries are bounded by its own types, not the first shard's).

        Args:
            schema: The shards' Arrow schema (the first shard's).
            columns: The dataset's columns.

        Returns:
            ``{query: (the same query with the bound in its scan, its decoded.ValueBound)}``;
            empty when the view reads no string or binary column.
        """
        from ..bounds import ValueBound

        read = [c for c in columns if self.query.reads(c)]
        out: dict[str, tuple[str, Any]] = {}
        plain = sqlfiles.column_list(columns)
        scans = [(schema, plain, self.window_sql, self.serve_sql)] + [
            (own.schema, own.columns, own.window_sql, own.serve_sql)
            for own in self.drifting.values()
        ]
        for types, select, window_sql, serve_sql in scans:
            bound = ValueBound(types, read)
            if not bound:
                continue
            guarded = _window_queries(self.query, columns, bound.guard(), select)
            out[window_sql] = (guarded[0], bound)
            if serve_sql:
                out[serve_sql] = (guarded[1], bound)
        return out

    def reads(self, column: str) -> bool:
        """Whether the view's query reads a column of the dataset."""
        return bool(self.query.reads(column))

    def check_unchanged(self) -> None:
        """Check that every side table is still the file that was indexed.

        Raises:
            ShardChangedError: If one changed (its kept rows could fail the view's filter).
        """
        for side in self.sides:
            side.check_unchanged()

    def kept_rows(self, window: Window) -> np.ndarray | None:
        """The local row numbers a window keeps, from the index (None when not available)."""
        if self.kept is None:
            return None
        rows = self.kept.rows(window.shard, window.start, window.stop)
        return rows if rows is not None and rows.size == window.rows else None

    def setup(self, con: duckdb.DuckDBPyConnection) -> None:
        """Register the side tables and ``dataset_view`` on a newly opened database."""
        for side in self.sides:
            side.register(con)
        con.execute(sqlfiles.render("view_define", view=self.query.sql))


def _shard_failure(
    exc: BaseException, shard: Shard | None, columns: Sequence[str], *,
    read: str | None = None, what: str = "the view's columns",
) -> SourceError | None:
    """The shard's error for a failure of a view's read that is the shard's, or None.

    A codec or an encoding DuckDB does not read in a shard is the shard's fault, not the
    query's. Such a failure names the file, or (BYTE_STREAM_SPLIT on FIXED_LEN_BYTE_ARRAY)
    nothing but the encoding, whose column is looked for among ``columns``.

    Args:
        exc: DuckDB's error.
        shard: The shard read.
        columns: The columns read.
        read: The file DuckDB read (a remote shard's local copy; default the shard).
        what: What was read, for the message.
    """
    if shard is None or isinstance(exc, duckdb.BinderException | duckdb.ParserException):
        return None
    path = shard.path if read is None else read
    text = str(exc)
    culprits = pages.split_columns(exc, path, columns) if columns else []
    named = {f'file "{path}"', f'file "{duckdb_path(path)}"'}
    if not culprits and not any(name in text for name in named):
        return None
    return failures.shard_error(exc, shard.path, what, culprits=culprits)


def _without_own_columns(text: str) -> str:
    """DuckDB's error without the view's own columns (``__ud_row``) among its suggestions.

    A query naming ``rowid`` was told 'Candidate bindings: "__ud_row"', a column the view
    refuses to be named.
    """
    own = re.escape(RESERVED_PREFIX)
    text = re.sub(rf'"{own}[^"]*"(, )?', "", text)
    text = re.sub(r"(, )+(?=$|[!.\n])", "", text)  # a dropped last suggestion's comma
    return re.sub(r"\s*Candidate bindings:\s*(?=$|\n)", "", text)


def index_view(
    query: str,
    sides: tuple[Side, ...],
    shards: Sequence[Shard],
    columns: Sequence[str],
    windows: Sequence[Window],
    connect: Callable[[Callable[[duckdb.DuckDBPyConnection], None]], duckdb.DuckDBPyConnection],
    *,
    executor: TaskMap | None = None,
    config: Mapping[str, Any] | None = None,
) -> IndexedView:
    """Check a view's query and count the rows it keeps in each window (or reuse the counts).

    Args:
        query: The view's SQL over ``dataset``.
        sides: Its side tables.
        shards: The dataset's shards.
        columns: The dataset's columns.
        windows: The dataset's window plan.
        connect: Opens a database with the ``dataset`` view, calling the given setup on it.
        executor: Runs the indexing pass as one task per shard (see :func:`count_rows`);
            None runs it here.
        config: DuckDB settings of a task's database.

    Returns:
        The :class:`IndexedView`.

    Raises:
        QueryError: If the query is not row by row, fails to bind or run, or a join repeats
            rows.
    """
    from .check import check

    def setup(con: duckdb.DuckDBPyConnection) -> None:
        for side in sides:
            side.register(con)

    # one database for checking, probing and indexing (opening one costs about 20 ms)
    con = connect(setup)
    try:
        view = check(query, {side.name: None for side in sides}, con=con)
        return _index(view, sides, shards, columns, windows, con, executor, config)
    finally:
        con.close()


def _index(
    view: ViewQuery,
    sides: tuple[Side, ...],
    shards: Sequence[Shard],
    columns: Sequence[str],
    windows: Sequence[Window],
    con: duckdb.DuckDBPyConnection,
    executor: TaskMap | None = None,
    config: Mapping[str, Any] | None = None,
) -> IndexedView:
    """:func:`index_view` once the query is checked, on its open database."""
    from ..source import view_plan

    window_sql, serve_sql = _window_queries(view, columns, guard="")
    locate_sql = sqlfiles.render(
        "view_index", columns=sqlfiles.column_list(columns), view=view.index_sql
    )

    protected = sorted({os.path.dirname(s.path) for s in shards})
    first = shards[0] if shards else None
    params = {"path": duckdb_path(first.path) if first else "", "start": 0, "stop": 0}
    try:
        # no row is read (rows [0, 0)): planned with the filter pushdown the indexing
        # database turns off, so the row-number filter prunes the scan to nothing
        with planned_as_configured(con, config):
            result: Any = con.sql(window_sql, params=params).to_arrow_table()
        schema = result.schema
    except duckdb.Error as exc:
        text = first_line(exc, limit=4000)
        left_out = [
            name for name in (first.schema.names if first and view.names is not None else [])
            if name not in columns and view.reads(name)
        ]
        if left_out and isinstance(exc, duckdb.BinderException):
            # columns= picks the dataset columns a query= view reads, not the view's own
            raise QueryError(
                f"view query names column(s) {left_out} that columns= leaves out of the "
                f"dataset it reads (columns={list(columns)}): add them to columns=, or leave "
                f"columns= out and choose the view's columns in its SELECT list ({text})"
            ) from None
        blamed = _shard_failure(exc, first, columns)
        if blamed is not None:
            raise blamed from None
        raise QueryError(
            f"view query cannot run over the dataset: {_without_own_columns(text)}"
        ) from None
    _check_reserved(columns, schema.names)
    names_sql = sqlfiles.render(
        "view_names", columns=sqlfiles.column_list(columns), view=view.window_sql
    )
    _check_distinct(con.sql(names_sql, params=params).columns)
    schema = pa.schema([f for f in schema if not f.name.startswith(RESERVED_PREFIX)])
    # shards whose columns drift are read converted to the dataset's types (the first
    # shard's), as the plain dataset serves them: the filter sees the same values
    reference = pa.schema([first.schema.field(c) for c in columns]) if first else pa.schema([])
    converts = conversions(con, shards, reference)
    drifting = {
        k: ShardQueries(
            select,
            *_window_queries(view, columns, "", select),
            sqlfiles.render("view_index", columns=select, view=view.index_sql),
            own_schema(shards[k], reference),
        )
        for k, select in converts.lists.items()
    }
    key = index_key(view, columns, shards, windows, sides, converts.lists)
    stored = load_counts(key, protected)
    reused = stored is not None and len(stored[0]) == len(windows)
    if stored is not None and reused:
        counts, kept = stored
        _log.debug("view index %s reused for %s", key, view.text)
    else:
        _log.info("indexing view %r over %d shards", view.text, len(shards))
        tasks = _Tasks(executor, sides, config)
        counts, kept = _count_and_keep(
            con, view, columns, shards, windows, key, protected, tasks, converts
        )
    return IndexedView(
        view,
        sides,
        view_plan(windows, counts),
        schema,
        window_sql,
        locate_sql,
        reused,
        serve_sql,
        kept,
        drifting,
    )


def _check_distinct(names: Sequence[str]) -> None:
    """Refuse a view whose result repeats a column name (in any case).

    DuckDB compares names case-insensitively and, reading the query as a subquery, serves
    a repeated name renamed (``label`` beside ``label`` as ``label_1``, ``x`` beside ``X`` as
    ``X_1``): a column the query never names would be served silently.

    Args:
        names: The result columns as the query's SELECT list names them.

    Raises:
        QueryError: Naming the repeated columns.
    """
    seen: dict[str, str] = {}
    for name in names:
        first = seen.get(name.lower())
        seen[name.lower()] = name
        if first is not None:
            both = repr(first) if first == name else f"{first!r} and {name!r}"
            raise QueryError(
                f"view query's result has two columns named {both} "
                "(DuckDB compares names case-insensitively, and would serve the second "
                "renamed); give each a distinct name with AS, or join side tables with "
                "USING (key) or select their columns by name instead of *"
            )


def _check_reserved(columns: Sequence[str], names: Sequence[str]) -> None:
    """Refuse input columns whose names would be taken for the view's own row numbers.

    The rewritten query carries the source row as ``__ud_row`` and orders by
    ``__ud_order``; a dataset column named so (in any case: DuckDB's names are
    case-insensitive) or a side table's column selected under such a name would be read
    in their place, serving other rows in another order.

    Args:
        columns: The dataset's columns.
        names: The columns of the view's window query (its ``__ud_order`` last).

    Raises:
        QueryError: Naming the column.
    """
    for name in columns:
        if name.lower().startswith(RESERVED_PREFIX):
            raise QueryError(
                f"the dataset's column {name!r} starts with {RESERVED_PREFIX!r}, which views "
                "reserve for their own columns; leave it out with columns=[...]"
            )
    own = [n for n in names if n.lower().startswith(RESERVED_PREFIX)]
    if sorted(n.lower() for n in own) not in ([ORDER_COLUMN], sorted([ORDER_COLUMN, ROW_COLUMN])):
        other = [n for n in own if n not in (ORDER_COLUMN, ROW_COLUMN)] or own
        raise QueryError(
            f"view query's result holds a column named {other[0]!r} (from a side table's "
            f"*?); names starting with {RESERVED_PREFIX!r} are reserved for views: select "
            "the side table's columns by name"
        )


@dataclass(frozen=True)
class _Tasks:
    """Where the indexing pass runs its per-shard tasks, and what they need."""

    executor: TaskMap | None
    sides: tuple[Side, ...]
    config: Mapping[str, Any] | None


def _task_arguments(
    tasks: _Tasks | None,
) -> tuple[TaskMap | None, tuple[Side, ...], Mapping[str, Any] | None]:
    """:func:`count_rows`'s executor, sides and config (none: indexed here)."""
    return (None, (), None) if tasks is None else (tasks.executor, tasks.sides, tasks.config)


class _Unsaved(Exception):
    """The kept-rows file could not be written whole: it is not published."""


def _count_and_keep(
    con: duckdb.DuckDBPyConnection,
    view: ViewQuery,
    columns: Sequence[str],
    shards: Sequence[Shard],
    windows: Sequence[Window],
    key: str,
    protected: list[str],
    tasks: _Tasks | None = None,
    converts: Conversions | None = None,
) -> tuple[list[int], KeptRows | None]:
    """Run the indexing pass, keeping its counts and bitmap in the views cache if it can.

    A cache that cannot be written (a full disk) costs only its reuse, as the docs say: one
    ``RuntimeWarning``, and the view is served without a kept-rows bitmap.
    """
    counts: list[int] | None = None
    kept: KeptRows | None = None
    failure: Exception | None = None
    directory: Path | str = "the views cache"
    try:
        directory = process_cache_dir("views", protected)
        with (
            atomic_file(directory, f"{key}.rows") as out,
            progress_bar("indexing view", unit=" shards") as progress,
        ):
            bitmaps = BitmapWriter(out, directory / f"{key}.rows")
            counts = count_rows(con, view, columns, shards, windows, progress, bitmaps,
                                *_task_arguments(tasks), converts=converts)
            kept = bitmaps.finish()
            if kept is None:
                failure = bitmaps.failed
                raise _Unsaved
    except (OSError, _Unsaved, CacheUnwritableError) as exc:
        failure = failure or (None if isinstance(exc, _Unsaved) else exc)
        kept = None
    if counts is None:  # the bitmap file could not even be created: count without it
        counts = count_rows(con, view, columns, shards, windows, None, None,
                            *_task_arguments(tasks), converts=converts)
    try:
        if failure is None:
            save_counts(key, counts, protected, kept)
    except OSError as exc:
        failure = exc
    if failure is not None:
        why = failure.strerror if isinstance(failure, OSError) else None
        warnings.warn(
            f"the view index cannot be kept in {directory} ({why or failure}); "
            "this process serves the view without it and the next one indexes it again",
            RuntimeWarning,
            stacklevel=4,
        )
    return counts, kept


def _window_queries(
    view: ViewQuery, columns: Sequence[str], guard: str, listed: str | None = None
) -> tuple[str, str]:
    """A view's window query and its kept-rows query (empty without a filter), with ``guard``.

    Joins need a sort to restore source order; a scan keeps it (``*_scan.sql``). ``listed``
    is the select list of the scan (default: the columns as they are).
    """
    listed = sqlfiles.column_list(columns) if listed is None else listed
    scan = "" if view.side_tables else "_scan"
    window_sql = sqlfiles.render(
        f"view_window{scan}", columns=listed, view=view.window_sql, guard=guard
    )
    serve_sql = ""
    if view.serve_sql:
        serve_sql = sqlfiles.render(
            f"view_window_kept{scan}", columns=listed, view=view.serve_sql, guard=guard
        )
    return window_sql, serve_sql


def _start(cursor: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> Any:
    """Start an indexing query; Ctrl-C interrupts it at once."""
    return interruptible(
        cursor, lambda: cursor.sql(sql, params=params).to_arrow_reader(INDEX_BATCH_ROWS)
    )


def _next_batch(cursor: duckdb.DuckDBPyConnection, reader: Any) -> pa.RecordBatch | None:
    """The next batch of an indexing query, or None at its end; Ctrl-C interrupts it at once."""

    def read() -> pa.RecordBatch | None:
        try:
            return reader.read_next_batch()
        except StopIteration:
            return None

    return interruptible(cursor, read)
