"""The DuckDB runtime: settings, connect(), lifecycle, interrupts, failures, SQL.

Also the private cache directories and the parsed SQL tree walker. Imports only
``errors`` and ``common``.
"""

from __future__ import annotations

from . import arrowpool, cachedir, duck, failures, lifecycle, sqlfiles
from .arrowpool import POOL_ENV, TIGHT_BUDGET, fit_arrow_pool, read_pool
from .cachedir import (
    CACHE_ENV,
    CACHE_KINDS,
    OWN_FOLDER,
    RECORD_SUFFIX,
    TAG_NAME,
    CacheUnwritableError,
    atomic_file,
    cache_dir,
    cache_root,
    foreign_parquet,
    held_path,
    kind_directory,
    open_cached,
    private_directory,
    process_cache_dir,
    read_cached,
    read_record,
    tagged,
    write_atomic,
    write_record,
)
from .connection import Connection
from .duck import (
    GLOB_CHARS,
    allocator_config,
    connect,
    default_duckdb_config,
    duckdb_path,
    nan_safe,
    planned_as_configured,
    threads_of,
    worker_duckdb_config,
)
from .interrupt import cancelled_at_exit, exiting, interruptible, sleep_unless_exiting
from .locks import acquire, release, try_acquire
from .sqlfiles import SQL_DIRS
from .sqltree import syntax_nodes
from .tasks import TASK_DONE, TaskMap, peak_rss, run_here

__all__ = [
    "CACHE_ENV",
    "CACHE_KINDS",
    "GLOB_CHARS",
    "OWN_FOLDER",
    "POOL_ENV",
    "RECORD_SUFFIX",
    "SQL_DIRS",
    "TAG_NAME",
    "TASK_DONE",
    "TIGHT_BUDGET",
    "CacheUnwritableError",
    "Connection",
    "TaskMap",
    "acquire",
    "allocator_config",
    "arrowpool",
    "atomic_file",
    "cache_dir",
    "cache_root",
    "cachedir",
    "cancelled_at_exit",
    "connect",
    "default_duckdb_config",
    "duck",
    "duckdb_path",
    "exiting",
    "failures",
    "fit_arrow_pool",
    "foreign_parquet",
    "held_path",
    "interruptible",
    "kind_directory",
    "lifecycle",
    "nan_safe",
    "open_cached",
    "peak_rss",
    "planned_as_configured",
    "private_directory",
    "process_cache_dir",
    "read_cached",
    "read_pool",
    "read_record",
    "release",
    "run_here",
    "sleep_unless_exiting",
    "sqlfiles",
    "syntax_nodes",
    "tagged",
    "threads_of",
    "try_acquire",
    "worker_duckdb_config",
    "write_atomic",
    "write_record",
]
