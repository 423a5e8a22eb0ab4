"""Decide whether ad hoc SQL only reads: allow-listed statements and functions, no side effects."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from ...common.text import first_line
from ...errors import ArgumentError, QueryError, ReadOnlyError
from ..runtime import duck, lifecycle, sqlfiles, syntax_nodes

#: Table functions a query may read from (an allow-list: a table function not named here,
#: such as ``query``, ``checkpoint``, ``enable_logging``, ``copy_database``, ``arrow_scan``
#: or one an extension adds, is refused). Table macros built on these are allowed too.
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {
        # files (confined to the dataset's shards when the session is confined)
        "read_parquet", "parquet_scan", "parquet_metadata", "parquet_schema",
        "parquet_file_metadata", "parquet_kv_metadata", "parquet_full_metadata",
        "parquet_page_index", "parquet_bloom_probe", "read_csv", "read_csv_auto", "sniff_csv",
        "read_json", "read_json_auto", "read_json_objects", "read_json_objects_auto",
        "read_ndjson", "read_ndjson_auto", "read_ndjson_objects", "read_text", "read_blob",
        "glob",
        # generators
        "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each", "json_tree",
        "summary", "test_all_types", "test_vector_types",
        # introspection
        "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_dependencies",
        "duckdb_extensions", "duckdb_functions", "duckdb_indexes", "duckdb_keywords",
        "duckdb_memory", "duckdb_optimizers", "duckdb_schemas", "duckdb_sequences",
        "duckdb_settings", "duckdb_tables", "duckdb_temporary_files", "duckdb_types",
        "duckdb_variables", "duckdb_views", "duckdb_approx_database_count",
        "duckdb_connection_count", "duckdb_dialects", "duckdb_available_metrics",
        "pragma_version", "pragma_platform", "pragma_table_info", "pragma_show",
        "pragma_database_size", "pragma_collations", "pragma_user_agent", "table_info", "show",
        "show_tables", "show_tables_expanded", "show_databases", "version", "platform",
        "user_agent", "collations", "database_size", "database_list", "functions",
        "extension_versions", "icu_calendar_names", "pg_timezone_names",
    }
)

#: Scalar and aggregate functions refused anywhere: they run SQL given as text (which would
#: bypass this check), write logs, or change the connection's state.
REFUSED_FUNCTIONS = frozenset(
    {
        "query", "query_table", "json_execute_serialized_sql", "json_serialize_plan",
        "write_log", "setseed", "nextval", "setval", "currval",
    }
)

#: Named arguments refused in any table function: ``read_csv(..., store_rejects=true,
#: rejects_table='dataset')`` creates temporary tables, which could hide the ``dataset`` view.
REFUSED_NAMED_ARGUMENTS = frozenset({"store_rejects", "rejects_table", "rejects_scan"})

#: The query nodes a read-only statement may hold: a SELECT statement's tree can also hold
#: ``COPY_QUERY_NODE``, ``INSERT_QUERY_NODE``, ``UPDATE_QUERY_NODE``, ``DELETE_QUERY_NODE``
#: (DuckDB 2 allows ``WITH x AS (COPY ... TO 'file') SELECT ...``), refused as any other.
READING_NODES = frozenset(
    {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
)

#: What a refusal says after its reason.
READ_ONLY = "the dataset is read-only through undertale_duck"


def statements(query: str) -> list[duckdb.Statement]:
    """Split SQL into its statements.

    Args:
        query: SQL text.

    Returns:
        The statements (at least one).

    Raises:
        ArgumentError: If the query is not a string.
        QueryError: If the SQL does not parse or holds no statement.
        ReadOnlyError: If a statement is of a kind this DuckDB's Python API cannot name
            (such as ``UPDATE EXTENSIONS``).
    """
    if not isinstance(query, str):
        raise ArgumentError(f"query must be SQL text (a str), got {type(query).__name__}")
    try:
        found = duckdb.extract_statements(query)
        for statement in found:
            _ = statement.type
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {first_line(exc)}") from None
    except ValueError:  # a statement type the Python enum does not know (UPDATE EXTENSIONS)
        raise ReadOnlyError(
            f"a statement of a kind that is not SELECT is refused: {READ_ONLY} (only SELECT, "
            "WITH ... SELECT, DESCRIBE, SUMMARIZE, SHOW and EXPLAIN SELECT run)"
        ) from None
    if not found:
        raise QueryError("the query holds no SQL statement")
    return found


def check_read_only(query: str, cursor: duckdb.DuckDBPyConnection | None = None) -> None:
    """Refuse SQL that is not made of read-only statements.

    A statement runs only if it is a ``SELECT`` (also ``WITH``, ``FROM``, ``VALUES``,
    ``DESCRIBE``, ``SUMMARIZE``, ``SHOW``, ``UNPIVOT``) or an ``EXPLAIN [ANALYZE]`` of one,
    every table function it reads from is in :data:`ALLOWED_TABLE_FUNCTIONS`, and it calls
    none of :data:`REFUSED_FUNCTIONS` (nor a built-in macro that does) and passes none of
    :data:`REFUSED_NAMED_ARGUMENTS`. DuckDB's own parser decides (``json_serialize_sql``).

    Args:
        query: One or more SQL statements.
        cursor: A DuckDB connection to parse with (a private one when None).

    Raises:
        QueryError: If the SQL does not parse or holds no statement.
        ReadOnlyError: If any statement could write, change state or run SQL given as text.
    """
    for statement in statements(query):
        check_statement(statement, cursor)


def check_statement(
    statement: duckdb.Statement, cursor: duckdb.DuckDBPyConnection | None = None
) -> tuple[Any, str]:
    """Refuse one statement unless it only reads (see :func:`check_read_only`).

    Args:
        statement: A statement from :func:`statements`.
        cursor: A DuckDB connection to parse with (a private one when None).

    Returns:
        Its syntax tree (``json_serialize_sql``) and the text it was parsed from (for an
        EXPLAIN, the statement it explains).

    Raises:
        ReadOnlyError: If the statement could write, change state or run SQL given as text.
    """
    text = statement.query
    if statement.type == duckdb.StatementType.EXPLAIN:
        inner = _explained(text)
        if inner is None:
            raise ReadOnlyError(
                "EXPLAIN is allowed only for a SELECT statement (EXPLAIN ANALYZE runs the "
                f"statement it explains): {READ_ONLY}"
            )
        text = inner
    elif statement.type != duckdb.StatementType.SELECT:
        words = _tokens(text)
        kind = words[0][1].upper() if words else statement.type.name
        raise ReadOnlyError(
            f"{kind} statements are refused: {READ_ONLY} (only SELECT, WITH ... "
            "SELECT, DESCRIBE, SUMMARIZE, SHOW and EXPLAIN SELECT run; to save a result, write "
            "it from the returned table or use the command line's --output)"
        )
    tree = _syntax_tree(text, cursor)
    for kind in _query_nodes(tree):
        if kind not in READING_NODES:  # WITH x AS (COPY ... TO / INSERT / DELETE ...) SELECT
            name = kind.removesuffix("_NODE").removesuffix("_QUERY").replace("_", " ")
            raise ReadOnlyError(
                f"{name} inside a query (WITH x AS ({name} ...) ...) is refused: it writes "
                f"files or tables; {READ_ONLY}"
            )
    refused = refused_functions()
    allowed = allowed_table_functions()
    for kind, name, arguments in _calls(tree):
        if kind == "table" and name not in allowed:
            raise ReadOnlyError(
                f"table function {name}() is refused: only table functions that read (such as "
                f"read_parquet, read_csv, range, duckdb_tables) may be used; {READ_ONLY}"
            )
        if kind == "scalar" and name in refused:
            raise ReadOnlyError(
                f"function {name}() is refused: it runs SQL given as text or changes state "
                f"(writes files, settings, logs or sequences); {READ_ONLY}"
            )
        bad = sorted(arguments & REFUSED_NAMED_ARGUMENTS)
        if bad:
            raise ReadOnlyError(
                f"{name}(..., {bad[0]} = ...) is refused: it creates tables in the database; "
                f"{READ_ONLY}"
            )
    return tree, text


# --------------------------------------------------------------------------- parsing


def _tokens(text: str) -> list[tuple[int, str]]:
    """The SQL's tokens as ``(offset, text)``, comments left out."""
    return [
        (start, text[start:end].strip())
        for start, end, kind in sqlfiles.tokens(text)
        if kind != duckdb.token_type.comment
    ]


