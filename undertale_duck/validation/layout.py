"""Shard layouts: group shards by DuckDB schema; the shard_schema, present and type checks."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from ..common.text import first_line
from ..core.runtime import duckdb_path
from ..core.source import schema_drift
from .model import Example
from .state import (
    NO_EXTRA,
    PRESENT,
    PRESENT_OPTIONAL,
    SAME_LAYOUT,
    RunState,
    ShardGroup,
    Tally,
)
from .targets import Target, describe_type, field_type, mismatch

#: Columns the checks' ``read_parquet`` adds to every shard's rows (``sql/checks/rows.sql``),
#: case-folded as DuckDB matches names: a shard holding one of them cannot be scanned.
ADDED_COLUMNS = {
    "file_row_number": "holding each row's number",
    "__undertale_shard": "holding the shard's path",
}


#: The DuckDB type of a column that holds only NULLs (pyarrow's ``null``): it drifts from no
#: type, since its rows reach pydantic as None whatever the other shards' type.
_NULL_TYPE = str(duckdb.sqltype("NULL"))


def shard_groups(state: RunState) -> list[ShardGroup]:
    """Group readable shards by their DuckDB schema (one footer bind per Arrow schema).

    The schema is that of the rows checked: a shard's own columns, or for a view the view's
    columns over that shard. Shards whose schema DuckDB cannot bind, or that hold a column
    the checks' scan adds (:data:`ADDED_COLUMNS`), are recorded in ``state.errors``. Columns
    are compared by name, so shards with the same columns in another order share a group.

    Args:
        state: The run.

    Returns:
        The groups, ordered by their first shard.
    """
    by_arrow: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for i in state.readable():
        shard = state.shards[i]
        assert shard is not None
        clash = next((n for n in shard.schema.names if n.casefold() in ADDED_COLUMNS), None)
        if clash is not None:  # every query of the checks would fail to bind on this shard
            state.errors[i] = (
                f"its column {clash!r} clashes with the column DuckDB adds to the checked rows "
                f"({ADDED_COLUMNS[clash.casefold()]}): rename that column"
            )
            continue
        key = tuple((f.name, str(f.type)) for f in shard.schema)
        by_arrow.setdefault(key, []).append(i)
    sql = state.relation.types
    by_duck: dict[tuple[tuple[str, str], ...], ShardGroup] = {}
    for members in by_arrow.values():
        state.step("schemas")
        try:
            files = [duckdb_path(state.paths[members[0]])]
            rel = state.cursor.sql(sql, params={"files": files})
            columns = dict(zip(rel.columns, rel.types, strict=True))
        except duckdb.Error as exc:
            for i in members:
                state.errors[i] = f"the schema cannot be read: {first_line(exc)}"
            continue
        first = state.shards[members[0]]
        assert first is not None
        durations = {} if state.relation.view is not None else {
            f.name: str(f.type) for f in first.schema if _holds_duration(f.type)
        }
        key = (  # by name; a duration column and a BIGINT one are served apart
            *sorted((name, str(t)) for name, t in columns.items()),
            *sorted(durations.items()),
        )
        zones = {} if state.relation.view is not None else {
            f.name: frozenset(z for z in _zones(f.type) if z.upper() not in _UTC_NAMES)
            for f in first.schema
        }
        if key not in by_duck:
            by_duck[key] = ShardGroup(list(members), columns, durations)
        else:
            by_duck[key].indices.extend(members)
        held = by_duck[key].zones  # members of another Arrow schema may name other zones
        for name, found in zones.items():
            if found:
                held[name] = held.get(name, frozenset()) | found
    groups = list(by_duck.values())
    for group in groups:
        group.indices.sort()
    groups.sort(key=lambda g: g.indices[0])
    return groups


#: Time zone names (upper case) whose wall-clock time is UTC's, as pydantic reads them.
_UTC_NAMES = frozenset({"UTC", "ETC/UTC", "Z", "+00:00", "-00:00", "GMT", "ETC/GMT", "UCT",
                        "ETC/UCT", "UNIVERSAL", "ETC/UNIVERSAL", "ZULU", "ETC/ZULU"})


def _zones(dtype: pa.DataType) -> set[str]:
    """The time zones of the timestamps in an Arrow type, at any depth."""
    if pa.types.is_timestamp(dtype):
        return {dtype.tz} if dtype.tz else set()
    if pa.types.is_dictionary(dtype):
        return _zones(dtype.value_type)
    if pa.types.is_map(dtype):
        return _zones(dtype.key_type) | _zones(dtype.item_type)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or (
        pa.types.is_fixed_size_list(dtype)
    ):
        return _zones(dtype.value_type)
    if pa.types.is_struct(dtype):
        return set().union(*(_zones(dtype.field(k).type) for k in range(dtype.num_fields)))
    return set()


def _holds_duration(dtype: pa.DataType) -> bool:
    """Whether an Arrow type holds durations at any depth (in lists, structs, maps)."""
    if pa.types.is_duration(dtype):
        return True
    if pa.types.is_dictionary(dtype):
        return _holds_duration(dtype.value_type)
    if pa.types.is_map(dtype):
        return _holds_duration(dtype.key_type) or _holds_duration(dtype.item_type)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or (
        pa.types.is_fixed_size_list(dtype)
    ):
        return _holds_duration(dtype.value_type)
    if pa.types.is_struct(dtype):
        return any(_holds_duration(dtype.field(k).type) for k in range(dtype.num_fields))
    return False


def _duration_mismatch(target: Target, arrow_type: str) -> str | None:
    """Why a field cannot take, or the checks cannot judge, a column of Arrow durations.

    pyarrow stores a duration as a Parquet integer with its Arrow type in the file's
    metadata: the dataset serves ``datetime.timedelta`` values, while DuckDB reads a count
    of the unit (``BIGINT``). A ``timedelta`` (or ``Any``) field takes them; constraints on
    them, and every other type (pydantic refuses a timedelta for ``int``, ``float``, ...),
    cannot be judged from DuckDB's integers.
    """
    annotation = target.annotation
    if annotation is Any or annotation is object:
        return None
    duckdb_reads = "which DuckDB reads as BIGINT, a count of its unit"
    if annotation is dt.timedelta:
        if not target.metadata:
            return None
        return (
            f"found Arrow {arrow_type}, {duckdb_reads}, so the field's constraints cannot be "
            "checked on the timedelta values the dataset serves; validate a view that "
            "converts the column (query=) or leave the constraints out"
        )
    return (
        f"found Arrow {arrow_type}, {duckdb_reads}; the dataset serves datetime.timedelta "
        f"values, expected {describe_type(annotation)}"
    )


def _fail_shard(state: RunState, tally: Tally, index: int, value: str) -> None:
    """Count every row of a shard against a shard-level check, with the shard as an example."""
    tally.add(state.paths[index], state.rows(index))
    tally.failed_shards = True
    if len(tally.examples) < state.limit:
        tally.examples.append(Example(shard=state.paths[index], value=value))


def layout_checks(state: RunState, groups: Sequence[ShardGroup]) -> None:
    """Run the ``shard_schema`` check and each top-level column's ``present`` and ``type``.

    ``shard_schema`` uses the one definition of drift (:func:`undertale_duck.core.drift.
    schema_drift`): the layout most shards share is the reference, so one odd shard is named
    wherever it sits (a column holding only NULLs drifts from no type). Shards missing a
    required column fail ``present`` (a field with a default takes rows without its column);
    shards whose column type does not satisfy the field fail ``type``.

    Args:
        state: The run.
        groups: The readable shards grouped by DuckDB schema.
    """
    sql = state.relation.types
    drift = state.tally("shard_schema", None, SAME_LAYOUT)
    drift.sql.append(sql)
    layouts = {i: {n: str(t) for n, t in g.types.items()} for g in groups for i in g.indices}
    # keyed by shard number: a list source may name one file twice
    for odd in schema_drift([(str(i), layouts[i]) for i in sorted(layouts)], _NULL_TYPE):
        _fail_shard(state, drift, int(odd.path), odd.summary())
    for target in state.targets:
        if len(target.path) != 1:
            continue
        present = state.tally(
            "present", target.label, PRESENT if target.required else PRESENT_OPTIONAL
        )
        typed = state.tally("type", target.label, describe_type(target.annotation))
        present.sql.append(sql)
        typed.sql.append(sql)
        for group in groups:
            column = in_group(state, target, group).path[0]
            if column not in group.types:
                if not target.required:
                    continue  # pydantic gives a row without the key the field's default
                for i in group.indices:
                    _fail_shard(state, present, i, "column missing")
                continue
            reason = mismatch(
                target.annotation, group.types[column], target.strict, target.strict_inside,
                by_row=True,
            ) if column not in group.durations else _duration_mismatch(
                target, group.durations[column]
            )
            if reason is not None:
                for i in group.indices:
                    _fail_shard(state, typed, i, reason)
    if state.model.model_config.get("extra") == "forbid":
        # pydantic refuses a row holding a key the model does not name, and each row holds
        # every column of its shard
        extra = state.tally("extra", None, NO_EXTRA)
        extra.sql.append(sql)
        for group in groups:
            # a field's name column is extra where its alias column is read (pydantic's rule)
            named = {in_group(state, t, group).path[0] for t in state.targets if len(t.path) == 1}
            beyond = [name for name in group.types if name not in named]
            for i in group.indices if beyond else ():
                _fail_shard(state, extra, i, f"columns the schema forbids: {', '.join(beyond)}")


def in_group(state: RunState, target: Target, group: ShardGroup) -> Target:
    """A target as a group's shards hold it: under the field's name where they lack its alias.

    pydantic reads a row's alias key when it holds one, else (``validate_by_name``) its name,
    so shards holding only the name column are checked on that column; the target keeps its
    label (the report names the field by its alias).

    Args:
        state: The run.
        target: A column or struct field of the schema.
        group: Shards sharing one DuckDB schema.

    Returns:
        The target, its column replaced by the field's name where the group reads that.
    """
    top = next((t for t in state.targets if t.path == target.path[:1]), target)
    if top.path[0] in group.types or top.by_name is None or top.by_name not in group.types:
        return target
    return dataclasses.replace(target, path=(top.by_name, *target.path[1:]))


def compatible_type(state: RunState, target: Target, group: ShardGroup) -> Any | None:
    """The DuckDB type of a target in a group, or None when absent or incompatible.

    Args:
        state: The run.
        target: A column or struct field of the schema.
        group: Shards sharing one DuckDB schema.

    Returns:
        The target's type in these shards, or None when its column is missing there or of a
        type the field does not accept (the ``type`` check reports that; value checks skip it).
    """
    top = next((t for t in state.targets if t.path == target.path[:1]), None)
    target = in_group(state, target, group)
    root = group.types.get(target.path[0])
    if root is None or target.path[0] in group.durations:  # DuckDB's integers, not timedeltas
        return None
    strict = (top.strict, top.strict_inside) if top is not None else (False, False)
    if top is not None and mismatch(top.annotation, root, *strict, by_row=True) is not None:
        return None
    return field_type(root, target.path[1:])
