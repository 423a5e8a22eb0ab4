"""Validate a dataset for ``load()``: reuse verdicts, and under DDP let rank 0 scan for all."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist
from pydantic import BaseModel

from .. import errors
from ..dataset import ParquetDataset
from ..errors import SchemaError, UndertaleDuckError
from ..validation import verdicts


def validate_once(dataset: ParquetDataset, schema: Any) -> None:
    """Check ``dataset`` against ``schema`` unless a passing verdict is on record.

    Outside ``torch.distributed`` (or with one process) this is
    :func:`undertale_duck.validation.verdicts.validate`. With several processes it is a
    collective, like a barrier: every rank must call it (``DataModule``'s hooks do). Rank 0
    validates (or reuses its recorded verdict) while the others wait for its verdict; a rank
    whose dataset fingerprint differs from rank 0's (other files on another machine)
    validates its own.

    Args:
        dataset: The opened dataset.
        schema: A pydantic model class.

    Raises:
        SchemaError: If the dataset does not conform (on every rank).
        UndertaleDuckError: What rank 0's validation raised, on every rank.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        verdicts.validate(dataset, schema)
        return
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        dataset.validate(schema)  # the usual ArgumentError, raised alike on every rank
        return
    key = verdicts.verdict_key(dataset, schema)
    message: list[Any] = [None]
    if dist.get_rank() == 0:
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
