"""What bounds decoded memory before DuckDB or pyarrow materialises it.

Dictionary bombs, top-level and nested, and ad hoc SQL's result vectors, with kept
weights.
"""

from __future__ import annotations

from . import nested, vectors, weights
from .decoded import VECTOR_ROWS, ValueBound, read_bounded
from .nested import NestedBound
from .repeated import RepeatedValues, arrow_values, csv_values
from .vectors import VectorBound

__all__ = [
    "VECTOR_ROWS",
    "NestedBound",
    "RepeatedValues",
    "ValueBound",
    "VectorBound",
    "arrow_values",
    "csv_values",
    "nested",
    "read_bounded",
    "vectors",
    "weights"
]
