"""A byte-bounded LRU cache of Arrow tables with hit, miss and eviction counts."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import cachetools
import pyarrow as pa


def table_bytes(table: pa.Table) -> int:
    """Return the bytes an Arrow table holds (whole buffers, so slices are not undercounted).

    Args:
        table: An Arrow table.

    Returns:
        Total size of the buffers the table references.
    """
    return int(table.get_total_buffer_size())


@dataclass(frozen=True)
class CacheStats:
    """Counters of a :class:`WindowCache`.

    Attributes:
        hits: Lookups served from the cache.
        misses: Lookups that had to read.
        evictions: Entries dropped to stay within the limit.
        oversized: Tables served but not kept because they exceed the whole limit.
        entries: Entries held now.
        bytes: Bytes held now.
        limit: The limit in bytes.
    """

    hits: int
    misses: int
    evictions: int
    oversized: int
    entries: int
    bytes: int
    limit: int


class _LRU(cachetools.LRUCache[Hashable, pa.Table]):
    evictions = 0

    def popitem(self) -> tuple[Hashable, pa.Table]:
        item: tuple[Hashable, pa.Table] = super().popitem()
        self.evictions += 1
        return item


class WindowCache:
    """A thread-safe LRU of Arrow tables whose total size never exceeds ``limit`` bytes.

    Args:
        limit: Maximum bytes held. A table larger than ``limit`` is never kept.

    Raises:
        ValueError: If ``limit`` is negative.
    """

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"cache limit must be >= 0 bytes, got {limit}")
        self.limit = limit
        self._lru = _LRU(maxsize=max(limit, 1), getsizeof=table_bytes)
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._oversized = 0

    def get(self, key: Hashable) -> pa.Table | None:
        """Return the cached table for ``key`` (marking it recently used), or None.

        Args:
            key: The cache key.

        Returns:
            The table, or None on a miss.
        """
        with self._lock:
            table: pa.Table | None = self._lru.get(key)
            if table is None:
                self._misses += 1
            else:
                self._hits += 1
            return table

    def put(self, key: Hashable, table: pa.Table) -> bool:
        """Keep a table, evicting least recently used ones to stay within the limit.

        Args:
            key: The cache key.
            table: The table to keep.

        Returns:
            True if the table is now cached; False if it is larger than the whole limit.
        """
        with self._lock:
            if self.limit == 0 or table_bytes(table) > self.limit:
                self._oversized += 1
                return False
            self._lru[key] = table
            return True

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._lru

    def clear(self) -> None:
        """Drop every entry (counters are kept)."""
        with self._lock:
            self._lru.clear()

    @property
    def stats(self) -> CacheStats:
        """A snapshot of the cache's counters."""
        with self._lock:
            return CacheStats(
                hits=self._hits,
                misses=self._misses,
                evictions=self._lru.evictions,
                oversized=self._oversized,
                entries=len(self._lru),
                bytes=int(self._lru.currsize),
                limit=self.limit,
            )
