"""Consecutive parts of a sequence: a group of batches cut back into its batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def consecutive_parts(values: Any, sizes: Sequence[int]) -> list[Any]:
    """Cut ``values`` (a list, numpy array or any sliceable sequence) into consecutive parts.

    Args:
        values: What to cut; each part is ``values[start:stop]`` (a view for numpy arrays).
        sizes: Items of each part, in order.

    Returns:
        One part per size.
    """
    parts = []
    start = 0
    for size in sizes:
        parts.append(values[start:start + size])
        start += size
    return parts
