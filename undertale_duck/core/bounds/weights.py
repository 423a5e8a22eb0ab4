"""Keep the exact weights of shards' string columns across runs, in the user's private cache.

Weighing a column exactly (:mod:`vectors`) reads its dictionary indices; a weight depends
only on the shard's identity (path, size, modification and status-change times, inode,
object version) and the column, so it is kept as a small JSON record under the cache
root's ``vectors`` directory (private to the user, outside any dataset; :mod:`cachedir`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os

from ...errors import UndertaleDuckError
from ..runtime import process_cache_dir, read_cached, write_atomic
from ..source import Shard

#: The format of a kept weight (a new version ignores older records).
RECORD_VERSION = 2
#: Exact weights computed (``weighed``) and taken from the cache (``loaded``) in this process.
STATS = {"weighed": 0, "loaded": 0}


def record_key(shard: Shard, column: str) -> str:
    """What an exact weight depends on: the shard's identity and the column (a hex digest)."""
    identity = [RECORD_VERSION, shard.identity, column]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()


def _protected(shard: Shard) -> list[str]:
    return [] if getattr(shard, "store", None) is not None else [os.path.dirname(shard.path)]


def load(shard: Shard, column: str) -> int | None:
    """The weight an earlier run kept for a shard's column, or None.

    Args:
        shard: The shard.
        column: The column.

    Returns:
        The most bytes one 2048-row vector of the column takes, or None (none kept, or a
        record that is not ours or not well formed).
    """
    key = record_key(shard, column)
    try:
        raw = read_cached(process_cache_dir("vectors", _protected(shard)) / f"{key}.json")
        data = json.loads(raw) if raw is not None else None
    except (ValueError, OSError, UndertaleDuckError):
        return None
    value = data.get("bytes") if isinstance(data, dict) and data.get("key") == key else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        STATS["loaded"] += 1
        return value
    return None


def save(shard: Shard, column: str, value: int) -> None:
    """Keep a shard column's exact weight for later runs (best effort: failures are ignored).

    Args:
        shard: The shard.
        column: The column.
        value: Its weight in bytes.
    """
    STATS["weighed"] += 1
    key = record_key(shard, column)
    with contextlib.suppress(OSError, UndertaleDuckError):
        directory = process_cache_dir("vectors", _protected(shard))
        write_atomic(directory, f"{key}.json", json.dumps({"key": key, "bytes": value}).encode())


__all__ = ["RECORD_VERSION", "STATS", "load", "record_key", "save"]
