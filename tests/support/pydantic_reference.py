"""The reference verdict validation must equal: which rows ``Model.model_validate`` refuses."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ValidationError

from undertale_duck.validation.model import ValidationReport


def refused_by_pydantic(model: type[BaseModel], table: pa.Table) -> set[int]:
    """Indices of the rows of ``table`` that ``model.model_validate`` refuses."""
    return refused_rows(model, table.to_pylist())


def refused_rows(model: type[BaseModel], rows: list[dict[str, Any]]) -> set[int]:
    """Indices of ``rows`` (dicts, such as shards' rows of different columns) it refuses."""
    bad = set()
    for i, row in enumerate(rows):
        try:
            model.model_validate(row)
        except ValidationError:
            bad.add(i)
    return bad


def refused_by_report(report: ValidationReport, table: pa.Table) -> set[int]:
    """Indices of the rows of ``table`` (one shard, examples enough for every row) a report fails.

    A shard-level ``type`` failure (an example without an index) fails every non-NULL value
    of its column; every other failed check fails the rows its examples name.
    """
    assert [c.error for c in report.checks if c.error] == []
    bad: set[int] = set()
    for check in report.failed:
        if check.check == "type" and any(e.index is None for e in check.examples):
            assert check.column is not None
            values = table.column(check.column).to_pylist()
            bad |= {i for i, v in enumerate(values) if v is not None}
        bad |= {e.index for e in check.examples if e.index is not None}
    return bad
