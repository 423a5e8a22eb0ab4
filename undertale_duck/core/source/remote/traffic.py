"""What one process fetched from object storage: bytes and requests, by kind."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

__all__ = ["StorageStats", "Traffic"]


@dataclass(frozen=True)
class StorageStats:
    """Bytes and requests this process fetched from a dataset's object store.

    Other processes (DataLoader workers, ranks) keep their own counts.

    Attributes:
        range_bytes: Bytes fetched by range requests: footers at open, the row groups
            and columns of windows read before their shard is cached, and the columns a
            view's indexing pass reads of shards not cached.
        range_requests: Range requests made.
        range_windows: Windows (and shards a view's indexing pass read) served from range
            reads.
        download_bytes: Bytes of whole shards downloaded for a window that needed them.
        downloads: Whole shards downloaded for a window.
        background_bytes: Bytes of whole shards downloaded in the background, after a window
            of theirs was served by range reads, for later epochs.
        background_downloads: Whole shards downloaded in the background.
    """

    range_bytes: int = 0
    range_requests: int = 0
    range_windows: int = 0
    download_bytes: int = 0
    downloads: int = 0
    background_bytes: int = 0
    background_downloads: int = 0

    @property
    def bytes(self) -> int:
        """Every byte fetched (range reads, downloads and background downloads)."""
        return self.range_bytes + self.download_bytes + self.background_bytes

    @property
    def requests(self) -> int:
        """Every request that fetched bytes (a whole download counts as one)."""
        return self.range_requests + self.downloads + self.background_downloads


class Traffic:
    """Thread-safe counters behind :class:`StorageStats` (one per store and process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys((f.name for f in dataclasses.fields(StorageStats)), 0)

    def add(self, **counts: int) -> None:
        """Add to named counters (``range_bytes=4096, range_requests=1``)."""
        with self._lock:
            for name, value in counts.items():
                self._counts[name] += value

    def snapshot(self) -> StorageStats:
        """The counters now."""
        with self._lock:
            return StorageStats(**self._counts)
