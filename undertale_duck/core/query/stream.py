"""One running ad hoc query: its cursor and DuckDB reader, as an iterator of record batches."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import duckdb
import pyarrow as pa

from ...common.text import first_line
from ...errors import QueryError
from ..runtime import failures, interruptible

T = TypeVar("T")


class Owner(Protocol):
    """The session a query runs in (:class:`~.query.QuerySession`)."""

    def check_vectors(
        self, shape: tuple[frozenset[str] | None, int], types: Sequence[Any]
    ) -> None:
        """Refuse a query whose result vectors would pass the memory budget."""

    def failure(self, exc: duckdb.Error) -> Exception:
        """Our error for a DuckDB error the query raised."""

    def after(self, cursor: duckdb.DuckDBPyConnection, failed: bool) -> None:
        """Check the catalog and the shards after the query."""


class Stream:
    """One running query: its cursor and DuckDB reader, as an iterator of record batches.

    Args:
        session: The session it runs in (checks its result vectors, names its failures and
            checks the catalog and shards after it).
        cursor: A fresh cursor, closed when the stream ends.
        query: The checked statement.
        params: Its parameters.
        batch_rows: The most rows per record batch.
        shape: The names it may read and the most rows of a result vector
            (:mod:`query_shape`).
    """

    def __init__(
        self,
        session: Owner,
        cursor: duckdb.DuckDBPyConnection,
        query: str,
        params: Any,
        batch_rows: int,
        shape: tuple[frozenset[str] | None, int],
    ) -> None:
        self._session = session
        self._batch_rows = max(1, batch_rows)
        self._cursor: duckdb.DuckDBPyConnection | None = cursor
        self._reader: pa.RecordBatchReader | None = None
        self._lock = threading.Lock()
        # held while a batch is read: close() from another thread waits for it to end
        self._busy = threading.Lock()
        self._closed = False  # closed before its end (the dataset closed or refreshed)

        def start() -> pa.RecordBatchReader:
            relation = cursor.sql(query, params=params)
            if relation is None:  # pragma: no cover - only SELECT-like statements get here
                return pa.RecordBatchReader.from_batches(pa.schema([]), [])
            # bound before DuckDB builds a vector: binding the query runs nothing
            session.check_vectors(shape, relation.types)
            return relation.to_arrow_reader(batch_rows)

        try:
            self._reader = self._call(start)
        except BaseException:
            self._finish(failed=True)
            raise
        self.schema: pa.Schema = self._reader.schema

    def _call(self, work: Callable[[], T]) -> T:
        cursor = self._cursor
        if cursor is None:
            raise QueryError("the query's result was closed")
        try:
            return interruptible(cursor, work)
        except duckdb.Error as exc:
            error = exc
        except pa.ArrowException as exc:
            raise QueryError(
                f"the query's result cannot be handed to Arrow: {first_line(exc)} (Arrow "
                f"accepts at most {failures.ARROW_MAX_NESTING} levels of nesting)"
            ) from None
        except OSError as exc:  # DuckDB's error while a batch is read, as pyarrow raises it
            error = _duckdb_error(exc)
        except (RecursionError, OverflowError, MemoryError) as exc:
            raise QueryError(f"query failed: {type(exc).__name__}: {first_line(exc)}") from None
        raise self._session.failure(error) from None

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        """Each batch of the result, ``batch_rows`` rows (the last one and empty results aside).

        DuckDB hands over one small batch per row group it scans where row groups are small
        (a few rows each: thousands of batches of 7 rows); those are joined up to
        ``batch_rows`` rows, as DuckDB's batches over large row groups are.
        """
        held: list[pa.RecordBatch] = []
        rows = 0
        for batch in self._batches():
            if not held and len(batch) >= self._batch_rows:
                yield batch  # as DuckDB made it: no copy
                continue
            held.append(batch)
            rows += len(batch)
            while rows >= self._batch_rows:
                joined = pa.Table.from_batches(held, self.schema).combine_chunks()
                yield joined.slice(0, self._batch_rows).to_batches()[0]
                rest = joined.slice(self._batch_rows)
                held, rows = (rest.to_batches(), len(rest)) if len(rest) else ([], 0)
        if rows:
            yield pa.Table.from_batches(held, self.schema).combine_chunks().to_batches()[0]

    def _batches(self) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                with self._busy:
                    reader = self._reader
                    if reader is None or self._closed:
                        if self._closed:  # never a short stream: an error says it ended early
                            raise _closed_error()
                        break
                    try:
                        batch = self._call(reader.read_next_batch)
                    except StopIteration:
                        break
                    except BaseException:
                        if self._closed:  # interrupted by close(): not the user's Ctrl-C
                            raise _closed_error() from None
                        raise
                yield batch
        except BaseException:
            self._finish(failed=True)
            raise
        self._finish(failed=False)

    def interrupt(self) -> None:
        """Stop the query from another thread (Ctrl-C)."""
        cursor = self._cursor
        if cursor is not None:
            with contextlib.suppress(duckdb.Error):
                cursor.interrupt()

    def close(self) -> None:
        """Stop the query and release its cursor (from any thread).

        A batch being read meanwhile is interrupted and waited for; reading on then raises
        :class:`QueryError` rather than ending the stream early.
        """
        if self._cursor is None:
            return  # already at its end
        self._closed = True
        self.interrupt()
        with self._busy:
            self._finish(failed=True)

    def _finish(self, failed: bool) -> None:
        with self._lock:
            cursor, reader = self._cursor, self._reader
            self._cursor = self._reader = None
        if cursor is None:
            return
        if reader is not None:
            with contextlib.suppress(duckdb.Error, pa.ArrowException):
                reader.close()
        try:
            self._session.after(cursor, failed)
        finally:
            with contextlib.suppress(duckdb.Error):
                cursor.close()


def _closed_error() -> QueryError:
    return QueryError(
        "the query's result was closed before it was read to the end (the dataset was "
        "closed or refreshed meanwhile); run the query again"
    )


#: DuckDB's error kinds by the words its messages start with (pyarrow hands an error while
#: a batch is read over as OSError with DuckDB's text).
_KINDS: dict[str, type[duckdb.Error]] = {
    "IO Error": duckdb.IOException,
    "Invalid Input Error": duckdb.InvalidInputException,
    "Not implemented Error": duckdb.NotImplementedException,
    "Serialization Error": duckdb.SerializationException,
    "INTERNAL Error": duckdb.InternalException,
    "FATAL Error": duckdb.FatalException,
    "Out of Memory Error": duckdb.OutOfMemoryException,
    "INTERRUPT Error": duckdb.InterruptException,
    "Permission Error": duckdb.PermissionException,
    "Conversion Error": duckdb.ConversionException,
    "Out of Range Error": duckdb.OutOfRangeException,
}


def _duckdb_error(exc: OSError) -> duckdb.Error:
    text = str(exc).strip()
    kind = _KINDS.get(text.split(":", 1)[0], duckdb.Error)
    return kind(text)


__all__ = ["Owner", "Stream"]
