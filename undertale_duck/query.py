"""Run ad hoc read-only SQL against the ``dataset`` view and map DuckDB errors to ours."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from .errors import QueryError, ReadOnlyError

#: Statement kinds that only read. Everything else (COPY, ATTACH, CREATE, INSERT, SET,
#: INSTALL/LOAD, EXPORT, ...) could write files, change settings or replace the view.
READ_ONLY_STATEMENTS = frozenset(
    {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN, duckdb.StatementType.CALL}
)

Params = Mapping[str, Any] | Sequence[Any] | None


def check_read_only(query: str) -> None:
    """Refuse SQL that is not made of read-only statements.

    Args:
        query: One or more SQL statements.

    Raises:
        QueryError: If the SQL does not parse or holds no statement.
        ReadOnlyError: If any statement could write or change state (``COPY ... TO``,
            ``ATTACH``, ``CREATE``, ``INSERT``, ``SET``, ``INSTALL`` ...).
    """
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {_one_line(exc)}") from None
    if not statements:
        raise QueryError("the query holds no SQL statement")
    for statement in statements:
        if statement.type not in READ_ONLY_STATEMENTS:
            kind = statement.type.name
            raise ReadOnlyError(
                f"{kind} statements are refused: the dataset is read-only through undertale_duck "
                "(only SELECT, EXPLAIN and CALL run; to save a result, write it from the returned "
                "table or use the command line's --output)"
            )


def run(cursor: duckdb.DuckDBPyConnection, query: str, params: Params = None) -> pa.Table:
    """Run read-only SQL and return the last statement's result as an Arrow table.

    Args:
        cursor: A DuckDB connection that has the ``dataset`` view.
        query: SQL text; ``dataset`` names the view over every shard.
        params: Values for ``$name`` (mapping) or ``?`` (sequence) placeholders.

    Returns:
        The result (an empty table when the statement returns no rows).

    Raises:
        QueryError: If the SQL fails to parse, bind or run.
        ReadOnlyError: If the SQL would write or change state.
    """
    check_read_only(query)
    try:
        relation = cursor.sql(query, params=params)
        if relation is None:
            return pa.table({})
        return relation.to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
