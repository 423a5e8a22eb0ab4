"""``DataModule``: a Lightning DataModule serving ParquetDatasets through ``load()``."""

from __future__ import annotations

import dataclasses
import inspect
import os
import types
from collections.abc import Callable, Iterator
from typing import Any, Literal

import lightning

from ..common.keywords import refuse_unknown
from ..common.numbers import check_int
from ..common.sizes import DEFAULT_MEMORY, parse_size
from ..core.source import SourceLike
from ..core.views import check_split
from ..dataset import ParquetDataset
from ..errors import ArgumentError
from .loader import ChunkedLoader, load
from .mixture import Mixture
from .resume_state import check_module_state

#: What a split may be: a source (path, URL, glob, list) or a Mixture of sources.
SplitSource = SourceLike | Mixture

#: ``load()`` keywords the DataModule sets itself; every other keyword option passes through.
_OWN = frozenset({"shuffle", "ranks", "rank"})
_OPTIONS = frozenset(
    name
    for name, p in inspect.signature(load).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
) - _OWN
#: Options about opening a source (where and how to read it); a split given as an open
#: dataset or a Mixture was opened with its own, so they apply to the splits given as paths.
_OPENING = frozenset({"window_bytes", "duckdb_config", "storage_options", "cache_dir",
                      "cache_limit", "retries", "disk", "disk_dir"})
#: Evaluation hooks and the attribute holding each one's path.
_SPLITS = {"val_dataloader": "validation", "test_dataloader": "test",
           "predict_dataloader": "predict"}


