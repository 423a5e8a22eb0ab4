"""Find which shard a failed ``dataset`` view or ad hoc query tripped on, and say why."""

from __future__ import annotations

import duckdb

from ...common.text import first_line
from ...errors import QueryError, SourceError
from ..runtime import duckdb_path, failures, sqlfiles
from ..source import Source

# DuckDB's error kinds that a shard, not the SQL text, can cause (a plain duckdb.Error is
# what its Parquet reader raises for some unsupported encodings).
_SHARD_KINDS = (
    duckdb.InvalidInputException,
    duckdb.IOException,
    duckdb.NotImplementedException,
    duckdb.SerializationException,
)


def _probe(cursor: duckdb.DuckDBPyConnection, path: str, rows: int) -> duckdb.Error | None:
    """The error reading a shard's footer (``rows=0``) or first rows gives, or None."""
    try:
        cursor.sql(
            sqlfiles.sql_text("probe_shard"), params={"path": duckdb_path(path), "rows": rows}
        ).fetchall()
    except duckdb.Error as exc:
        if failures.is_interrupt(exc):
            raise KeyboardInterrupt from None
        return exc
    return None


def culprit(
    source: Source, cursor: duckdb.DuckDBPyConnection, exc: BaseException
) -> tuple[str, BaseException] | None:
    """Return the shard a DuckDB error is about and the error to describe it by.

    The shard the message names, else the first whose footer fails to read, else the first
    whose first rows fail to read (a whole scan is never repeated).

    Args:
        source: The dataset's shards.
        cursor: A DuckDB cursor still usable after the error.
        exc: The error.

    Returns:
        ``(shard path, error)``, or None if no shard can be blamed.
    """
    text = str(exc)
    for shard in source.shards:
        if shard.path in text:
            return shard.path, exc
    for rows in (0, 1):
        for shard in source.shards:
            found = _probe(cursor, shard.path, rows)
            if found is not None:
                return shard.path, found
    return None


def view_failure(
    source: Source, cursor: duckdb.DuckDBPyConnection, exc: BaseException
) -> SourceError | QueryError:
    """Our error for a ``dataset`` view DuckDB could not create (a shard it cannot open).

    Args:
        source: The dataset's shards.
        cursor: A DuckDB cursor (the database opened without the view).
        exc: The error creating the view.

    Returns:
        The error naming the shard, or a :class:`QueryError` if none can be blamed.
    """
    found = culprit(source, cursor, exc)
    if found is None:
        return QueryError(f"the dataset view cannot be created: {first_line(exc)}")
    path, error = found
    return failures.shard_error(error, path, "its footer and schema")


def query_failure(
    source: Source, cursor: duckdb.DuckDBPyConnection, exc: BaseException | None
) -> SourceError | None:
    """Our error for an ad hoc query that failed on a shard, or None if the SQL is the cause.

    Args:
        source: The dataset's shards.
        cursor: The cursor the query ran on.
        exc: The DuckDB error the query raised.

    Returns:
        The error naming the shard, or None.
    """
    if not isinstance(exc, duckdb.Error) or failures.is_fatal(exc):
        return None
    if not (isinstance(exc, _SHARD_KINDS) or type(exc) is duckdb.Error):
        return None
    found = culprit(source, cursor, exc)
    if found is None:
        return None
    path, error = found
    if error is exc and "parquet" not in str(exc).replace(path, "").lower():
        # The message names the shard but is not the Parquet reader's: the query may read
        # it with another reader (read_csv, read_text, ...). The shard is to blame only if
        # it does not read as Parquet either.
        probed = _probe(cursor, path, 0) or _probe(cursor, path, 1)
        if probed is None:
            return None
        error = probed
    return failures.shard_error(error, path, "rows the query reads")
