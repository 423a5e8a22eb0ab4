"""The core dataset: ShardDataset, its argument checks, reader settings and SQL."""

from __future__ import annotations

from .dataset import ShardDataset

__all__ = [
    "ShardDataset"
]
