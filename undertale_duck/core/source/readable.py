"""Column types across readers: refuse what DuckDB would change, give it pyarrow's types."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def conform(
    table: pa.Table, schema: pa.Schema, shard: Shard | None = None, *, view: bool = False
) -> pa.Table:
    """Give a DuckDB result the Arrow types pyarrow reads from the footer, where they differ.

    DuckDB returns, for example, plain strings for dictionary-encoded columns and its own
    integer types for unsigned or narrow Parquet types; casting back keeps ``as_py()`` values
    identical to pyarrow's. Dictionary types are decoded (values are what ``as_py`` sees).
    Columns take the reference names: DuckDB binds a name case-insensitively, so a shard
    whose column is ``ID`` answers for the dataset's ``id`` under its own spelling.

    Args:
        table: A window as DuckDB returned it, columns in ``schema`` order.
        schema: The dataset's reference schema.
        shard: The window's shard: a column whose type in that shard differs from the
            reference type (schema drift between shards) must cast to it, so that a column
            has one type whatever shard a row comes from (in a view too).
        view: Whether ``schema`` is a view's (DuckDB's types for its first shard): then
            any column DuckDB gives another type for ``shard`` drifts (DuckDB typed it from
            that shard's columns, which a computed column may not name).

    Returns:
        The table with each column cast to the reference type where that cast is safe.

    Raises:
        SourceError: If a drifting column's values do not fit the reference type (an
            int64 value beyond int32, a negative value for uint64, text for a number), or
            a cast would change them (rounding, a dropped time of day, a time zone).
    """
    columns = []
    fields = []
    changed = False
    for column, field in zip(table.columns, schema, strict=True):
        target = _plain(field.type)
        if column.type != target:
            drifting = shard is not None and (view or drifts(shard, field))
            why = ""
            try:
                cast = _uuids(column, target) if _has_uuid(target) else column.cast(target)
                if drifting:
                    why = zone_change(column.type, target) or _lost(column, cast)
                if not why:
                    column = cast
                    changed = True
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                why = first_line(exc)  # a view too: one type per column, as the dataset
            if why and shard is not None and drifting:
                # a view's column may be computed: its type there is DuckDB's for the shard
                own = column.type if view else shard.schema.field(field.name).type
                where = "the view over its first shard" if view else "the dataset (its first shard)"
                head, tail = drift_message(shard.path, field.name, own, field.type, where)
                raise SourceError(head + why + tail, shard.path)
        columns.append(column)
        fields.append(pa.field(field.name, column.type, nullable=field.nullable))
    if not changed and table.column_names == schema.names:
        return table
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def drift_message(
    path: str, name: str, own: pa.DataType, target: pa.DataType,
    where: str = "the dataset (its first shard)",
) -> tuple[str, str]:
    """The message of a drifting column whose values do not fit, around its reason.

    One text for every reader: :func:`conform` (the plain dataset's rows) and the casts
    of ``convert.py`` (views and ad hoc SQL) raise the same :class:`SourceError`.

    Args:
        path: The shard.
        name: The column.
        own: Its Arrow type in the shard.
        target: Its Arrow type in the dataset.
        where: What holds ``target``.

    Returns:
        The text before the reason (why a value does not fit) and the text after it.
    """
    head = (
        f"shard {path}: column {name!r} is {own} there but {target} in {where}, and its "
        "values do not fit that type (schema drift between shards): "
    )
    tail = "; rewrite the shard with the dataset's type, or leave the column out with columns=[...]"
    return head, tail


def _lost(column: pa.ChunkedArray, cast: pa.ChunkedArray) -> str:
    """How casting a drifting column changed a value ("" when every value survives).

    Arrow's safe cast refuses integer overflow but not every loss: a float64 rounded to
    float32 (or to infinity), a timestamp cast to a date (its time of day dropped). A value
    survives when casting it back gives it again (NaN for NaN, null for null).
    """
    own = _plain(column.type)
    try:
        before = column.cast(own) if own != column.type else column
        back = cast.cast(own)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return ""  # no way back to compare with: Arrow's safe cast is the check
    # one array each: a cast may join chunks (drifting columns only pay for it)
    found = _first_change(before.combine_chunks(), back.combine_chunks())
    return "" if found is None else f"the value {found} changes when cast"


def _zones(typ: pa.DataType) -> Iterator[str | None]:
    """The time zone of each timestamp in ``typ`` (nested ones too), in schema order."""
    if pa.types.is_timestamp(typ):
        yield typ.tz
    for child in _children(typ):
        yield from _zones(child)


def zone_change(own: pa.DataType, target: pa.DataType) -> str:
    """Why casting ``own`` to ``target`` gives or takes away a time zone ("" if it does not).

    Arrow's cast reads a timestamp without a zone as UTC (and drops the zone the other way):
    every value passes a cast back, yet a local wall time would be served as a UTC instant.
    """
    for mine, theirs in zip(_zones(own), _zones(target), strict=False):
        if (mine is None) != (theirs is None):
            return (
                "a timestamp with a time zone and one without are different values (the "
                "cast would guess UTC for the zone-less one)"
            )
    return ""


def _first_change(a: pa.Array, b: pa.Array) -> str | None:
    """The first value of ``a`` that ``b`` (``a`` cast away and back) does not hold, or None."""
    if a.equals(b):
        return None
    if len(a) != len(b) or a.null_count != b.null_count:
        return "(a null or a length)"
    typ = a.type
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return _first_change(a.flatten(), b.flatten())
    if pa.types.is_struct(typ):
        for x, y in zip(a.flatten(), b.flatten(), strict=True):
            found = _first_change(x, y)
            if found is not None:
                return found
        return None
    if pa.types.is_floating(typ):  # NaN is not equal to itself: compare it apart
        if typ == pa.float16():  # no compute kernels for it; float64 holds it exactly
            a, b = a.cast(pa.float64()), b.cast(pa.float64())
        same = pc.or_kleene(pc.equal(a, b), pc.and_(pc.is_nan(a), pc.is_nan(b)))
        changed = pc.invert(pc.fill_null(same, True))
        if not pc.any(changed).as_py():
            return None
        return repr(a.filter(changed)[0].as_py())
    try:
        changed = pc.invert(pc.fill_null(pc.equal(a, b), True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return "(a value)"
    return repr(a.filter(changed)[0].as_py()) if pc.any(changed).as_py() else None


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


def _has_uuid(typ: pa.DataType) -> bool:
    """Whether a type is Arrow's ``uuid`` or holds it (in a list, struct or map)."""
    return isinstance(typ, pa.UuidType) or any(_has_uuid(child) for child in _children(typ))


def _uuids(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """UUIDs as DuckDB returns them (text) in Arrow's ``uuid`` type, as pyarrow reads them.

    Also inside lists, structs and maps (``list<uuid>``): each level is rebuilt around its
    converted children, other values cast as they are.
    """
    return pa.chunked_array([_uuid_array(chunk, target) for chunk in column.chunks], target)


def _uuid_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    typ = array.type
    if isinstance(target, pa.UuidType):
        if not pa.types.is_string(typ):
            return array.cast(target)
        raw = [None if v is None else uuid.UUID(v).bytes for v in array.to_pylist()]
        return pa.ExtensionArray.from_storage(target, pa.array(raw, pa.binary(16)))
    if not _has_uuid(target):
        return array.cast(target)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(typ):
        # flatten(): each field within the slice, null where the struct is (the values under
        # a null struct are whatever the writer left there, not UUIDs)
        children = [
            _uuid_array(child, target.field(k).type)
            for k, child in enumerate(array.flatten())
        ]
        return pa.StructArray.from_arrays(
            children, fields=[target.field(k) for k in range(target.num_fields)], mask=mask
        )
    listed = (
        (pa.types.is_map, pa.MapArray), (pa.types.is_list, pa.ListArray),
        (pa.types.is_large_list, pa.LargeListArray),
    )
    for kind, cls in listed:
        if not (kind(target) and kind(typ)):
            continue
        # the values of the slice's lists, none of a null list (whose range may hold
        # leftovers), with offsets from 0 as pyarrow takes them beside a null mask
        bounds = array.offsets.to_numpy()
        lengths = np.diff(bounds)
        if mask is not None:
            lengths[mask.to_numpy(zero_copy_only=False)] = 0
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        kept = pa.array(
            np.arange(offsets[-1]) + np.repeat(bounds[:-1] - offsets[:-1], lengths)
        )
        rebased = pa.array(offsets, array.offsets.type)
        if cls is pa.MapArray:
            keys = _uuid_array(array.keys.take(kept), target.key_type)
            items = _uuid_array(array.items.take(kept), target.item_type)
            return pa.MapArray.from_arrays(rebased, keys, items, type=target, mask=mask)
        values = _uuid_array(array.values.take(kept), target.value_type)
        return cls.from_arrays(rebased, values, type=target, mask=mask)
    return array.cast(target)  # another shape: the cast's own error says why


def drifts(shard: Shard, field: pa.Field) -> bool:
    """Whether a column's type in ``shard`` differs from the dataset's (dictionaries decoded)."""
    if field.name not in shard.schema.names:
        return False
    return bool(_plain(shard.schema.field(field.name).type) != _plain(field.type))
