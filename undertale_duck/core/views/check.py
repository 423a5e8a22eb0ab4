"""Training-set views: check that a query over ``dataset`` can be served row by row, rewrite it.

A view is SQL over the ``dataset`` view (every row of every shard) made of projections
(computed columns), a ``WHERE`` filter and lookups joined from side tables. Such a query maps
each source row to at most one output row, so the i-th row of the view can be found by
reading one window: the query restricted to that window's source rows, ordered by source row.

The query is parsed by DuckDB itself (``json_serialize_sql``) and every construct that is not
row by row is refused up front, naming it. The parsed tree is then rewritten (one extra
column carrying the source row number) and turned back into SQL by DuckDB
(``json_deserialize_sql``), so no SQL text is ever spliced together by string matching.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from ...errors import ArgumentError, QueryError
from ..runtime import duck, sqlfiles, syntax_nodes

#: The column carrying the source row number through the user's query (never shown).
ROW_COLUMN = "__ud_row"
#: The output column the rewritten query orders by (never shown).
ORDER_COLUMN = "__ud_order"
#: The column carrying the source shard's path through the user's query (validation only).
FILE_COLUMN = "__ud_file"
#: The output column naming the source shard (validation only).
SHARD_COLUMN = "__ud_shard"
#: Prefix of every column name reserved by views.
RESERVED_PREFIX = "__ud_"

_MODIFIERS = {
    "ORDER_MODIFIER": "ORDER BY",
    "LIMIT_MODIFIER": "LIMIT/OFFSET",
    "LIMIT_PERCENT_MODIFIER": "LIMIT ... PERCENT",
    "DISTINCT_MODIFIER": "DISTINCT",
}
_JOINS = {"LEFT", "INNER"}
#: SQL's clock values, written without parentheses: DuckDB parses them as column names.
_CLOCK = frozenset(
    {"current_date", "current_time", "current_timestamp", "localtime", "localtimestamp"}
)


#: Functions that, in the select list, turn one row into as many rows as a list holds.
_ROW_MAKERS = frozenset({"unnest", "unlist"})
#: Functions whose one-argument form reads the clock although DuckDB marks it deterministic
#: (``age(t)`` is the time from ``t`` to today's midnight).
_CLOCK_ONE_ARGUMENT = frozenset({"age"})


@functools.cache
def _function_kinds() -> tuple[frozenset[str], frozenset[str]]:
    """Names of DuckDB's aggregate functions and of the functions a view refuses.

    Refused: a function volatile in any overload (``random``, ``nextval``) and one that
    depends on the session in every overload (``now``, ``current_setting``). A function with
    deterministic overloads beside ones DuckDB marks as depending on the session (``+``,
    ``year`` and ``strftime`` of a ``TIMESTAMPTZ``, whose results depend on the time zone)
    is allowed: every connection pins the time zone and calendar
    (:func:`..runtime.duck.default_duckdb_config`), so those forms give the same rows in
    every process and on every machine.

    Returns:
        The aggregates, and the refused functions.
    """
    con = duck.connect()
    try:
        rows = con.execute(sqlfiles.sql_text("function_kinds")).fetchall()
    finally:
        con.close()
    aggregates = frozenset(n for n, kind, _ in rows if kind == "aggregate")
    clock = {"now", "current_timestamp", "current_date", "current_time", "today"}
    session = {n for n, _, s in rows if s == "CONSISTENT_WITHIN_QUERY"}
    stable = {n for n, _, s in rows if s not in ("VOLATILE", "CONSISTENT_WITHIN_QUERY")}
    volatile = {n for n, _, s in rows if s == "VOLATILE"}
    return aggregates, frozenset((session - stable) | volatile | clock)


def _parse(con: duckdb.DuckDBPyConnection, query: str) -> dict[str, Any]:
    rows = con.execute(sqlfiles.sql_text("syntax_tree"), {"query": query}).fetchall()
    tree: dict[str, Any] = json.loads(rows[0][0]) if rows and rows[0][0] else {"error": True}
    if tree.get("error"):
        message = tree.get("error_message") or "it is not a SELECT statement DuckDB can parse"
        if message.startswith("Only SELECT statements can be serialized"):
            # DuckDB's words for any statement that is not a SELECT (DELETE, or DROP after ';')
            raise QueryError(
                "view query must be one SELECT statement over dataset (a statement that is "
                "not a SELECT cannot be a view, nor follow one after ';')"
            )
        raise QueryError(f"view query cannot be used: {message}")
    return tree


def _refuse(construct: str, hint: str = "") -> QueryError:
    tail = f"; {hint}" if hint else ""
    return QueryError(
        f"view query uses {construct}, which cannot be served row by row{tail}. A view may "
        "project and compute columns, filter with WHERE and LEFT/INNER JOIN side tables by key."
    )


def _tables(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The leaves (tables) of a FROM clause, left to right."""
    if node.get("type") == "JOIN":
        join = str(node.get("join_type", "")).upper()
        ref = str(node.get("ref_type", "REGULAR")).upper()
        if join not in _JOINS or ref not in ("REGULAR", "NATURAL"):
            kind = ref if ref not in ("REGULAR", "NATURAL") else join
            article = "an" if kind.startswith(("A", "E", "I", "O", "U")) else "a"
            raise _refuse(f"{article} {kind} join", "use LEFT JOIN or JOIN ... ON a key")
        if node.get("condition") is None and not node.get("using_columns"):
            raise _refuse("a join without ON or USING (a cross product)")
        yield from _tables(node["left"])
        yield from _tables(node["right"])
        return
    yield node


