"""The core dataset: ShardDataset, its argument checks, reader settings and SQL."""

from __future__ import annotations

from .arguments import check_positions
from .dataset import ShardDataset

__all__ = [
    "ShardDataset",
    "check_positions",
]
