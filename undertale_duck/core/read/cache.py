"""The window cache: a byte-bounded LRU of Arrow tables inside a memory budget, with counters."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

#: Logs under ``undertale_duck`` (silent unless the application configures logging).
_log = logging.getLogger(__name__)


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
        oversized: Tables served but not kept because they exceed the cache's share.
        entries: Entries held now.
        bytes: Bytes held now.
        limit: The cache's share of the budget in bytes (the budget less the reserve).
    """

    hits: int
    misses: int
    evictions: int
    oversized: int
    entries: int
    bytes: int
    limit: int


class WindowCache:
    """A thread-safe LRU of Arrow tables inside a memory budget that also pays for reads.

    The budget is split: :attr:`reserve` bytes are kept free for the transient memory of
    window reads (DuckDB's decode buffers and Arrow result), and the cache holds at most
    :attr:`limit` ``= budget - reserve`` bytes of windows. Room for a window about to be read
    is made before the read (:meth:`make_room`), so cached plus incoming windows stay within
    the limit. With no reserve this is a plain byte-bounded LRU.

    Self-owned (an ordered dict and a byte count) rather than built on cachetools: the
    limit moves whenever a read measures more bytes per row (:meth:`set_reserve`), eviction
    must spare the window being consumed (``keep``), and a floor keeps one window; a
    cachetools cache fixes its ``maxsize`` at construction and evicts without exceptions,
    so its own bound would never be the one that holds.

    Args:
        budget: The whole budget in bytes (cache plus reserve). A table larger than the
            cache's share is served by the caller but never kept.

    Raises:
        ValueError: If ``budget`` is negative.
    """

    def __init__(self, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"cache budget must be >= 0 bytes, got {budget}")
        self._budget = int(budget)
        self._limit = self._budget
        self._tables: OrderedDict[Hashable, tuple[pa.Table, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = self._oversized = 0

    @property
    def budget(self) -> int:
        """The whole budget in bytes: :attr:`limit` plus :attr:`reserve`."""
        return self._budget

    @property
    def limit(self) -> int:
        """The most bytes of tables held: the budget less the reserve."""
        return self._limit

    @property
    def reserve(self) -> int:
        """Bytes of the budget kept free for window reads."""
        return self._budget - self._limit

    @property
    def held(self) -> int:
        """Bytes of the tables held now."""
        return self._bytes

    def resize(self, budget: int) -> None:
        """Change the whole budget (a forked DataLoader worker's share of its parent's).

        The reserve is kept; windows beyond the new limit are evicted. The caller sets the
        reserve again (``WindowReader.resize``).

        Args:
            budget: The new budget in bytes.
        """
        with self._lock:
            reserve = self._budget - self._limit
            self._budget = max(0, int(budget))
            self._limit = max(0, self._budget - reserve)
            self._trim(0)

    def keys(self) -> list[Hashable]:
        """Return the keys held, least recently used first."""
        with self._lock:
            return list(self._tables)

    def set_reserve(self, nbytes: int, floor: int = 0) -> None:
        """Keep ``nbytes`` of the budget free for reads, evicting windows beyond the rest.

        Args:
            nbytes: Transient bytes a read needs (see :func:`windows.read_reserve`).
            floor: The cache's share never drops below ``min(budget, floor)`` because of the
                reserve (one window: without it every batch would read its window again).
        """
        with self._lock:
            budget = self._budget
            self._limit = max(budget - max(0, int(nbytes)), min(budget, int(floor)))
            self._trim(0)

    def _trim(self, nbytes: int, keep: Hashable | None = None) -> None:
        """Evict least recently used entries, sparing ``keep``, until ``nbytes`` more fit."""
        tables = self._tables
        while self._bytes + nbytes > self._limit and len(tables) > (1 if keep in tables else 0):
            key = next(iter(tables))
            if key == keep:  # keep is the least recently used: spare it, take the next one
                tables.move_to_end(key)
                key = next(iter(tables))
            _, size = tables.pop(key)
            self._bytes -= size
            self._evictions += 1
            _log.debug("evicted window %s (%d bytes) to stay within %d", key, size, self._limit)

    def get(self, key: Hashable) -> pa.Table | None:
        """Return the cached table for ``key`` (marking it recently used), or None.

        Args:
            key: The cache key.

        Returns:
            The table, or None on a miss.
        """
        with self._lock:
            entry = self._tables.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._tables.move_to_end(key)
            self._hits += 1
            return entry[0]

    def put(self, key: Hashable, table: pa.Table) -> bool:
        """Keep a table, evicting least recently used ones to stay within :attr:`limit`.

        Args:
            key: The cache key.
            table: The table to keep.

        Returns:
            True if the table is now cached; False if it is larger than the cache's share.
        """
        with self._lock:
            size = table_bytes(table)
            if self._limit == 0 or size > self._limit:
                self._oversized += 1
                return False
            old = self._tables.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._trim(size)
            self._tables[key] = (table, size)
            self._bytes += size
            return True

    def holds(self, key: Hashable, table: pa.Table) -> bool:
        """Whether ``table`` is what the cache holds for ``key`` (no hit or miss counted)."""
        with self._lock:
            entry = self._tables.get(key)
            return entry is not None and entry[0] is table

    def swap(self, key: Hashable, old: pa.Table, new: pa.Table) -> bool:
        """Hold ``new`` for ``key`` in place of ``old`` (the same rows); False if ``old`` is gone.

        Args:
            key: The cache key.
            old: The table held now.
            new: Its replacement.
        """
        with self._lock:
            entry = self._tables.get(key)
            if entry is None or entry[0] is not old:
                return False
            size = table_bytes(new)
            self._bytes += size - entry[1]
            self._tables[key] = (new, size)
            self._trim(0, key)
            return True

    #: Whether the windows this cache serves are mapped files (free to hold for a while).
    maps_windows = False

    def unopened(self, key: Hashable) -> bool:
        """Whether the window is held as a file not yet opened (:meth:`open_ahead` opens it)."""
        return False

    def open_ahead(self, key: Hashable) -> bool:
        """Open a held window's file before it is asked for; whether it is open now."""
        return False

    def handed(self, key: Hashable, table: pa.Table) -> pa.Table:
        """The table to hand out for a window just put: ``table`` itself here."""
        return table

    def make_room(self, nbytes: int, keep: Hashable | None = None) -> bool:
        """Evict least recently used windows until ``nbytes`` more would fit in the limit.

        Args:
            nbytes: Bytes about to be read.
            keep: A key never evicted for this (the window being consumed); it becomes the
                most recently used.

        Returns:
            True if ``nbytes`` now fits beside what is held.
        """
        with self._lock:
            if keep is not None and keep in self._tables:
                self._tables.move_to_end(keep)
            self._trim(nbytes, keep)
            return self._bytes + nbytes <= self._limit

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._tables

    def __len__(self) -> int:
        return len(self._tables)

    def clear(self) -> None:
        """Drop every entry (counters are kept; dropping is not counted as eviction)."""
        with self._lock:
            self._tables.clear()
            self._bytes = 0

    def missed(self) -> None:
        """Count a window decoded for the cache without a :meth:`get` that missed it.

        (A row group read whole in the background for the disk tier decodes windows no one
        asked for yet: they count as misses, what was decoded, like the consumer's own.)
        """
        with self._lock:
            self._misses += 1

    def stats(self) -> CacheStats:
        """Return a snapshot of the cache's counters."""
        with self._lock:
            return CacheStats(
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                oversized=self._oversized,
                entries=len(self._tables),
                bytes=self._bytes,
                limit=self._limit,
            )
