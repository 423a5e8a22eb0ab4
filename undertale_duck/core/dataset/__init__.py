"""The core dataset: ShardDataset, its argument checks, reader settings and SQL."""

from __future__ import annotations

from .arguments import check_expected_rows, check_positions
from .dataset import ShardDataset

__all__ = [
    "ShardDataset",
    "check_expected_rows",
    "check_positions",
]
