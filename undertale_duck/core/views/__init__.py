"""Training-set views: the query check, the indexing pass, kept rows, side tables."""

from __future__ import annotations

from . import check, index
from .index import IndexedView, index_view
from .sides import SideTable, side_tables

__all__ = [
    "IndexedView", "SideTable", "check", "index", "index_view", "side_tables"
]
