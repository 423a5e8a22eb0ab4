"""The one way this package opens DuckDB: its settings, read_parquet path escaping, connect()."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import duckdb

from ...errors import SourceError
from . import lifecycle, sqlfiles

#: Characters DuckDB expands as glob patterns in every path it reads.
GLOB_CHARS = frozenset("*?[")

#: Default cap on the bytes DuckDB may spill to a process's private spill directory; the
#: smaller of this and half the free space of the file system holding it is used, unless
#: ``max_temp_directory_size`` is given.
SPILL_LIMIT_BYTES = 20 << 30


def default_duckdb_config() -> dict[str, Any]:
    """Return the DuckDB settings each process's database opens with.

    Insertion order is preserved (windows come back in file order without a sort), and no
    extension is auto-installed (nothing is downloaded). Spill files go to the process's
    private spill directory, which :func:`connect` adds (never next to the dataset or in the
    working directory). DuckDB's external file cache is off: each window is read once per
    visit, so caching file blocks only costs memory; DuckDB's allocator returns freed memory
    promptly (4 MB thresholds), so RSS follows the ``memory`` budget; a dataset raises the
    thresholds with its budget (:func:`allocator_config`) unless ``duckdb_config`` sets them.

    Inside a DataLoader worker, :func:`worker_duckdb_config` adjusts ``threads`` and
    ``memory_limit`` to the number of workers (unless given in ``duckdb_config``).

    Returns:
        A DuckDB ``config`` mapping.
    """
    return {
        "preserve_insertion_order": True,
        "autoinstall_known_extensions": False,
        "threads": os.cpu_count() or 1,
        "enable_external_file_cache": False,
        # Give freed memory back to the system promptly instead of keeping up to 128 MiB per
        # thread in DuckDB's allocator caches: RSS then tracks the window cache.
        "allocator_background_threads": True,
        "allocator_flush_threshold": "4MB",
        "allocator_bulk_deallocation_flush_threshold": "4MB",
    }


#: DuckDB's allocator flush threshold in :func:`default_duckdb_config`, and the smallest one
#: :func:`allocator_config` chooses.
FLUSH_THRESHOLD_MIN = 4 << 20
#: The largest flush threshold :func:`allocator_config` chooses (DuckDB's own default).
FLUSH_THRESHOLD_MAX = 128 << 20


def threads_of(setting: Any) -> int:
    """DuckDB's threads from a ``threads`` setting (the machine's cores when unset or odd).

    Args:
        setting: The ``threads`` value of a DuckDB config (any type), or None.

    Returns:
        The number of threads.
    """
    try:
        threads = int(setting)
    except (TypeError, ValueError):
        threads = 0
    return threads if threads > 0 else os.cpu_count() or 1


def allocator_config(memory_bytes: int, threads: int) -> tuple[dict[str, str], int]:
    """Choose DuckDB's allocator flush thresholds for a process's memory budget.

    After each task DuckDB returns freed memory to the system once a thread holds more than
    the threshold. A small threshold keeps RSS down but makes every window read fault in
    fresh pages, so a larger budget affords a larger threshold. The threshold is a
    sixteenth of the budget per thread, between 4 MB and 128 MB, and what DuckDB may keep
    beyond the 4 MB baseline (one threshold per worker thread, plus the consumer's and the
    read-ahead thread) is returned so the budget can reserve it.

    Args:
        memory_bytes: The process's memory budget in bytes.
        threads: DuckDB's ``threads`` setting for the process.

    Returns:
        ``(settings, retained)``: the two threshold settings, and the bytes DuckDB may keep
        beyond what the 4 MB threshold keeps.
    """
    threads = max(1, int(threads))
    threshold = memory_bytes // (16 * threads)
    threshold = max(FLUSH_THRESHOLD_MIN, min(FLUSH_THRESHOLD_MAX, threshold)) >> 20 << 20
    value = f"{threshold >> 20}MB"
    settings = {
        "allocator_flush_threshold": value,
        "allocator_bulk_deallocation_flush_threshold": value,
    }
    return settings, (threshold - FLUSH_THRESHOLD_MIN) * (threads + 1)


def worker_duckdb_config(workers: int, cpus: int | None = None,
                         ram_bytes: int | None = None) -> dict[str, Any]:
    """Return the DuckDB settings of one of ``workers`` DataLoader worker processes.

    The cores are shared: each worker gets ``max(1, min(2, cpus // workers))`` threads (two
    threads let DuckDB decode a window's row groups in parallel; more workers than cores
    gain nothing from more). ``memory_limit`` is DuckDB's single-process default (80% of
    RAM) divided among the workers, so all workers together stay within it.

    Args:
        workers: Number of DataLoader workers (>= 1).
        cpus: Cores available (default ``os.cpu_count()``).
        ram_bytes: Physical memory (default from ``os.sysconf``).

    Returns:
        ``{"threads": ..., "memory_limit": ...}``.
    """
    cpus = cpus or os.cpu_count() or 1
    if ram_bytes is None:
        try:
            ram_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            ram_bytes = 8 << 30
    workers = max(1, workers)
    limit_mb = max(256, int(ram_bytes * 0.8) // workers >> 20)
    return {"threads": max(1, min(2, cpus // workers)), "memory_limit": f"{limit_mb}MB"}


def duckdb_path(path: str) -> str:
    """Return a path as DuckDB's ``read_parquet`` must be given it to read exactly that file.

    DuckDB expands ``*``, ``?`` and ``[`` as glob patterns in every path it reads, also in
    bound parameters, so ``a[1].parquet`` would read ``a1.parquet`` and ``x*.parquet`` every
    file starting with ``x``. Each such character is written as a one-character class
    (``[*]``, ``[?]``, ``[[]``), which DuckDB's glob matches literally.

    Args:
        path: An absolute file path.

    Returns:
        The path with glob characters escaped (unchanged when it holds none).

    Raises:
        SourceError: If the path holds a backslash as well as a glob character: DuckDB's
            glob then splits the path at the backslash and no escaping reaches the file.
    """
    if not GLOB_CHARS & set(path):
        return path
    if "\\" in path:
        raise SourceError(
            f"dataset file {path!r} cannot be read through DuckDB: its path holds a backslash "
            "and one of the glob characters * ? [ , a combination DuckDB's glob cannot match "
            "literally; rename the file or its directory",
            path,
        )
    return "".join(f"[{c}]" if c in GLOB_CHARS else c for c in path)


def spill_limit(directory: str) -> str:
    """Return the default ``max_temp_directory_size`` for a spill directory.

    Args:
        directory: The spill directory.

    Returns:
        The smaller of :data:`SPILL_LIMIT_BYTES` and half the free space of the file
        system holding ``directory``, as a DuckDB size (``"...MiB"``).
    """
    limit = SPILL_LIMIT_BYTES
    try:
        st = os.statvfs(directory)
        limit = min(limit, st.f_bavail * st.f_frsize // 2)
    except OSError:
        pass
    return f"{limit >> 20}MiB"


def _spill_directory() -> str:
    try:
        return lifecycle.spill_directory()
    except OSError as exc:
        root = lifecycle.spill_root()
        warnings.warn(
            f"cannot create a private spill directory under {root} ({exc.strerror or exc}); "
            f"DuckDB will not spill to disk: set {lifecycle.SPILL_ROOT_ENV} to a writable "
            "directory, or pass temp_directory in duckdb_config",
            RuntimeWarning,
            stacklevel=3,
        )
        return ""  # DuckDB's way to turn spilling off: a query beyond memory_limit fails


#: DuckDB optimizers that trust a Parquet float column's min/max statistics to cover every
#: value. Writers leave NaN out of them (as the Parquet spec says), so with these on DuckDB
#: drops NaN rows: ``isnan(x)``, ``x > 10`` (NaN sorts above every number in DuckDB) and a
#: check's ``count_if`` skip row groups holding NaN beside finite values (DuckDB issue 25521).
NAN_UNSAFE_OPTIMIZERS = ("filter_pushdown", "statistics_propagation")


def nan_safe(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``config`` with :data:`NAN_UNSAFE_OPTIMIZERS` disabled, beside any it disables already.

    For a database whose queries must see every row whatever the footers' statistics say:
    validation's checks and a view's indexing pass, which scan their shards (or row ranges)
    whole anyway. Window reads keep the optimizers: their row-number filter needs pushdown.

    Args:
        config: DuckDB settings.

    Returns:
        A new mapping.
    """
    settings = dict(config or {})
    given = str(settings.get("disabled_optimizers") or "")
    names = [n.strip() for n in given.split(",") if n.strip()]
    names += [n for n in NAN_UNSAFE_OPTIMIZERS if n not in names]
    settings["disabled_optimizers"] = ",".join(names)
    return settings


@contextlib.contextmanager
def planned_as_configured(
    con: duckdb.DuckDBPyConnection, config: Mapping[str, Any] | None
) -> Iterator[None]:
    """Within: ``con``'s :func:`nan_safe` database plans with the optimizers ``config`` keeps.

    Only for queries that read no row whatever the data (a view's schema probe over local
    rows [0, 0)): without ``filter_pushdown`` their row-number filter runs above the scan,
    which then reads the whole first shard to return nothing (1.1 s for one shard of a
    200 MB row group). On leaving, the database is NaN-safe again (``nan_safe(config)``),
    also when the query failed.

    Args:
        con: A connection to a database opened with ``nan_safe(config)``.
        config: The DuckDB settings it was opened with, before :func:`nan_safe`.
    """
    text = sqlfiles.sql_text("set_disabled_optimizers")
    given = str((config or {}).get("disabled_optimizers") or "")
    con.execute(text, {"names": given})
    try:
        yield
    finally:
        con.execute(text, {"names": nan_safe(config)["disabled_optimizers"]})


def connect(config: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB database: every DuckDB database of this package opens here.

    Unless ``config`` sets them, ``temp_directory`` is this process's private spill
    directory (:func:`lifecycle.spill_directory`: mode 0700, removed at exit) and
    ``max_temp_directory_size`` is :func:`spill_limit` of it, so spill files never land in
    the dataset or the working directory (DuckDB's own default for an in-memory database is
    ``.tmp`` in the working directory). Unless ``config`` sets ``TimeZone``, the time zone
    is UTC (``sql/pin_time_zone.sql``), so functions of a ``TIMESTAMPTZ`` (``year``,
    ``strftime``, ``+ INTERVAL``) give the same values on every machine.

    Args:
        config: DuckDB settings (e.g. :func:`default_duckdb_config`), applied as given.

    Returns:
        The new connection; the caller closes it.
    """
    settings = dict(config or {})
    if "temp_directory" not in settings:
        settings["temp_directory"] = _spill_directory()
    directory = settings["temp_directory"]
    if "max_temp_directory_size" not in settings and directory:
        settings["max_temp_directory_size"] = spill_limit(str(directory))
    con = duckdb.connect(":memory:", config=settings)
    if not any(str(name).lower() == "timezone" for name in settings):
        # without the icu extension DuckDB refuses the setting: it then computes in UTC
        with contextlib.suppress(duckdb.Error):
            con.execute(sqlfiles.sql_text("pin_time_zone"))
    return con
