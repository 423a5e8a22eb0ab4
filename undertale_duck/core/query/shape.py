"""Read a parsed ad hoc query's shape: the columns it may read, its result's types and rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..bounds import VECTOR_ROWS
from ..runtime import syntax_nodes

#: DuckDB type ids whose values are strings or bytes.
TEXT_IDS = frozenset({"varchar", "blob", "bit", "json"})


def text_result(types: Sequence[Any]) -> bool:
    """Whether a result with these DuckDB column types can hold string or binary values.

    Args:
        types: The result's column types (``DuckDBPyRelation.types``).

    Returns:
        True if any type is, or nests, a string or binary type (or cannot be told).
    """
    return any(_text_type(t) for t in types)


def _text_type(typ: Any) -> bool:
    try:
        if str(typ.id).lower() in TEXT_IDS:
            return True
        children = typ.children if str(typ.id).lower() in _NESTED_IDS else []
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return True  # a type that cannot be inspected: assume it may hold strings
    return any(_text_type(child[1] if isinstance(child, tuple) else child) for child in children)


_NESTED_IDS = frozenset({"list", "array", "struct", "map", "union"})


def referenced(tree: Any, text: str) -> frozenset[str] | None:
    """The names a parsed query's column references use, lowercased; None if it may read all.

    A star (``*``, ``COLUMNS(...)``, ``f(*)``), a positional reference, a table function
    (which may read the shards' files directly), ``SUMMARIZE``, a table other than
    ``dataset`` (a view's ``dataset_view`` renames columns), or a reference to a table or its
    alias by itself (the whole row as a struct) may read every column.

    Args:
        tree: The statement's syntax tree (``json_serialize_sql``).
        text: The statement's text (the tree's locations point into it).

    Returns:
        The names, or None.
    """
    names: set[str] = set()
    tables: set[str] = set()
    read: set[str] = set()  # the tables (and common table expressions) read by name
    ctes: set[str] = set()
    refs: list[list[str]] = []
    for node in syntax_nodes(tree):
        kind = node.get("class")
        if kind in ("STAR", "POSITIONAL_REFERENCE"):
            if not _describe_only(tree):
                return None
            return frozenset()
        if kind == "FUNCTION" and not node.get("arguments") and _star_call(node, text):
            return None
        if isinstance(node.get("cte_map"), dict):
            for entry in node["cte_map"].get("map") or []:
                if isinstance(entry, dict):
                    ctes.add(str(entry.get("key", "")).lower())
        if kind == "COLUMN_REF":
            refs.append([str(part).lower() for part in node.get("column_names", [])])
        elif node.get("type") == "TABLE_FUNCTION":
            return None
        elif node.get("type") in ("BASE_TABLE", "SUBQUERY", "JOIN"):
            for key in ("table_name", "alias"):
                if node.get(key):
                    tables.add(str(node[key]).lower())
            if node.get("type") == "BASE_TABLE":
                read.add(str(node.get("table_name", "")).lower())
        elif node.get("type") == "SHOW_REF" and str(node.get("show_type")) != "DESCRIBE":
            return None
    if read - ctes - {"dataset"}:
        # another table (a view's dataset_view, a side table) may hold the shards' columns
        # under other names
        return None
    for parts in refs:
        if len(parts) == 1 and parts[0] in tables:
            return None
        names.update(parts)
    return frozenset(names)


def result_rows(tree: Any) -> int:
    """The most rows one result vector of a parsed query holds: a top-level ``LIMIT n``'s n.

    Args:
        tree: The statement's syntax tree (``json_serialize_sql``).

    Returns:
        ``min(n, VECTOR_ROWS)`` for a constant ``LIMIT n`` of the outermost query, else
        ``VECTOR_ROWS``.
    """
    try:
        node = tree["statements"][0]["node"]
        for modifier in node.get("modifiers") or []:
            kind = (modifier.get("type"), modifier.get("limit_type"))
            if kind != ("LIMIT_MODIFIER", "ROW_COUNT"):
                continue
            literal = (modifier.get("limit") or {}).get("literal") or {}
            if modifier["limit"].get("class") == "CONSTANT" and literal.get("kind") == "INTEGER":
                return max(0, min(int(literal["text"]), VECTOR_ROWS))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        pass
    return VECTOR_ROWS


def _star_call(node: dict[str, Any], text: str) -> bool:
    """Whether a call the tree records without arguments has some in its text (``f(*)``).

    DuckDB's serialized tree drops the star of ``struct_pack(*)``; ``count(*)`` reads no
    column.
    """
    if str(node.get("function_name", "")).lower() == "count_star":
        return False
    start, length = node.get("query_location"), node.get("query_location_length")
    if not isinstance(start, int) or not isinstance(length, int) or length <= 0:
        return True
    call = text.encode()[start:start + length].decode(errors="replace")
    inside = call[call.find("(") + 1:call.rfind(")")] if "(" in call else ""
    return bool(inside.strip())


def _describe_only(tree: Any) -> bool:
    """Whether the statement is a DESCRIBE (it reads no rows)."""
    return any(
        node.get("type") == "SHOW_REF" and str(node.get("show_type")) == "DESCRIBE"
        for node in syntax_nodes(tree)
    )


__all__ = ["referenced", "result_rows", "text_result"]
