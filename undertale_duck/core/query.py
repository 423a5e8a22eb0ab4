"""Run ad hoc read-only SQL against the ``dataset`` view and map DuckDB errors to ours."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from ..errors import QueryError, ReadOnlyError

#: Statement kinds that only read. Everything else (COPY, ATTACH, CREATE, INSERT, SET,
#: INSTALL/LOAD, EXPORT, ...) could write files, change settings or replace the view.
READ_ONLY_STATEMENTS = frozenset(
    {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN, duckdb.StatementType.CALL}
)

Params = Mapping[str, Any] | Sequence[Any] | None

#: Functions refused in any statement: they run SQL given as text (``query``,
#: ``json_execute_serialized_sql``), which would bypass the statement check, or have side
#: effects such as writing log or profile files anywhere (``enable_logging``).
UNSAFE_FUNCTIONS = frozenset(
    {
        "query",
        "query_table",
        "json_execute_serialized_sql",
        "enable_logging",
        "disable_logging",
        "truncate_duckdb_logs",
        "enable_profiling",
        "disable_profiling",
        "checkpoint",
        "force_checkpoint",
        "create_external_resource",
        "register_external_resource",
        "register_external_resource_type",
        "deregister_external_resource",
        "destroy_external_resource",
        "add_grammar_extension",
        "remove_grammar_extension",
    }
)


def _tokens(query: str) -> list[tuple[str, Any]]:
    """The SQL's tokens as ``(text, type)``, comments left out."""
    spans = duckdb.tokenize(query)
    out = []
    for k, (start, kind) in enumerate(spans):
        end = spans[k + 1][0] if k + 1 < len(spans) else len(query)
        if kind != duckdb.token_type.comment:
            out.append((query[start:end].strip(), kind))
    return out


def _unsafe_calls(query: str) -> list[str]:
    """Names of :data:`UNSAFE_FUNCTIONS` called anywhere in the SQL (quoted or not)."""
    tokens = _tokens(query)
    names = (duckdb.token_type.identifier, duckdb.token_type.keyword)
    found = []
    for k, (text, kind) in enumerate(tokens):
        if kind not in names:
            continue
        name = text[1:-1].replace('""', '"') if text.startswith('"') else text
        if name.lower() in UNSAFE_FUNCTIONS and k + 1 < len(tokens) and tokens[k + 1][0][:1] == "(":
            found.append(name)
    return found


def _explained_type(statement_text: str) -> duckdb.StatementType | None:
    """The type of the statement an ``EXPLAIN [ANALYZE] [(options)]`` wraps, or None."""
    tokens = _tokens(statement_text)
    k = 0
    if k < len(tokens) and tokens[k][0].upper() == "EXPLAIN":
        k += 1
    if k < len(tokens) and tokens[k][0].upper() in ("ANALYZE", "ANALYSE"):
        k += 1
    if k < len(tokens) and tokens[k][0].startswith("("):
        depth = 0
        while k < len(tokens):
            depth += tokens[k][0].count("(") - tokens[k][0].count(")")
            k += 1
            if depth <= 0:
                break
    if k >= len(tokens):
        return None
    rest = statement_text[_offset(statement_text, tokens, k) :]
    try:
        inner = duckdb.extract_statements(rest)
    except duckdb.Error:
        return None
    return inner[0].type if len(inner) == 1 else None


def _offset(text: str, tokens: list[tuple[str, Any]], k: int) -> int:
    """Character offset just after tokens ``0..k-1`` (where the rest of the SQL starts)."""
    position = 0
    for token, _ in tokens[:k]:
        position = text.find(token, position) + len(token)
    return position


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
    unsafe = _unsafe_calls(query)
    if unsafe:
        raise ReadOnlyError(
            f"function {unsafe[0]}() is refused: it runs SQL given as text or changes state "
            "(writes files, settings or logs); the dataset is read-only through undertale_duck"
        )
    for statement in statements:
        if statement.type == duckdb.StatementType.EXPLAIN and _explained_type(
            statement.query
        ) != duckdb.StatementType.SELECT:
            raise ReadOnlyError(
                "EXPLAIN is allowed only for a SELECT statement (EXPLAIN ANALYZE runs the "
                "statement it explains): the dataset is read-only through undertale_duck"
            )
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
