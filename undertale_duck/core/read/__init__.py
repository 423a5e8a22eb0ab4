"""Reading windows: pyarrow or DuckDB decoding, the reader, read-ahead, caches.

The budgeted window cache, the disk tier and the access monitor live here too.
"""

from __future__ import annotations

from . import access, reader
from .access import AccessMonitor
from .cache import CacheStats, WindowCache
from .disk_tier import DiskStats, DiskTier, TieredCache, prepare_directory, window_keys
from .reader import WindowReader

__all__ = [
    "AccessMonitor", "CacheStats", "DiskStats", "DiskTier", "TieredCache", "WindowCache",
    "WindowReader", "access", "prepare_directory", "reader", "window_keys"
]
