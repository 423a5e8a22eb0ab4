"""Find which shard a failed ``dataset`` view or ad hoc query tripped on, and say why."""

from __future__ import annotations

import duckdb

from ...common.text import first_line
from ...errors import QueryError, SourceError
from ..parquet import pages
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


def _probe(
    cursor: duckdb.DuckDBPyConnection, path: str, rows: int | None
) -> duckdb.Error | None:
    """The error reading a shard's footer (``rows=0``), first rows, or every value (None)."""
    name, params = ("probe_shard", {"rows": rows}) if rows is not None else (
        "probe_shard_scan", {}
    )
    try:
        cursor.sql(
            sqlfiles.sql_text(name), params={"path": duckdb_path(path), **params}
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

    The shard DuckDB's reader says it failed on, else the shard the message names, else the
    first whose footer fails to read, else the first whose first rows fail to read (a whole
    scan of the dataset is never repeated).

    Args:
        source: The dataset's shards.
        cursor: A DuckDB cursor still usable after the error.
        exc: The error.

    Returns:
        ``(shard path, error)``, or None if no shard can be blamed.
    """
    text = str(exc)
    # DuckDB's reader names the file it failed on first ("Failed to read file X: ...");
    # other files its message names (the one a column was read from) are not to blame
    for shard in source.shards:
        if f'Failed to read file "{shard.path}"' in text:
            return shard.path, exc
    for shard in source.shards:
        if shard.path in text:
            return shard.path, exc
    for rows in (0, 1):
        for shard in source.shards:
            found = _probe(cursor, shard.path, rows)
            if found is not None:
                return shard.path, found
    return None


def unblamed_advice(exc: BaseException) -> str:
    """What to add to a query's failure that may be a shard's though no shard was blamed.

    DuckDB's Parquet reader fails on a damaged page past a shard's first rows with a message
    naming no file ("Out of buffer", a Thrift error: a plain ``duckdb.Error``); finding the
    shard would take a scan of every shard, which ``describe --scan`` is.

    Args:
        exc: The DuckDB error a query raised.

    Returns:
        The advice (starting with ``"; "``), or ``""`` when the error is the SQL's.
    """
    plain = type(exc) is duckdb.Error
    if not (plain or (isinstance(exc, _SHARD_KINDS) and failures.looks_corrupt(exc))):
        return ""
    return (
        "; DuckDB's message names no file: if a shard may be damaged, `undertale-duck "
        "describe SOURCE --scan` reads every shard and names those that cannot be read"
    )


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


def drift_failure(source: Source, exc: BaseException) -> SourceError | None:
    """Our error for a shard whose column the ``dataset`` view cannot cast, or None.

    The view reads every shard with the first shard's types; DuckDB's cast of a drifting
    column (text for a number, any values for a column all NULL in the first shard) fails
    with a ``ConversionException`` naming the file and the column.

    Args:
        source: The dataset's shards.
        exc: The error an ad hoc query raised.

    Returns:
        The error naming the shard, the column and both types, or None.
    """
    if not isinstance(exc, duckdb.ConversionException):
        return None
    text = str(exc)
    for shard in source.shards:
        if f'file "{shard.path}"' not in text:
            continue
        for name in source.columns:
            if "\x00" in name:  # no view holds such a column: quote_identifier refuses it
                continue
            # DuckDB names the column as an identifier in SQL, quotes doubled
            marker = f"failed to cast column {sqlfiles.quote_identifier(name)} from type "
            if marker not in text:
                continue
            # the types are DuckDB's names, which hold no " to " themselves (the column's
            # name, which might, ends before the marker)
            types, _, why = text.split(marker, 1)[1].partition(":")
            own, _, wanted = types.partition(" to ")
            # DuckDB's own reason is the first line; its advice after it is about its options
            why = (why.strip(" :").splitlines() or ["no cast"])[0].strip()
            return SourceError(
                f"shard {shard.path}: column {name!r} is {own} there but {wanted} in the "
                "dataset (its first shard), and its values do not fit that type (schema "
                f"drift between shards): {why}; rewrite the shard with the "
                "dataset's type, or leave the column out of the query (a ParquetDataset: "
                "columns=[...])",
                shard.path,
            )
    return None


def missing_column_failure(source: Source, exc: BaseException) -> SourceError | None:
    """Our error for a shard that lacks a column of the ``dataset`` view, or None.

    DuckDB's reader fails with ``Failed to read file "B": schema mismatch in glob: column
    "c" was read from the original file "A", but could not be found in file "B"``.

    Args:
        source: The dataset's shards.
        exc: The error an ad hoc query raised.

    Returns:
        The error naming the shard that lacks the column, and the column, or None.
    """
    text = str(exc)
    if "schema mismatch" not in text:
        return None
    for shard in source.shards:
        if f'could not be found in file "{shard.path}"' not in text:
            continue
        for name in source.columns:
            # DuckDB quotes the name as it is; a " in it may also come doubled
            doubled = name.replace('"', '""')
            if not any(f'column "{n}" was read' in text for n in (name, doubled)):
                continue
            return SourceError(
                f"shard {shard.path} has no column {name!r}, which the dataset has (its "
                f"first shard's columns: {list(source.columns)}; schema drift between "
                "shards): rewrite the shard with the dataset's columns, or leave it out of "
                "the dataset",
                shard.path,
            )
    return None


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
        # The message names the shard but does not say it is the Parquet reader's: the
        # query may read it with another reader (read_csv, read_text, ...). The shard is to
        # blame only if it does not read as Parquet either: its footer, its first rows, or
        # (a page past them that fails to decompress) its every value, this one shard only.
        probed = _probe(cursor, path, 0) or _probe(cursor, path, 1)
        if probed is None:
            whole = _probe(cursor, path, None)
            if whole is None or isinstance(whole, duckdb.OutOfMemoryException):
                return None  # it reads (or cannot be weighed): the query's own failure
            probed = exc  # DuckDB's message is about the page that failed
        error = probed
    culprits = pages.split_columns(error, path, source.columns)
    return failures.shard_error(error, path, "rows the query reads", culprits=culprits)
