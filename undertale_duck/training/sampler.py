"""``ChunkedSampler``: rank- and worker-contiguous index orders, with a locality-aware shuffle."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence, Sized
from typing import Any

import numpy as np
import numpy.typing as npt
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

from ..dataset import ParquetDataset
from ..errors import ArgumentError, MemoryBudgetError

#: Rows per shuffle unit for datasets that are not a ``ParquetDataset`` (which has windows).
DEFAULT_CHUNK = 1024

#: Indices converted to Python integers at a time while iterating.
_YIELD_STEP = 1 << 16

Order = npt.NDArray[np.int64]


# ---------------------------------------------------------------------- pure order functions
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
    owner = (np.arange(len(order)) // batch) % workers
    hints = []
    for w in range(workers):
        mine = window[owner == w]
        _, first = np.unique(mine, return_index=True)
        hints.append(mine[np.sort(first)].tolist())
    return hints


def _check_int(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArgumentError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ArgumentError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


#: Bytes per row an epoch's order takes while it is built (the rank's sequence, the
#: interleaved order, and the pieces a shuffled sequence is joined from: int64 each).
ORDER_BYTES_PER_ROW = 24


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX: no check
        return 0


def _check_order_memory(rank_rows: int, length: int) -> None:
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


# ---------------------------------------------------------------------- the sampler
class ChunkedSampler(DistributedSampler[int]):
    """A distributed sampler that keeps each rank's and each worker's reads contiguous.

    ``DistributedSampler`` strides samples over ranks, which destroys the locality that
    ``ParquetDataset``'s window cache needs. This sampler gives each rank one contiguous share
    and each DataLoader worker one contiguous part of it, delivered as ``batch``-sized blocks
    interleaved round-robin over the workers (the order the DataLoader hands batches to its
    workers in), so each worker reads its own rows in order. Without shuffling the order is
    exactly that of undertale's original ``ChunkedSampler``: each rank's share is
    ``len // ranks`` cut down to a multiple of the workers, rank ``r`` takes the ``r``-th such
    share, and the rows left over (fewer than ``ranks * workers``) are the last rows of the
    dataset. See :func:`interleave`.

    With ``shuffle=True`` the same partition runs over a shuffled sequence: the dataset's
    windows (``ParquetDataset.windows``; fixed chunks of ``chunk`` rows for other datasets)
    in a random order, with the rows of each window shuffled (of each group of ``mix``
    windows with ``mix > 1``). A worker thus reads each of its windows in one visit per
    epoch; at most the windows at the edges of a share are split between two workers. The
    rows left over are the last positions of the epoch's sequence, so a different few rows
    each epoch.
    The order depends only on ``(seed, epoch)``; call :meth:`set_epoch` each epoch.

    It subclasses ``DistributedSampler`` so that Lightning (``use_distributed_sampler=True``)
    keeps it as it is instead of partitioning its order a second time.

    The ranks and this rank come from ``torch.distributed`` when not given (rank 0 of 1
    outside a distributed run).

    Note:
        This relies on ``DataLoader`` giving batches to its workers round-robin (true of every
        torch release so far); were that to change only locality would suffer, not
        correctness.

    Args:
        dataset: Any dataset with ``__len__``.
        batch: Batch size of the DataLoader that will use the sampler.
        workers: Number of DataLoader workers (0 behaves as 1).
        ranks: Number of distributed ranks.
        rank: This process's rank.
        shuffle: Shuffle windows and the rows inside them.
        seed: Shuffle seed (the same on every rank).
        mix: With ``shuffle``, how many windows' rows are mixed together; a worker then
            holds up to ``mix`` windows at once (make sure its cache fits them).
        chunk: Rows per shuffle unit for datasets that are not a ``ParquetDataset``.

    Raises:
        ArgumentError: If an argument is out of range or the dataset has no length.
    """

    def __init__(
        self,
        dataset: Any,
        batch: int,
        workers: int,
        ranks: int | None = None,
        rank: int | None = None,
        *,
        shuffle: bool = False,
        seed: int = 0,
        mix: int = 1,
        chunk: int = DEFAULT_CHUNK,
    ) -> None:
        try:
            length = int(getattr(dataset, "epoch_size", None) or len(dataset))
        except TypeError as exc:
            raise ArgumentError(
                f"ChunkedSampler needs a dataset with a length; {type(dataset).__name__} has none"
            ) from exc
        self.batch = _check_int("batch", batch, 1)
        self.workers = _check_int("workers", workers, 0)
        world_size, world_rank = _world()
        ranks = world_size if ranks is None else _check_int("ranks", ranks, 1)
        rank = world_rank if rank is None else _check_int("rank", rank, 0)
        if rank >= ranks:
            raise ArgumentError(f"rank must be in [0, {ranks - 1}] for ranks={ranks}, got {rank}")
        if not isinstance(shuffle, bool):
            raise ArgumentError(f"shuffle must be True or False, got {shuffle!r}")
        self.seed = _check_int("seed", seed, 0)
        self.mix = _check_int("mix", mix, 1)
        self.chunk = _check_int("chunk", chunk, 1)
        self.dataset = dataset
        self._sized: Sized = dataset
        self.length = length
        self.num_replicas = ranks
        self.rank = rank
        self.shuffle = shuffle
        self.drop_last = True
        self.epoch = 0
        #: Samples of this epoch consumed so far (kept up to date by ``load()``'s loader).
        self.consumed = 0
        self._resume = 0  # samples of ``epoch`` to skip on the next iteration
        self._units: list[tuple[int, int]] | None = None
        self._memo: tuple[int, Order] | None = None  # (epoch, order) of a shuffled epoch
        self.num_samples, _ = shares(length, self.workers, ranks)
        self.total_size = self.num_samples * ranks
        _check_order_memory(self.num_samples, length)

    @property
    def ranks(self) -> int:
        """Number of distributed ranks (``num_replicas``)."""
        return self.num_replicas

    @property
    def resume_at(self) -> int:
        """Samples of the current epoch the next iteration skips (after ``load_state_dict``)."""
        return self._resume

    def __len__(self) -> int:
        """Number of indices one whole epoch yields on this rank."""
        return self.num_samples

    def order(self, epoch: int | None = None) -> Order:
        """Return this rank's whole order for an epoch (no resume offset applied).

        Args:
            epoch: The epoch; the sampler's current epoch by default.

        Returns:
            Dataset indices in the order they are yielded.
        """
        epoch = self.epoch if epoch is None else epoch
        rank_share, _ = shares(self.length, self.workers, self.num_replicas)
        first = self.rank * rank_share
        mixture = callable(getattr(self._sized, "epoch_units", None))
        if not self.shuffle and not mixture:
            sequence = np.arange(first, first + rank_share, dtype=np.int64)
        elif self._memo is not None and self._memo[0] == epoch:
            return self._memo[1]
        elif mixture:  # a Mixture: the epoch's rows (with repeats) come as ranges
            units = self._sized.epoch_units(self.seed, epoch)  # type: ignore[attr-defined]
            if self.shuffle:
                sequence = shuffled_sequence(
                    units, self.seed, epoch, self.mix, first, first + rank_share
                )
            else:
                rows = [np.arange(a, b, dtype=np.int64) for a, b in units]
                whole = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
                sequence = whole[first : first + rank_share]
        else:
            if self._units is None:
                self._units = units_of(self._sized, self.chunk)
            sequence = shuffled_sequence(
                self._units, self.seed, epoch, self.mix, first, first + rank_share
            )
        # ``sequence`` is this rank's share only: partition it over the workers
        order = interleave(sequence, self.batch, self.workers, 1, 0)
        if self.shuffle or mixture:
            order.flags.writeable = False
            self._memo = (epoch, order)
        return order

    def __iter__(self) -> Iterator[int]:
        """Yield this epoch's indices, skipping those consumed before a restored checkpoint."""
        start, self._resume = self._resume, 0
        self.consumed = start
        order = self.order()[start:]
        return _yield(order)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next iteration yields.

        Setting the epoch a restored state is in keeps its resume position; any other epoch
        starts from its beginning.

        Args:
            epoch: Epoch number (>= 0).

        Raises:
            ArgumentError: If ``epoch`` is not an integer >= 0.
        """
        epoch = _check_int("epoch", epoch, 0)
        if epoch != self.epoch:
            self.epoch = epoch
            self.consumed = 0
            self._resume = 0

    # ------------------------------------------------------------------ resume
    def _fingerprint(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "batch": self.batch,
            "workers": max(self.workers, 1),
            "ranks": self.num_replicas,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "mix": self.mix,
            "chunk": self.chunk,
            "data": getattr(self.dataset, "fingerprint", None),
        }

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Return the position in the epoch, to resume from with :meth:`load_state_dict`.

        Args:
            consumed: Samples of this epoch already used by training; by default
                :attr:`consumed`, which the loader built by ``load()`` keeps up to date
                (counting batches handed to the training loop, not batches prefetched by
                workers). Give it when driving the sampler with another loader.

        Returns:
            ``{"epoch", "consumed", ...}`` plus the settings the order depends on.
        """
        done = self.consumed if consumed is None else _check_int("consumed", consumed, 0)
        return {"epoch": self.epoch, "consumed": min(done, len(self)), **self._fingerprint()}

    def load_state_dict(self, state: dict[str, Any], *, check_data: bool = True) -> None:
        """Resume: the next iteration yields exactly the samples of the saved epoch not yet used.

        A state saved at the end of an epoch resumes at the start of the next one.

        Args:
            state: A dict from :meth:`state_dict`.
            check_data: Refuse a state saved over other data: its ``data`` fingerprint (the
                dataset's ``fingerprint``: view query, columns, every shard's identity)
                differs from this dataset's. False resumes at the saved position anyway.

        Raises:
            ArgumentError: If the state is malformed or was saved by a sampler with different
                settings (length, batch, workers, ranks, shuffle, seed, mix, chunk), whose
                order would differ, or over other data (unless ``check_data`` is False).
        """
        if not isinstance(state, dict) or "epoch" not in state or "consumed" not in state:
            raise ArgumentError("a ChunkedSampler state must be a dict from state_dict()")
        mine = self._fingerprint()
        saved_data = state.get("data")
        if check_data and saved_data is not None and saved_data != mine["data"]:
            raise ArgumentError(
                f"cannot resume: the checkpoint was saved over other data (dataset fingerprint "
                f"{saved_data}, now {mine['data']}): a shard, the columns or the view's query "
                "changed, so the saved position would point into different rows. Resume with "
                "check_data=False (load(..., check_data=False) or DataModule(..., "
                "check_data=False)) to continue at that position anyway"
            )
        mine.pop("data")
        different = [
            f"{key}: saved {state[key]!r}, now {mine[key]!r}"
            for key in mine
            if key in state and state[key] != mine[key]
        ]
        if different:
            raise ArgumentError(
                "cannot resume: the saved sampler state was made with other settings ("
                + "; ".join(different)
                + "); build the sampler with the saved settings"
            )
        epoch = _check_int("epoch", state["epoch"], 0)
        consumed = _check_int("consumed", state["consumed"], 0)
        if consumed >= len(self) and len(self) > 0:
            epoch, consumed = epoch + 1, 0
        self.epoch = epoch
        self.consumed = consumed
        self._resume = consumed


def _yield(order: Order) -> Iterator[int]:
    for start in range(0, len(order), _YIELD_STEP):
        yield from order[start : start + _YIELD_STEP].tolist()
