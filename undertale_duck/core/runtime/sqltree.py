"""Walk a SQL statement's parsed syntax tree (DuckDB's ``json_serialize_sql``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["syntax_nodes"]


def syntax_nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every dict in a parsed syntax tree (``json_serialize_sql``), depth first.

    Args:
        node: A tree, or any part of one.

    Yields:
        Each node.
    """
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from syntax_nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from syntax_nodes(value)
