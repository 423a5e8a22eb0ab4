"""Column types across readers: refuse what DuckDB would change, give it pyarrow's types."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ...common.text import first_line
from ...errors import SourceError, UnsupportedShardError

if TYPE_CHECKING:
    from .shard import Shard

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


def conform(table: pa.Table, schema: pa.Schema, shard: Shard | None = None) -> pa.Table:
    """Give a DuckDB result the Arrow types pyarrow reads from the footer, where they differ.

    DuckDB returns, for example, plain strings for dictionary-encoded columns and its own
    integer types for unsigned or narrow Parquet types; casting back keeps ``as_py()`` values
    identical to pyarrow's. Dictionary types are decoded (values are what ``as_py`` sees).
    Columns take the reference names: DuckDB binds a name case-insensitively, so a shard
    whose column is ``ID`` answers for the dataset's ``id`` under its own spelling.

    Args:
        table: A window as DuckDB returned it, columns in ``schema`` order.
        schema: The dataset's reference schema.
        shard: The window's shard, for a plain dataset (not a view): a column whose type in
            that shard differs from the reference type (schema drift between shards) must
            cast to it, so that a column has one type whatever shard a row comes from.

    Returns:
        The table with each column cast to the reference type where that cast is safe.

    Raises:
        SourceError: If a drifting column's values do not fit the reference type (an
            int64 value beyond int32, a negative value for uint64, text for a number).
    """
    columns = []
    fields = []
    changed = False
    for column, field in zip(table.columns, schema, strict=True):
        target = _plain(field.type)
        if column.type != target:
            try:
                column = _uuids(column, target) if isinstance(target, pa.UuidType) else (
                    column.cast(target)
                )
                changed = True
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                if shard is not None and _drifts(shard, field):
                    own = shard.schema.field(field.name).type
                    raise SourceError(
                        f"shard {shard.path}: column {field.name!r} is {own} there but "
                        f"{field.type} in the dataset (its first shard), and its values do not "
                        f"fit that type (schema drift between shards): {first_line(exc)}; "
                        "rewrite the shard with the dataset's type, or leave the column out "
                        "with columns=[...]",
                        shard.path,
                    ) from None
        columns.append(column)
        fields.append(pa.field(field.name, column.type, nullable=field.nullable))
    if not changed and table.column_names == schema.names:
        return table
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _plain(typ: pa.DataType) -> pa.DataType:
    """The type rows are served in: dictionaries decoded, views as their plain types.

    Arrow has no ``take`` for view types, which gathering a batch of rows needs.
    """
    if pa.types.is_dictionary(typ):
        return typ.value_type
    if pa.types.is_string_view(typ):
        return pa.string()
    if pa.types.is_binary_view(typ):
        return pa.binary()
    return typ


def _uuids(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """UUIDs as DuckDB returns them (text) in Arrow's ``uuid`` type, as pyarrow reads them."""
    if not pa.types.is_string(column.type):
        return column.cast(target)
    chunks = []
    for chunk in column.chunks:
        raw = [None if v is None else uuid.UUID(v).bytes for v in chunk.to_pylist()]
        chunks.append(pa.ExtensionArray.from_storage(target, pa.array(raw, pa.binary(16))))
    return pa.chunked_array(chunks, target)


def _drifts(shard: Shard, field: pa.Field) -> bool:
    """Whether a column's type in ``shard`` differs from the dataset's (dictionaries decoded)."""
    if field.name not in shard.schema.names:
        return False
    return bool(_plain(shard.schema.field(field.name).type) != _plain(field.type))