@dataclass(frozen=True)
class ViewQuery:
    """A query over ``dataset`` checked to be row by row, with its rewritten forms.

    Attributes:
        text: The query as the user wrote it.
        sql: The same query as DuckDB writes it back (one statement, no trailing ``;``).
        window_sql: The query with the source row number carried as ``__ud_order``.
        index_sql: The query projecting only the source row number (for counting rows).
        side_tables: Names of the side tables the query joins.
        check_sql: The query with the source shard's path and row number carried as
            ``__ud_shard`` and ``__ud_order`` (schema validation scans many shards at once).
        serve_sql: :attr:`window_sql` without its ``WHERE`` clause, for reading rows the
            index already knows the query keeps (the filter's columns are then not read);
            empty when the query has no ``WHERE``.
        names: Every name the query refers to, lowercased (a superset of the dataset
            columns it reads); None when it uses ``*`` or ``COLUMNS(...)``.
        index_names: Every name its filter and joins refer to, lowercased (a superset of
            the dataset columns :attr:`index_sql` reads); None when they use ``*``.
    """

    text: str
    sql: str
    window_sql: str
    index_sql: str
    side_tables: tuple[str, ...]
    check_sql: str = ""
    serve_sql: str = ""
    names: frozenset[str] | None = None
    index_names: frozenset[str] | None = None

    def reads(self, column: str) -> bool:
        """Whether the query may read ``column`` of the dataset."""
        return self.names is None or column.lower() in self.names

    def index_reads(self, column: str) -> bool:
        """Whether :attr:`index_sql` (its filter and joins) may read ``column``."""
        return self.index_names is None or column.lower() in self.index_names


