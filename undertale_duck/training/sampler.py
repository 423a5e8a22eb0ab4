"""``ChunkedSampler``: rank- and worker-contiguous index orders, with a locality-aware shuffle."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

from ..errors import ArgumentError
from .order import (
    DEFAULT_CHUNK,
    Order,
    check_order_memory,
    interleave,
    shares,
    shuffled_sequence,
    units_of,
)
from .resume_state import STATE_VERSION, check_sampler_state

#: Indices converted to Python integers at a time while iterating.
_YIELD_STEP = 1 << 16


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
        check_order_memory(self.num_samples, length)

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
        return {"version": STATE_VERSION, "epoch": self.epoch,
                "consumed": min(done, len(self)), **self._fingerprint()}

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
        state = check_sampler_state(state)  # one schema, one clear error (resume_state.py)
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
