"""A dataset's shards: resolving a source, Shard and Source, types, windows, drift.

``remote/`` reaches object storage (fsspec client, store, listing, shard cache).
"""

from __future__ import annotations

from . import windows
from .convert import Conversions, conversions, drift_error, own_schema
from .drift import ShardDrift, reference_columns, schema_drift
from .local import SourceLike, local_paths
from .readable import conform
from .remote.fsclient import parse_storage_options
from .remote.listing import SourceFiles, remote_metadata
from .remote.store import is_remote
from .remote.traffic import StorageStats
from .shard import Shard, check_column_names, read_footer
from .source import Source, source_text
from .windows import (
    Window,
    max_touched_bytes,
    read_reserve,
    touched_bytes,
    view_plan,
    window_row_groups,
)

__all__ = [
    "Conversions",
    "Shard",
    "ShardDrift",
    "Source",
    "SourceFiles",
    "SourceLike",
    "StorageStats",
    "Window",
    "check_column_names",
    "conform",
    "conversions",
    "drift_error",
    "is_remote",
    "local_paths",
    "max_touched_bytes",
    "own_schema",
    "parse_storage_options",
    "read_footer",
    "read_reserve",
    "reference_columns",
    "remote_metadata",
    "schema_drift",
    "source_text",
    "touched_bytes",
    "view_plan",
    "window_row_groups",
    "windows"
]
