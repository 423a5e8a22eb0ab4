"""Uniqueness checks: fields marked ``Unique`` have no value twice across the whole dataset."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..common.text import first_line
from ..core.runtime import connect, sqlfiles
from ..errors import ArgumentError
from . import schemas
from .layout import compatible_type, in_group
from .plan import holds_nan, value_sql
from .state import RunState, ShardGroup
from .targets import Target


def unique_checks(state: RunState, groups: Sequence[ShardGroup]) -> None:
    """Check every ``Unique`` field over all shards where its type is compatible.

    One query counts duplicated rows; only when there are some, two more find the count per
    shard and the first offending rows (grouped by value). A query that fails because of one
    undecodable shard is rerun without it (the shard becomes a failed ``readable`` check).

    Args:
        state: The run.
        groups: The readable shards grouped by DuckDB schema.
    """
    for target in state.targets:
        if not any(schemas.is_unique_marker(m) for m in target.metadata):
            continue
        tally = state.tally("unique", target.label, f"{target.label} is unique")
        members = [g for g in groups if compatible_type(state, target, g) is not None]
        if not members:
            continue
        indices = sorted(i for g in members for i in g.indices if i not in state.errors)
        value = value_sql(_unique_path(state, target, members))
        nan = _nan_sql(state, target, members)
        rows_sql = state.relation.rows
        sql = sqlfiles.render("checks/unique", value=value, rows=rows_sql, holds_nan=nan)
        tally.sql.append(sql)
        tally.condition = f"{value} occurs in more than one row"
        state.step(f"unique {target.label}")
        try:
            (_, duplicated), *_ = state.query(sql, {"files": state.files(indices)})
        except duckdb.Error as exc:
            failure = first_line(exc)
            kept = [i for i in indices if state.decodes(i)]
            try:
                if len(kept) == len(indices) or not kept:
                    raise  # not a shard's fault (or nothing left to check)
                indices = kept
                (_, duplicated), *_ = state.query(sql, {"files": state.files(indices)})
            except duckdb.Error:
                tally.error = f"the uniqueness query failed: {failure}"
                continue
        files = state.files(indices)
        if not duplicated:
            continue
        state.step(f"unique {target.label} per shard")
        per_shard_sql = sqlfiles.render(
            "checks/unique_shards", value=value, rows=rows_sql, holds_nan=nan
        )
        examples_sql = sqlfiles.render(
            "checks/unique_examples", value=value, rows=rows_sql, holds_nan=nan
        )
        try:
            for shard, count in state.query(per_shard_sql, {"files": files}):
                tally.add(shard, int(count))
            rows = state.query(
                examples_sql,
                {
                    "files": files,
                    "offsets": [state.offsets[i] for i in indices],
                    "limit": state.limit,
                },
            )
        except duckdb.Error as exc:
            tally.violations = max(tally.violations, int(duplicated))
            tally.error = f"the uniqueness query failed: {first_line(exc)}"
            continue
        tally.sql.extend([per_shard_sql, examples_sql])
        for index, shard, row, val in rows:
            tally.examples.append(state.example(index, shard, row, val))


def _unique_path(state: RunState, target: Target, members: Sequence[ShardGroup]) -> tuple[str, ...]:
    """The one column path a ``Unique`` field has in every group the query scans.

    Raises:
        ArgumentError: If some shards hold the field under its alias and others under its
            name (``validate_by_name``): one query reads one column over every shard.
    """
    paths = list(dict.fromkeys(in_group(state, target, g).path for g in members))
    if len(paths) > 1:
        raise ArgumentError(
            f"schema {state.model.__name__}: field {target.label!r} is Unique, and some shards "
            f"hold it as column {paths[0][0]!r}, others as {paths[1][0]!r} (validate_by_name); "
            "the uniqueness check reads one column over every shard and cannot compare them. "
            "Give the column one name in every shard, or drop Unique for validation"
        )
    return paths[0] if paths else target.path


def _nan_sql(state: RunState, target: Target, members: Sequence[ShardGroup]) -> str:
    """SQL true for a value that holds a float NaN in any of the groups' types.

    Uniqueness compares values as Python does: a NaN (or a list, map or struct holding one)
    equals no other value, so it is never a duplicate; DuckDB would group NaN with NaN.
    """
    tests: list[str] = []
    for group in members:
        found = holds_nan(
            value_sql(in_group(state, target, group).path), compatible_type(state, target, group)
        )
        if found is not None and found not in tests:
            tests.append(found)
    return " OR ".join(f"({t})" for t in tests) or "false"


# ---------------------------------------------------------------- the partitioned exchange
@dataclasses.dataclass(frozen=True)
class UniquePlan:
    """One ``Unique`` field's check as tasks run it: hash partitions of its values.

    Tasks send each non-NULL value (with its row's index and shard) to the partition its hash
    names, so every row holding one value meets in one partition and no process holds every
    value; each partition counts its duplicated rows and keeps its first offending rows.

    Attributes:
        label: The field's label.
        value: SQL of the value.
        nan: SQL true for a value holding a NaN (never a duplicate; see :func:`_nan_sql`).
        members: Shard numbers whose type of the field is compatible (the shards checked).
        sql: The single query of the in-process check (the report shows it).
        per_shard_sql: Its per-shard query, shown when there are duplicates.
        examples_sql: Its examples query, shown when there are duplicates.
    """

    label: str
    value: str
    nan: str
    members: frozenset[int]
    sql: str
    per_shard_sql: str
    examples_sql: str


@dataclasses.dataclass
class UniquePartial:
    """What one partition found for one field.

    Attributes:
        per_shard: Rows holding a duplicated value, by shard number.
        candidates: Its first offending rows by value then index (columns ``v``, ``index``,
            ``shard``), or None when it found none.
    """

    per_shard: dict[int, int]
    candidates: pa.Table | None


def plan_unique(state: RunState, groups: Sequence[ShardGroup]) -> list[UniquePlan]:
    """Describe every ``Unique`` field's check for tasks (no query runs, no tally changes).

    Args:
        state: The run.
        groups: The readable shards grouped by DuckDB schema.

    Returns:
        One plan per ``Unique`` field, in schema order.
    """
    plans = []
    for target in state.targets:
        if not any(schemas.is_unique_marker(m) for m in target.metadata):
            continue
        members = [g for g in groups if compatible_type(state, target, g) is not None]
        value = value_sql(_unique_path(state, target, members))
        nan = _nan_sql(state, target, members)
        rows_sql = state.relation.rows
        parts = {"value": value, "rows": rows_sql, "holds_nan": nan}
        plans.append(
            UniquePlan(
                label=target.label,
                value=value,
                nan=nan,
                members=frozenset(i for g in members for i in g.indices),
                sql=sqlfiles.render("checks/unique", **parts),
                per_shard_sql=sqlfiles.render("checks/unique_shards", **parts),
                examples_sql=sqlfiles.render("checks/unique_examples", **parts),
            )
        )
    return plans


def unique_keys(
    state: RunState, plan: UniquePlan, indices: Sequence[int], parts: int
) -> tuple[list[pa.Table], str | None]:
    """Map side: one task's values of a field, split into ``parts`` hash partitions.

    A query that fails because of an undecodable shard is rerun without it (the shard
    becomes unreadable, as in the single query).

    Args:
        state: The task's run (its shards, cursor and errors).
        plan: The field's plan.
        indices: The task's shard numbers.
        parts: How many partitions.

    Returns:
        One table per partition (columns ``v``, ``index``, ``shard``; empty when the task
        holds none of the field's shards), and why the query failed when it did.
    """
    kept = [i for i in indices if i in plan.members and i not in state.errors]
    if not kept:
        return [], None
    sql = sqlfiles.render(
        "checks/unique_keys", value=plan.value, rows=state.relation.rows, holds_nan=plan.nan
    )

    def keys(numbers: Sequence[int]) -> pa.Table:
        state.step(f"unique {plan.label} keys")
        return state.arrow(sql, {
            "files": state.files(numbers),
            "offsets": [state.offsets[i] for i in numbers],
            "numbers": list(numbers),
            "parts": parts,
        })

    try:
        table = keys(kept)
    except duckdb.Error as exc:
        failure = first_line(exc)
        readable = [i for i in kept if state.decodes(i)]
        if len(readable) == len(kept):
            return [], failure  # not a shard's fault
        if not readable:
            return [], None
        try:
            table = keys(readable)
        except duckdb.Error:
            return [], failure
    part = table.column("part")
    table = table.drop_columns(["part"])
    return [table.filter(pc.equal(part, p)) for p in range(parts)], None


def unique_partition(
    tables: Sequence[pa.Table], limit: int, config: Mapping[str, Any]
) -> UniquePartial:
    """Reduce side: one partition's duplicated rows per shard and its first offending rows.

    Args:
        tables: The partition's tables from every task.
        limit: Examples kept per check.
        config: DuckDB settings (the memory budget) of the connection that counts.

    Returns:
        The partition's counts and candidates.
    """
    if not tables:
        return UniquePartial({}, None)
    con = connect(config)
    try:
        con.register("unique_keys", pa.concat_tables(tables, promote_options="permissive"))
        per_shard = {
            int(shard): int(n)
            for shard, n in con.execute(sqlfiles.sql_text("checks/unique_partition")).fetchall()
        }
        candidates = None
        if per_shard:
            candidates = con.sql(
                sqlfiles.sql_text("checks/unique_candidates"), params={"limit": limit}
            ).to_arrow_table()
    finally:
        con.close()
    return UniquePartial(per_shard, candidates)


def merge_unique(
    state: RunState,
    plans: Sequence[UniquePlan],
    partials: Sequence[Sequence[UniquePartial]],
    failures: Sequence[str | None],
) -> None:
    """Put every partition's finding into the report's ``unique`` checks, as the single query.

    Args:
        state: The run (on the driver, or on every rank).
        plans: The fields' plans.
        partials: For each field, what each partition found.
        failures: For each field, why a task's query failed (the first), or None.
    """
    for plan, found, failure in zip(plans, partials, failures, strict=True):
        tally = state.tally("unique", plan.label, f"{plan.label} is unique")
        if not plan.members:
            continue
        tally.sql.append(plan.sql)
        tally.condition = f"{plan.value} occurs in more than one row"
        if failure is not None:
            tally.error = f"the uniqueness query failed: {failure}"
            continue
        per_shard: Counter[int] = Counter()
        for partial in found:
            per_shard.update(partial.per_shard)
        if not per_shard:
            continue
        for shard in sorted(per_shard):
            tally.add(state.paths[shard], per_shard[shard])
        candidates = [p.candidates for p in found if p.candidates is not None]
        con = connect({"preserve_insertion_order": True, **state.config})
        try:
            con.register("unique_keys", pa.concat_tables(candidates, promote_options="permissive"))
            rows = con.execute(
                sqlfiles.sql_text("checks/unique_examples_merge"), {"limit": state.limit}
            ).fetchall()
        finally:
            con.close()
        tally.sql.extend([plan.per_shard_sql, plan.examples_sql])
        for value, index, shard in rows:
            row = int(index) - state.offsets[int(shard)]
            tally.examples.append(state.example(index, state.paths[int(shard)], row, value))
