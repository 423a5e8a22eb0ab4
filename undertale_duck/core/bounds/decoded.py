"""Bound what a window's string and binary values decode to before DuckDB materialises them.

A Parquet file can hold one long string in a dictionary page that every row references: the
file is tiny, its footer records tiny sizes, and each 2048-row vector DuckDB hands to Arrow
decodes to 2048 copies (a 64 KiB string: about 400 MB before the first batch arrives, where
the result is counted). Lengths, though, DuckDB computes without materialising the values.
So a window read with a memory budget carries a filter that raises an error when one value
is longer than a cap (the budget shared by one vector's rows and these columns); when it
trips, the window's exact value bytes are summed by one query of lengths, and the read is
refused with :class:`MemoryBudgetError` if they pass the budget (else, a legitimate long
value among short ones, it is read as usual).

Only top-level string and binary columns carry the bound; strings nested in lists, structs
and maps are bounded by :mod:`nested` before DuckDB reads the window.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import duckdb
import pyarrow as pa

from ...common.sizes import MIB, format_size
from ...errors import MemoryBudgetError
from ..runtime import sqlfiles

#: Rows DuckDB materialises at once when it hands a result to Arrow (its vector size).
VECTOR_ROWS = 2048
#: What a vector of long values transiently takes in DuckDB, as a multiple of their bytes
#: (measured about 3 on a 256 KiB dictionary string), with a margin.
AMPLIFICATION = 4
#: The text of the error the filter raises (recognised by :func:`tripped`).
MARKER = "undertale_duck: a value is longer than the memory budget allows for one read"


def length_function(dtype: pa.DataType) -> str | None:
    """DuckDB's length function for a string or binary column type, or None (no such values)."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "strlen"
    if pa.types.is_string_view(dtype):
        return "strlen"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "octet_length"
    if pa.types.is_binary_view(dtype):
        return "octet_length"
    # FIXED_LEN_BYTE_ARRAY values have the width the schema gives (no bomb), and DuckDB
    # may read them as another type (INTERVAL), which octet_length does not take
    return None


class ValueBound:
    """The bound on a dataset's string and binary values for window reads.

    Args:
        schema: The shards' Arrow schema.
        columns: The columns read, in order.
    """

    def __init__(self, schema: pa.Schema, columns: list[str]) -> None:
        names = set(schema.names)
        self.lengths = [
            f"{function}({sqlfiles.quote_identifier(name)})"
            for name in columns
            if name in names
            and (function := length_function(schema.field(name).type)) is not None
        ]

    def __bool__(self) -> bool:
        return bool(self.lengths)

    def guard(self) -> str:
        """The WHERE fragment (ending in ``AND``) raising :data:`MARKER` past ``$cap``."""
        longer = " OR ".join(f"{length} > $cap" for length in self.lengths)
        message = sqlfiles.quote_literal(MARKER)
        return f"(CASE WHEN {longer} THEN error({message}) ELSE true END) AND "

    def total(self) -> str:
        """The select list of ``window_value_bytes.sql``: one ``bytes`` column."""
        sums = " + ".join(f"coalesce(sum({length}), 0)" for length in self.lengths)
        return f"{sums} AS bytes"

    def cap(self, limit: int, rows: int) -> int:
        """The longest value allowed in a window of ``rows`` rows under a read ``limit``.

        One vector of ``min(rows, VECTOR_ROWS)`` rows of values at the cap, in every bounded
        column, stays within the limit with DuckDB's transient copies counted.
        """
        per_vector = AMPLIFICATION * max(1, min(rows, VECTOR_ROWS)) * len(self.lengths)
        return max(1, limit // per_vector)


def tripped(exc: BaseException) -> bool:
    """Whether a DuckDB error is the bound's filter tripping (a value longer than the cap)."""
    return MARKER in str(exc)


def read_bounded(
    cursor: duckdb.DuckDBPyConnection,
    bound: ValueBound,
    sql: tuple[str, str],
    params: Mapping[str, object],
    fetch: Callable[[duckdb.DuckDBPyRelation], pa.Table],
    *,
    limit: int,
    rows: int,
    error: tuple[str, str, tuple[int, int]],
) -> pa.Table:
    """Read a window with the bound on its values; when it trips, weigh the values exactly.

    A window whose values pass ``limit`` is refused; one that fits (a long value among short
    ones) is read as usual.

    Args:
        cursor: The cursor the window is read on.
        bound: The dataset's bound.
        sql: The window's query with the bound in its scan (its template's ``{guard}``) and
            without it.
        params: The query's parameters: ``path`` (as DuckDB reads it), and ``start`` and
            ``stop`` unless it reads the whole shard.
        fetch: Fetches a query's result (counting its batches against the limit).
        limit: The read limit in bytes.
        rows: The window's rows.
        error: The shard, what is read and the global row range, for the error.

    Returns:
        The window's rows.

    Raises:
        MemoryBudgetError: If the window's string and binary values pass ``limit``.
    """
    guarded, plain = sql
    try:
        return fetch(cursor.sql(guarded, params={**params, "cap": bound.cap(limit, rows)}))
    except (duckdb.Error, OSError) as exc:  # OSError: DuckDB's error from a batch, via pyarrow
        if not tripped(exc):
            raise
    path, what, span = error
    text = sqlfiles.render("window_value_bytes", aggregates=bound.total())
    span_params = {
        "path": params["path"],
        "start": params.get("start", 0),
        "stop": params.get("stop", 1 << 62),  # the whole shard
    }
    # a fresh cursor: the tripped query's result may still be open on the first one
    cursor = cursor.cursor()
    try:
        ((total,),) = cursor.execute(text, span_params).fetchall()
        total = int(total or 0)
        if total <= limit:  # a long value among short ones
            return fetch(cursor.sql(plain, params=dict(params)))
    finally:
        cursor.close()
    raise MemoryBudgetError(
        f"reading {what} of shard {path} decodes to {format_size(total)} of string and "
        f"binary values, more than the memory budget allows for one read "
        f"({limit / MIB:.4g} MiB) and far more than its footer records (a dictionary "
        "bomb: a long value repeated by many rows): raise memory if the shard is trusted",
        path,
        span,
    )


