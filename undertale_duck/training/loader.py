"""``load()``: a resumable DataLoader over a validated ``ParquetDataset`` and a ChunkedSampler."""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import multiprocessing.context
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import torch
from torch.autograd.profiler import record_function
from torch.utils.data import BatchSampler, DataLoader, get_worker_info

from ..common.keywords import guard
from ..common.numbers import check_int
from ..common.parts import consecutive_parts
from ..common.sizes import DEFAULT_MEMORY
from ..core.pack import Pack
from ..core.rows import AHEAD_BYTES, AHEAD_ROWS, Format, RowBatch
from ..core.runtime import TaskMap
from ..core.source import SourceLike
from ..core.views import Split
from ..dataset import PackedDataset, ParquetDataset
from ..errors import ArgumentError, WorkerStartError, WorkerStartWarning
from .collate import collate, split_batch
from .mixture import Mixture
from .one_block import one_block as to_one_block
from .order import worker_windows
from .sampler import ChunkedSampler
from .startwatch import StartWatch, fork_deadlock_prone, mark_started
from .validated import validate_once


def default_start_method() -> str:
    """Return the start method ``load()`` gives DataLoader workers.

    ``fork`` on Linux: ``source.py`` closes every DuckDB connection of the process before a
    ``fork()`` (a child inheriting a live connection crashes) and the dataset reopens its own
    lazily, so forked workers are safe; they start in milliseconds without re-importing
    torch, and collators may be lambdas or closures. Elsewhere ``spawn`` (macOS's and
    Windows' default): the dataset pickles without its connection and cache.

    Returns:
        ``"fork"`` or ``"spawn"``.
    """
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


