"""Build a dataset's window reader in this process: DuckDB settings, budget, cache, disk tier."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import torch

from ..read import AccessMonitor, DiskTier, TieredCache, WindowCache, WindowReader, window_keys
from ..runtime import Connection, allocator_config, fit_arrow_pool, worker_duckdb_config
from ..source import Source, Window
from ..views import IndexedView
from .arguments import bytes_setting, read_limit, worker_budget


@dataclass(frozen=True)
class ReaderSettings:
    """What a window reader is built from: a frozen copy of an opened dataset's settings.

    Attributes:
        source: The dataset's shards.
        windows: The window plan (a view's windows for a view).
        schema: The dataset's row schema.
        columns: The columns read.
        rows: The dataset's length.
        view: The indexed view, or None for a plain dataset.
        duckdb_config: DuckDB settings (defaults and the user's).
        user_config: Names of the settings the user gave (they win over tuning).
        memory: The memory budget in MiB.
        memory_bytes: The memory budget in bytes.
        memory_shared: Whether the budget was left at its default (then shared between a
            process's DataLoader workers, see :func:`arguments.worker_budget`).
        disk: The disk tier's size in MiB (0: none).
        disk_dir: The disk tier's checked directory, or None.
        read_ahead: Whether read-ahead is on.
        read_depth: How many windows read-ahead reads at once (None: its default).
        order: The window order hint (positions of ``windows``), or None.
    """

    source: Source
    windows: Sequence[Window]
    schema: pa.Schema
    columns: Sequence[str]
    rows: int
    view: IndexedView | None
    duckdb_config: Mapping[str, Any]
    user_config: frozenset[str]
    memory: float
    memory_bytes: int
    memory_shared: bool
    disk: float
    disk_dir: str | None
    read_ahead: bool
    read_depth: int | None
    order: Sequence[int] | None


def process_budget(memory_bytes: int) -> int:
    """This process's share of a default budget: divided between DataLoader workers.

    Args:
        memory_bytes: The dataset's whole budget in bytes.

    Returns:
        The budget in bytes (all of it outside a DataLoader worker).
    """
    info = torch.utils.data.get_worker_info()
    return memory_bytes if info is None else worker_budget(memory_bytes, info.num_workers)


def build_reader(ds: ReaderSettings) -> tuple[WindowReader, AccessMonitor | None]:
    """The window reader of ``ds`` for this process, and its access monitor.

    In a DataLoader worker, DuckDB's threads and memory are shared among the workers
    (settings the user gave win), and so is the default memory budget (a budget given is
    each process's own); DuckDB's allocator keeps what the budget allows; its
    ``memory_limit`` backs the read limit up; with a disk tier the cache is a
    :class:`TieredCache`, else the uniform-random-access monitor watches the cache.

    Args:
        ds: The opened dataset's settings.

    Returns:
        The reader (its order hint set if the dataset has one), and the monitor (None with
        a disk tier or no windows).
    """
    # windows come back in source row order only with this on (read_window.sql and a
    # view's *_scan.sql do not sort), whatever duckdb_config says
    config = {**ds.duckdb_config, "preserve_insertion_order": True}
    info = torch.utils.data.get_worker_info()
    budget = ds.memory_bytes  # this process's share of the budget
    if info is not None:  # a DataLoader worker process: share the cores and memory
        tuned = worker_duckdb_config(info.num_workers)
        config.update({k: v for k, v in tuned.items() if k not in ds.user_config})
        if ds.memory_shared:
            budget = process_budget(ds.memory_bytes)
            fit_arrow_pool(budget)
    retained = 0
    if not ds.user_config & {
        "allocator_flush_threshold", "allocator_bulk_deallocation_flush_threshold"
    }:
        allocator, retained = allocator_config(budget, config["threads"])
        config.update(allocator)
    limit = read_limit(ds.memory_bytes)
    if limit and "memory_limit" not in ds.user_config:
        # A backstop for pages that decompress to far more than the footer records
        # (the footer check cannot see them): DuckDB stops such a read. Twice the
        # limit, as an honest read of row groups within the limit holds up to
        # about twice their size (compressed and decompressed pages).
        ceiling = bytes_setting(config.get("memory_limit")) or 2 * limit
        config["memory_limit"] = f"{min(2 * limit, ceiling) >> 20}MiB"
    remote = ds.source.store
    cache = WindowCache(budget)
    if ds.disk_dir is not None and ds.disk:
        view = None if ds.view is None else [
            ds.view.query.sql, [side.fingerprint for side in ds.view.sides]
        ]
        tier = DiskTier(
            ds.disk_dir,
            int(ds.disk * (1 << 20)),
            window_keys(ds.source, ds.windows, ds.schema, view),
            ds.source,
            ds.windows,
            ds.columns,
            check=None if ds.view is None else ds.view.check_unchanged,
        )
        cache = TieredCache(budget, tier)
    reader = WindowReader(
        ds.source,
        ds.windows,
        cache,
        # a remote source's windows are read from cached copies; the store's
        # filesystem serves validation, and the dataset view a view= query needs
        Connection(
            ds.source.paths,
            ds.source.columns,
            config,
            None if ds.view is None else ds.view.setup,
            filesystem=None if remote is None else remote.filesystem,
            view=remote is None or ds.view is not None,
            convert=ds.source.converted,
        ),
        read_ahead=ds.read_ahead,
        read_depth=ds.read_depth,
        retained=retained,
        view=ds.view,
        schema=None if ds.view is None else ds.view.schema,
        read_limit=limit,
        threads=int(config.get("threads", 1)) > 1,
    )
    if ds.order:
        reader.set_order(ds.order)
    monitor = None
    if not isinstance(cache, TieredCache) and ds.windows:
        monitor = AccessMonitor(
            ds.rows / len(ds.windows), budget / (1 << 20), reader.planned_bytes / (1 << 20)
        )
    return reader, monitor


__all__ = ["ReaderSettings", "build_reader", "process_budget"]
