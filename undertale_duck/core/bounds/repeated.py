"""Bound a side table's values that a join may repeat: CSV files and Arrow tables.

A view's side table is joined to the shards, so any one of its values may fill every row
of a result vector: a 4 MiB string in a 10-row CSV file is 8 GiB per 2048-row vector once
joined. Parquet side tables are weighed from their pages as the shards are
(:class:`.VectorBound` with ``repeated=True``); a CSV file or an Arrow table has no pages,
so its largest value per column is what counts, ``rows`` times per vector:

- an Arrow table's: measured exactly from its lengths (the table is already in memory;
  nothing is copied);
- a CSV file's: first bounded by the file's size (no value is longer than the file); only
  when that bound passes the budget, measured by one streaming DuckDB pass over the file
  (lengths only, under the memory budget), before the query runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...common.arrays import numpy_of
from ...common.sizes import format_size
from ...common.text import first_line
from ...errors import ArgumentError, MemoryBudgetError
from ..runtime import connect, duckdb_path, sqlfiles
from .decoded import VECTOR_ROWS, length_function
from .vectors import MIN_BUDGET
from .weigh import nested_text

__all__ = ["RepeatedValues", "arrow_values", "csv_values"]


class RepeatedValues:
    """The largest value of each string and binary column of a side table that is not Parquet.

    Args:
        name: The side table's name in the query.
        where: What messages call it (its file, or "the Arrow table").
        top: Lower-case column name -> its name and the bytes of its largest value, for
            top-level string and binary columns.
        nested: The same for columns nesting strings (a row's strings at every depth).
        csv: A CSV file whose values are measured on first need, when the bound of ``top``
            (one value as long as the file, in any column) passes a budget.
    """

    def __init__(
        self,
        name: str,
        where: str,
        top: Mapping[str, tuple[str, int]],
        nested: Mapping[str, tuple[str, int]] | None = None,
        csv: str | None = None,
    ) -> None:
        self.name = name
        self.where = where
        self.top = dict(top)
        self.nested = dict(nested or {})
        self.csv = csv  # None once measured

    def check(
        self, names: frozenset[str] | None, text: bool, limit: int, threads: int,
        rows: int = VECTOR_ROWS,
    ) -> None:
        """Refuse a query whose result vectors could repeat these values past ``limit``.

        Args:
            names: The names the query's column references use (None: every column).
            text: Whether the result can hold string or binary values.
            limit: The memory budget in bytes (0: no check; at least the vector bound's
                smallest budget).
            threads: DuckDB's threads for the query.
            rows: The most rows of a result vector.

        Raises:
            MemoryBudgetError: Naming the side table, its file and the column.
            ArgumentError: If a CSV file cannot be read to measure it.
        """
        if limit <= 0:
            return
        limit = max(limit, MIN_BUDGET)
        copies = max(1, threads) + 1
        sizes = self._sizes(names, text, rows)
        if copies * sum(sizes.values()) > limit and self.csv is not None:
            self.top, self.csv = _measure(self.name, self.csv, limit), None
            sizes = self._sizes(names, text, rows)
        need = copies * sum(sizes.values())
        if need <= limit:
            return
        column = max(sizes, key=lambda c: sizes[c])
        raise MemoryBudgetError(
            f"the query may return the side table's column {column!r} of tables"
            f"[{self.name!r}] ({self.where}), whose longest value a join may repeat in every "
            f"row: one DuckDB vector of {rows} rows of it takes {format_size(sizes[column])} "
            f"(measured), and DuckDB builds {copies} vectors at once ({copies - 1} threads and "
            f"one buffered): {format_size(need)}, more than the memory budget "
            f"({format_size(limit)}). Raise memory if the table is trusted, lower DuckDB's "
            "threads, or select its lengths (strlen) rather than its values",
            self.where,
        )

    def _sizes(self, names: frozenset[str] | None, text: bool, rows: int) -> dict[str, int]:
        if self.csv is not None:  # not measured: one value as long as the file, anywhere
            column, largest = self.top[""]
            return {column: rows * largest} if text and (names is None or names) else {}
        kinds = [self.nested, self.top] if text else [self.nested]
        return {
            column: rows * largest
            for kind in kinds
            for low, (column, largest) in kind.items()
            if names is None or low in names
        }


def arrow_values(name: str, table: pa.Table) -> RepeatedValues:
    """The largest value of each string column of an Arrow side table, measured exactly.

    Args:
        name: The side table's name.
        table: The table.

    Returns:
        Its :class:`RepeatedValues`.
    """
    top: dict[str, tuple[str, int]] = {}
    nested: dict[str, tuple[str, int]] = {}
    for field, column in zip(table.schema, table.columns, strict=True):
        typ = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        kind = top if length_function(typ) is not None else nested if nested_text(typ) else None
        if kind is None:
            continue
        largest = max((int(_row_bytes(chunk).max(initial=0)) for chunk in column.chunks),
                      default=0)
        low = field.name.lower()
        kind[low] = (field.name, max(largest, kind.get(low, ("", 0))[1]))
    return RepeatedValues(name, "the Arrow table", top, nested)


def _row_bytes(array: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each row's bytes of string and binary values, at any depth (nothing is decoded)."""
    typ = array.type
    if isinstance(array, pa.DictionaryArray):
        return _row_bytes(array.dictionary)[_filled(array.indices)] if len(array.dictionary) \
            else np.zeros(len(array), dtype=np.int64)
    if length_function(typ) is not None:
        return _filled(pc.binary_length(array))
    if isinstance(array, pa.StructArray):
        total = np.zeros(len(array), dtype=np.int64)
        for child in array.flatten():
            total += _row_bytes(child)
        return total
    if isinstance(array, pa.FixedSizeListArray):
        size = typ.list_size
        flat = _row_bytes(array.values)[array.offset * size:(array.offset + len(array)) * size]
        return flat.reshape(len(array), size).sum(axis=1) if size else \
            np.zeros(len(array), dtype=np.int64)
    if isinstance(array, (pa.ListArray, pa.LargeListArray, pa.MapArray)):
        values = _row_bytes(array.values)
        ends = np.concatenate([[0], np.cumsum(values)])
        offsets = np.asarray(numpy_of(array.offsets), dtype=np.int64)
        return np.asarray(ends[offsets[1:]] - ends[offsets[:-1]], dtype=np.int64)
    return np.zeros(len(array), dtype=np.int64)


def _filled(array: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """An integer array as int64 numbers, nulls as 0."""
    return np.asarray(numpy_of(array.cast(pa.int64()), zero_nulls=True), dtype=np.int64)


def csv_values(name: str, path: str, size: int) -> RepeatedValues:
    """A CSV side table's values: bounded by its size, measured when that bound is too big.

    No column names are known before DuckDB reads the file, so until it is measured every
    column counts as one (any referenced name), holding a value as long as the file.

    Args:
        name: The side table's name.
        path: The file (checked: a regular file).
        size: Its size in bytes.

    Returns:
        Its :class:`RepeatedValues`.
    """
    return RepeatedValues(name, path, {"": ("any column", size)}, csv=path)


def _measure(name: str, path: str, limit: int) -> dict[str, tuple[str, int]]:
    """The longest value of each text column of a CSV file, read by DuckDB as the view reads it.

    One streaming pass computing lengths only, at one thread and within ``limit``.
    """
    con = connect({"memory_limit": f"{max(limit, MIN_BUDGET) // 2}B", "threads": 1})
    try:
        params = {"path": duckdb_path(path)}
        columns = con.execute(sqlfiles.sql_text("side_csv_columns"), params).fetchall()
        longest = con.execute(sqlfiles.sql_text("side_csv_longest"), params).fetchone()
    except duckdb.Error as exc:
        raise ArgumentError(
            f"tables[{name!r}]: {path} cannot be read as a CSV side table: {first_line(exc)}"
        ) from None
    finally:
        con.close()
    out: dict[str, tuple[str, int]] = {}
    for (column, typ), length in zip(columns, longest or (), strict=False):
        if str(typ).upper() in ("VARCHAR", "BLOB"):
            out[str(column).lower()] = (str(column), int(length or 0))
    return out