class DataModule(lightning.LightningDataModule):
    """A Lightning DataModule that wraps ParquetDatasets.

    Every split is read through :func:`undertale_duck.load` (schema validation, a
    :class:`~undertale_duck.ChunkedSampler`, resumable loader). Training shuffles (windows,
    and rows inside them) unless ``shuffle=False``; evaluation never does. Lightning calls
    ``set_epoch`` on the training sampler each epoch. The sampler subclasses
    ``DistributedSampler``, so under DDP Lightning keeps it instead of wrapping it in a
    second partitioning ``DistributedSamplerWrapper`` (``use_distributed_sampler`` True or
    False give the same order): each rank reads its own contiguous share once per epoch.
    Under DDP the evaluation splits are partitioned into contiguous shares too, but with
    ``drop_last=False``: every row is evaluated exactly once (no padding duplicates), and a
    rank may run one batch more than another, so log evaluation metrics with
    ``sync_dist=True`` at epoch end (``on_epoch=True, on_step=False``), not per step.
    ``drop_last`` (an option) sets the training split's rule only.

    The training position (epoch and samples consumed) is saved in Lightning checkpoints
    through :meth:`state_dict`; fitting with ``ckpt_path=`` resumes mid-epoch with exactly
    the samples not yet consumed.

    Args:
        training: Path to the training dataset, or a :class:`~undertale_duck.Mixture`
            (any split may be one; proportions per epoch, resume and the data check apply).
        validation: Path to the validation dataset; None skips validation (Lightning then
            sees no ``val_dataloader``, as with ``test`` and ``predict``).
        schema: Expected dataset schema (None skips validation).
        collator: Dataset collator (``collate_fn``).
        batch: Batch size.
        workers: Number of DataLoader workers; 0 reads in the main process.
        memory: Memory budget in megabytes per process (cached windows plus a read).
        test: Path to the test dataset (for ``trainer.test``).
        predict: Path to the prediction dataset (for ``trainer.predict``).
        shuffle: Shuffle the training split.
        **options: Other keyword options of :func:`undertale_duck.load` (``seed``, ``mix``,
            ``pin_memory``, ``persistent_workers``, ``prefetch_factor``,
            ``multiprocessing_context``, ``columns``, ``pack``, ``index_executor``, ...).
            ``split=Split(...)``
            serves its train part for training and its validation part for validation
            (``validation`` may then be the training path itself; docs/packing.md#splits).
            The options about opening a source (``storage_options``, ``cache_dir``,
            ``cache_limit``, ``retries``, ``window_bytes``, ``duckdb_config``) apply to the
            splits given as paths; a split given as an open dataset or a Mixture keeps its
            own, and ``columns``/``format`` must match what it serves.

    Raises:
        ArgumentError: If an option is not one ``load()`` accepts, ``batch`` or ``workers``
            is not an integer (a bool is not) in range, or ``memory`` is not a size.
    """

    def __init__(
        self,
        training: SplitSource,
        validation: SplitSource | None,
        schema: Any,
        collator: Callable[[list[dict[str, Any]]], Any] | None,
        batch: int,
        workers: int = 0,
        memory: float | str = DEFAULT_MEMORY,
        *,
        test: SplitSource | None = None,
        predict: SplitSource | None = None,
        shuffle: bool = True,
        **options: Any,
    ) -> None:
        super().__init__()
        named = {"batch", "workers", "memory", "collator", "test", "predict", "shuffle"}
        refuse_unknown("DataModule()", sorted(options), _OPTIONS | named)
        # here, not when Lightning first asks for a loader: batch=True would count as 1
        batch = check_int("batch", batch, 1)
        workers = check_int("workers", workers, 0)
        parse_size(memory, "memory", "MiB")  # kept as given: load() reads it again
        split = options.get("split")
        if split is not None and validation is not None and (
            _source_key(validation) != _source_key(training)
        ):
            # the split would cut the other dataset too, validating on a fraction of it
            raise ArgumentError(
                f"split= serves the train and validation parts of one source, but validation "
                f"({validation!r:.100}) is not the training source ({training!r:.100}); pass "
                "the training source as validation too, or leave split= out to validate on "
                "every row of the validation source"
            )
        self.training = training
        self.validation = validation
        self.test = test
        self.predict = predict
        self.schema = schema
        self.collator = collator
        self.batch = batch
        self.workers = workers
        self.memory = memory
        self.shuffle = shuffle
        self.options = options
        self._train_loader: ChunkedLoader | None = None
        self._pending: dict[str, Any] = {}
        self._reload_setting: int | None = None  # the trainer's, while an elastic epoch runs
        self._hide_missing_splits()

    def _hide_missing_splits(self) -> None:
        # A split without a path gets LightningDataModule's own hook, which Lightning treats
        # as "no such split" (no loader, no warning), as LightningDataModule.from_datasets does.
        base = lightning.LightningDataModule
        for name, path in _SPLITS.items():
            if getattr(self, path) is None:
                setattr(self, name, types.MethodType(getattr(base, name), self))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in _SPLITS:
            state.pop(name, None)
        state["_train_loader"] = None  # its workers cannot be pickled; keep its position
        state["_pending"] = self.state_dict().get("train", {})
        # an executor (a process group) does not travel: a copy indexes views itself
        state["options"] = {k: v for k, v in self.options.items() if k != "index_executor"}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._hide_missing_splits()

    def _load(
        self,
        path: SplitSource,
        shuffle: bool,
        part: Literal["train", "validation"] | None = None,
        *,
        evaluation: bool = False,
    ) -> ChunkedLoader:
        options = dict(self.options)
        if isinstance(path, ParquetDataset | Mixture):  # opened with its own options
            for name in _OPENING:
                options.pop(name, None)
        split = check_split(options.pop("split", None))
        if split is not None and part is not None:  # test and predict are not split
            options["split"] = dataclasses.replace(split, part=part)
        if evaluation:  # every row once over the ranks: no tail dropped
            options["drop_last"] = False
        loader = load(
            path,
            self.schema,
            self.collator,
            self.batch,
            self.workers,
            self.memory,
            shuffle=shuffle,
            **options,
        )
        sampler = loader.chunked_sampler
        if evaluation and sampler is not None:
            # Lightning sets the epoch of evaluation samplers too: a Mixture would then
            # evaluate other rows of a downsampled stream each epoch, metrics of other data
            sampler.fixed_epoch = True
        return loader

    def __iter__(self) -> Iterator[Any]:
        """Yield the training split's collated batches, one epoch (as undertale's scripts do).

        A pass like ``for batch in datamodule: ...`` (class weights from the labels, say)
        runs over a loader of its own, with the training settings: it neither moves nor
        resets the training position that checkpoints save. Under ``torch.distributed`` it
        covers this rank's share.

        Returns:
            An iterator over the batches.
        """
        return iter(self._load(self.training, self.shuffle, "train"))

    def train_dataloader(self) -> ChunkedLoader:
        """Return the training loader (shuffled by default), resumed from a restored state.

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.

        Raises:
            ArgumentError: If ``drop_last=False`` gives the ranks different numbers of batches.
        """
        loader = self._load(self.training, self.shuffle, "train")
        if self._pending:
            loader.load_state_dict(self._pending)
            self._carry_lightning_count(loader, self._pending)
            self._pending = {}
        # after the restored state: an elastic rest is shared anew, maybe unequally
        _check_equal_steps(loader)
        self._train_loader = loader
        self._reload_after_elastic(loader)
        return loader

    def _carry_lightning_count(self, loader: ChunkedLoader, state: dict[str, Any]) -> None:
        """Count into the next epoch the batches Lightning carries over from the saved one.

        Restored from a checkpoint saved at the last batch of an epoch (not at its end),
        Lightning starts the next epoch at that epoch's batch count unless the new loader has
        no more batches: on another topology (a smaller batch, fewer ranks) it would skip the
        next epoch's first batches. The sampler's length counts them (``carried``) instead.
        """
        sampler = loader.chunked_sampler
        trainer = getattr(self, "trainer", None)
        if sampler is None or trainer is None or sampler.epoch == state.get("epoch"):
            return
        loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
        progress = getattr(loop, "batch_progress", None)
        if loop is None or progress is None or not loop.restarting:
            return
        total = progress.total
        steps = progress.current.completed + 1
        # Lightning's own tests: a checkpoint of on_train_batch_end (its "restarted on train
        # batch end") at the epoch's last batch, after which it starts the next epoch; it
        # starts it at batch 0 when the loader has no more batches than the count (the same
        # topology): nothing to carry then
        if progress.is_last_batch and (
            total.ready == total.started == total.processed == total.completed + 1
        ) and len(loader) > steps:
            sampler.carried = steps

    def _reload_after_elastic(self, loader: ChunkedLoader) -> None:
        """Have Lightning rebuild the training loader once after an elastically resumed epoch.

        Lightning reads the loader's length once, and the epoch resumed on another topology
        has another length (the batches before the checkpoint plus this rank's rest) than the
        epochs after it; so has the epoch after a checkpoint saved at the last batch of an
        epoch (:attr:`ChunkedSampler.carried`).
        ``reload_dataloaders_every_n_epochs`` is set so that Lightning rebuilds the loader
        when that epoch ends, and given back its value when the next epoch's loader is built.
        """
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return
        if self._reload_setting is not None:
            trainer.reload_dataloaders_every_n_epochs = self._reload_setting
            self._reload_setting = None
        sampler = loader.chunked_sampler
        if sampler is not None and (sampler.elastic or sampler.carried):
            self._reload_setting = trainer.reload_dataloaders_every_n_epochs
            # after the sampler's epoch: a state that ended its epoch is in the next one
            # while Lightning, restored at that epoch's last batch, is still in the saved one
            trainer.reload_dataloaders_every_n_epochs = max(
                1, sampler.epoch + 1 - trainer.current_epoch)

    def val_dataloader(self) -> ChunkedLoader:
        """Return the validation loader: never shuffled, every row once across the ranks.

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        assert self.validation is not None  # replaced in __init__ otherwise
        return self._load(self.validation, False, "validation", evaluation=True)

    def test_dataloader(self) -> ChunkedLoader:
        """Return the test loader, never shuffled (only with a ``test`` path).

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        assert self.test is not None  # replaced in __init__ otherwise
        return self._load(self.test, False, evaluation=True)

    def predict_dataloader(self) -> ChunkedLoader:
        """Return the prediction loader, never shuffled (only with a ``predict`` path).

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        assert self.predict is not None  # replaced in __init__ otherwise
        return self._load(self.predict, False, evaluation=True)

    def state_dict(self) -> dict[str, Any]:
        """Return the training position for a checkpoint.

        Returns:
            ``{"train": <ChunkedSampler state>}``, or ``{}`` before training started.
        """
        if self._train_loader is not None:
            state = self._train_loader.state_dict()
            return {"train": state} if state else {}
        return {"train": self._pending} if self._pending else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the training position; the next training epoch continues from it.

        Args:
            state_dict: A dict from :meth:`state_dict`.

        Raises:
            ArgumentError: If the state does not fit this DataModule's training loader.
        """
        state = check_module_state(state_dict).get("train", {})
        if not state:
            return
        if self._train_loader is not None:
            self._train_loader.load_state_dict(state)
        else:
            self._pending = dict(state)


