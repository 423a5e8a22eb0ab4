"""Packed token blocks: the spec, the indexing pass over lengths, cutting and serving blocks."""

from __future__ import annotations

from .packed import PackedBlocks
from .plan import BlockRun
from .spec import MAX_BLOCK, POSITION_IDS, SEGMENT_IDS, Pack, check_pack

__all__ = [
    "MAX_BLOCK",
    "POSITION_IDS",
    "SEGMENT_IDS",
    "BlockRun",
    "Pack",
    "PackedBlocks",
    "check_pack"
]
