"""Parquet files read without DuckDB: footers, page headers, decoded-size estimates.

Footers are checked before they are trusted; the Thrift reader is bounded.
"""

from __future__ import annotations

from . import fixed_lists, footers, pages
from .group_sizes import decoded_sizes
from .pages import LeafVerdicts, ShardPages
from .text_pages import Page, child_types, chunk_pages, column_leaves

__all__ = [
    "LeafVerdicts", "Page", "ShardPages", "child_types", "chunk_pages", "column_leaves",
    "decoded_sizes", "fixed_lists", "footers", "pages"
]
