"""Ad hoc read-only SQL over the ``dataset`` view: its own database, limits, streaming, Ctrl-C."""

from __future__ import annotations

import contextlib
import re
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from ...common.sizes import format_size
from ...common.text import first_line
from ...errors import ArgumentError, QueryError, ReadOnlyError
from ..bounds import RepeatedValues, VectorBound
from ..runtime import (
    Connection,
    duckdb_path,
    failures,
    lifecycle,
    nan_safe,
    sqlfiles,
    threads_of,
)
from ..source import Shard, Source, drift_error
from . import blame
from . import shape as query_shape
from .readonly import check_statement, statements
from .stream import Stream

__all__ = ["DEFAULT_BATCH_ROWS", "SQL_FILES", "Params", "QuerySession", "SqlFiles"]

Params = Mapping[str, Any] | Sequence[Any] | None

#: What ad hoc SQL may read: ``"any"`` file the process can read, or only the ``"dataset"``'s
#: own shards (DuckDB's ``allowed_paths`` with external access off).
SqlFiles = Literal["any", "dataset"]
SQL_FILES: tuple[SqlFiles, ...] = ("any", "dataset")

#: Rows per record batch of a streamed result, unless the caller says otherwise.
DEFAULT_BATCH_ROWS = 8192

#: Rows per record batch while collecting a whole result: small, so the byte limit is
#: enforced close to where it is crossed even when rows are large.
TABLE_BATCH_ROWS = 2048

#: The smallest result :meth:`QuerySession.table` collects when the limit comes from a memory
#: budget (a budget of 0 still answers small queries).
MIN_RESULT_BYTES = 64 << 20

T = TypeVar("T")


class _QueryConnection(Connection):
    """The ``dataset`` view in a database of its own, with its settings locked after setup."""

    def __init__(
        self,
        files: Sequence[str],
        columns: Sequence[str],
        config: dict[str, Any] | None,
        setup: Callable[[duckdb.DuckDBPyConnection], None] | None,
        *,
        confine: bool,
        readable: Sequence[str] = (),
        filesystem: Callable[[], Any] | None = None,
        convert: Callable[[duckdb.DuckDBPyConnection], Mapping[int, str]] | None = None,
    ) -> None:
        super().__init__(
            files, columns, config, setup, filesystem=filesystem, convert=convert
        )
        self.confine = confine
        self.readable = list(readable)
        self.state: list[tuple[Any, ...]] = []

    def _open(self) -> duckdb.DuckDBPyConnection:
        db = super()._open()
        try:
            if self.confine:
                files = [*self._files, *self.readable]
                paths = sorted({*files, *(duckdb_path(f) for f in files)})
                _execute_file(db, "confine", {"paths": paths})
            _execute_file(db, "lock", {})
            self.state = _catalog_state(db)
        except duckdb.Error:
            db.close()
            raise
        return db


