"""The Arrow memory pool a process allocates from: one that returns memory at small budgets."""

from __future__ import annotations

import os
import threading

import pyarrow as pa

from ...common.sizes import MIB

#: Below this cache budget (per process) Arrow's freed memory is handed back at once.
TIGHT_BUDGET = 256 * MIB
#: The environment variable with which pyarrow users choose their pool: theirs wins.
POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"

_lock = threading.Lock()


def fit_arrow_pool(budget: int) -> str:
    """Make pyarrow return freed memory to the system at once when ``budget`` is small.

    pyarrow's default allocator (mimalloc in the Linux and macOS wheels) keeps the pages
    of freed buffers for later allocations: over a first epoch it held 40-60 MiB that no
    live buffer used, which fits in a budget of gigabytes but not in one of 64 MiB. Below
    :data:`TIGHT_BUDGET` the process's default pool becomes pyarrow's jemalloc pool with a
    decay of 0 ms (freed pages go back at once; measured: 41 MiB over the fixed footprint
    at ``memory=64`` where mimalloc peaked at 97-117 MiB). The switch is process-wide and
    stays (buffers already allocated are freed to the pool that made them). A pool chosen
    with ``ARROW_DEFAULT_MEMORY_POOL`` is left alone, and so is a pyarrow built without
    jemalloc.

    Args:
        budget: The process's cache budget in bytes (0: nothing is cached).

    Returns:
        The name of the default pool's allocator after the call.
    """
    with _lock:
        pool = pa.default_memory_pool()
        if budget >= TIGHT_BUDGET or os.environ.get(POOL_ENV):
            return str(pool.backend_name)
        if pool.backend_name != "jemalloc":
            try:
                pool = pa.jemalloc_memory_pool()
            except NotImplementedError:  # a pyarrow built without jemalloc
                return str(pool.backend_name)
            pa.set_memory_pool(pool)
        pa.jemalloc_set_decay_ms(0)
        return str(pool.backend_name)


__all__ = ["POOL_ENV", "TIGHT_BUDGET", "fit_arrow_pool"]
