"""The Arrow memory pools: one that returns memory at small budgets, one for our reads."""

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
        if budget >= TIGHT_BUDGET:
            return str(pool.backend_name)
        jemalloc = _our_jemalloc()
        if jemalloc is None:
            return str(pool.backend_name)
        if pool.backend_name != "jemalloc":
            pa.set_memory_pool(jemalloc)
        pa.jemalloc_set_decay_ms(0)
        return str(jemalloc.backend_name)


def _our_jemalloc() -> pa.MemoryPool | None:
    """The jemalloc pool for us to use; None if the user chose a pool or pyarrow has none."""
    if os.environ.get(POOL_ENV):
        return None
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return None


def read_pool() -> pa.MemoryPool:
    """The pool our reads decode windows into and hold them in.

    pyarrow's jemalloc pool rather than the default mimalloc one. In pyarrow's wheels
    mimalloc reserves its arenas with ``MADV_HUGEPAGE`` and hands freed pages back to the
    system between batches, so decoding refaults (and the kernel zeroes) fresh 2 MiB pages
    over and over; how often depends on timing, which made a first epoch erratic: 17-190k
    rows/s over repeated runs of the same process on a quiet machine, up to 84 us of CPU per
    row, 42% of it in the kernel's page clearing (decision 0022). With decoding and the
    held copies in jemalloc, 4 KiB pages and reuse between batches: 139-181k rows/s at
    9.7-12.4 us. A pool chosen with ``ARROW_DEFAULT_MEMORY_POOL`` is used as it is, and so
    is the default pool of a pyarrow built without jemalloc; the process's default pool is
    not changed (below :data:`TIGHT_BUDGET`, :func:`fit_arrow_pool` does that).
    """
    return _our_jemalloc() or pa.default_memory_pool()


__all__ = ["POOL_ENV", "TIGHT_BUDGET", "fit_arrow_pool", "read_pool"]
