"""``ChunkedSampler``: rank- and worker-contiguous index orders, with a locality-aware shuffle."""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import math
import operator
import os
import warnings
import weakref
from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

from ..common.numbers import check_int
from ..dataset import ParquetDataset
from ..errors import ArgumentError, EmptyEpochWarning
from .order import (
    DEFAULT_CHUNK,
    Order,
    check_order_memory,
    consumed_positions,
    deliver,
    rank_bounds,
    shuffled_sequence,
    units_digest,
    units_of,
    worker_windows,
)
from .resume_state import STATE_VERSION, check_sampler_state

_log = logging.getLogger(__name__)

#: Settings that define an epoch's sequence; a state saved with others cannot resume.
#: ``units`` hashes the shuffle units (the dataset's windows) of a shuffled sequence; a state
#: saved before it existed has none, and is not checked for it.
_SEQUENCE = ("length", "shuffle", "seed", "mix", "chunk", "units")
#: Settings that only partition the sequence; a state saved with others resumes elastically.
_TOPOLOGY = ("ranks", "workers", "batch", "drop_last")

_UNITS_CHANGED = (
    "the dataset's windows (its shuffle units): they differ from the saved run's; open the "
    "dataset with the window_bytes= it had (memory= sets the default window size)"
)

#: Indices converted to Python integers at a time while iterating.
_YIELD_STEP = 1 << 16


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
    dataset. See :func:`interleave`. With ``drop_last=False`` (evaluation) no row is left
    over: the shares differ by at most one row and every row goes to exactly one rank.

    With ``shuffle=True`` the same partition runs over a shuffled sequence: the dataset's
    windows (``ParquetDataset.windows``; fixed chunks of ``chunk`` rows for other datasets)
    in a random order, with the rows of each window shuffled (of each group of ``mix``
    windows with ``mix > 1``). A worker thus reads each of its windows in one visit per
    epoch; at most the windows at the edges of a share are split between two workers. The
    rows left over are the last positions of the epoch's sequence, so a different few rows
    each epoch.
    The order depends only on ``(seed, epoch)``; call :meth:`set_epoch` each epoch.
    Built for no workers (``workers`` 0 or 1), each pass tells a ``ParquetDataset`` the
    order of its windows and rows (``prefetch(lazy=True, rows=...)``), so a plain
    ``DataLoader``'s shuffled epoch reads the next window ahead and gathers its small
    batches a few at a time, as ``load()`` does. Built for workers, it hands the dataset a
    plan (``prefetch_in_workers``) by which each forked DataLoader worker declares its own
    share of a shuffled pass at its first read.

    The epoch's sequence does not depend on the ranks, workers or batch size, which only
    cut it into shares; that is what lets :meth:`load_state_dict` resume a state saved with
    another topology (docs/resume.md).

    It subclasses ``DistributedSampler`` so that Lightning (``use_distributed_sampler=True``)
    keeps it as it is instead of partitioning its order a second time.

    The ranks and this rank come from ``torch.distributed`` when not given (rank 0 of 1
    outside a distributed run; ``ranks > 1`` without ``rank`` there is rank 0, with a
    warning).

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
        drop_last: True (training): undertale's original rule, equal shares and the last
            few rows of the sequence left out. False (evaluation): every row exactly once,
            so ranks may get one row, and so one batch, more than others.

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
        drop_last: bool = True,
    ) -> None:
        try:
            # a Mixture's epoch (0 is an epoch too): only with the epoch_units its sequence
            # comes from; another dataset's own epoch_size would serve other rows than len()
            mixture = callable(getattr(dataset, "epoch_units", None))
            length = int(dataset.epoch_size if mixture else len(dataset))
        except TypeError as exc:
            raise ArgumentError(
                f"ChunkedSampler needs a dataset with a length; {type(dataset).__name__} has none"
            ) from exc
        self.batch = check_int("batch", batch, 1)
        self.workers = check_int("workers", workers, 0)
        world_size, world_rank = _world()
        ranks = world_size if ranks is None else check_int("ranks", ranks, 1)
        if rank is None and ranks > world_size == 1:
            # undertale's original dataset module takes rank 0 here, as written; in several
            # processes each would read rank 0's share (the same rows trained once per
            # process, the other shares never): said, not refused
            warnings.warn(
                f"ranks={ranks} without rank=, and torch.distributed gives no rank here (not "
                "initialized, or a world of 1): this process takes rank 0's share. If several "
                f"processes train, give each its rank= (0 to {ranks - 1}), or initialize "
                "torch.distributed first",
                UserWarning,
                stacklevel=2,
            )
        rank = world_rank if rank is None else check_int("rank", rank, 0)
        if rank >= ranks:
            raise ArgumentError(f"rank must be in [0, {ranks - 1}] for ranks={ranks}, got {rank}")
        for name, flag in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(flag, bool):
                raise ArgumentError(f"{name} must be True or False, got {flag!r}")
        self.seed = check_int("seed", seed, 0)
        self.mix = check_int("mix", mix, 1)
        self.chunk = check_int("chunk", chunk, 1)
        self.dataset = dataset
        self._sized: Sized = dataset
        self.length = length
        self.num_replicas = ranks
        self.rank = rank
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        #: When True, :meth:`set_epoch` changes nothing: every iteration serves the same
        #: rows (a DataModule's evaluation loaders, whose Mixture would otherwise take
        #: other rows of a downsampled stream each epoch).
        self.fixed_epoch = False
        #: Samples of this epoch consumed so far (kept up to date by ``load()``'s loader).
        self.consumed = 0
        #: Whether a driver (``load()``'s loader) counts :attr:`consumed` batch by batch.
        self.counted_by_loader = False
        self._live: _Pass | None = None  # the latest iteration, whose position state_dict reports
        self._resume = 0  # samples of ``epoch`` to skip on the next iteration
        # Earlier parts of the current epoch run with other topologies (elastic resume): each
        # {ranks, workers, batch, drop_last, consumed}; their rows are out of this epoch's rest.
        self._before: list[dict[str, Any]] = []
        # Batches a trainer counts into this epoch before its first one (see ``carried``).
        self._carried = 0
        # The epoch a restored state ended (load_state_dict moved on to the next): setting it
        # again keeps it at its end rather than serving it a second time.
        self._ended: int | None = None
        #: A state loaded at the end of its epoch, given back while nothing is served since
        #: (:meth:`_state`).
        self._end_state: dict[str, Any] | None = None
        # The epoch set_epoch() was last given (None: never): torchdata's StatefulDataLoader
        # restores its state when iterated, after a loop has set the epoch (:class:`_Pass`).
        self._asked: int | None = None
        self._units: list[tuple[int, int]] | None = None
        self._data: tuple[Any] | None = None  # the dataset's fingerprint, once computed
        self._unit_hash: tuple[str | None] | None = None  # units_digest, once computed
        self._memo: tuple[tuple[int, bool], Order] | None = None  # a shuffled/elastic order
        first, stop = rank_bounds(length, self.workers, ranks, rank, drop_last)
        self.num_samples = stop - first
        self.total_size = length if not drop_last else self.num_samples * ranks
        if drop_last and length and not self.num_samples:
            # the tail rule drops fewer than ranks x workers rows: here that is every row, and
            # an epoch of no batches would otherwise pass without a word
            warnings.warn(
                f"ChunkedSampler: the dataset's {length} rows are fewer than ranks x workers "
                f"({ranks} x {max(self.workers, 1)}), so with drop_last=True every rank gets "
                "none and an epoch has no batches; use fewer workers, or drop_last=False",
                EmptyEpochWarning,
                stacklevel=2,
            )
        check_order_memory(self.num_samples, length)
        if self.workers and type(dataset) is ParquetDataset:  # a packed one's rows are blocks
            # forked DataLoader workers each declare their share of the pass at their first
            # read: the sampler runs in this process, after they start
            dataset.prefetch_in_workers(_WorkerPlan(self))

    @property
    def ranks(self) -> int:
        """Number of distributed ranks (``num_replicas``)."""
        return self.num_replicas

    @property
    def resume_at(self) -> int:
        """Samples of the current epoch the next iteration skips (after ``load_state_dict``)."""
        return self._resume

    @property
    def elastic(self) -> bool:
        """Whether the current epoch continues one begun with another topology."""
        return bool(self._before)

    @property
    def carried(self) -> int:
        """Batches a trainer counts into the current epoch before its first one (default 0).

        Lightning, restored from a checkpoint saved at the last batch of an epoch, starts the
        next epoch with the ended epoch's batch count unless the loader has no more batches
        than that; ``DataModule`` sets this to that count so that the epoch's length (and
        so the loader's) counts them too, as after an elastic resume. Saved in the state;
        :meth:`set_epoch` to another epoch clears it.
        """
        return self._carried

    @carried.setter
    def carried(self, steps: int) -> None:
        self._carried = check_int("carried", steps, 0)

    @property
    def tail(self) -> int:
        """Rows of the current epoch's sequence that no rank gets (the tail rule's drop)."""
        rest = self._rest_length()
        taken = sum(
            b - a
            for a, b in (
                rank_bounds(rest, self.workers, self.num_replicas, r, self.drop_last)
                for r in range(min(self.num_replicas, rest))  # later ranks have no rows
            )
        )
        return rest - taken

    def __len__(self) -> int:
        """Number of indices one whole epoch yields on this rank.

        After an elastic resume (a state saved with other ranks, workers or batch size) the
        epoch counts, at this batch size, the batches run before the checkpoint plus this
        rank's rest, so that a trainer counting batches from the checkpoint's step ends the
        epoch where the rest ends.
        """
        if not self._before and not self._carried:
            return self.num_samples
        steps = self._carried + _steps(self._before)
        return steps * self.batch + self._rows_now()

    def rank_batches(self) -> list[int]:
        """Return the batches each rank's loader runs in the current epoch, rank by rank.

        Without ``drop_last`` the rank shares differ by up to one row, which may be one batch
        more on some ranks: fine for evaluation, a hang under DDP training (a rank running
        one more step waits for gradients no other rank sends).

        Returns:
            For each rank, the batches of its rows of the current epoch (after an elastic
            resume, of the rows left).
        """
        rest = self._rest_length()
        return [
            math.ceil((stop - first) / self.batch)
            for first, stop in (
                rank_bounds(rest, self.workers, self.num_replicas, r, self.drop_last)
                for r in range(self.num_replicas)
            )
        ]

    def _rows_now(self) -> int:
        """Indices the current epoch's order holds on this rank."""
        if not self._before:
            return self.num_samples
        a, b = rank_bounds(self._rest_length(), self.workers, self.num_replicas, self.rank,
                           self.drop_last)
        return b - a

    def _rest_length(self) -> int:
        """Length of the current epoch's sequence left after the earlier topologies."""
        return _rest(self.length, self._before)

    def __repr__(self) -> str:
        what = type(self.dataset).__name__
        return (
            f"ChunkedSampler({what} of {self.length} rows, batch={self.batch}, "
            f"workers={self.workers}, rank {self.rank} of {self.num_replicas}, "
            f"shuffle={self.shuffle}, seed={self.seed}, mix={self.mix}, epoch={self.epoch}, "
            f"{len(self)} indices per epoch)"
        )

    def order(self, epoch: int | None = None) -> Order:
        """Return this rank's whole order for an epoch (no resume offset applied).

        Args:
            epoch: The epoch; the sampler's current epoch by default. After an elastic
                resume, the current epoch's order is that of the rows not consumed before
                the checkpoint.

        Returns:
            Dataset indices in the order they are yielded.

        Raises:
            ArgumentError: If ``epoch`` is not an integer >= 0 (as ``set_epoch`` says).
        """
        # numpy's seeding would refuse it in its own words, or never look at it unshuffled
        epoch = self.epoch if epoch is None else check_int("epoch", epoch, 0)
        elastic = bool(self._before) and epoch == self.epoch
        mixture = callable(getattr(self._sized, "epoch_units", None))
        key = (epoch, elastic)
        if (self.shuffle or mixture or elastic) and self._memo is not None and (
            self._memo[0] == key
        ):
            return self._memo[1]
        if elastic:
            sequence = self.sequence(epoch)
            for part in self._before:
                seen = consumed_positions(len(sequence), part["batch"], part["workers"],
                                          part["ranks"], part["drop_last"], part["consumed"])
                sequence = sequence[~seen]
            first, stop = rank_bounds(len(sequence), self.workers, self.num_replicas,
                                      self.rank, self.drop_last)
            sequence = sequence[first:stop]
        else:
            first, stop = rank_bounds(self.length, self.workers, self.num_replicas, self.rank,
                                      self.drop_last)
            sequence = self.sequence(epoch, first, stop)
        # ``sequence`` is this rank's share only: partition it over the workers
        order = deliver(sequence, self.batch, self.workers)
        if self.shuffle or mixture or elastic:
            order.flags.writeable = False
            self._memo = (key, order)
        return order

    def sequence(self, epoch: int, start: int = 0, stop: int | None = None) -> Order:
        """Return (part of) an epoch's sequence, before any rank or worker takes its share.

        It depends on the dataset, ``shuffle``, ``seed``, ``mix``, ``chunk`` and the epoch,
        never on the ranks, workers or batch size.

        Args:
            epoch: The epoch.
            start: First position to return.
            stop: End position (exclusive); the end of the sequence by default.

        Returns:
            Dataset indices.

        Raises:
            ArgumentError: If ``epoch`` is not an integer >= 0.
        """
        epoch = check_int("epoch", epoch, 0)
        stop = self.length if stop is None else stop
        if callable(getattr(self._sized, "epoch_units", None)):  # a Mixture's ranges
            units = self._sized.epoch_units(self.seed, epoch)  # type: ignore[attr-defined]
            if self.shuffle:
                return shuffled_sequence(units, self.seed, epoch, self.mix, start, stop)
            rows = [np.arange(a, b, dtype=np.int64) for a, b in units]
            whole = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
            return whole[start:stop]
        if not self.shuffle:
            return np.arange(start, stop, dtype=np.int64)
        if self._units is None:
            self._units = units_of(self._sized, self.chunk)
        return shuffled_sequence(self._units, self.seed, epoch, self.mix, start, stop)

    def __iter__(self) -> Iterator[int]:
        """Yield this epoch's indices, skipping those consumed before a restored checkpoint.

        Returns:
            An iterator with its own ``state_dict``/``load_state_dict`` (its position in the
            epoch), which torchdata's ``StatefulDataLoader`` saves with every batch it hands
            out.
        """
        # the skip is taken by the first pass that yields (or finds nothing to yield): torch
        # builds an iterator's sampler pass twice and uses the second (torchdata's fresh
        # iterator after a restored one had finished, too), and both must start there
        start = self._resume
        self.consumed = start
        self._live = _Pass(self, start)
        return self._live

    def _declare_order(self, order: Order, start: int) -> None:
        """Declare a pass's window order to the dataset, for its read-ahead.

        A pass reads its dataset in this process when the sampler was built for no
        DataLoader workers (``workers`` 0 or 1): a shuffled pass declares the order in which
        its windows are first read from sample ``start`` on, and its rows from there (so
        its small batches are gathered a few at a time), a pass in order clears what was
        declared before (sequential reads are detected by themselves). Declared lazily
        (``ParquetDataset.prefetch(lazy=True)``): a process that only iterates the sampler
        while workers read reads nothing ahead. Each pass calls it as it begins.

        Args:
            order: The pass's whole order (:meth:`order`).
            start: Samples of it already consumed (a resumed pass).
        """
        dataset = self.dataset
        if self.workers > 1 or not isinstance(dataset, ParquetDataset):
            return
        if not self.shuffle:
            dataset.prefetch(None, lazy=True)
            return
        windows, rows = self._share(dataset, order, start, 0, 1)
        dataset.prefetch(windows, lazy=True, rows=rows)

    def _share(
        self, dataset: ParquetDataset, order: Order, start: int, worker: int, workers: int
    ) -> tuple[list[int], Order]:
        """One DataLoader worker's part of a pass from sample ``start`` on: windows and rows.

        The loader gives batch ``k`` to worker ``k % workers``; the rows are that worker's
        batches in turn, the windows those rows read in the order each is first read.
        """
        rest = order[min(start, len(order)):]
        mine = rest
        if workers > 1:
            batch = self.batch
            full = len(rest) // batch
            mine = rest[: full * batch].reshape(full, batch)[worker::workers].ravel()
            if full % workers == worker and len(rest) > full * batch:  # the short last batch
                mine = np.concatenate([mine, rest[full * batch:]])
        starts = [w.offset for w in dataset.windows]
        return worker_windows(mine, starts, self.batch, 1)[0], mine

    def rewind(self, consumed: int) -> None:
        """Make the next iteration yield this epoch's samples after its first ``consumed``.

        For a loader that starts its workers again mid-epoch (``ChunkedLoader`` replacing a
        worker that never started): the samples it handed out are not served again, and the
        rest come in the same order.

        Args:
            consumed: Samples of the current pass already handed out (its ``consumed``;
                past the epoch's end, nothing is left).

        Raises:
            ArgumentError: If ``consumed`` is not an integer >= 0.
        """
        self._resume = check_int("consumed", consumed, 0)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next iteration yields.

        Setting the epoch a restored state is in keeps its resume position (a state saved at
        the end of its epoch: that epoch stays at its end, nothing left to serve); any other
        epoch starts from its beginning. With :attr:`fixed_epoch` set it changes nothing.

        Args:
            epoch: Epoch number (>= 0).

        Raises:
            ArgumentError: If ``epoch`` is not an integer >= 0.
        """
        epoch = check_int("epoch", epoch, 0)
        if not self.fixed_epoch:
            self._asked = epoch
        if epoch != self.epoch and not self.fixed_epoch:
            # the epoch the restored state ended, set again as a resumed loop does (docs):
            # served from its end, not a second time
            ended = epoch == self._ended and self._live is None
            self.epoch = epoch
            self.consumed = self._resume = self.num_samples if ended else 0
            self._before = []
            self._carried = 0
            self._ended = None
            self._live = None
            if self._end_state is not None and epoch - self._end_state["epoch"] not in (0, 1):
                self._end_state = None

    # ------------------------------------------------------------------ resume
    def _settings(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "batch": self.batch,
            "workers": max(self.workers, 1),
            "ranks": self.num_replicas,
            "drop_last": self.drop_last,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "mix": self.mix,
            "chunk": self.chunk,
            "units": self._units_fingerprint(),
            "data": self._data_fingerprint(),
        }

    def _units_fingerprint(self) -> str | None:
        # a shuffled sequence permutes the dataset's windows: the same rows cut into other
        # windows (window_bytes=, or memory= setting its default) give another sequence.
        # Without shuffle the sequence is the rows in order, whatever the windows.
        if not self.shuffle:
            return None
        if self._unit_hash is None:
            if callable(getattr(self._sized, "epoch_units", None)):  # a Mixture's sources'
                units = getattr(self._sized, "units", None)
            else:
                if self._units is None:
                    self._units = units_of(self._sized, self.chunk)
                units = self._units
            self._unit_hash = (None if units is None else units_digest(units),)
        return self._unit_hash[0]

    def _data_fingerprint(self) -> Any:
        # computed once: torchdata's StatefulDataLoader asks for the state with every batch,
        # and hashing every shard's identity each time would cost more than the batch
        if self._data is None:
            self._data = (getattr(self.dataset, "fingerprint", None),)
        return self._data[0]

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Return the position in the epoch, to resume from with :meth:`load_state_dict`.

        Which count the state holds, in this order:

        1. ``consumed``, when given: what the driver knows was used by training;
        2. :attr:`consumed` when the loader built by ``load()`` drives the sampler (it counts
           the batches handed to the training loop, not those its workers prefetched);
        3. otherwise the indices the sampler's latest iteration handed out. That is exact
           for a plain loop over the sampler and for torchdata's ``StatefulDataLoader``
           (which saves the state of the sampler's iterator at the batch it yields), but a
           plain ``DataLoader`` with workers prefetches ahead of the training loop, so it
           counts batches not yet trained on: give ``consumed=`` there.

        Every rank consumes the same count (with ``drop_last``), so one rank's state tells
        which rows every rank consumed: rank 0's, which Lightning saves, is enough.

        Args:
            consumed: Samples of this epoch already used by training.

        Returns:
            ``{"epoch", "consumed", ...}``, the settings the order depends on, ``before``
            (the parts of the epoch run with other topologies, after an elastic resume) and
            ``tail`` (rows of the epoch's sequence that no rank gets).

        Raises:
            ArgumentError: If ``consumed`` is not an integer >= 0, or is more than this
                rank's samples of the epoch (a count over all epochs, say).
        """
        if consumed is not None:
            done = check_int("consumed", consumed, 0)
            # the epoch's count: after an elastic resume the batches run before the
            # checkpoint come first, at this batch size (as len() counts them); the order
            # holds the rest
            earlier = (self._carried + _steps(self._before)) * self.batch
            rows = earlier + self._rows_now()
            if done > rows:
                # cut to the share, it would read as the epoch's end: the resumed run would
                # skip the rest of the epoch without a word
                raise ArgumentError(
                    f"consumed={done} is more than the {rows} samples this rank has in epoch "
                    f"{self.epoch}: give the samples of this epoch that training used (not a "
                    "count over all epochs), or set_epoch() to the epoch it counts in"
                )
            if done < earlier:
                raise ArgumentError(
                    f"consumed={done} is less than the {earlier} samples epoch {self.epoch} "
                    "counts before this run resumed it (the batches run before the "
                    f"checkpoint, or carried into it, at batch {self.batch}; len(sampler) "
                    "counts them too): give the samples of the whole epoch, those before "
                    "the resume included"
                )
            done -= earlier
            live = self._live if self._live is not None and self._live.epoch == self.epoch else None
            if live is not None and done < live.start:
                # the saved state this run resumed from had used them: serving them again
                raise ArgumentError(
                    f"consumed={consumed} is less than the {earlier + live.start} samples "
                    f"epoch {self.epoch} had used when this run resumed it: give the samples "
                    "of the whole epoch, those before the resume included"
                )
            if live is not None and done > live.position:
                # training cannot have used what this rank's iteration never handed out: a
                # count of other units (rows before an elastic resume, say) would skip rows
                raise ArgumentError(
                    f"consumed={consumed} is more than this rank's iteration of epoch "
                    f"{self.epoch} handed out ({earlier + live.position}, counted as "
                    "len(sampler) counts: after an elastic resume the batches run before "
                    f"the checkpoint at batch {self.batch}): give the samples of this epoch "
                    "that training used"
                )
        elif self.counted_by_loader:
            done = self.consumed
        elif self._live is not None and self._live.epoch == self.epoch:
            done = self._live.position
        else:
            done = max(self.consumed, self._resume)
        return self._state(self.epoch, done)

    def _state(self, epoch: int, done: int, *, of_pass: bool = False) -> dict[str, Any]:
        end = self._end_state
        if (
            end is not None and done == 0 and epoch == self.epoch and not self._before
            and not self._carried
            and (epoch == end["epoch"] or (epoch == end["epoch"] + 1 and not of_pass))
        ):
            # nothing served since a state saved at the end of epoch E was loaded: that
            # state again. This topology's own count of E (its share, 0 where ranks x
            # workers outnumber the rows) or of E + 1 (0) would read as "not started", and
            # a trainer restored again inside E would be served E a second time. Not for
            # an iteration of E + 1 (StatefulDataLoader's): its state is its own epoch's,
            # which the loader then steps through (as E's end, it read as exhausted)
            return {**copy.deepcopy(end), "units": self._units_fingerprint(),
                    "data": self._data_fingerprint()}
        before = self._before if epoch == self.epoch else []
        return {
            "version": STATE_VERSION,
            "epoch": epoch,
            "consumed": min(done, self._rows_now() if before else self.num_samples),
            **self._settings(),
            "before": [dict(part) for part in before],
            "carried": self._carried if epoch == self.epoch else 0,
            "tail": self.tail if before else self._plain_tail(),
            "rank": self.rank,
        }

    def _plain_tail(self) -> int:
        if not self.drop_last:
            return 0
        first, stop = rank_bounds(self.length, self.workers, self.num_replicas, 0, True)
        return self.length - (stop - first) * self.num_replicas

    def load_state_dict(self, state: dict[str, Any], *, check_data: bool = True) -> None:
        """Resume: the next iteration yields exactly the samples of the saved epoch not yet used.

        A state saved at the end of an epoch resumes at the start of the next one. A state
        saved with other ranks, workers, batch size or ``drop_last`` resumes elastically:
        the rows every saved rank consumed (a function of the saved settings and count) are
        taken out of the epoch's sequence, and this topology partitions the rest, so across
        the rest of the epoch no row comes twice and every row not consumed comes once,
        except the new tail (:attr:`tail`: fewer than ``ranks * workers`` rows, logged).

        Args:
            state: A dict from :meth:`state_dict`.
            check_data: Refuse a state saved over other data: its ``data`` fingerprint (the
                dataset's ``fingerprint``: view query, columns, every shard's identity)
                differs from this dataset's, or a shuffled state over other windows (the
                shuffle units; ``window_bytes=``, or ``memory=`` setting its default). False
                resumes at the saved position anyway.

        Raises:
            ArgumentError: If the state is malformed or was saved by a sampler whose epoch
                sequence differs (length, shuffle, seed, mix, chunk), or over other data
                (unless ``check_data`` is False).
        """
        state = check_sampler_state(state)  # one schema, one clear error (resume_state.py)
        mine = self._settings()
        saved_data = state.get("data")
        if check_data and saved_data is not None and saved_data != mine["data"]:
            raise ArgumentError(
                f"cannot resume: the checkpoint was saved over other data (dataset fingerprint "
                f"{saved_data}, now {mine['data']}): a shard, the columns or the view's query "
                "changed, so the saved position would point into different rows. Resume with "
                "check_data=False (load(..., check_data=False) or DataModule(..., "
                "check_data=False)) to continue at that position anyway"
            )
        different = [
            _UNITS_CHANGED if key == "units" else f"{key}: saved {state[key]!r}, now {mine[key]!r}"
            for key in _SEQUENCE
            if state.get(key) is not None and mine[key] is not None and state[key] != mine[key]
            and (check_data or key != "units")  # other windows of other data: accepted then
        ]
        if different:
            raise ArgumentError(
                "cannot resume: the saved sampler state was made with other settings ("
                + "; ".join(different)
                + "), which give another order of the epoch; build the sampler with the saved "
                "settings (ranks, workers and batch may differ)"
            )
        epoch = saved_epoch = check_int("epoch", state["epoch"], 0)
        consumed = check_int("consumed", state["consumed"], 0)
        before = _parts(state.get("before", []))
        carried = check_int("carried", state.get("carried", 0), 0)
        if carried > self.length:  # an epoch has no more batches than rows: never saved
            raise ArgumentError(
                f"cannot resume: the state carries {carried} batches into its epoch, more "
                f"than the dataset's {self.length} rows make; pass a state from state_dict()"
            )
        saved = _topology(state, mine)
        saver = _saver(state, saved)
        _check_counts(self.length, epoch, before, saved, saver, consumed)
        rest = _rest(self.length, before)
        if consumed >= _share(rest, saved, saver) and (consumed or before):
            # saved at its epoch's end. Loaded again where it left the sampler (Lightning loads
            # the loader's state after the DataModule did), the count carried into the next
            # epoch stays
            here = (self.epoch, self._resume, self._before, self._live) == (epoch + 1, 0, [], None)
            carried = self._carried if here else 0
            epoch, consumed, before = epoch + 1, 0, []
        elif saved != _topology(mine, mine):
            if consumed:
                before = [*before, {**saved, "consumed": consumed}]
            # the saved epoch stays even when it leaves this topology only a tail (no rows
            # for any rank): a trainer restored inside that epoch finishes it with the
            # loader it has, so moving on here served the next epoch twice
            consumed = 0
        self.epoch = epoch
        self.consumed = consumed
        self._resume = consumed
        self._before = before
        self._carried = carried
        self._ended = saved_epoch if epoch != saved_epoch else None
        self._end_state = state if epoch != saved_epoch else None
        self._memo = None
        self._live = None
        if before and saved != _topology(mine, mine):
            _log.warning(
                "elastic resume of epoch %d: %d rows were consumed with (ranks x workers x batch) "
                "%s; this topology (ranks=%d, workers=%d, batch=%d) serves the %d rows left, "
                "except a tail of %d",
                epoch, self.length - self._rest_length(),
                ", ".join(f"{p['ranks']}x{p['workers']}x{p['batch']}" for p in before),
                self.num_replicas, max(self.workers, 1), self.batch, self._rest_length(),
                self.tail,
            )


