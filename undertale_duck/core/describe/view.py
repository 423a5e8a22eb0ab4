"""Describe a view (``describe --query/--where``): its query, exact row count and columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...common.jsonvalue import jsonable
from ...errors import ArgumentError, ShardChangedError
from ..runtime import sqlfiles
from .footers import UNKNOWN, ColumnInfo, is_nested, scan_aggregates, scan_row, scan_values

if TYPE_CHECKING:
    from ..dataset import ShardDataset


@dataclass
class ViewDescription:
    """A view as ``describe`` reports it beside its source.

    Attributes:
        query: The view's query (``where=`` written out as a query).
        rows: The view's exact row count, from its index (``len(ds)``).
        columns: The view's columns with their DuckDB types; after a scan, with exact null
            counts and min/max (of lengths for list columns), else with those unknown.
        scanned: Whether the view's rows were scanned.
    """

    query: str
    rows: int
    columns: list[ColumnInfo]
    scanned: bool

    def to_dict(self) -> dict[str, Any]:
        """The view as JSON-ready data (the ``view`` key of ``describe --format json``).

        Returns:
            A mapping with ``query``, ``rows``, ``statistics`` (``"scan"`` or None) and
            ``columns`` (``name``, ``type``; after a scan also ``null_count``, ``min``,
            ``max`` and, for lists, ``min_length``/``max_length``).
        """
        columns = []
        for c in self.columns:
            item: dict[str, Any] = {"name": c.name, "type": c.type}
            if self.scanned:
                item.update(null_count=c.null_count, min=jsonable(c.min), max=jsonable(c.max))
                if c.min_length is not None or c.max_length is not None:
                    item.update(min_length=c.min_length, max_length=c.max_length)
            columns.append(item)
        return {
            "query": self.query,
            "rows": self.rows,
            "statistics": "scan" if self.scanned else None,
            "columns": columns,
        }


def describe_view(ds: ShardDataset, *, scan: bool = False) -> ViewDescription:
    """Describe the view a dataset serves.

    Args:
        ds: A dataset opened with ``query=`` or ``where=``.
        scan: Read every row of the view for exact null counts and min/max (one query over
            ``dataset_view``, through the dataset's read-only SQL session).

    Returns:
        The description; ``rows`` is ``len(ds)``.

    Raises:
        ArgumentError: If ``ds`` is not a view.
        ShardChangedError: If the scan counts other rows than the index (a side table
            changed since indexing; ``ds.refresh()`` indexes again).
    """
    if ds.query is None:
        raise ArgumentError("describe_view needs a dataset opened with query= or where=")
    types = ds.sql(sqlfiles.sql_text("describe_view_columns")).to_pylist()
    layout = [(str(r["column_name"]), str(r["column_type"])) for r in types]
    columns = [ColumnInfo(name, duck_type, shards=len(ds.source.shards)) for name, duck_type
               in layout]
    if not scan:
        for c in columns:
            c.null_count = None
            c._known = False
        return ViewDescription(ds.query, len(ds), columns, scanned=False)
    text = sqlfiles.render("describe_view_scan", aggregates=scan_aggregates(layout))
    row = scan_row(ds.sql(text))
    if int(row["rows"]) != len(ds):
        raise ShardChangedError(
            f"the view has {row['rows']} rows now but {len(ds)} when it was indexed: a side "
            "table changed; open the dataset again (ds.refresh()) to index it again"
        )
    for c, (nulls, lo, hi, is_list) in zip(
        columns, scan_values(row, layout).values(), strict=True
    ):
        c.null_count = nulls
        if is_list:
            c.min_length, c.max_length = lo, hi
            c._known = False
        elif is_nested(c.type) or lo is UNKNOWN or hi is UNKNOWN:
            c._known = False  # structs and maps have no min/max here, as in describe
        else:
            c.min, c.max = lo, hi
    return ViewDescription(ds.query, len(ds), columns, scanned=True)
