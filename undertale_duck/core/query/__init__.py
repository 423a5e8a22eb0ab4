"""Ad hoc read-only SQL: the session, its stream, the read-only guard, shapes, blame."""

from __future__ import annotations

from . import blame, readonly, shape
from .readonly import statements
from .session import (
    DEFAULT_BATCH_ROWS,
    SQL_FILES,
    Params,
    QuerySession,
    SqlFiles,
    memory_limit,
    result_limit,
)

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "SQL_FILES",
    "Params",
    "QuerySession",
    "SqlFiles",
    "blame",
    "memory_limit",
    "readonly",
    "result_limit",
    "shape",
    "statements"
]