def _execute_file(db: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> None:
    for statement in duckdb.extract_statements(sqlfiles.sql_text(name)):
        wanted = {k: v for k, v in params.items() if k in statement.named_parameters}
        db.execute(statement.query, wanted or None)


def _catalog_state(cursor: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return sorted(cursor.execute(sqlfiles.sql_text("catalog_state")).fetchall())


class QuerySession:
    """Read-only ad hoc SQL over the ``dataset`` view, in a DuckDB database of its own.

    Window reads never share this database, so nothing a query does reaches them. Each
    query is checked first (:func:`check_read_only`: one statement, allow-listed), runs on
    a fresh cursor closed afterwards (temporary objects die with it), and the catalog is
    compared before and after: a query that left anything behind is refused and the
    database is reopened. The database's settings are locked once the view exists.

    A query that fails on a shard is reported by the shard (:mod:`blame`: encrypted,
    unsupported, corrupt ...), and the shards are checked for changes before and after.

    Args:
        source: The dataset's shards; ``dataset`` is the view over their columns.
        config: DuckDB settings for the database (``memory_limit``, ``threads`` ...).
        sql_files: ``"any"`` (DuckDB may read any file the process can, e.g. to join a CSV)
            or ``"dataset"`` (only the shards: ``read_text('/etc/passwd')`` is refused).
        max_bytes: The most bytes :meth:`table` collects (None: no limit).
        memory_bytes: The memory budget a query's result vectors must fit (0: not checked):
            a query that may return string or binary columns whose DuckDB vectors would pass
            it (a dictionary bomb) is refused before it runs (:mod:`vectors`).
        setup: Called with the database once the view exists (a view's side tables).
        readable: Other files confined SQL may read (a view's side tables).
        sides: A view's Parquet side tables, weighed as shards whose values a join repeats.
        side_values: A view's CSV and Arrow side tables' largest values (a join repeats them).

    Raises:
        ArgumentError: If ``sql_files`` is not ``"any"`` or ``"dataset"``.
    """

    def __init__(
        self,
        source: Source,
        config: Mapping[str, Any] | None = None,
        *,
        sql_files: SqlFiles = "any",
        max_bytes: int | None = None,
        setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
        readable: Sequence[str] = (),
        memory_bytes: int = 0,
        sides: Sequence[Shard] = (),
        side_values: Sequence[RepeatedValues] = (),
    ) -> None:
        self._sides = list(sides)
        self._side_values = list(side_values)
        self._side_vectors: dict[str, VectorBound] = {}
        if sql_files not in SQL_FILES:
            raise ArgumentError(f"sql_files must be 'any' or 'dataset', got {sql_files!r}")
        self.sql_files: SqlFiles = sql_files
        self.max_bytes = max_bytes
        self.memory_bytes = memory_bytes
        self.source = source
        self._vectors: VectorBound | None = None
        # every query sees NaN rows, whatever the footers' statistics say (nan_safe)
        settings = nan_safe(config)
        self._memory_limit = settings.get("memory_limit")  # named when a query passes it
        self._threads = threads_of(settings.get("threads"))
        settings.pop("lock_configuration", None)  # locked after setup, whatever it says
        self._connection = _QueryConnection(
            source.paths,
            source.columns,
            settings,
            setup,
            confine=sql_files == "dataset",
            readable=readable,
            # a remote source's objects: DuckDB reads them through the store's client
            filesystem=None if source.store is None else source.store.filesystem,
            convert=source.converted,
        )
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        lifecycle.track_connection(self)  # streams closed before fork() and at exit

    # ------------------------------------------------------------------ queries
    def table(self, query: str, params: Params = None, *, max_bytes: int | None = None) -> pa.Table:
        """Run one read-only statement and return its whole result.

        Args:
            query: One SQL statement; ``dataset`` names the view over every shard.
            params: Values for ``$name`` (mapping) or ``?`` (sequence) placeholders.
            max_bytes: The most bytes of result to collect (default: the session's).

        Returns:
            The result as an Arrow table.

        Raises:
            QueryError: If the SQL fails, or its result is larger than ``max_bytes`` (the
                message says to stream it with :meth:`batches` or add a LIMIT).
            ReadOnlyError: If the SQL would write or change state.
        """
        limit = self.max_bytes if max_bytes is None else max_bytes
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 0):
            raise ArgumentError(f"max_bytes must be a number of bytes >= 0, got {limit!r}")
        stream = self._start(query, params, TABLE_BATCH_ROWS)
        batches: list[pa.RecordBatch] = []
        size = 0
        with contextlib.closing(stream):
            for batch in stream:
                size += batch.nbytes
                if limit is not None and size > limit:
                    raise QueryError(
                        f"the query's result is larger than {format_size(limit)} (the limit of a "
                        "result returned whole, from the memory budget); stream it in batches "
                        "with sql_batches(), add a LIMIT, or pass a larger max_bytes"
                    )
                batches.append(batch)
        return pa.Table.from_batches(batches, schema=stream.schema)

    def batches(
        self, query: str, params: Params = None, *, batch_rows: int = DEFAULT_BATCH_ROWS
    ) -> pa.RecordBatchReader:
        """Run one read-only statement and stream its result.

        DuckDB computes the result as it is read, so memory stays bounded whatever its
        size. Close the reader (or read it to the end) before the session closes; leaving
        it early stops the query.

        Args:
            query: One SQL statement; ``dataset`` names the view over every shard.
            params: Values for ``$name`` (mapping) or ``?`` (sequence) placeholders.
            batch_rows: The most rows per record batch.

        Returns:
            A reader of record batches; errors while reading are :class:`QueryError`.

        Raises:
            QueryError: If the SQL fails to parse, bind or start.
            ReadOnlyError: If the SQL would write or change state.
        """
        stream = self._start(query, params, batch_rows)
        return pa.RecordBatchReader.from_batches(stream.schema, stream)

    def _start(self, query: str, params: Params, batch_rows: int) -> Stream:
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise ArgumentError(f"batch_rows must be a positive integer, got {batch_rows!r}")
        params = _check_params(params)
        found = statements(query)
        self.source.check_unchanged()
        try:
            base = self._connection.cursor()
        except duckdb.Error as exc:
            raise QueryError(
                "cannot open the database for ad hoc SQL (a duckdb_config setting DuckDB "
                f"refuses): {first_line(exc)}"
            ) from None
        if self._connection.view_error is not None:
            raise blame.view_failure(self.source, base, self._connection.view_error)
        trees = [check_statement(s, base) for s in found]  # one that writes: refused as such
        if len(found) != 1:
            raise QueryError(
                f"the query holds {len(found)} statements; run one statement at a time"
            )
        cursor = base.cursor()
        shape = (query_shape.referenced(*trees[0]), query_shape.result_rows(trees[0][0]))
        stream = Stream(self, cursor, query, params, batch_rows, shape)
        self._streams.add(stream)
        return stream

    def check_vectors(
        self, shape: tuple[frozenset[str] | None, int], types: Sequence[Any]
    ) -> None:
        """Refuse a query whose result vectors would pass the memory budget (:mod:`vectors`).

        Args:
            shape: The names the query's column references use (None: every column) and
                the most rows of one result vector.
            types: The result's DuckDB column types.

        Raises:
            MemoryBudgetError: Naming the shard and column.
        """
        if not self.memory_bytes:
            return
        if self._vectors is None:
            self._vectors = VectorBound(self.source.schema)
        names, rows = shape
        text = query_shape.text_result(types)
        columns = self._vectors.columns(names, text)
        self._vectors.check(self.source.shards, columns, self.memory_bytes, self._threads, rows)
        for side in self._sides:  # a view's Parquet side tables: inputs like shards
            bound = self._side_vectors.setdefault(side.path, VectorBound(side.schema))
            bound.check([side], bound.columns(names, text), self.memory_bytes, self._threads,
                        rows, what="the query may return the side table's", repeated=True)
        for values in self._side_values:  # CSV files and Arrow tables: their largest values
            values.check(names, text, self.memory_bytes, self._threads, rows)

    def after(self, cursor: duckdb.DuckDBPyConnection, failed: bool) -> None:
        """After a query: the catalog must be as it was, and the shards too.

        Args:
            cursor: The query's cursor (closed by the caller afterwards).
            failed: Whether the query failed (a changed catalog is then undone silently).

        Raises:
            ReadOnlyError: If the query changed the database (the change is undone).
            ShardChangedError: If a shard changed on disk.
        """
        try:
            changed = _catalog_state(cursor) != self._connection.state
        except duckdb.Error:
            changed = True
        if changed:
            self._connection.close()  # reopened, pristine, by the next query
            if not failed:
                raise ReadOnlyError(
                    "the query changed the database (it created or replaced a table, view or "
                    "other object); the change was undone: the dataset is read-only through "
                    "undertale_duck"
                )
        self.source.check_unchanged()

    def failure(self, exc: duckdb.Error) -> Exception:
        """Our error for a DuckDB error a query raised (the shard it is about, when one is).

        Args:
            exc: The error.

        Returns:
            The exception to raise.

        Raises:
            ShardChangedError: If a shard changed on disk (the real cause).
        """
        self.source.check_unchanged()
        if failures.is_interrupt(exc):
            return QueryError("the query was interrupted")
        unbindable = _UNBINDABLE.search(str(exc))
        if isinstance(exc, duckdb.NotImplementedException) and unbindable:
            # only a parameter's value reaches DuckDB from Python: the caller's argument
            return ArgumentError(
                f"params: DuckDB cannot bind a value of type {unbindable.group(1)}; pass "
                "str, int, float, bool, bytes, None, dates and times, Decimal, UUID, numpy "
                "numbers and arrays, torch tensors, or lists and dicts of them"
            )
        missing = _MISSING_PARAMS.search(str(exc))
        if isinstance(exc, duckdb.InvalidInputException) and missing:
            # the SQL's placeholders and params= disagree: no shard is to blame
            return QueryError(f"query failed: {failures.message(exc)}; {_params_advice(missing)}")
        if isinstance(exc, duckdb.PermissionException) and self.sql_files == "dataset":
            return QueryError(
                "refused: ad hoc SQL is confined to the dataset's own files (sql_files="
                "'dataset'; ParquetDataset(..., sql_files='any') or the command line's "
                f"--sql-files any lifts it): {failures.message(exc)}"
            )
        drift = (
            drift_error(exc, self.source.shards)
            or blame.drift_failure(self.source, exc)
            or blame.missing_column_failure(self.source, exc)
        )
        if drift is not None:
            return drift
        if failures.is_fatal(exc):
            self._connection.close()  # DuckDB invalidated the database: reopened next time
        else:
            try:
                found = blame.query_failure(self.source, self._connection.cursor(), exc)
            except duckdb.Error:
                found = None
            if found is not None:
                return found
        if isinstance(exc, duckdb.OutOfMemoryException):
            limit = f" ({self._memory_limit})" if self._memory_limit else ""
            return QueryError(
                f"query failed: {failures.message(exc)}; the query needs more than DuckDB's "
                f"memory_limit{limit}: raise memory= (the command line's --memory) or "
                "duckdb_config['memory_limit'], or make the query hold less at once (fewer "
                "columns, smaller lists or groups)"
            )
        return _no_table(exc) or QueryError(
            f"query failed: {failures.message(exc)}{blame.unblamed_advice(exc)}"
        )

    # ------------------------------------------------------------------ control
    def interrupt(self) -> None:
        """Stop every query of this session that is running now (from any thread)."""
        for stream in list(self._streams):
            stream.interrupt()

    def end_streams(self) -> None:
        """Close every open stream of this session (their readers then stop)."""
        for stream in list(self._streams):
            stream.close()

    def close(self) -> None:
        """Close open streams and the database (reopened by the next query)."""
        self.end_streams()
        self._connection.close()


#: Deepest list or dict nesting of a parameter whose numpy numbers are converted.
_MAX_PARAM_DEPTH = 32


#: DuckDB's error for a Python value it cannot bind as a parameter (names the value's type).
_UNBINDABLE = re.compile(r"Unable to transform python value of type '<class '([^']+)'>'")
_MISSING_PARAMS = re.compile(r"Values were not provided for the following parameters: (.*)")


def _params_advice(missing: re.Match[str]) -> str:
    """What to do about placeholders DuckDB got no value for (``?`` ones are numbered)."""
    if all(name.strip().isdigit() for name in missing.group(1).split(",")):
        return (
            "? placeholders take their values in order: pass params as a list or tuple "
            "with a value for each ? (a dict's values bind $name placeholders)"
        )
    return "pass params as a dict with a value for each $name placeholder"


def _check_params(params: object) -> Params:
    """Refuse parameters DuckDB would misread rather than reject; bind numpy numbers.

    A string is a sequence to DuckDB (``"abc"`` binds ``?`` to ``"a"``, ``"b"``, ``"c"``),
    and a set has no order for ``?`` to follow. Values DuckDB cannot bind are converted
    (:func:`_bindable`).

    Returns:
        The parameters to bind.

    Raises:
        ArgumentError: If ``params`` is not None, a mapping with string keys, or a list or
            tuple.
    """
    if params is None:
        return None
    if isinstance(params, list | tuple):
        return [_bindable(value) for value in params]
    if isinstance(params, Mapping):
        bad = [k for k in params if not isinstance(k, str)]
        if bad:
            raise ArgumentError(
                f"params: the names of $name placeholders are strings, got {bad[0]!r}"
            )
        return {name: _bindable(value) for name, value in params.items()}
    raise ArgumentError(
        "params must be a mapping (for $name placeholders) or a list or tuple (for ?), got "
        f"{type(params).__name__}" + (
            f" {params!r}: wrap a single value in a list, [value]"
            if isinstance(params, str | bytes) else ""
        )
    )


def _bindable(value: Any, depth: int = 0) -> Any:
    """A parameter as DuckDB can bind it: numpy numbers and torch tensors as Python values.

    DuckDB binds Python numbers and numpy arrays, not a numpy scalar (also inside a list:
    ``list(ids_array)``) nor a torch tensor (``batch["label"][0]``): those are bound as
    their Python values, a tensor with dimensions as a (nested) list. Lists, tuples and
    dicts are converted inside; a sequence with nothing to convert is bound as given (a
    namedtuple stays one).
    """
    if isinstance(value, np.integer | np.floating | np.bool_):
        return value.item()
    if depth < _MAX_PARAM_DEPTH:
        if isinstance(value, list | tuple):
            items = [_bindable(item, depth + 1) for item in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {key: _bindable(item, depth + 1) for key, item in value.items()}
    torch = sys.modules.get("torch")  # a tensor comes from an imported torch
    tensor = getattr(torch, "Tensor", None) if torch is not None else None
    if isinstance(tensor, type) and isinstance(value, tensor):
        as_list: Any = value
        return as_list.detach().cpu().tolist()
    return value


def result_limit(memory_bytes: int) -> int:
    """The default byte limit of a whole result for a dataset with this memory budget.

    Args:
        memory_bytes: The dataset's memory budget in bytes.

    Returns:
        The budget, but at least :data:`MIN_RESULT_BYTES`.
    """
    return max(int(memory_bytes), MIN_RESULT_BYTES)


def memory_limit(memory_bytes: int) -> str:
    """DuckDB's ``memory_limit`` for the database of a dataset's ad hoc SQL.

    Args:
        memory_bytes: The dataset's memory budget in bytes.

    Returns:
        The budget (at least 256 MiB, which DuckDB needs to run queries with a few threads)
        as a DuckDB size; DuckDB spills to disk beyond it.
    """
    return f"{max(int(memory_bytes), 256 << 20) >> 20}MiB"


_NO_TABLE = re.compile(r'Table with name (\S+) does not exist!(?:\s*Did you mean "([^"]+)")?')
_SYSTEM = ("pg_", "sqlite_", "duckdb_", "information_schema")


def _no_table(exc: duckdb.Error) -> QueryError | None:
    """For an unknown table, what the tables are called (DuckDB suggests pg_attribute)."""
    found = _NO_TABLE.search(str(exc)) if isinstance(exc, duckdb.CatalogException) else None
    if found is None:
        return None
    guess = found[2] if found[2] and not found[2].startswith(_SYSTEM) else None
    return QueryError(
        f"query failed: there is no table {found[1]}"
        + (f" (did you mean {guess}?)" if guess else "")
        + ": the dataset's rows are the table dataset, a view's (query=/where=, --query/"
        "--where) are dataset_view, and side tables go by their names"
    )
