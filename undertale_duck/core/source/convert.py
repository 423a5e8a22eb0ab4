"""Drifting columns converted to the dataset's types in DuckDB's SQL, checked as conform checks.

The plain dataset reads each shard by its own types and converts a drifting column with
:func:`readable.conform`, refusing a cast that changes a value. Whatever reads shards through
SQL (a view's indexing pass and windows, the ``dataset`` view of ad hoc SQL) converts them
here, the same way, before any filter or computation sees them: each value is cast to the
dataset's type (the first shard's, as DuckDB reads it) and cast back, and a value that does
not come back unchanged, or does not cast at all, stops the query with the same
:class:`SourceError` (:func:`drift_error` recognises it). Columns that do not drift are read
as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
from duckdb.sqltypes import DuckDBPyType

from ...errors import SourceError
from ..runtime import duckdb_path, sqlfiles
from .readable import drift_message, drifts, zone_change
from .shard import Shard

#: Begins the text of the error a conversion raises (recognised by :func:`drift_error`).
MARKER = "undertale_duck schema drift: "

#: A DuckDB type name without children (``BIGINT``, ``DECIMAL(10,2)``,
#: ``TIMESTAMP WITH TIME ZONE``): safe to splice into SQL as it is.
_PLAIN_TYPE = re.compile(r"[A-Z][A-Z0-9_]*( [A-Z][A-Z0-9_]*)*(\(\d+(, ?\d+)?\))?")


class _Unnamed(ValueError):
    """A DuckDB type this module cannot write as SQL text."""


def type_sql(typ: DuckDBPyType) -> str:
    """DuckDB's type as SQL text, struct field names quoted by the project's quoting.

    Raises:
        _Unnamed: For a type whose name is not a plain type name (none that Parquet gives).
    """
    kind = typ.id
    if kind == "list":
        return f"{type_sql(typ.child)}[]"
    if kind == "array":
        (_, child), (_, size) = typ.children
        if not isinstance(child, DuckDBPyType) or not isinstance(size, int):
            raise _Unnamed(str(typ))
        return f"{type_sql(child)}[{size}]"
    if kind == "map":
        return f"MAP({type_sql(typ.key)}, {type_sql(typ.value)})"
    if kind == "struct":
        fields = []
        for name, child in typ.children:
            if not isinstance(child, DuckDBPyType):
                raise _Unnamed(str(typ))
            fields.append(f"{sqlfiles.quote_identifier(name)} {type_sql(child)}")
        return f"STRUCT({', '.join(fields)})"
    text = str(typ)
    if not _PLAIN_TYPE.fullmatch(text):
        raise _Unnamed(text)
    return text


def shard_types(
    cursor: duckdb.DuckDBPyConnection, path: str, columns: Sequence[str]
) -> list[DuckDBPyType]:
    """The types DuckDB reads ``columns`` of one shard as (its footer only)."""
    text = sqlfiles.render("shard_types", columns=sqlfiles.column_list(columns))
    return list(cursor.sql(text, params={"path": duckdb_path(path)}).types)


@dataclass(frozen=True)
class Conversions:
    """The select list of each shard whose columns DuckDB reads as other types.

    Attributes:
        lists: ``{shard index: select list}``: the dataset's columns, each drifting one
            converted to the dataset's type (``drift_cast.sql``) under its own name. Shards
            not listed are read as they are.
    """

    lists: Mapping[int, str]

    def columns(self, shard: int, plain: str) -> str:
        """The select list reading shard number ``shard`` (``plain``: the columns as they are)."""
        return self.lists.get(shard, plain)


def conversions(
    cursor: duckdb.DuckDBPyConnection, shards: Sequence[Shard], schema: pa.Schema
) -> Conversions:
    """Find the shards whose columns drift from the first shard's, and how to convert them.

    The footers say which shards may drift (their Arrow types differ from the dataset's);
    DuckDB's own reading of the first shard and of those (footers only) says which columns
    it reads as other types. A shard DuckDB cannot open is left as it is: its read reports
    that.

    Args:
        cursor: A DuckDB cursor that can read the shards (a remote source's filesystem
            registered).
        shards: The dataset's shards, the first giving the dataset's types.
        schema: The dataset's Arrow schema (the first shard's, of the columns read).

    Returns:
        The :class:`Conversions` (empty without drift).
    """
    columns = list(schema.names)
    candidates = [
        k for k, shard in enumerate(shards) if k and any(drifts(shard, f) for f in schema)
    ]
    lists: dict[int, str] = {}
    if not candidates:
        return Conversions(lists)
    try:
        target = shard_types(cursor, shards[0].path, columns)
    except duckdb.Error:
        return Conversions(lists)  # the first shard's own read reports it
    for k in candidates:
        try:
            own = shard_types(cursor, shards[k].path, columns)
        except duckdb.Error:
            continue
        if own == target:
            continue  # Arrow's types differ, DuckDB's do not (a dictionary, a large string)
        parts = [
            sqlfiles.quote_identifier(name) if mine == theirs
            else f"{_converted(cursor, shards[k], field, mine, theirs)} AS "
                 f"{sqlfiles.quote_identifier(name)}"
            for name, field, mine, theirs in zip(columns, schema, own, target, strict=True)
        ]
        lists[k] = ", ".join(parts)
    return Conversions(lists)


def _converted(
    cursor: duckdb.DuckDBPyConnection, shard: Shard, field: pa.Field,
    own: DuckDBPyType, target: DuckDBPyType,
) -> str:
    """The expression converting ``field`` of ``shard`` from DuckDB's ``own`` type to ``target``."""
    name = field.name
    column = sqlfiles.quote_identifier(name)
    mine = shard.schema.field(name).type if name in shard.schema.names else own
    head, tail = drift_message(shard.path, name, mine, field.type)
    head = MARKER + head
    try:
        target_sql, own_sql = type_sql(target), type_sql(own)
    except _Unnamed as exc:
        return sqlfiles.fragment(
            "drift_refused", column=column, target="VARCHAR",
            message=sqlfiles.quote_literal(f"{head}DuckDB's type {exc} has no cast here{tail}"),
        )
    zone = zone_change(mine, field.type) if isinstance(mine, pa.DataType) else ""
    if zone:
        return sqlfiles.fragment(
            "drift_refused", column=column, target=target_sql,
            message=sqlfiles.quote_literal(head + zone + tail),
        )
    if own.id == "varchar" and target.id in ("float", "double"):
        # text into a float: cast back as Arrow writes a float (conform compares Arrow's text)
        back = sqlfiles.fragment("drift_back_text", column=column, target=target_sql)
    else:
        back = sqlfiles.fragment("drift_back", column=column, target=target_sql, own=own_sql)
    expression = sqlfiles.fragment(
        "drift_cast", column=column, target=target_sql, back=back,
        head=sqlfiles.quote_literal(head + "the value "),
        fails=sqlfiles.quote_literal(f" does not cast to {field.type}{tail}"),
        changes=sqlfiles.quote_literal(f" changes when cast{tail}"),
    )
    try:
        check = sqlfiles.render(
            "drift_cast_check", expression=expression, own=own_sql, column=column
        )
        cursor.sql(check).types  # noqa: B018 (binding is the check)
    except duckdb.Error:
        return sqlfiles.fragment(
            "drift_refused", column=column, target=target_sql,
            message=sqlfiles.quote_literal(
                f"{head}DuckDB has no cast from {own} to {target}{tail}"
            ),
        )
    return expression