def _check_equal_steps(loader: ChunkedLoader) -> None:
    """Refuse a training loader whose ranks would run different numbers of steps.

    ``drop_last=False`` shares every row, so a rank may get one batch more; under DDP that
    rank's extra backward pass waits for gradients no other rank sends: a hang, or a raw
    gloo/NCCL error once a peer has left.
    """
    sampler = loader.chunked_sampler
    if sampler is None or sampler.drop_last or sampler.ranks == 1:
        return
    steps = sampler.rank_batches()
    if len(set(steps)) > 1:
        which = (
            "for the rest of the resumed epoch (the rows the checkpoint left, shared anew)"
            if sampler.elastic
            else f"per epoch ({sampler.length} rows, batch={sampler.batch})"
        )
        raise ArgumentError(
            f"drop_last=False gives the {sampler.ranks} ranks {min(steps)} to {max(steps)} "
            f"training batches {which}: under "
            "DDP a rank with one step more waits for the others' gradients (a hang or a "
            "gloo/NCCL error). Keep drop_last=True for training (the default: fewer than "
            "ranks x workers rows are left out of an epoch), or choose a batch size that "
            "gives every rank the same number of batches"
        )


def _source_key(source: object) -> object:
    """What tells two split sources apart: paths made absolute, other values by identity."""
    if isinstance(source, str | os.PathLike):
        text = str(os.fspath(source))
        return text if "://" in text else os.path.abspath(text)
    if isinstance(source, list | tuple):
        return tuple(_source_key(s) for s in source)
    return id(source)
