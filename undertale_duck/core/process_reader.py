"""Build a dataset's window reader in this process: DuckDB settings, budget, cache, disk tier."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .access import AccessMonitor
from .arguments import bytes_setting, read_limit
from .cache import WindowCache
from .connection import Connection
from .disk_tier import DiskTier, TieredCache, window_keys
from .duck import allocator_config, worker_duckdb_config
from .reader import WindowReader

if TYPE_CHECKING:
    from .dataset import ShardDataset


def build_reader(ds: ShardDataset) -> tuple[WindowReader, AccessMonitor | None]:
    """The window reader of ``ds`` for this process, and its access monitor.

    In a DataLoader worker, DuckDB's threads and memory are shared among the workers
    (settings the user gave win); DuckDB's allocator keeps what the budget allows; its
    ``memory_limit`` backs the read limit up; with a disk tier the cache is a
    :class:`TieredCache`, else the uniform-random-access monitor watches the cache.

    Args:
        ds: The dataset, opened.

    Returns:
        The reader (its order hint set if the dataset has one), and the monitor (None with
        a disk tier or no windows).
    """
    config = dict(ds.duckdb_config)
    info = torch.utils.data.get_worker_info()
    if info is not None:  # a DataLoader worker process: share the cores and memory
        tuned = worker_duckdb_config(info.num_workers)
        config.update({k: v for k, v in tuned.items() if k not in ds._user_config})
    retained = 0
    if not ds._user_config & {
        "allocator_flush_threshold", "allocator_bulk_deallocation_flush_threshold"
    }:
        allocator, retained = allocator_config(ds.memory_bytes, config["threads"])
        config.update(allocator)
    limit = read_limit(ds.memory_bytes)
    if limit and "memory_limit" not in ds._user_config:
        # A backstop for pages that decompress to far more than the footer records
        # (the footer check cannot see them): DuckDB stops such a read. Twice the
        # limit, as an honest read of row groups within the limit holds up to
        # about twice their size (compressed and decompressed pages).
        ceiling = bytes_setting(config.get("memory_limit")) or 2 * limit
        config["memory_limit"] = f"{min(2 * limit, ceiling) >> 20}MiB"
    remote = ds.source.store
    cache = WindowCache(ds.memory_bytes)
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
        )
        cache = TieredCache(ds.memory_bytes, tier)
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
        ),
        read_ahead=ds.read_ahead,
        read_depth=ds.read_depth,
        retained=retained,
        view=ds.view,
        schema=None if ds.view is None else ds.view.schema,
        read_limit=limit,
        threads=int(config.get("threads", 1)) > 1,
    )
    if ds._order:
        reader.set_order(ds._order)
    monitor = None
    if not isinstance(cache, TieredCache) and ds.windows:
        monitor = AccessMonitor(
            len(ds) / len(ds.windows), ds.memory, reader.planned_bytes / (1 << 20)
        )
    return reader, monitor


__all__ = ["build_reader"]
