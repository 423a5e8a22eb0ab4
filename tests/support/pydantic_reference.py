"""The reference verdict validation must equal: which rows ``Model.model_validate`` refuses."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ValidationError


def refused_by_pydantic(model: type[BaseModel], table: pa.Table) -> set[int]:
    """Indices of the rows of ``table`` that ``model.model_validate`` refuses."""
    bad = set()
    for i, row in enumerate(table.to_pylist()):
        try:
            model.model_validate(row)
        except ValidationError:
            bad.add(i)
    return bad
