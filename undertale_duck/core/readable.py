"""Refuse column types DuckDB would read as other values than the file holds (wide decimals)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import UnsupportedShardError

if TYPE_CHECKING:
    from .source import Shard

#: Most digits of a DECIMAL DuckDB holds exactly; it reads wider ones as DOUBLE (rounded).
DUCKDB_DECIMAL_DIGITS = 38


def _children(typ: pa.DataType) -> Iterator[pa.DataType]:
    if pa.types.is_dictionary(typ):
        yield typ.value_type
    elif pa.types.is_map(typ):
        yield typ.key_type
        yield typ.item_type
    else:
        for i in range(typ.num_fields):
            yield typ.field(i).type


def _wide_decimal(typ: pa.DataType) -> pa.DataType | None:
    """The first decimal type wider than DuckDB holds in ``typ`` (nested ones too), or None."""
    if pa.types.is_decimal(typ) and typ.precision > DUCKDB_DECIMAL_DIGITS:
        return typ
    for child in _children(typ):
        found = _wide_decimal(child)
        if found is not None:
            return found
    return None


def check_types(shards: Sequence[Shard], columns: Sequence[str]) -> None:
    """Refuse the columns read whose values DuckDB would change.

    DuckDB reads a DECIMAL of more than 38 digits (Arrow's ``decimal256``) as DOUBLE,
    rounding its values: rows and ``sql`` results would silently differ from the file.

    Args:
        shards: The dataset's shards.
        columns: The columns the dataset reads.

    Raises:
        UnsupportedShardError: Naming the shard, the column and its type.
    """
    wanted = set(columns)
    for shard in shards:
        for field in shard.schema:
            if field.name not in wanted:
                continue
            wide = _wide_decimal(field.type)
            if wide is not None:
                raise UnsupportedShardError(
                    f"shard {shard.path}: column {field.name!r} holds {wide}, wider than the "
                    f"{DUCKDB_DECIMAL_DIGITS} digits DuckDB reads exactly (it would round the "
                    "values to DOUBLE); the file is not corrupt: leave the column out with "
                    "columns=[...], or rewrite it as decimal128 or a string",
                    shard.path,
                )
