"""Which rows made a batch: the rows a rank received at a step, without replaying the epoch."""

from __future__ import annotations

from typing import Any

from ..common.numbers import check_int
from ..errors import ArgumentError
from .sampler import ChunkedSampler


def batch_indices(sampler: ChunkedSampler, step: int, *, epoch: int | None = None) -> list[int]:
    """The dataset indices of batch ``step`` of an epoch on the sampler's rank.

    A ``DataLoader`` with ``batch_size=sampler.batch`` (as :func:`~undertale_duck.load`
    builds) cuts the sampler's order into consecutive batches, and hands them to its workers
    and back to the loop in that order, so batch ``step`` is one slice of the order, which is
    a pure function of the sampler's settings and the epoch.

    Args:
        sampler: A sampler built with the training run's settings (dataset, batch, workers,
            ranks, rank, shuffle, seed, mix).
        step: The batch number within the epoch (0 for the first batch of the epoch).
        epoch: The epoch (the sampler's current one by default).

    Returns:
        The indices, in the order the batch holds them.

    Raises:
        ArgumentError: If ``step`` is not an integer >= 0 (numpy's count), or is beyond the
            epoch.
    """
    step = check_int("step", step, 0, say_range=False)
    order = sampler.order(epoch)
    start = step * sampler.batch
    if start >= len(order):
        steps = -(-len(order) // sampler.batch)
        raise ArgumentError(
            f"step {step} is beyond the epoch: rank {sampler.rank} has {steps} batches "
            f"of {sampler.batch} ({len(order)} rows)"
        )
    return [int(i) for i in order[start : start + sampler.batch]]


def batch_rows(
    sampler: ChunkedSampler, step: int, *, epoch: int | None = None, values: bool = False
) -> list[dict[str, Any]]:
    """Describe the rows of batch ``step``: index, source, shard and row in the shard.

    Args:
        sampler: As for :func:`batch_indices`; its dataset is a ``ParquetDataset``, a view
            or a :class:`~undertale_duck.Mixture`.
        step: The batch number within the epoch.
        epoch: The epoch (the sampler's current one by default).
        values: Also include each row's values (``row`` key) as the dataset returns them.

    Returns:
        One dict per row, in batch order: ``position`` (in the batch), ``index`` (in the
        dataset), ``source`` (the mixture stream's name, or None), ``shard`` and
        ``shard_row`` (the source row in that shard). For a packed dataset (or stream) a
        row is a block: ``shard`` and ``shard_row`` are its first document's, and
        ``documents`` lists every document with a token in the block, in order, as
        ``{"shard": ..., "shard_row": ...}`` (entry ``i`` made ``segment_ids == i + 1``).
    """
    dataset: Any = sampler.dataset
    out = []
    for position, index in enumerate(batch_indices(sampler, step, epoch=epoch)):
        source = None
        target, inner = dataset, index
        source_of = getattr(dataset, "source_of", None)
        if callable(source_of):
            stream, inner = source_of(index)
            source = dataset.names[stream]
            target = dataset.streams[stream].dataset
        shard, row = dataset.locate(index)
        entry: dict[str, Any] = {
            "position": position,
            "index": index,
            "source": source,
            "shard": shard,
            "shard_row": row,
        }
        locate_documents = getattr(target, "locate_documents", None)
        if callable(locate_documents):  # a packed dataset: a block spans documents
            entry["documents"] = [
                {"shard": path, "shard_row": local} for path, local in locate_documents(inner)
            ]
        if values:
            entry["row"] = dataset[index]
        out.append(entry)
    return out
