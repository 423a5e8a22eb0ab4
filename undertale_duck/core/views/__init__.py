"""Training-set views: the query check, the indexing pass, kept rows, side tables, splits."""

from __future__ import annotations

from . import check, index
from .index import IndexedView, index_view
from .sides import SideTable, side_tables
from .split import Split, check_split

__all__ = [
    "IndexedView", "SideTable", "Split", "check", "check_split", "index", "index_view",
    "side_tables"
]