def _explained(text: str) -> str | None:
    """The SELECT an ``EXPLAIN [ANALYZE] [(options)]`` wraps, or None if it wraps another kind."""
    tokens = _tokens(text)
    k = 0
    if k < len(tokens) and tokens[k][1].upper() == "EXPLAIN":
        k += 1
    if k < len(tokens) and tokens[k][1].upper() in ("ANALYZE", "ANALYSE"):
        k += 1
    if k < len(tokens) and tokens[k][1].startswith("("):
        depth = 0
        while k < len(tokens):
            depth += tokens[k][1].count("(") - tokens[k][1].count(")")
            k += 1
            if depth <= 0:
                break
    if k >= len(tokens):
        return None
    try:
        inner = duckdb.extract_statements(text[tokens[k][0] :])
    except (duckdb.Error, ValueError):
        return None
    if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
        return None
    return str(inner[0].query)


class _Parser:
    """A private database to parse with when no cursor is given (closed before fork())."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: duckdb.DuckDBPyConnection | None = None
        lifecycle.track_connection(self)

    def run(self, sql: str, params: dict[str, Any]) -> list[Any]:
        with self._lock:
            if self._db is None:
                self._db = duck.connect()
            return self._db.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(duckdb.Error):
                    self._db.close()
                self._db = None


_PARSER = _Parser()


def _syntax_tree(text: str, cursor: duckdb.DuckDBPyConnection | None) -> Any:
    """DuckDB's syntax tree of one SELECT, as ``json_serialize_sql`` gives it."""
    sql = sqlfiles.sql_text("syntax_tree")
    try:
        if cursor is None:
            rows = _PARSER.run(sql, {"query": text})
        else:
            rows = cursor.execute(sql, {"query": text}).fetchall()
    except duckdb.Error as exc:
        raise ReadOnlyError(
            f"the statement cannot be checked ({first_line(exc)}): {READ_ONLY}"
        ) from None
    tree = json.loads(rows[0][0]) if rows else {"error": True}
    if tree.get("error"):
        raise ReadOnlyError(
            "the statement cannot be checked as read-only "
            f"({tree.get('error_message', 'DuckDB cannot serialize it')}); {READ_ONLY}"
        )
    return tree