def _topology(state: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The partition settings of a state (older states lack ``drop_last``: True)."""
    out = {key: state[key] if key in state else default[key] for key in _TOPOLOGY[:3]}
    out["drop_last"] = bool(state.get("drop_last", True))
    for key in ("ranks", "workers", "batch"):
        out[key] = check_int(f"saved {key}", out[key], 1)
    return out


def _steps(before: list[dict[str, Any]]) -> int:
    """Batches the parts of an epoch run with earlier topologies took (each at its batch)."""
    return sum(math.ceil(int(p["consumed"]) / int(p["batch"])) for p in before)


def _parts(value: Any) -> list[dict[str, Any]]:
    """Check the ``before`` list of a state."""
    if not isinstance(value, list):
        raise ArgumentError("a ChunkedSampler state's 'before' must be a list from state_dict()")
    parts = []
    for part in value:
        missing = [key for key in (*_TOPOLOGY[:3], "consumed")
                   if not isinstance(part, dict) or key not in part]
        if missing:
            # a KeyError from _topology otherwise, or a default that resumes at a wrong place
            raise ArgumentError(
                "a ChunkedSampler state's 'before' entries come from state_dict(); "
                f"this one lacks {', '.join(missing)}: {part!r:.100}"
            )
        if not isinstance(part.get("drop_last", True), bool):  # bool("no") would be True
            raise ArgumentError(
                "a ChunkedSampler state's 'before' entry has drop_last="
                f"{part['drop_last']!r}, not True or False; pass a state saved by state_dict()"
            )
        parts.append({**_topology(part, part), "consumed": check_int(
            "consumed", part["consumed"], 0)})
    return parts


def _check_counts(length: int, epoch: int, before: list[dict[str, Any]],
                  saved: dict[str, Any], saver: int, consumed: int) -> None:
    """Refuse a count beyond its rank's share: no ``state_dict()`` writes one.

    ``load_state_dict`` reads a count that reaches the share as the end of the epoch, so an
    altered count (``consumed=10**9``) would otherwise skip the rest of the epoch in silence.
    """
    rest = length
    for part in before:
        share = _share(rest, part, 0)  # the part's saver is not recorded: rank 0's is largest
        if part["consumed"] > share:
            raise ArgumentError(
                f"cannot resume: the state's 'before' entry says {part['consumed']} samples "
                f"were consumed per rank of epoch {epoch}, more than the {share} of a rank's "
                f"share there (ranks={part['ranks']}, workers={part['workers']}); the state "
                "was altered or comes from another dataset: pass a state saved by state_dict()"
            )
        rest = _rest(rest, [part])
    share = _share(rest, saved, saver)
    if consumed > share:
        raise ArgumentError(
            f"cannot resume: the state says {consumed} samples of epoch {epoch} were consumed, "
            f"more than the {share} of rank {saver}'s share (length {length}, "
            f"ranks={saved['ranks']}, workers={saved['workers']}, "
            f"drop_last={saved['drop_last']}); the state was altered or comes from another "
            "dataset: pass a state saved by state_dict()"
        )


def _share(length: int, topology: dict[str, Any], rank: int) -> int:
    """Rows of one rank's share of a sequence under a topology."""
    first, stop = rank_bounds(length, topology["workers"], topology["ranks"], rank,
                              topology["drop_last"])
    return stop - first


def _saver(state: dict[str, Any], topology: dict[str, Any]) -> int:
    """The rank that saved a state: its share tells whether the count ended the epoch.

    Without ``drop_last`` a later rank's share may be a row smaller than rank 0's, so its
    final count is below rank 0's. A state saved before the rank was recorded is read as
    rank 0's.
    """
    rank = state.get("rank")
    if rank is None:
        return 0
    if rank >= topology["ranks"]:
        raise ArgumentError(
            f"cannot resume: the state was saved by rank {rank}, but it records "
            f"ranks={topology['ranks']}; pass a state saved by state_dict()"
        )
    return int(rank)


def _rest(length: int, before: list[dict[str, Any]]) -> int:
    """Length of the sequence left after the parts of ``before`` consumed their rows."""
    for part in before:
        taken = sum(
            min(part["consumed"], b - a)
            for a, b in (
                rank_bounds(length, part["workers"], part["ranks"], r, part["drop_last"])
                for r in range(min(part["ranks"], length))  # later ranks have no rows
            )
        )
        length -= taken
    return length


class _WorkerPlan:
    """What a DataLoader worker of a shuffled pass reads: its windows and its rows, in order.

    Handed to the dataset (``prefetch_in_workers``) by a sampler built for workers, and
    called in each forked worker at its first read, on the worker's copy of the sampler as
    it stood when the loader started its workers (the pass about to begin, from the position
    a resume set). The loader gives batch ``k`` to worker ``k % workers``. Pickled with the
    dataset to spawned workers, it carries a copy of the sampler without its order or its
    pass (each worker works the order out again, as a forked one does).
    """

    #: The dataset pickles this plan to spawned workers (see ``prefetch_in_workers``).
    travels = True

    def __init__(self, sampler: ChunkedSampler, pid: int | None = None) -> None:
        self._sampler = sampler
        self._pid = os.getpid() if pid is None else pid  # the giving process
        _PLANS.add(self)

    def __reduce__(self) -> tuple[type[_WorkerPlan], tuple[ChunkedSampler, int]]:
        lean = copy.copy(self._sampler)
        lean._live = None  # the main process's pass, its buffers
        lean._memo = None  # the order: the worker works it out from the settings
        return (_WorkerPlan, (lean, self._pid))

    def __call__(self, worker: int, workers: int) -> tuple[list[int], Order] | None:
        """The windows and rows of ``worker``, or None (in order, or other workers)."""
        sampler = self._sampler
        if not sampler.shuffle or workers != sampler.workers:
            return None
        dataset = sampler.dataset
        assert isinstance(dataset, ParquetDataset)  # the sampler gives a plan to no other
        try:
            return sampler._share(dataset, sampler.order(), sampler._resume, worker, workers)
        finally:
            # a worker's copy of the sampler serves no pass: the order is not needed again
            # here (its share is a copy of its rows), and each worker holding one would
            # hold the rank's whole order as many times as there are workers
            if os.getpid() != self._pid:
                sampler._memo = None

    def prepare(self) -> None:
        """Work out the pass's order in the giving process, before its workers are forked.

        Called just before any ``fork()`` (see :func:`_order_before_fork`): the forked
        workers then read the parent's order, shared copy-on-write, instead of each working
        it out again (time and memory per worker); the parent needs it for the pass anyway.
        """
        sampler = self._sampler
        if sampler.shuffle and os.getpid() == self._pid:
            sampler.order()


#: Plans alive in this process, whose orders a fork is about to need (weak: a plan goes with
#: its dataset and sampler).
_PLANS: weakref.WeakSet[_WorkerPlan] = weakref.WeakSet()


def _order_before_fork() -> None:
    """Work out each live plan's pass order before ``fork()`` (see ``_WorkerPlan.prepare``)."""
    for plan in list(_PLANS):
        # a fork must go on; a worker that needs the order works it out (and says why not)
        with contextlib.suppress(Exception):
            plan.prepare()


os.register_at_fork(before=_order_before_fork)


class _Pass(Iterator[int]):
    """One iteration over a :class:`ChunkedSampler`'s epoch; its state is its position.

    torchdata's ``StatefulDataLoader`` calls :meth:`state_dict` as it sends each batch of
    indices to a worker and keeps the state that belongs to each batch it yields, so a
    resumed loader continues after exactly the batches it handed out.

    The indices come from a list iterator over a buffer of the order, and the position is
    read off it (the buffer's end less what it has left), so nothing is counted per index.
    ``iter()`` of a pass hands out one iterator over those buffers (the same object every
    time) rather than the pass itself: torch's ``BatchSampler`` takes each batch with
    ``itertools.islice(iter(pass), batch)``, or with ``drop_last=True`` zips ``batch``
    references to it, which then run in C instead of calling a Python ``__next__`` per
    index; ``next()`` on the pass takes from the same iterator, so every way of iterating
    shares one position.
    """

    def __init__(self, sampler: ChunkedSampler, start: int) -> None:
        self._sampler = sampler
        self._restored_end = False
        # restored at the end of the epoch the loop set: torchdata may pull it and then, its
        # saved loop having finished, begin a fresh iteration, which must start at that end
        self._keeps_skip = False
        self._begin(start)

    def _begin(self, start: int) -> None:
        self.epoch = self._sampler.epoch
        self._order = self._sampler.order()
        self._buffer_end = min(start, len(self._order))
        #: Where this iteration began in its order (a resumed one: after what was used).
        self.start = self._buffer_end
        self._sampler._declare_order(self._order, self._buffer_end)
        self._indices: Iterator[int] = iter([])
        # one iterator for every iter() and next(): torch's BatchSampler(drop_last=True) zips
        # `batch` references to the pass, calling iter() on each, and every one of them must
        # draw from the same stream
        self._stream: Iterator[int] = itertools.chain.from_iterable(self._buffers())

    @property
    def position(self) -> int:
        """Indices of the epoch handed out so far (those skipped on resuming included)."""
        return self._buffer_end - operator.length_hint(self._indices)

    def _refill(self) -> bool:
        """Convert the order's next indices to a list; False at the end of the epoch."""
        start = self._buffer_end
        if start >= len(self._order):
            return False
        buffer: list[int] = self._order[start : start + _YIELD_STEP].tolist()
        self._buffer_end = start + len(buffer)
        self._indices = iter(buffer)
        return True

    def _buffers(self) -> Iterator[Iterator[int]]:
        """The list iterator of each buffer in turn (the stream takes their indices in C)."""
        if self._sampler._live is self and not self._keeps_skip:
            self._sampler._resume = 0  # this pass takes the skip: the next starts over
        while self._refill():
            yield self._indices

    def __iter__(self) -> Iterator[int]:
        return self._stream

    def __next__(self) -> int:
        return next(self._stream)

    def state_dict(self) -> dict[str, Any]:
        """Return the sampler's state at this iteration's position (indices handed out)."""
        # restored exhausted, this pass is the loaded end of the epoch before its own: saved
        # before anything is served, it is that end state again (as the sampler's own is)
        return self._sampler._state(self.epoch, self.position, of_pass=not self._restored_end)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a state of :meth:`state_dict` (the sampler's checks apply).

        Args:
            state: A dict from :meth:`state_dict` or ``ChunkedSampler.state_dict``.
        """
        sampler = self._sampler
        sampler.load_state_dict(state)
        saved = state.get("epoch") if isinstance(state, dict) else None
        ended = sampler.epoch != saved and sampler._asked == saved
        if ended:
            # a state at its epoch's end, restored when iterated after the loop set that
            # epoch again: as set after the restore, the epoch stays at its end (docs); and
            # a fresh iteration of it (torchdata's, once the saved one had finished) too
            sampler.set_epoch(check_int("epoch", saved, 0))
        mine = sampler._settings()
        if sampler.workers and _topology(state, mine) != _topology(mine, mine):
            # torchdata's StatefulDataLoader with workers restores its last snapshot, then
            # steps through the batches since at this batch size and topology (docs/resume.md)
            _log.warning(
                "an elastic resume through torchdata's StatefulDataLoader with workers is "
                "exact only with snapshot_every_n_steps=1 (its default; then nothing is "
                "wrong): with a longer interval the batches yielded after the last snapshot "
                "are stepped through again at batch %d and this topology, so rows may be "
                "served twice or skipped", sampler.batch,
            )
        start = sampler._resume
        self._keeps_skip = ended
        sampler.consumed = start
        sampler._live = self
        self._begin(start)
        if isinstance(state, dict) and sampler.epoch != state.get("epoch"):
            # the saved iteration had handed out its whole epoch: it stays exhausted, and the
            # sampler waits at the start of the next epoch
            self._order = self._order[:0]
            self._buffer_end = 0
            self._indices = iter([])
            self._restored_end = True
