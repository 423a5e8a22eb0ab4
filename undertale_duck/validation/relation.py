"""What the checks scan: the rows of a group of shards, or a view's rows over them."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..core.runtime import sqlfiles
from ..core.source import Window
from ..core.views import IndexedView

#: Runs a query with shard paths escaped (``RunState.query``) and returns every row.
Query = Callable[[str, dict[str, Any]], list[tuple[Any, ...]]]


def _template(name: str, **parts: str) -> str:
    """An ``sql/`` text without its comment lines, with ``parts`` substituted.

    Comments are dropped before substitution, so a view's query (which may hold a string
    literal spanning lines) is never mistaken for one.
    """
    lines = [ln for ln in sqlfiles.sql_text(name).splitlines() if not ln.lstrip().startswith("--")]
    return "\n".join(lines).strip().format(**parts)


@dataclasses.dataclass(frozen=True)
class Relation:
    """The rows a validation run checks, as SQL over ``$files`` (a group of shards).

    Attributes:
        rows: A ``FROM`` item yielding the checked columns, the shard's path
            (``__undertale_shard``) and the row's number in its shard (``file_row_number``).
        types: A query over ``$files`` (one shard) whose columns are the checked columns with
            their DuckDB types; it binds without reading rows.
        statistics: Whether the footers' statistics describe the checked columns (then null
            checks they prove need no scan).
        ordered: Whether scanning ``rows`` yields rows in dataset order (else examples sort).
        view: The view whose rows are checked, or None for the shards' own rows.
    """

    rows: str
    types: str
    statistics: bool = True
    ordered: bool = True
    view: IndexedView | None = None


def shard_rows() -> Relation:
    """The shards' own rows: every column as stored."""
    return Relation(_template("checks/rows"), sqlfiles.sql_text("checks/column_types").strip())


def view_rows(view: IndexedView, columns: Sequence[str]) -> Relation:
    """A view's rows: its query over each group of shards, carrying the source row.

    Computed columns have no footer statistics, so every check scans. Without joins a scan
    keeps source order (as when the view serves windows); with joins, examples are sorted.

    Args:
        view: The opened view.
        columns: The dataset's columns (those ``dataset`` exposes to the query).

    Returns:
        The relation.
    """
    rows = _template(
        "checks/view_rows",
        columns=sqlfiles.column_list(columns),
        names=sqlfiles.column_list(view.schema.names),
        view=view.query.check_sql,
    )
    types = _template("checks/view_types", rows=rows)
    return Relation(rows, types, False, not view.query.side_tables, view)


class ViewPositions:
    """Global indices in a view of source rows: window offset plus rank among kept rows.

    Args:
        view: The opened view (its windows carry each window's offset and kept count).
        paths: Shard paths by shard number.
        query: Runs the view's locate query (``sql/view_index.sql``) for one window.
    """

    def __init__(self, view: IndexedView, paths: Sequence[str], query: Query) -> None:
        self._view = view
        self._paths = list(paths)
        self._query = query
        self._by_shard: dict[int, list[Window]] = {}
        for w in view.windows:
            self._by_shard.setdefault(w.shard, []).append(w)
        self._kept: dict[tuple[int, int], list[int]] = {}

    def rows(self, shard: int) -> int:
        """Rows the view keeps in one shard (from its index; no query)."""
        return sum(w.rows for w in self._by_shard.get(shard, []))

    def index(self, shard: int, row: int) -> int | None:
        """The view's global index of local row ``row`` of shard number ``shard``.

        Args:
            shard: Shard number.
            row: Row number in that shard.

        Returns:
            The index, or None when the view does not keep that row (the data changed).
        """
        windows = self._by_shard.get(shard, [])
        k = bisect.bisect_right([w.start for w in windows], row) - 1
        if k < 0 or row >= windows[k].stop:
            return None
        w = windows[k]
        key = (w.shard, w.start)
        if key not in self._kept:
            params = {"path": self._paths[shard], "start": w.start, "stop": w.stop}
            sql = self._view.locate_query(shard)
            self._kept[key] = [int(r[0]) for r in self._query(sql, params)]
        kept = self._kept[key]
        rank = bisect.bisect_left(kept, row)
        if rank >= len(kept) or kept[rank] != row or len(kept) != w.rows:
            return None
        return w.offset + rank


__all__ = ["Relation", "ViewPositions", "shard_rows", "view_rows"]
