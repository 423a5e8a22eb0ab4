"""Index orders of ``ChunkedSampler``: shares, worker interleaving, the locality-aware shuffle."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence, Sized

import numpy as np
import numpy.typing as npt

from ..dataset import ParquetDataset
from ..errors import MemoryBudgetError

#: Rows per shuffle unit for datasets that are not a ``ParquetDataset`` (which has windows).
DEFAULT_CHUNK = 1024

Order = npt.NDArray[np.int64]


def shares(length: int, workers: int, ranks: int) -> tuple[int, int]:
    """Return the samples each rank and each of its workers gets, as undertale's original does.

    The rank share is ``length // ranks`` cut down to a multiple of the workers; the rows
    that do not fit are the last ones of the sequence (never rows inside a rank's share).

    Args:
        length: Length of the dataset.
        workers: DataLoader workers per rank (0 counts as 1).
        ranks: Number of distributed ranks.

    Returns:
        ``(rank share, worker share)``: ``worker share = (length // ranks) // workers`` and
        ``rank share = worker share * workers``.
    """
    workers = max(workers, 1)
    worker_share = length // ranks // workers
    return worker_share * workers, worker_share


def interleave(sequence: Order, batch: int, workers: int, ranks: int, rank: int) -> Order:
    """Partition a sequence over ranks and workers, and interleave the workers' blocks.

    This is the order of undertale's original ``ChunkedSampler``. With ``(R, L) =``
    :func:`shares` ``(len(sequence), workers, ranks)``, rank ``rank`` takes the contiguous
    positions ``[rank * R, (rank + 1) * R)`` of ``sequence``, so the positions dropped (fewer
    than ``ranks * workers``) are the last ones; inside its share worker ``w`` takes the
    contiguous positions ``[w * L, (w + 1) * L)``. Each worker's share is cut into
    ``batch``-sized blocks (the last one shorter when ``batch`` does not divide ``L``), and
    the blocks are emitted round-robin: block 0 of worker 0, block 0 of worker 1, ...,
    block 1 of worker 0, ... Every worker has the same number of blocks, so with a
    DataLoader of ``batch_size=batch`` and ``workers`` workers, worker ``w`` receives the
    blocks at positions ``w, w + workers, w + 2 * workers, ...``: its own contiguous share.
    Only when ``batch`` does not divide ``L`` do the workers' short last blocks, emitted
    together at the end, get cut into batches that may cross from one worker's share into
    the next (no sample is lost or repeated).

    Args:
        sequence: The items to partition (positions ``0..len-1`` for the plain order).
        batch: Batch size.
        workers: DataLoader workers per rank (0 counts as 1).
        ranks: Number of ranks.
        rank: This rank.

    Returns:
        This rank's items in delivery order, ``R`` of them.
    """
    workers = max(workers, 1)
    rank_share, worker_share = shares(len(sequence), workers, ranks)
    mine = sequence[rank * rank_share : (rank + 1) * rank_share]
    per_worker = mine.reshape(workers, worker_share)
    # a batch beyond a worker's share is one block of it (a restored state's 2**62 too)
    batch = min(batch, max(worker_share, 1))
    full = worker_share // batch
    head = per_worker[:, : full * batch].reshape(workers, full, batch).transpose(1, 0, 2)
    tail = per_worker[:, full * batch :]
    return np.ascontiguousarray(np.concatenate([head.reshape(-1), tail.reshape(-1)]))


def units_of(dataset: Sized, chunk: int) -> list[tuple[int, int]]:
    """Return the shuffle units of a dataset: its windows, or fixed-size chunks.

    Args:
        dataset: A ``ParquetDataset`` (its row-group windows are the units) or any sized
            dataset (cut into chunks of ``chunk`` rows).
        chunk: Rows per unit when the dataset has no windows.

    Returns:
        ``(start, stop)`` global row ranges, in order, covering every row once.
    """
    if isinstance(dataset, ParquetDataset):
        return [(w.offset, w.offset + w.rows) for w in dataset.windows]
    length = len(dataset)
    return [(start, min(start + chunk, length)) for start in range(0, length, chunk)]


def units_digest(units: Sequence[tuple[int, int]]) -> str:
    """Return a short hash of shuffle units: the shuffled sequence is a function of them.

    A saved position points into the sequence the units gave; the same dataset cut into
    other windows (``window_bytes=``, or ``memory=`` which sets its default) is shuffled
    into another sequence, so a resumed state compares this hash.

    Args:
        units: ``(start, stop)`` row ranges, as :func:`units_of` returns them.

    Returns:
        16 hex digits.
    """
    bounds = np.asarray(units, dtype=np.int64).reshape(-1)
    return hashlib.sha256(bounds.tobytes()).hexdigest()[:16]


def shuffled_sequence(
    units: Sequence[tuple[int, int]],
    seed: int,
    epoch: int,
    mix: int,
    start: int = 0,
    stop: int | None = None,
) -> Order:
    """Return (part of) the epoch's shuffled row sequence.

    The units are permuted with a generator seeded by ``(seed, epoch)``; consecutive groups of
    ``mix`` units of that permutation have their rows shuffled together (``mix=1``: each unit
    on its own), each group with its own generator seeded by ``(seed, epoch, group)``, so any
    part of the sequence is built without the rest.

    Args:
        units: ``(start, stop)`` row ranges.
        seed: Shuffle seed.
        epoch: Epoch number.
        mix: Units whose rows are mixed together.
        start: First position of the sequence to build.
        stop: End position (exclusive) to build; the end of the sequence by default.

    Returns:
        Positions ``start..stop-1`` of the sequence: row indices, each unit's rows adjacent
        (each group's, with ``mix > 1``).
    """
    permutation = np.random.default_rng([seed, epoch]).permutation(len(units))
    sizes = np.array([b - a for a, b in units], dtype=np.int64)[permutation]
    firsts = np.arange(0, len(units), mix)
    group_sizes = np.add.reduceat(sizes, firsts) if len(units) else sizes
    ends = np.cumsum(group_sizes)
    begins = ends - group_sizes
    stop = int(ends[-1]) if stop is None and len(ends) else (stop or 0)
    pieces: list[Order] = [np.zeros(0, dtype=np.int64)]
    for group in np.flatnonzero((ends > start) & (begins < stop)).tolist():
        members = permutation[firsts[group] : firsts[group] + mix]
        rows = np.concatenate([np.arange(*units[u], dtype=np.int64) for u in members])
        np.random.default_rng([seed, epoch, group]).shuffle(rows)
        begin = int(begins[group])
        pieces.append(rows[max(start - begin, 0) : stop - begin])
    return np.concatenate(pieces)


def worker_windows(
    order: Order, starts: Sequence[int], batch: int, workers: int
) -> list[list[int]]:
    """Return the windows each DataLoader worker will read, in the order it first reads them.

    The DataLoader cuts ``order`` into ``batch``-sized batches and gives batch ``k`` to worker
    ``k % workers``. This is the read-ahead hint for ``ParquetDataset.prefetch``.

    Args:
        order: Indices in delivery order.
        starts: Global start of each window, ascending.
        batch: Batch size.
        workers: DataLoader workers (0 counts as 1).

    Returns:
        For each worker, window positions in order of first use.
    """
    workers = max(workers, 1)
    window = np.searchsorted(np.asarray(starts, dtype=np.int64), order, side="right") - 1
    owner = None if workers == 1 else (np.arange(len(order)) // batch) % workers
    hints = []
    for w in range(workers):
        mine = window if owner is None else window[owner == w]
        # a locality-aware order reads each window in runs: the first index of each run is
        # all the unique below needs to see (a sort of runs, not of every row)
        if len(mine) > 1:
            mine = mine[np.flatnonzero(np.r_[True, mine[1:] != mine[:-1]])]
        _, first = np.unique(mine, return_index=True)
        hints.append(mine[np.sort(first)].tolist())
    return hints


#: Bytes per row an epoch's order takes while it is built (the rank's sequence, the
#: interleaved order, and the pieces a shuffled sequence is joined from: int64 each).
ORDER_BYTES_PER_ROW = 24


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX: no check
        return 0


def check_order_memory(rank_rows: int, length: int) -> None:
    """Refuse a rank share whose order would not fit in half of this machine's memory.

    The order of an epoch is held as an array (8 bytes per row, about three times that while
    it is built); a footer claiming billions of rows would otherwise get the process killed
    for memory instead of an error.
    """
    need = rank_rows * ORDER_BYTES_PER_ROW
    memory = _physical_memory()
    if memory and need > memory // 2:
        raise MemoryBudgetError(
            f"ChunkedSampler holds each rank's order of an epoch in memory (about "
            f"{ORDER_BYTES_PER_ROW} bytes per row while it is built): this rank's "
            f"{rank_rows:,} of {length:,} rows would need {need / 2**30:.3g} GiB, more than half "
            f"of this machine's {memory / 2**30:.3g} GiB. Check the dataset's row count (a "
            "footer may claim rows its file cannot hold), use more ranks, or a view that "
            "selects fewer rows"
        )


# ---------------------------------------------------------------------- topologies
def rank_bounds(
    length: int, workers: int, ranks: int, rank: int, drop_last: bool
) -> tuple[int, int]:
    """Return the positions ``[first, stop)`` of a sequence that one rank takes.

    With ``drop_last`` it is undertale's original rule (:func:`shares`: equal contiguous
    shares, each a multiple of the workers, the last positions dropped). Without it every
    position goes to exactly one rank: contiguous shares whose sizes differ by at most one
    (the first ``length % ranks`` ranks take one more), as evaluation needs.

    Args:
        length: Length of the sequence.
        workers: DataLoader workers per rank (0 counts as 1).
        ranks: Number of ranks.
        rank: This rank.
        drop_last: Drop the positions that do not divide evenly.

    Returns:
        ``(first, stop)``.
    """
    if drop_last:
        share, _ = shares(length, workers, ranks)
        return rank * share, (rank + 1) * share
    base, extra = divmod(length, ranks)
    first = rank * base + min(rank, extra)
    return first, first + base + (1 if rank < extra else 0)


def deliver(sequence: Order, batch: int, workers: int) -> Order:
    """Return one rank's part of a sequence in delivery order (see :func:`interleave`).

    The workers take equal contiguous parts of the first ``len - len % workers`` positions,
    interleaved block by block; the few positions left over (only without ``drop_last``)
    come last, in order.

    Args:
        sequence: The rank's positions of the epoch's sequence.
        batch: Batch size.
        workers: DataLoader workers (0 counts as 1).

    Returns:
        The same items in delivery order.
    """
    workers = max(workers, 1)
    even = len(sequence) - len(sequence) % workers
    head = interleave(sequence[:even], batch, workers, 1, 0)
    if even == len(sequence):
        return head
    return np.ascontiguousarray(np.concatenate([head, sequence[even:]]))


def consumed_positions(
    length: int, batch: int, workers: int, ranks: int, drop_last: bool, consumed: int
) -> Order:
    """Return which positions of a sequence the ranks of a topology consumed, as a mask.

    Each rank of the topology received the first ``consumed`` items of its delivery order
    (all of them if it had fewer): the set is a pure function of the topology and the count,
    so one rank's saved state tells what every rank consumed.

    Args:
        length: Length of the sequence the topology partitioned.
        batch: Its batch size.
        workers: Its workers per rank.
        ranks: Its number of ranks.
        drop_last: Its tail rule.
        consumed: Items each rank consumed.

    Returns:
        A boolean array of ``length``: True where the position was consumed.
    """
    seen = np.zeros(length, dtype=bool)
    for rank in range(min(ranks, length)):  # ranks past the length have no positions
        first, stop = rank_bounds(length, workers, ranks, rank, drop_last)
        order = deliver(np.arange(first, stop, dtype=np.int64), batch, workers)
        seen[order[:consumed]] = True
    return seen