def _calls(tree: Any) -> Iterator[tuple[str, str, frozenset[str]]]:
    """Every function call in a syntax tree: ``("table" | "scalar", name, named arguments)``."""
    for node in syntax_nodes(tree):
        if node.get("type") == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
            function = node["function"]
            name = str(function.get("function_name", "")).lower()
            arguments = function.get("arguments") or function.get("children")
            yield "table", name, _named_arguments(arguments)
        elif "function_name" in node:
            yield "scalar", str(node["function_name"]).lower(), frozenset()


def _query_nodes(tree: Any) -> Iterator[str]:
    """The type of every query node in a syntax tree (a node with modifiers and a CTE map)."""
    for node in syntax_nodes(tree):
        kind = str(node.get("type"))
        if ("modifiers" in node and "cte_map" in node) or kind.endswith("_QUERY_NODE"):
            yield kind


def _named_arguments(arguments: Any) -> frozenset[str]:
    names: set[str] = set()
    for argument in arguments or []:
        if not isinstance(argument, dict):
            continue
        if argument.get("name"):
            names.add(str(argument["name"]).lower())
        expression = argument.get("expression", argument)
        if (
            isinstance(expression, dict)
            and expression.get("type") == "COMPARE_EQUAL"
            and isinstance(expression.get("left"), dict)
            and expression["left"].get("class") == "COLUMN_REF"
        ):
            names.add(str(expression["left"]["column_names"][-1]).lower())
        if isinstance(expression, dict) and expression.get("alias"):
            names.add(str(expression["alias"]).lower())
    return frozenset(names)


# --------------------------------------------------------------------------- built-in macros


@dataclass(frozen=True)
class _Builtins:
    table_functions: frozenset[str]  # table functions and pragmas
    macros: dict[tuple[str, bool], frozenset[str]]  # (name, is a table macro) -> names called


@functools.cache
def _builtins() -> _Builtins:
    """DuckDB's built-in table functions and macros, from a pristine database."""
    con = duck.connect()
    try:
        rows = con.execute(sqlfiles.sql_text("builtin_functions")).fetchall()
    finally:
        con.close()
    tables: set[str] = set()
    macros: dict[tuple[str, bool], set[str]] = {}
    for name, kind, definition in rows:
        if kind in ("table", "pragma"):
            tables.add(name.lower())
        if kind in ("macro", "table_macro"):
            tokens = _tokens(definition or "")
            called = macros.setdefault((name.lower(), kind == "table_macro"), set())
            for k, (_, text) in enumerate(tokens[:-1]):
                if tokens[k + 1][1].startswith("("):
                    called.add(text.split(".")[-1].strip('"').lower())
    return _Builtins(
        frozenset(tables), {key: frozenset(names) for key, names in macros.items()}
    )


@functools.cache
def _refused_macros() -> frozenset[tuple[str, bool]]:
    """Built-in macros that call, directly or through other macros, a refused function."""
    builtins = _builtins()
    names = set(REFUSED_FUNCTIONS) | (builtins.table_functions - ALLOWED_TABLE_FUNCTIONS)
    refused: set[tuple[str, bool]] = set()
    changed = True
    while changed:
        changed = False
        for key, called in builtins.macros.items():
            if key not in refused and called & names:
                refused.add(key)
                names.add(key[0])
                changed = True
    return frozenset(refused)


@functools.cache
def refused_functions() -> frozenset[str]:
    """Scalar functions refused: :data:`REFUSED_FUNCTIONS` and every macro that calls one.

    Returns:
        Lower-case function names.
    """
    return REFUSED_FUNCTIONS | {name for name, table in _refused_macros() if not table}


@functools.cache
def allowed_table_functions() -> frozenset[str]:
    """Table functions allowed: the allow-list and the table macros calling nothing refused.

    ``histogram_values`` calls ``query_table``, so it is refused, and ``histogram`` with it.

    Returns:
        Lower-case function names.
    """
    refused = _refused_macros()
    macros = {
        name for name, table in _builtins().macros if table and (name, True) not in refused
    }
    return ALLOWED_TABLE_FUNCTIONS | macros
