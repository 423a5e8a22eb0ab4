"""``DataModule``: a Lightning DataModule serving ParquetDatasets through ``load()``."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import lightning

from ..core.source import SourceLike
from ..errors import ArgumentError
from .loader import ChunkedLoader, load
from .resume_state import check_module_state

#: ``load()`` keywords the DataModule sets itself; every other keyword option passes through.
_OWN = frozenset({"shuffle", "ranks", "rank"})
_OPTIONS = frozenset(
    name
    for name, p in inspect.signature(load).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
) - _OWN
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
    Under DDP the evaluation splits are partitioned the same way, so their last
    ``len % (ranks * workers)`` rows (at most) are not evaluated.

    The training position (epoch and samples consumed) is saved in Lightning checkpoints
    through :meth:`state_dict`; fitting with ``ckpt_path=`` resumes mid-epoch with exactly
    the samples not yet consumed.

    Args:
        training: Path to the training dataset.
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
            ``multiprocessing_context``, ``columns``, ...).

    Raises:
        ArgumentError: If an option is not one ``load()`` accepts.
    """

    def __init__(
        self,
        training: SourceLike,
        validation: SourceLike | None,
        schema: Any,
        collator: Callable[[list[dict[str, Any]]], Any] | None,
        batch: int,
        workers: int = 0,
        memory: float = 4096,
        *,
        test: SourceLike | None = None,
        predict: SourceLike | None = None,
        shuffle: bool = True,
        **options: Any,
    ) -> None:
        super().__init__()
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ArgumentError(
                f"DataModule got unknown option(s) {unknown}; options are {sorted(_OPTIONS)}"
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
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._hide_missing_splits()

    def _load(self, path: SourceLike, shuffle: bool) -> ChunkedLoader:
        return load(
            path,
            self.schema,
            self.collator,
            self.batch,
            self.workers,
            self.memory,
            shuffle=shuffle,
            **self.options,
        )

    def train_dataloader(self) -> ChunkedLoader:
        """Return the training loader (shuffled by default), resumed from a restored state.

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        loader = self._load(self.training, self.shuffle)
        if self._pending:
            loader.load_state_dict(self._pending)
            self._pending = {}
        self._train_loader = loader
        return loader

    def val_dataloader(self) -> ChunkedLoader:
        """Return the validation loader, never shuffled (Lightning skips it without a path).

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        assert self.validation is not None  # replaced in __init__ otherwise
        return self._load(self.validation, False)

    def test_dataloader(self) -> ChunkedLoader:
        """Return the test loader, never shuffled (only with a ``test`` path).

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        assert self.test is not None  # replaced in __init__ otherwise
        return self._load(self.test, False)

    def predict_dataloader(self) -> ChunkedLoader:
        """Return the prediction loader, never shuffled (only with a ``predict`` path).

        Returns:
            A :class:`~undertale_duck.loader.ChunkedLoader`.
        """
        assert self.predict is not None  # replaced in __init__ otherwise
        return self._load(self.predict, False)

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
