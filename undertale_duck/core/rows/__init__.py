"""Arrow windows to rows: row dicts, column-wise batches, gathers and index access."""

from __future__ import annotations

from .indices import check_collection, index_array
from .ragged import Ragged
from .row_access import AHEAD_BYTES, AHEAD_ROWS, RowAccess
from .row_batch import Row, RowBatch
from .rows import ROW_FORMATS, Format, TensorRangeError, to_tensor

__all__ = [
    "AHEAD_BYTES",
    "AHEAD_ROWS",
    "ROW_FORMATS",
    "Format",
    "Ragged",
    "Row",
    "RowAccess",
    "RowBatch",
    "TensorRangeError",
    "check_collection",
    "index_array",
    "to_tensor"
]
