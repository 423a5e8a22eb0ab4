"""Notice uniform random access over data larger than the memory budget; warn once per process."""

from __future__ import annotations

import warnings

from ...errors import RandomAccessWarning
from .cache import CacheStats, WindowCache

#: The cache's counters are read every this many batches (they take its lock).
EVERY = 4
#: Window reads an interval must hold before it is judged.
MIN_READS = 64
#: Access is called random when a window read serves fewer than this share of its rows.
WASTE_SHARE = 1 / 8

_warned = False


def warned() -> bool:
    """Whether this process has emitted its :class:`RandomAccessWarning`."""
    return _warned


class AccessMonitor:
    """Judge, from the cache's counters, whether window reads are wasted on random access.

    Over each interval of at least :data:`MIN_READS` window reads, if windows were evicted
    and the rows served per window read are under :data:`WASTE_SHARE` of a window's mean
    rows, the access is uniform random over more data than the budget holds: a
    :class:`RandomAccessWarning` is emitted, once per process. Sequential and
    ``ChunkedSampler`` orders use every row of a window they read, and data that fits in
    the budget evicts nothing, so neither warns.

    Args:
        window_rows: Mean rows per window.
        memory_mb: The memory budget in megabytes (for the message).
        data_mb: The dataset's uncompressed size in megabytes (for the message).
    """

    def __init__(self, window_rows: float, memory_mb: float, data_mb: float) -> None:
        self.window_rows = window_rows
        self.memory_mb = memory_mb
        self.data_mb = data_mb
        self._rows = 0
        self._pending = 0
        self._calls = 0
        self._start: CacheStats | None = None

    @property
    def active(self) -> bool:
        """False once the warning was given (or cannot apply): nothing left to watch."""
        return not _warned and self.window_rows >= 8

    def served(self, rows: int, cache: WindowCache) -> None:
        """Note ``rows`` served; judge the interval when it holds enough reads.

        Args:
            rows: Rows just served.
            cache: The cache they were served through.
        """
        global _warned
        self._pending += rows
        self._calls += 1
        if self._calls % EVERY and self._start is not None:
            return
        stats = cache.stats()
        if self._start is None:
            self._start = stats
            self._pending = 0
            return
        self._rows += self._pending
        self._pending = 0
        reads = stats.misses - self._start.misses
        if reads < MIN_READS:
            return
        evicted = stats.evictions > self._start.evictions
        per_read = self._rows / reads
        self._start = stats
        self._rows = 0
        if not evicted or per_read >= WASTE_SHARE * self.window_rows or _warned:
            return
        _warned = True
        warnings.warn(
            f"rows are read in a uniform random order over about {self.data_mb:,.0f} MB of "
            f"data, more than memory={self.memory_mb:g} MiB holds: each window read (DuckDB "
            f"decodes whole row groups) served about {per_read:.1f} of its "
            f"{self.window_rows:.0f} rows before it was evicted, so nearly every row costs "
            "a window decode. Use ChunkedSampler(dataset, batch, workers, shuffle=True, "
            "mix=...) to shuffle windows and rows within groups of windows, or "
            "ParquetDataset(..., disk=MB) for a disk tier of memory-mapped decoded windows, "
            "or a memory budget larger than the data.",
            RandomAccessWarning,
            stacklevel=4,
        )