class ChunkedLoader(DataLoader[Any]):
    """A ``DataLoader`` that counts the batches it hands out, so its sampler can resume.

    What :func:`load` and :class:`DataModule` return; construct it as you would a
    ``DataLoader``, with a :class:`ChunkedSampler` as ``sampler`` built for the same batch
    size and workers. Batches prefetched by workers are not counted, only those the loop
    received, so :meth:`state_dict` resumes at the next batch. Without workers, pinning or a
    timeout its epochs come from its own iterator (the same batches as torch's, less torch's
    per-batch cost) and small batches of ``numpy``/``torch`` rows are fetched several at a
    time (decisions 0023, 0024 and 0025). With any other sampler it is a plain ``DataLoader``.

    Iterating raises :class:`ArgumentError` if the ``ChunkedSampler`` was built for
    another batch size or number of workers than ``batch_size`` and ``num_workers``, or if
    workers may hand batches out of order (``in_order=False``).
    """

    #: Whether :meth:`load_state_dict` refuses a state saved over other data.
    check_data: bool = True
    #: Seconds a forked worker may take to start (None: not watched). One that has not started
    #: by then, while the loop waits for a batch, is stopped and the epoch's workers are
    #: started again at the next batch, with a ``WorkerStartWarning`` (see ``startwatch``).
    worker_start_timeout: float | None = 60.0
    #: Times an epoch's workers are started again so before ``WorkerStartError`` is raised.
    worker_restarts: int = 3

    @property
    def chunked_sampler(self) -> ChunkedSampler | None:
        """The loader's ``ChunkedSampler``, if it has one."""
        sampler = self.sampler
        return sampler if isinstance(sampler, ChunkedSampler) else None

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        """Iterate the batches, recording in the sampler how many samples were handed out.

        Without workers, pinning or a timeout the batches come from :class:`_Batches`, which
        does what torch's single-process iterator does without its per-batch cost and counts
        them; else :class:`_Counting` counts torch's.
        """
        sampler = self.chunked_sampler
        if sampler is None or self.batch_size is None:
            return super().__iter__()
        self._check(sampler, self.batch_size)
        self._begin_pass(sampler, self.batch_size)
        batches = self.batch_sampler  # what batch_size= builds, unless a subclass changed it
        lean = (
            self.num_workers == 0 and not self.pin_memory and self.timeout == 0
            and isinstance(self.dataset, ParquetDataset | Mixture)
            and callable(getattr(self.dataset, "__getitems__", None))
            and type(batches) is BatchSampler and batches.sampler is sampler
        )
        if lean:
            return _Batches(self, sampler)
        return _Counting(self, sampler, self.batch_size)

    def _begin_pass(self, sampler: ChunkedSampler, batch: int) -> None:
        """Prepare a pass from the sampler's resume point: read-ahead hints, the count."""
        self._hint(sampler, batch)
        sampler.counted_by_loader = True
        sampler.consumed = sampler.resume_at

    def _workers_iterator(self) -> tuple[Iterator[Any], StartWatch | None]:
        """The epoch's (or its rest's) torch iterator, with a watch on the workers it forks.

        Forked workers are watched until each has started (see :mod:`startwatch`): the
        ``worker_init_fn`` (a :class:`WorkerHints`) marks each worker's start on a board the
        watch reads. Not with ``worker_start_timeout=None``, spawned workers (they fork
        nothing), or persistent workers already running.
        """
        watch = None
        started = self.persistent_workers and getattr(self, "_iterator", None) is not None
        timeout = self.worker_start_timeout
        if self.num_workers > 0 and not started and timeout is not None and self._forks():
            watch = StartWatch(self.num_workers, float(timeout))
        init = self.worker_init_fn
        if watch is not None and not isinstance(init, WorkerHints):
            init = self.worker_init_fn = WorkerHints(init)
        if isinstance(init, WorkerHints):
            init.board = None if watch is None else watch.key
        inner = super().__iter__()
        if watch is not None:
            # torch's iterator keeps its worker processes in order (a private attribute:
            # where a torch release renames it, nothing is watched)
            workers = list(getattr(inner, "_workers", ()))
            pids = [w.pid for w in workers if isinstance(getattr(w, "pid", None), int)]
            if len(pids) == len(workers) == self.num_workers:
                watch.watch(pids)
            else:
                watch.close()
                watch = None
        return inner, watch

    def _forks(self) -> bool:
        """Whether this loader's workers are started by ``fork()``."""
        context = self.multiprocessing_context
        if context is None:  # torch then uses multiprocessing's default context
            return bool(multiprocessing.get_context().get_start_method() == "fork")
        return bool(context.get_start_method() == "fork")

    def _check(self, sampler: ChunkedSampler, batch: int) -> None:
        """Refuse a sampler built for other batches or workers than the loader's.

        And workers that hand batches out of order (``in_order=False``): the state counts
        batches received, which is a resume point only if they came in the sampler's order.
        Checked when an epoch starts, not in ``__init__``: Lightning rebuilds loaders from
        ``DataLoader.__init__``'s arguments, which an ``__init__`` of ours would change.
        """
        if self.num_workers > 0 and not getattr(self, "in_order", True):
            raise ArgumentError(
                "ChunkedLoader: in_order=False hands out each batch as soon as a worker has "
                "it, so the batches received are not the first of the epoch and a state "
                "saved then would skip some on resuming and repeat others; leave in_order "
                "at True (the workers still read ahead), or use a plain DataLoader where no "
                "resume is needed"
            )
        if sampler.batch != batch:
            raise ArgumentError(
                f"ChunkedLoader: its ChunkedSampler was built for batch {sampler.batch} but "
                f"batch_size is {batch}: the sampler deals each worker its rows in blocks of "
                f"its batch and its resume state counts them; build ChunkedSampler(dataset, "
                f"{batch}, ...) or pass batch_size={sampler.batch}"
            )
        if max(1, sampler.workers) != max(1, self.num_workers):
            raise ArgumentError(
                f"ChunkedLoader: its ChunkedSampler was built for {sampler.workers} workers "
                f"but num_workers is {self.num_workers}: the sampler deals its batches "
                "round-robin to that many workers, so each would read rows scattered over "
                f"the others' parts; build ChunkedSampler(dataset, {batch}, "
                f"{self.num_workers}, ...) or pass num_workers={sampler.workers}"
            )

    def _hint(self, sampler: ChunkedSampler, batch: int) -> None:
        """Give each worker of a shuffled epoch its window order, for read-ahead.

        Without workers the sampler's pass declares its order itself
        (``ChunkedSampler._declare_order``).
        """
        dataset = self.dataset
        workers = self.num_workers
        if not sampler.shuffle or not isinstance(dataset, ParquetDataset) or workers == 0:
            return
        if self.persistent_workers:
            return  # persistent workers start once: a hint would go stale after their first epoch
        order = sampler.order()[sampler.resume_at :]
        starts = [w.offset for w in dataset.windows]
        hints = worker_windows(order, starts, batch, workers)
        init = self.worker_init_fn
        if not isinstance(init, WorkerHints):  # each worker's order first, then the user's
            init = self.worker_init_fn = WorkerHints(init)
        init.orders = hints

    def state_dict(self) -> dict[str, Any]:
        """Return the sampler's epoch and the samples consumed in it (see ``ChunkedSampler``).

        Returns:
            The state, or ``{}`` without a ``ChunkedSampler``.
        """
        sampler = self.chunked_sampler
        return {} if sampler is None else sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next iteration yield exactly the batches not consumed before ``state``.

        Args:
            state: A dict from :meth:`state_dict` (``{}`` changes nothing).

        Raises:
            ArgumentError: If the state does not fit this loader's sampler, or was saved over
                other data (see ``check_data`` of :func:`load`).
        """
        if not isinstance(state, dict):  # None (a checkpoint key missing) would restart quietly
            raise ArgumentError(
                f"a loader state must be a dict from state_dict(), got {type(state).__name__}"
            )
        sampler = self.chunked_sampler
        if state and sampler is not None:
            sampler.load_state_dict(state, check_data=self.check_data)


class WorkerHints:
    """A ``worker_init_fn`` that marks each worker's start and gives it its read-ahead order.

    :class:`ChunkedLoader` sets :attr:`board` before it forks watched workers, and fills
    :attr:`orders` before it starts the workers of a shuffled epoch; each worker then marks
    its start (:func:`startwatch.mark_started`), calls ``ParquetDataset.prefetch`` with its
    own windows, and runs the user's ``worker_init_fn`` after that.

    Args:
        user: The user's ``worker_init_fn``, or None.
    """

    def __init__(self, user: Callable[[int], None] | None = None) -> None:
        self.user = user
        self.orders: list[list[int]] = []
        #: The key of the board the parent's ``StartWatch`` reads, or None.
        self.board: int | None = None

    def __call__(self, worker_id: int) -> None:
        """Mark this worker's start, set its read-ahead order, run the user's init.

        Args:
            worker_id: The worker's number.
        """
        mark_started(self.board, worker_id)
        info = get_worker_info()
        if info is not None and worker_id < len(self.orders):
            dataset = info.dataset
            if isinstance(dataset, ParquetDataset):
                dataset.prefetch(self.orders[worker_id])
        if self.user is not None:
            self.user(worker_id)


#: torch's name for a single-process DataLoader step in profiler traces.
_STEP = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


#: torch's test of a running profiler; None where this torch has none (then always annotate).
_profiler_enabled: Callable[[], bool] | None = getattr(
    getattr(torch._C, "_autograd", None), "_profiler_enabled", None
)


def _profiling() -> bool:
    """Whether a torch profiler is recording (True if this torch cannot say)."""
    enabled = _profiler_enabled
    return True if enabled is None else bool(enabled())


#: ``__getitems__`` whose rows depend on their indices alone (several batches may be fetched
#: as one): our own datasets', not a subclass's (or an instance's own) that may look at the
#: batch it is handed.
_GROUPABLE = (ParquetDataset.__getitems__, PackedDataset.__getitems__)


class _Batches(Iterator[Any]):
    """The batches of a ``workers=0`` epoch of a :class:`ChunkedLoader`, counted in its sampler.

    What torch's single-process iterator does (the batch sampler's next indices, the
    dataset's ``__getitems__``, ``collate_fn``), without the profiler annotation it opens
    around every batch even when no profiler runs: with the rest of torch's step, 60-70 us
    of a cached 64-row batch's 190 (``benchmarks/bench_small_batches.py``, decision 0023).
    The annotation is kept while a profiler records, and one number is drawn from the
    loader's generator (or torch's global one) at the start of the epoch, as torch's
    iterator draws it, so the random numbers a training step draws stay the same whichever
    iterator served the batches. The batch sampler ``batch_size=`` builds (torch's own
    ``BatchSampler`` over the loader's sampler) is not asked batch by batch: its lists are
    taken straight from the sampler's pass, several batches' at once (the same lists, the
    same position).

    Small batches of our own datasets' ``numpy``/``torch`` rows are fetched several at a
    time (up to 1,024 rows and 1 MiB, judged by the epoch's first batch) and cut apart, so
    the fixed cost of a fetch is paid once per group: with our own ``collate`` the group is
    collated once and its batch cut (:func:`split_batch`) wherever that is each part's
    batch, else each part's rows (:meth:`RowBatch.split`) go through ``collate_fn`` alone.
    Their columns are views of the group's (decisions 0024, 0026). A group whose fetch fails
    is fetched again batch by batch, so an error is raised by the batch it belongs to, after
    the batches before it.
    """

    def __init__(self, loader: ChunkedLoader, sampler: ChunkedSampler) -> None:
        batches = loader.batch_sampler
        assert isinstance(batches, BatchSampler)  # torch's own, over ``sampler``
        self._sampler = sampler
        self._batch = batches.batch_size
        self._drop = batches.drop_last
        self._stream: Iterator[int] | None = None  # the sampler's pass, from the first batch on
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
        fetch = loader.dataset.__getitems__  # type: ignore[attr-defined]
        self._fetch: Callable[[list[int]], Any] = fetch
        self._collate: Callable[[Any], Any] = loader.collate_fn
        self._ours = _is_collate(loader.collate_fn)
        self._length = len(batches)
        # batches per fetch; 0: not yet judged (the epoch's first batch, fetched alone, sets it)
        self._per_group = 0 if getattr(fetch, "__func__", None) in _GROUPABLE else 1
        # a group's coming batches, the next last: collated, or rows to collate (``_rows``)
        self._ready: list[Any] = []
        self._rows = False
        self._alone: list[list[int]] = []  # a group's indices to fetch alone, the next last

    def __next__(self) -> Any:
        if _profiling():
            with record_function(_STEP):
                batch = self._next()
        else:
            batch = self._next()
        sampler = self._sampler
        sampler.consumed = min(sampler.consumed + self._batch, len(sampler))
        return batch

    def __len__(self) -> int:
        return self._length

    def _take(self, count: int) -> tuple[list[int], list[int]]:
        """The indices of up to ``count`` coming batches (one list) and each batch's size.

        The lists torch's ``BatchSampler`` would hand out, drawn from the same pass of the
        sampler (which it too starts at the first batch), several at once.
        """
        if self._stream is None:
            self._stream = iter(self._sampler)
        batch = self._batch
        flat = list(itertools.islice(self._stream, count * batch))
        full, rest = divmod(len(flat), batch)
        sizes = [batch] * full
        if rest and self._drop:  # as BatchSampler(drop_last=True): the short last is dropped
            del flat[full * batch:]
        elif rest:
            sizes.append(rest)
        return flat, sizes

    def _next(self) -> Any:
        """The next batch."""
        if self._ready:
            ready = self._ready.pop()
            return self._collate(ready) if self._rows else ready
        if self._alone:
            return self._collate(self._fetch(self._alone.pop()))
        flat, sizes = self._take(max(1, self._per_group))
        if not sizes:
            raise StopIteration
        if len(sizes) == 1:
            rows = self._fetch(flat)
            if not self._per_group:
                self._per_group = _per_group(rows)
            return self._collate(rows)
        # fetched alone if the group's fetch fails (the error then comes back in its place)
        # or is interrupted (a loop that goes on still gets these batches)
        self._alone = consecutive_parts(flat, sizes)[::-1]
        try:
            ready = self._cut(self._fetch(flat), sizes)
        except Exception:
            ready = None
        if ready is None:
            return self._collate(self._fetch(self._alone.pop()))
        self._alone = []
        ready.reverse()
        self._ready = ready
        return self._next()

    def _cut(self, rows: Any, sizes: list[int]) -> list[Any] | None:
        """A group's batches (or the rows of each, ``_rows`` set), or None to fetch alone.

        Our own ``collate`` collates the group once and cuts its batch apart where that is
        the batch of each part (:func:`split_batch`): a collate and the part's dicts less
        per batch. Else, and for any other ``collate_fn``, each part's rows are collated
        when its batch is handed out, so an error comes from the batch it belongs to.
        """
        if not isinstance(rows, RowBatch):
            return None
        if self._ours:  # if its collate raises, the group is fetched batch by batch
            batches = split_batch(self._collate(rows), rows, sizes)
            if batches is not None:
                self._rows = False
                return batches
            self._ours = False  # such columns come again: not collated twice per group
        parts = rows.split(sizes)
        self._rows = True
        return parts


def _is_collate(function: object) -> bool:
    """Whether ``function`` is :func:`collate`, or a ``functools.partial`` of it with options."""
    if isinstance(function, functools.partial):
        return function.func is collate and not function.args
    return function is collate


def _per_group(rows: Any) -> int:
    """How many batches of the size of ``rows`` (an epoch's first) one fetch serves."""
    if not isinstance(rows, RowBatch) or rows.materialized or not len(rows):
        return 1
    row_bytes = max(1, -(-rows.nbytes() // len(rows)))
    return max(1, min(AHEAD_ROWS, AHEAD_BYTES // row_bytes) // len(rows))


class _Counting(Iterator[Any]):
    """Torch's iterator over a :class:`ChunkedLoader`'s epoch, counting the samples handed out.

    A forked worker that never starts (see :mod:`startwatch`) is stopped by the epoch's
    watch; torch then raises that a worker died, and this iterator shuts the workers down
    and starts the epoch's rest with new ones, from the next batch (the sampler rewound to
    the samples handed out), at most ``worker_restarts`` times an epoch.
    """

    def __init__(self, loader: ChunkedLoader, sampler: ChunkedSampler, batch: int) -> None:
        self._loader = loader
        self._sampler = sampler
        self._batch = batch
        self._restarts = 0
        self._inner, self._watch = loader._workers_iterator()

    def __next__(self) -> Any:
        while True:
            watch = self._watch
            if watch is not None:
                watch.waiting_since = time.monotonic()
            try:
                item = next(self._inner)
            except StopIteration:
                self._end()
                raise
            except RuntimeError as exc:  # torch's report of a dead worker
                if watch is None or not watch.stuck:
                    raise
                self._restart(watch, exc)
                continue
            finally:
                if watch is not None:
                    watch.waiting_since = None
            sampler = self._sampler
            sampler.consumed = min(sampler.consumed + self._batch, len(sampler))
            return item

    def __len__(self) -> int:
        return len(self._inner)  # type: ignore[arg-type]

    def __del__(self) -> None:
        self._end()

    def _end(self) -> None:
        watch = getattr(self, "_watch", None)
        if watch is not None:
            watch.close()

    def _restart(self, watch: StartWatch, exc: RuntimeError) -> None:
        """Shut down the workers of a pass one of whose never started; go on with new ones."""
        self._restarts += 1
        loader, sampler = self._loader, self._sampler
        names = ", ".join(f"{i} (pid {pid})" for i, pid in watch.stuck)
        cause = (
            "this Python's fork() can leave a child waiting forever on a lock another thread "
            "held (python/cpython#112275, fixed in Python 3.11.10 and 3.12: upgrading avoids it)"
            if fork_deadlock_prone()
            else "a lock another thread held at fork() can leave a child waiting forever"
        )
        self._shutdown()
        if self._restarts > loader.worker_restarts:
            raise WorkerStartError(
                f"ChunkedLoader: DataLoader worker {names} did not start within "
                f"{watch.deadline:g} s of its fork, start failure {self._restarts} of this epoch "
                f"(ChunkedLoader.worker_restarts is {loader.worker_restarts}); {cause}. The "
                f"epoch stopped after {sampler.consumed} samples of this rank's "
                f"{len(sampler)}: its state_dict() "
                "resumes there; or pass multiprocessing_context='forkserver' (a script then "
                "needs an `if __name__ == \"__main__\":` guard)"
            ) from exc
        warnings.warn(
            WorkerStartWarning(
                f"ChunkedLoader: DataLoader worker {names} did not start within "
                f"{watch.deadline:g} s of its fork and was stopped; {cause}. The epoch goes on "
                f"with new workers from sample {sampler.consumed} of this rank's "
                f"{len(sampler)}: no batch is lost or repeated"
            ),
            stacklevel=3,
        )
        sampler.rewind(sampler.consumed)
        loader._begin_pass(sampler, self._batch)
        self._inner, self._watch = loader._workers_iterator()

    def _shutdown(self) -> None:
        """Shut down the current pass's workers (torch's own shutdown of its iterator)."""
        self._end()
        inner, loader = self._inner, self._loader
        shutdown = getattr(inner, "_shutdown_workers", None)
        for _ in range(3):
            try:
                if shutdown is not None:
                    shutdown()
                break
            except RuntimeError:  # torch's SIGCHLD handler, again for the stopped worker
                continue
        if getattr(loader, "_iterator", None) is inner:  # persistent workers: start anew
            loader._iterator = None


@guard("load()")
def load(
    path: SourceLike | ParquetDataset | Mixture,
    schema: Any,
    collator: Callable[[list[dict[str, Any]]], Any] | None,
    batch: int,
    workers: int = 0,
    memory: float | str = DEFAULT_MEMORY,
    *,
    shuffle: bool = False,
    seed: int = 0,
    mix: int = 1,
    drop_last: bool = True,
    ranks: int | None = None,
    rank: int | None = None,
    pin_memory: bool = False,
    persistent_workers: bool = False,
    prefetch_factor: int | None = None,
    multiprocessing_context: str | multiprocessing.context.BaseContext | None = None,
    timeout: float = 0,
    worker_init_fn: Callable[[int], None] | None = None,
    columns: Sequence[str] | None = None,
    window_bytes: int | str | None = None,
    duckdb_config: Mapping[str, Any] | None = None,
    query: str | None = None,
    where: str | None = None,
    tables: Mapping[str, Any] | None = None,
    format: Format | None = None,
    check_data: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    cache_limit: int | str | None = None,
    retries: int | None = None,
    disk: float | str | None = None,
    disk_dir: str | os.PathLike[str] | None = None,
    pack: Pack | Mapping[str, Any] | None = None,
    split: Split | None = None,
    index_executor: TaskMap | None = None,
    one_block: bool = True,
) -> ChunkedLoader:
    """Build a DataLoader for the dataset at ``path``.

    The dataset is validated against ``schema`` first, unless it passed before with the same
    schema and the same shards (see :func:`validated.validate_once`: the verdict is kept in
    this process and in the user's cache directory, and under ``torch.distributed`` the ranks
    validate together, each scanning a share, so every rank must call ``load()``); indices
    come from a :class:`ChunkedSampler` (each rank and each worker reads contiguous windows);
    workers start with :func:`default_start_method` unless ``multiprocessing_context`` says
    otherwise.

    Args:
        path: A Parquet file, a directory of shards, a glob or a list of files (see
            ``ParquetDataset``), an open ``ParquetDataset``, or a
            :class:`~undertale_duck.Mixture` (the dataset options below are then the
            mixture's own business; ``shuffle``, resume and ``batch_rows`` work alike).
        schema: Expected dataset schema (a schema class); None skips validation. For a
            mixture, every stream that is a ``ParquetDataset`` is validated.
        collator: Turns a list of row dicts into a batch (``collate_fn``); None keeps lists.
        batch: Batch size.
        workers: Number of worker processes; 0 reads in the main process.
        memory: Memory budget in megabytes per process (cached windows plus a read).
        shuffle: Shuffle windows and the rows inside them, per epoch (``set_epoch``).
        seed: Shuffle seed.
        mix: With ``shuffle``, how many windows' rows are mixed together.
        drop_last: True (training): equal rank shares, the last few rows of the epoch's
            sequence left out (undertale's original rule). False (evaluation): every row
            exactly once; ranks may then run one batch more than others.
        ranks: Distributed ranks (from ``torch.distributed`` by default).
        rank: This rank (from ``torch.distributed`` by default).
        pin_memory: Passed to ``DataLoader``.
        persistent_workers: Passed to ``DataLoader`` (needs ``workers > 0``).
        prefetch_factor: Passed to ``DataLoader`` (needs ``workers > 0``).
        multiprocessing_context: Worker start method (``fork``, ``spawn``, ``forkserver``)
            or a ``multiprocessing`` context; under ``spawn`` and ``forkserver``
            ``collator`` and ``worker_init_fn`` must pickle (module-level functions).
        timeout: Passed to ``DataLoader``.
        worker_init_fn: Passed to ``DataLoader``.
        columns: Columns to read (all by default).
        window_bytes: Target window size in bytes (see ``ParquetDataset``).
        duckdb_config: DuckDB settings (see ``ParquetDataset``).
        query: Serve a view: SQL over ``dataset`` (see ``ParquetDataset`` and docs/views.md).
        where: Shorthand for a view keeping the rows matching this SQL condition.
        tables: Side tables the view joins (``{name: path or pyarrow.Table}``).
        format: Row value format (``"python"``, the default, ``"numpy"``, ``"torch"``).
        check_data: When resuming (``load_state_dict``), refuse a state saved over other
            data (a different dataset fingerprint); False resumes at the saved position
            anyway.
        storage_options: Options of a remote source's store (see docs/storage.md).
        cache_dir: The node's shard cache directory for a remote source.
        cache_limit: The shard cache's byte limit.
        retries: Retries of a failed store request.
        disk: Size of a local disk tier (MiB or a size string, see ``ParquetDataset``):
            decoded windows kept as memory-mapped files, so uniform random access stays
            fast and later runs over the same data decode nothing.
        disk_dir: The disk tier's directory (needs ``disk``; see ``ParquetDataset``).
        pack: Serve fixed-length blocks of tokens (see ``ParquetDataset`` and
            docs/packing.md); the schema still describes the documents.
        split: Serve one part of a train/validation split (see docs/packing.md#splits).
        index_executor: Where a view's indexing pass runs, one task per shard (see
            ``ParquetDataset``; default: in this process).
        one_block: With workers, place each batch's tensors in one shared-memory block in
            the worker (:func:`~undertale_duck.one_block`), so torch passes one block per
            batch to the main process instead of one per tensor (``collator``'s batches
            too: dicts, lists, tuples and their subclasses). A tensor kept after its batch keeps
            the block alive; False leaves the tensors to torch.

    Returns:
        A :class:`ChunkedLoader` (a ``DataLoader`` with ``state_dict``/``load_state_dict``).

    Raises:
        SchemaError: If the dataset does not conform to ``schema``.
        SourceError: If the dataset cannot be opened.
        ArgumentError: If an argument is out of range.
    """
    dataset: ParquetDataset | Mixture
    if isinstance(path, ParquetDataset | Mixture):
        # what defines the rows is the given dataset's: a view of it here would be ignored,
        # serving the rows the view leaves out
        given = [name for name, value in
                 (("query", query), ("where", where), ("tables", tables), ("pack", pack),
                  ("split", split), ("index_executor", index_executor),
                  ("window_bytes", window_bytes), ("duckdb_config", duckdb_config),
                  ("storage_options", storage_options), ("cache_dir", cache_dir),
                  ("cache_limit", cache_limit), ("retries", retries), ("disk", disk),
                  ("disk_dir", disk_dir))
                 if value is not None]
        if given:
            named = " and ".join(f"{name}=" for name in given)
            raise ArgumentError(
                f"{named} {'applies' if len(given) == 1 else 'apply'} when load() opens the "
                "dataset; give "
                f"{'it' if len(given) == 1 else 'them'} to the {type(path).__name__} passed "
                "as path instead"
            )
        _check_served_as_asked(path, columns, format)
        dataset = path
    else:
        dataset = ParquetDataset(
            path,
            memory,
            columns=columns,
            window_bytes=window_bytes,
            duckdb_config=duckdb_config,
            query=query,
            where=where,
            tables=tables,
            format="python" if format is None else format,
            storage_options=storage_options,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            retries=retries,
            disk=disk,
            disk_dir=disk_dir,
            pack=pack,
            split=split,
            index_executor=index_executor,
        )
    if schema is not None:
        parts = [s.dataset for s in dataset.streams] if isinstance(dataset, Mixture) else [dataset]
        for part in parts:
            if isinstance(part, ParquetDataset):
                validate_once(part, schema)
    sampler = ChunkedSampler(
        dataset, batch, workers, ranks, rank, shuffle=shuffle, seed=seed, mix=mix,
        drop_last=drop_last,
    )
    _check_loader_options(collator, worker_init_fn, timeout, pin_memory=pin_memory,
                          persistent_workers=persistent_workers, check_data=check_data)
    if workers == 0 and (persistent_workers or prefetch_factor is not None):
        raise ArgumentError(
            "persistent_workers and prefetch_factor need workers > 0; got workers=0"
        )
    if prefetch_factor is not None:
        prefetch_factor = check_int("prefetch_factor", prefetch_factor, 1, say_range=False)
    if not isinstance(one_block, bool):
        raise ArgumentError(f"one_block must be True or False, got {one_block!r}")
    context = None
    if workers > 0:
        context = _context(multiprocessing_context)
        if context.get_start_method() != "fork":
            _check_picklable(collator=collator, worker_init_fn=worker_init_fn)
    loader = ChunkedLoader(
        dataset,
        # the sampler's checked ints: DataLoader refuses numpy integers with its own error
        batch_size=sampler.batch,
        sampler=sampler,
        num_workers=sampler.workers,
        collate_fn=_collate_fn(collator, dataset, workers, one_block),
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
        prefetch_factor=prefetch_factor,
        multiprocessing_context=context,
        timeout=timeout,
        worker_init_fn=worker_init_fn,  # wrapped for a shuffled epoch's hints (_hint)
    )
    loader.check_data = check_data
    return loader


def _check_served_as_asked(
    dataset: ParquetDataset | Mixture, columns: Sequence[str] | None, format: Format | None
) -> None:
    """Refuse ``columns=``/``format=`` that an open dataset (or a mixture's) does not serve.

    The open dataset serves its own columns in its own format: a differing request would
    otherwise be ignored, and the collator handed rows it was not written for.
    """
    parts = [s.dataset for s in dataset.streams] if isinstance(dataset, Mixture) else [dataset]
    for part in parts:
        if not isinstance(part, ParquetDataset):
            continue  # a map-style dataset of the user's: its rows are its own
        if format is not None and part.format != format:
            raise ArgumentError(
                f"format={format!r}, but the open dataset {part.source.spec!r} serves "
                f"format={part.format!r}: open it with format={format!r}, or leave format= "
                "out of load()"
            )
        if columns is not None and list(columns) != part.columns:
            raise ArgumentError(
                f"columns={list(columns)!r}, but the open dataset {part.source.spec!r} serves "
                f"{part.columns!r}: open it with these columns, or leave columns= out of load()"
            )


def _check_loader_options(
    collator: object, worker_init_fn: object, timeout: object, **flags: object
) -> None:
    """Refuse what DataLoader would take silently or only fail on at the first batch.

    ``DataLoader`` calls ``collate_fn`` and ``worker_init_fn`` only when batches flow (a
    worker's ``TypeError`` then arrives as a traceback from another process) and tests its
    flags for truth (``persistent_workers="no"`` would keep workers).
    """
    for name, value in (("collator", collator), ("worker_init_fn", worker_init_fn)):
        if value is not None and not callable(value):
            raise ArgumentError(
                f"{name} must be a function (or None), got {type(value).__name__} {value!r}"
            )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
        timeout >= 0 and timeout < float("inf")
    ):
        raise ArgumentError(
            f"timeout must be a number of seconds >= 0 (0: wait forever), got {timeout!r}"
        )
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ArgumentError(f"{name} must be True or False, got {flag!r}")


def _context(method: object) -> multiprocessing.context.BaseContext:
    """The workers' start method: a name, a ``multiprocessing`` context, or ours."""
    if isinstance(method, multiprocessing.context.BaseContext):  # as DataLoader takes it
        return method
    name = method or default_start_method()
    if name not in multiprocessing.get_all_start_methods():
        raise ArgumentError(
            f"multiprocessing_context must be one of "
            f"{multiprocessing.get_all_start_methods()} (or a multiprocessing context), "
            f"got {name!r}"
        )
    return multiprocessing.get_context(str(name))


def _check_picklable(**functions: object) -> None:
    """Refuse functions a spawned worker cannot receive, before any worker starts.

    Under ``spawn`` and ``forkserver`` the DataLoader pickles ``collate_fn`` and
    ``worker_init_fn`` to each worker when the first epoch starts; a lambda or a local
    function then fails there with pickle's error, far from the call that set it.
    """
    for name, function in functions.items():
        if function is None:
            continue
        try:
            pickle.dumps(function)
        except Exception as exc:  # pickle raises several types (PicklingError, AttributeError)
            raise ArgumentError(
                f"{name} {function!r} cannot be sent to worker processes started with spawn "
                f"or forkserver ({type(exc).__name__}: {exc}); define it at module level "
                "(not a lambda or a local function), or start workers with "
                "multiprocessing_context='fork' (Linux)"
            ) from None


def _collate_fn(
    collator: Callable[..., Any] | None, dataset: Any, workers: int, one_block: bool
) -> Callable[..., Any]:
    """The loader's ``collate_fn``: ``collator`` told the schema, its batches in one block.

    Our own ``collate`` places a worker's batch in one block itself (``one_block=False``
    turns that off); another collator is wrapped to do so where workers collate.
    """
    if collator is None:
        return _as_list
    function = _with_schema(collator, dataset)
    if _is_collate(function):
        return function if one_block else functools.partial(function, one_block=False)
    return _OneBlock(function) if one_block and workers > 0 else function


class _OneBlock:
    """A collator whose batches :func:`one_block` places in one block (in a worker)."""

    def __init__(self, collator: Callable[..., Any]) -> None:
        self.collator = collator

    def __call__(self, rows: Any) -> Any:
        return to_one_block(self.collator(rows))

    def __repr__(self) -> str:
        return f"{self.collator!r} (its batches in one block)"


def _with_schema(collator: Callable[..., Any], dataset: Any) -> Callable[..., Any]:
    """``collate`` told the dataset's schema, else ``collator`` as given.

    Python rows do not say the type of a list column whose lists are all empty in a batch;
    told the schema, ``collate`` makes such a batch int64 like the batches with values (not
    float64). A mixture is told its sources' schema where they all have the same one.
    """
    if collator is not collate:
        return collator
    parts = [s.dataset for s in dataset.streams] if isinstance(dataset, Mixture) else [dataset]
    schemas = [getattr(part, "schema", None) for part in parts]
    first = schemas[0]
    if isinstance(first, pa.Schema) and all(
        isinstance(s, pa.Schema) and s.equals(first) for s in schemas
    ):
        return functools.partial(collate, schema=first)
    return collator


def _as_list(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return rows