def check(
    query: str,
    side_tables: Mapping[str, object] | None = None,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> ViewQuery:
    """Check that ``query`` can be served row by row and rewrite it for windows and indexing.

    Args:
        query: SQL over the ``dataset`` view, e.g.
            ``"SELECT tokens[1:512] AS tokens, label FROM dataset WHERE len(tokens) > 8"``.
        side_tables: Names the query may join besides ``dataset``.
        con: A connection to parse on (DuckDB parses; nothing is created on it); by default
            one is opened and closed.

    Returns:
        The checked :class:`ViewQuery`.

    Raises:
        ArgumentError: If ``query`` is not a string.
        QueryError: If the query cannot be parsed or uses a construct that is not row by
            row (aggregates, GROUP BY, ORDER BY, DISTINCT, LIMIT, window functions, set
            operations, subqueries, CTEs, non-deterministic functions, unknown tables).
    """
    if not isinstance(query, str) or not query.strip():
        raise ArgumentError(f"query must be SQL text over the dataset view, got {query!r}")
    names = {n.lower() for n in side_tables or {}}
    own = con is None
    if con is None:
        con = duck.connect()
    try:
        tree = _parse(con, query)
        statements = tree.get("statements", [])
        if len(statements) != 1:
            raise QueryError(f"view query must be one SELECT statement, got {len(statements)}")
        node = statements[0]["node"]
        if node.get("type") == "SET_OPERATION_NODE":
            raise _refuse(f"a set operation ({node.get('setop_type', 'UNION')})")
        if node.get("type") != "SELECT_NODE":
            raise QueryError("view query must be a SELECT statement over dataset")
        _check_select(node, names)
        table = _dataset_ref(node)
        window_node = copy.deepcopy(node)
        window_node["select_list"].append(_column(table, ROW_COLUMN, ORDER_COLUMN))
        index_node = copy.deepcopy(node)
        index_node["select_list"] = [_column(table, ROW_COLUMN, ORDER_COLUMN)]
        check_node = copy.deepcopy(window_node)
        check_node["select_list"].append(_column(table, FILE_COLUMN, SHARD_COLUMN))
        plain_sql = _unparse(con, tree, node)
        window_sql = _unparse(con, tree, window_node)
        index_sql = _unparse(con, tree, index_node)
        check_sql = _unparse(con, tree, check_node)
        serve_sql = ""
        if node.get("where_clause") is not None:
            # Rows the index found kept pass the filter by definition (the query is
            # deterministic), so serving them needs only the projection and the joins.
            serve_node = copy.deepcopy(window_node)
            serve_node["where_clause"] = None
            serve_sql = _unparse(con, tree, serve_node)
    finally:
        if own:
            con.close()
    names_used = {str(t["table_name"]).lower() for t in _tables(node["from_table"])}
    used = tuple(sorted(names_used - {"dataset"}))
    return ViewQuery(
        query, plain_sql, window_sql, index_sql, used, check_sql, serve_sql, _names(node),
        _names(node, ("where_clause", "from_table")),
    )


def _names(
    node: dict[str, Any], parts: Sequence[str] = ("select_list", "where_clause", "from_table")
) -> frozenset[str] | None:
    """Every name the column references of some parts of a query use (None if a star).

    A join's ``USING`` names count as references (``NATURAL`` joins are refused).
    """
    names: set[str] = set()
    for item in syntax_nodes([node.get(part) for part in parts]):
        if item.get("type") == "JOIN":
            names.update(str(name).lower() for name in item.get("using_columns") or [])
        if item.get("class") == "STAR":
            return None
        if item.get("class") == "COLUMN_REF":
            names.update(str(part).lower() for part in item.get("column_names", []))
    return frozenset(names)


def _check_select(node: dict[str, Any], side_tables: set[str]) -> None:
    for modifier in node.get("modifiers", []):
        raise _refuse(_MODIFIERS.get(modifier.get("type"), str(modifier.get("type"))))
    if node.get("cte_map", {}).get("map"):
        raise _refuse("WITH (a common table expression)", "pass side tables with tables=")
    if node.get("group_expressions") or node.get("group_sets"):
        raise _refuse("GROUP BY")
    if node.get("aggregate_handling") not in (None, "STANDARD_HANDLING"):
        raise _refuse("GROUP BY ALL")
    for key, name in (("having", "HAVING"), ("qualify", "QUALIFY"), ("sample", "USING SAMPLE")):
        if node.get(key) is not None:
            raise _refuse(name)
    leaves = list(_tables(node["from_table"]))
    datasets = 0
    for leaf in leaves:
        if leaf.get("type") == "EMPTY":
            raise QueryError(
                "view query reads no table: a view selects rows FROM dataset, e.g. "
                "query=\"SELECT tokens, label FROM dataset WHERE label > 0\""
            )
        if leaf.get("type") != "BASE_TABLE":
            kind = {"TABLE_FUNCTION": "a table function in FROM", "SUBQUERY": "a subquery in FROM"}
            raise _refuse(
                kind.get(str(leaf.get("type")), f"{leaf.get('type')} in FROM"),
                "pass side tables with tables={name: path or Arrow table}",
            )
        if leaf.get("schema_name") or leaf.get("catalog_name") or leaf.get("sample"):
            raise _refuse("a qualified table name or a sample in FROM")
        name = str(leaf["table_name"]).lower()
        if name == "dataset":
            datasets += 1
        elif name not in side_tables:
            raise QueryError(
                f"view query reads table {leaf['table_name']!r}, which is neither dataset "
                f"nor a side table passed with tables= (known: {sorted(side_tables)})"
            )
    if datasets != 1 or str(leaves[0].get("table_name", "")).lower() != "dataset":
        raise _refuse(
            "dataset other than once as the first table",
            "write SELECT ... FROM dataset [LEFT JOIN side ON ...] [WHERE ...]",
        )
    for item in node["select_list"]:
        if str(item.get("alias") or "").lower().startswith(RESERVED_PREFIX):
            raise QueryError(f"column names starting with {RESERVED_PREFIX!r} are reserved")
    aggregates, always = _function_kinds()
    for item in syntax_nodes([node["select_list"], node.get("where_clause"), node["from_table"]]):
        cls = item.get("class")
        if cls == "WINDOW":
            raise _refuse(f"the window function {item.get('function_name', '')}()")
        if cls == "SUBQUERY":
            raise _refuse("a subquery", "join a side table instead")
        if cls == "PARAMETER":
            raise QueryError("view query cannot hold parameters ($name or ?): write the value")
        if cls == "COLUMN_REF" and str(item["column_names"][-1]).lower().startswith(
            RESERVED_PREFIX
        ):
            raise QueryError(f"column names starting with {RESERVED_PREFIX!r} are reserved")
        if cls == "COLUMN_REF" and len(item["column_names"]) == 1 and (
            str(item["column_names"][0]).lower() in _CLOCK
        ):  # DuckDB parses these as names and binds them to the clock's functions
            raise _refuse(
                f"the non-deterministic value {item['column_names'][0]}",
                "rows must be the same every time a window is read (a column of that name "
                "is read as dataset.<name>)",
            )
        if cls == "FUNCTION":
            name = str(item.get("function_name", "")).lower()
            if name in aggregates or item.get("distinct") or item.get("filter") is not None:
                raise _refuse(f"the aggregate function {name}()")
            if name in _ROW_MAKERS:
                raise _refuse(
                    f"{name}(), which makes rows from a list",
                    "keep the list, or take items by index (tokens[1]); for a struct's fields "
                    "select them (s.a, s.b or s.*)",
                )
            # DuckDB 2.0 names a call's arguments "arguments"; earlier versions "children"
            arguments = item.get("arguments") or item.get("children") or []
            if name in _CLOCK_ONE_ARGUMENT and len(arguments) == 1:
                raise _refuse(
                    f"{name}() of one argument (the time from its argument to today's midnight)",
                    f"rows must be the same every time a window is read; give the time to "
                    f"measure from: {name}(TIMESTAMP '2025-01-01', t)",
                )
            if name in always:
                raise _refuse(
                    f"the non-deterministic function {name}()",
                    "rows must be the same every time a window is read",
                )


def _dataset_ref(node: dict[str, Any]) -> str:
    leaf = next(_tables(node["from_table"]))
    return str(leaf.get("alias") or leaf["table_name"])


def _column(table: str, name: str, alias: str) -> dict[str, Any]:
    return {
        "class": "COLUMN_REF",
        "type": "COLUMN_REF",
        "alias": alias,
        "query_location": 18446744073709551615,
        "query_location_length": 0,
        "column_names": [table, name],
    }


def _unparse(con: duckdb.DuckDBPyConnection, tree: dict[str, Any], node: dict[str, Any]) -> str:
    out = dict(tree)
    out["statements"] = [{"node": node, "named_param_map": []}]
    rows = con.execute(sqlfiles.sql_text("unparse_tree"), {"tree": json.dumps(out)}).fetchall()
    if not rows or not rows[0][0]:
        raise QueryError("view query could not be rewritten by DuckDB")
    return str(rows[0][0])
