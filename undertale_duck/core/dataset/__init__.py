"""The core dataset: ShardDataset, its argument checks, reader settings and SQL."""

from __future__ import annotations

from .arguments import RowList, check_expected_rows, check_positions
from .dataset import ShardDataset, named_filter

__all__ = [
    "RowList",
    "ShardDataset",
    "check_expected_rows",
    "check_positions",
    "named_filter",
]