def own_schema(shard: Shard, schema: pa.Schema) -> pa.Schema:
    """The dataset's columns with the types ``shard`` holds them in, as DuckDB reads it raw.

    A column is matched by name, else case-insensitively (DuckDB binds names so); one the
    shard lacks keeps the dataset's type. What a read of the shard's own columns decodes
    (the bound on string values weighs these types, not the first shard's).
    """
    own = {f.name: f for f in shard.schema}
    folded = {f.name.lower(): f for f in reversed(list(shard.schema))}
    fields = []
    for f in schema:
        mine = own.get(f.name) or folded.get(f.name.lower())
        fields.append(f if mine is None else pa.field(f.name, mine.type, mine.nullable))
    return pa.schema(fields)


def drift_error(exc: BaseException, shards: Sequence[Shard]) -> SourceError | None:
    """Our error for a query stopped by a conversion of this module, or None.

    Args:
        exc: The error a query raised (DuckDB's, or pyarrow's ``OSError`` from a batch).
        shards: The dataset's shards.

    Returns:
        The :class:`SourceError` naming the shard, the column and the value, or None.
    """
    text = str(exc)
    at = text.find(MARKER)
    if at < 0:
        return None
    message = text[at + len(MARKER):]
    for shard in shards:
        if message.startswith(f"shard {shard.path}: "):
            return SourceError(message, shard.path)
    return SourceError(message)
