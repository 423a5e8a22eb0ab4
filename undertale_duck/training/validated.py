"""Validate a dataset for ``load()``: reuse verdicts, and under DDP let every rank scan a share."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist
from pydantic import BaseModel

from .. import errors
from ..dataset import PackedDataset, ParquetDataset
from ..errors import SchemaError, UndertaleDuckError
from ..validation import verdicts
from ..validation.executors import TorchDistributedExecutor


def validate_once(dataset: ParquetDataset, schema: Any) -> None:
    """Check ``dataset`` against ``schema`` unless a passing verdict is on record.

    Outside ``torch.distributed`` (or with one process) this is
    :func:`undertale_duck.validation.verdicts.validate`. With several processes it is a
    collective, like a barrier: every rank must call it (``DataModule``'s hooks do). The
    ranks first share their verdict keys and rank 0's record; then, all deciding alike:

    - rank 0 has a passing verdict on record: no rank scans (a rank whose dataset
      fingerprint differs from rank 0's, other files on another machine, validates its own);
    - every rank has the same dataset: the ranks validate it together, each scanning a share
      of the shards (:class:`TorchDistributedExecutor`), and every rank ends with the same
      report, the one a single process makes;
    - otherwise (a view, whose side tables live in each process, or different files on
      some rank): rank 0 validates and sends its verdict; a rank with other files validates
      its own.

    Args:
        dataset: The opened dataset.
        schema: A pydantic model class.

    Raises:
        SchemaError: If the dataset does not conform (on every rank, with the report).
        UndertaleDuckError: What a rank's validation raised, on every rank.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        verdicts.validate(dataset, schema)
        return
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        dataset.validate(schema)  # the usual ArgumentError, raised alike on every rank
        return
    key = verdicts.verdict_key(dataset, schema)
    rank = dist.get_rank()
    mine = {"key": key, "known": rank == 0 and verdicts.known(key), "tasks": _by_tasks(dataset)}
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    first = every[0]
    if first["known"]:
        if rank == 0:
            verdicts.count(reused=1)
        elif key == first["key"]:
            verdicts.count(shared=1)
            verdicts.remember(key)
        else:
            verdicts.validate(dataset, schema, key)
        return
    if all(e["key"] == key and e["tasks"] for e in every):
        _together(dataset, schema, key, rank)
        return
    _from_rank_zero(dataset, schema, key, rank)


def _by_tasks(dataset: ParquetDataset) -> bool:
    """Whether the dataset's checks can run as tasks (its shards' rows, not a view's)."""
    checked = dataset.documents if isinstance(dataset, PackedDataset) else dataset
    return checked.view is None


def _together(dataset: ParquetDataset, schema: type[BaseModel], key: str, rank: int) -> None:
    """Every rank scans its share; every rank gets the whole report (a collective)."""
    verdicts.count(scans=1, together=1)
    report = dataset.report(schema, executor=TorchDistributedExecutor())
    if not report.passed:
        raise SchemaError(f"dataset does not conform: {report.summary()}", report=report)
    verdicts.record(key, dataset, schema, write=rank == 0)


def _from_rank_zero(dataset: ParquetDataset, schema: type[BaseModel], key: str, rank: int) -> None:
    """Rank 0 validates and broadcasts its verdict; a rank with other files checks its own."""
    message: list[Any] = [None]
    if rank == 0:
        verdict: dict[str, Any] = {"key": key, "passed": False, "error": "validation stopped"}
        try:
            verdicts.validate(dataset, schema, key)
            verdict = {"key": key, "passed": True}
        except SchemaError as exc:
            report = exc.report
            verdict["error"] = str(exc)
            verdict["report"] = report.model_dump_json() if isinstance(report, BaseModel) else None
            raise
        except UndertaleDuckError as exc:
            verdict["error"] = str(exc)
            verdict["kind"] = type(exc).__name__
            raise
        finally:
            message[0] = verdict  # sent even when rank 0 fails, so no rank waits forever
            dist.broadcast_object_list(message, src=0)
        return
    dist.broadcast_object_list(message, src=0)
    received: dict[str, Any] = message[0]
    if received["key"] != key:
        verdicts.validate(dataset, schema, key)
        return
    verdicts.count(shared=1)
    if received["passed"]:
        verdicts.remember(key)
        return
    _raise(received)


def _raise(verdict: dict[str, Any]) -> None:
    """Raise on this rank the error rank 0's validation raised."""
    text = f"rank 0 validated the dataset: {verdict['error']}"
    if "report" in verdict:
        from ..validation.model import ValidationReport

        blob = verdict["report"]
        report = None if blob is None else ValidationReport.model_validate_json(blob)
        raise SchemaError(text, report=report)
    kind = getattr(errors, str(verdict.get("kind")), None)
    if isinstance(kind, type) and issubclass(kind, UndertaleDuckError):
        raise kind(text)
    raise UndertaleDuckError(text)
