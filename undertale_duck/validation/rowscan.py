"""Row checks: one aggregate scan per shard group counts every per-row check, then examples."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb

from ..common.text import first_line
from ..core.bounds import VectorBound
from ..core.runtime import sqlfiles
from ..errors import SourceError
from .layout import compatible_type, in_group
from .plan import (
    NULL_TEMPLATES,
    RowCheck,
    bound_value,
    condition,
    naive_bound_on_zoned,
    re2_pattern,
    row_checks,
    value_sql,
)
from .regex import PatternRefused
from .state import CheckKey, RunState, ShardGroup, Tally

#: Checks that a failing row scan does not touch (they are decided from footers or elsewhere).
_NOT_ROW_CHECKS = frozenset({"readable", "shard_schema", "present", "type", "unique"})


@dataclasses.dataclass(frozen=True)
class PlannedCheck:
    """One row check of a group as SQL: its tally's key, violation condition and value.

    Attributes:
        key: The check's tally key.
        condition: SQL true for an offending row.
        value: SQL of the checked value (for examples).
        bound: The check's bound as ``{placeholder: value}`` (empty when it has none).
    """

    key: CheckKey
    condition: str
    value: str
    bound: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class GroupScan:
    """The row checks of one group of shards: one aggregate query and what it counts.

    A pure description: any process holding some of the group's shards can run it on them
    (:func:`scan_group`), and the counts and examples of the parts add up to the whole.

    Attributes:
        sql: The aggregate query over ``$files`` (``sql/checks/aggregate.sql``).
        params: Its bound values (every parameter but ``$files``).
        checks: The checks it counts, in its count columns' order.
        valued: Top-level columns whose values (not only nulls) the checks read.
    """

    sql: str
    params: dict[str, Any]
    checks: tuple[PlannedCheck, ...]
    valued: frozenset[str]


def row_checks_for_group(state: RunState, group: ShardGroup) -> None:
    """Count every per-row check over one group of shards in one scan; keep examples.

    Checks that do not apply to the group's column type become errors; null checks that the
    footers' statistics already prove are not scanned (not for a view: its computed columns
    have no statistics); a scan that fails is rerun shard by
    shard so one unreadable shard does not hide the others' counts.

    Args:
        state: The run.
        group: Shards sharing one DuckDB schema.
    """
    scan = plan_group(state, group)
    if scan is not None:
        scan_group(state, group, scan, lambda key: state.limit - len(state.tallies[key].examples))


def plan_group(state: RunState, group: ShardGroup) -> GroupScan | None:
    """Plan one group's row checks; record on the tallies what the plan alone decides.

    Checks that do not apply to the group's column type get their error, invalid patterns
    theirs, and null checks the footers' statistics prove get the statistics query; nothing
    reads a row.

    Args:
        state: The run.
        group: Shards sharing one DuckDB schema.

    Returns:
        The scan, or None when no check needs one.
    """
    files = state.files(group.indices)
    counts: list[str] = []
    params: dict[str, Any] = {}
    planned: list[PlannedCheck] = []
    valued: set[str] = set()
    no_null_leaves: set[str] | None = None
    for target in state.targets:
        held = in_group(state, target, group)  # the column these shards give pydantic
        checks = row_checks(held)
        dtype = compatible_type(state, target, group)
        if dtype is None:
            for check in checks:
                state.tally(check.kind, target.label, check.description)
            if len(held.path) != 1 or held.path[0] not in group.types:
                continue
            # a column of a type the field refuses (`type` fails these shards) still has its
            # NULL rows named: pydantic refuses a NULL of a field that is not optional
            dtype = group.types[held.path[0]]
            checks = [c for c in checks if c.template == "not_null" and not c.steps]
        for check in checks:
            tally = state.tally(check.kind, target.label, check.description)
            name = f"p{len(planned)}" if check.bound is not None else None
            cond = condition(check, dtype, name)
            if cond is None and check.template == "lax_type":
                continue  # the column's type holds only values pydantic takes
            if cond is None:
                tally.error = tally.error or (
                    f"{check.template} does not apply to {target.label} of type {dtype}"
                )
                continue
            if check.kind == "pattern" and not _pattern_ok(state, check, tally):
                continue  # before bound_value, which cannot spell a refused pattern
            zones = group.zones.get(held.path[0])
            if zones and naive_bound_on_zoned(check, dtype):
                tally.error = tally.error or (
                    f"{target.label} holds timestamps in the time zone "
                    f"{', '.join(sorted(zones))}: pydantic compares a naive datetime bound with "
                    "a value's wall-clock time there, which DuckDB does not keep (it holds the "
                    "UTC instant); give the bound a time zone, or write the column in UTC"
                )
                continue
            # a condition that cannot be violated here ("never") takes no bound
            bound = {name: bound_value(check, dtype)} if name and f"${name}" in cond else {}
            statistics = state.relation.statistics
            if (statistics and check.template in NULL_TEMPLATES and len(target.path) == 1
                    and not check.steps):
                if no_null_leaves is None:
                    no_null_leaves = _columns_without_null_leaves(state, files)
                if held.path[0] in no_null_leaves:  # the footers prove it: no scan
                    tally.condition = tally.condition or cond
                    tally.sql.append(sqlfiles.sql_text("checks/leaf_nulls").strip())
                    continue
            tally.condition = tally.condition or cond
            counts.append(f'count_if({cond}) AS "c{len(planned)}"')
            params.update(bound)
            planned.append(PlannedCheck(check.key, cond, value_sql(held.path), bound))
            if check.template not in NULL_TEMPLATES:
                valued.add(held.path[0])
    if not planned:
        return None
    sql = sqlfiles.render(
        "checks/aggregate", counts=",\n    ".join(counts), rows=state.relation.rows
    )
    return GroupScan(sql, params, tuple(planned), frozenset(valued))


def scan_group(
    state: RunState, group: ShardGroup, scan: GroupScan, wanted: Callable[[CheckKey], int]
) -> None:
    """Run a group's scan over ``group.indices``: counts, examples, unreadable shards.

    Shards whose checked values would pass the memory budget are left out (unreadable); a
    failing scan is rerun shard by shard. ``group.indices`` keeps the shards scanned.

    Args:
        state: The run (the tallies the counts and examples go to).
        group: The shards to scan (all of a group, or some of them in a task).
        scan: The group's :func:`plan_group`.
        wanted: How many more examples a check's tally wants.
    """
    _bound_vectors(state, group, set(scan.valued))
    if not group.indices:
        return
    params = {**scan.params, "files": state.files(group.indices)}
    sql = scan.sql
    state.step("row checks")
    try:
        rows = state.query(sql, params)
    except duckdb.Error:
        rows = _per_shard(state, group, sql, params)
        group.indices = [i for i in group.indices if i not in state.errors]
    for row in rows:
        shard = row[0]
        for k, check in enumerate(scan.checks):
            state.tallies[check.key].add(shard, int(row[2 + k] or 0))
    for check in scan.checks:
        tally = state.tallies[check.key]
        tally.sql.append(sql)
        if tally.violations and len(tally.examples) < state.limit:
            _examples(state, tally, group, check, wanted(check.key))


def _bound_vectors(state: RunState, group: ShardGroup, columns: set[str]) -> None:
    """Take out of the scan the shards whose ``columns``' string values pass the budget.

    DuckDB builds the scan's vectors whole (2048 rows per thread): a dictionary bomb in a
    checked column would pass the memory budget before a count comes back. Such a shard
    becomes unreadable in the report, with the reason (:mod:`..core.vectors`). Local
    shards and shards in object storage (by range reads) are weighed.
    """
    if not state.memory_bytes or state.relation.view is not None or not columns:
        return
    names = frozenset(c.lower() for c in columns)
    kept = []
    for i in group.indices:
        shard = state.shards[i]
        remote = getattr(shard, "store", None) is not None  # weighed by range reads
        if shard is None or not (remote or os.path.isfile(shard.path)):
            kept.append(i)
            continue
        bound = VectorBound(shard.schema)
        try:
            bound.check([shard], bound.columns(names, True), state.memory_bytes, state.threads,
                        what="validating would read",
                        hint="Raise memory if the shard is trusted, or lower DuckDB's threads")
        except SourceError as exc:
            state.errors[i] = str(exc)
            continue
        kept.append(i)
    group.indices = kept


def _columns_without_null_leaves(state: RunState, files: Sequence[str]) -> set[str]:
    """Top-level columns whose leaves record zero nulls in every chunk's statistics."""

    def read() -> set[str]:
        state.step("statistics")
        try:
            rows = state.query(sqlfiles.sql_text("checks/leaf_nulls"), {"files": list(files)})
        except duckdb.Error:
            return set()
        clean: dict[str, bool] = {}
        for path, chunks, without_nulls in rows:
            column = str(path).split(", ")[0]
            clean[column] = clean.get(column, True) and chunks == without_nulls
        return {column for column, ok in clean.items() if ok}

    return set(state.once(("leaf_nulls", *files), read))


def _pattern_ok(state: RunState, check: RowCheck, tally: Tally) -> bool:
    """Whether DuckDB accepts a pattern; when not, the check gets an error saying why."""

    def compile_pattern() -> str | None:
        try:
            pattern = re2_pattern(check.bound)
        except PatternRefused as exc:
            return (f"pattern {check.bound!r} cannot be matched as pydantic matches it: {exc}")
        try:
            state.query(sqlfiles.sql_text("checks/pattern_valid"), {"pattern": pattern})
        except duckdb.Error as exc:
            return f"pattern {check.bound!r} is not a valid regular expression: {first_line(exc)}"
        return None

    failure = state.once(("pattern", str(check.bound)), compile_pattern)
    if failure is not None:
        tally.error = failure
        return False
    return True


def _per_shard(
    state: RunState, group: ShardGroup, sql: str, params: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """Rerun a failed group scan shard by shard; unreadable shards become errors."""
    rows: list[tuple[Any, ...]] = []
    for i in group.indices:
        path = state.paths[i]
        state.step("row checks (per shard)")
        try:
            rows.extend(state.query(sql, {**params, "files": [path]}))
            continue
        except duckdb.Error as exc:
            failure = first_line(exc)
        if not state.decodes(i):
            continue
        for key in state.order:  # readable, but the checks themselves fail on it
            tally = state.tallies[key]
            if tally.check not in _NOT_ROW_CHECKS:
                tally.error = tally.error or f"the check query failed on {path}: {failure}"
    return rows


def _examples(
    state: RunState, tally: Tally, group: ShardGroup, check: PlannedCheck, limit: int
) -> None:
    """Add the first ``limit`` offending rows of one check in a group, in dataset order."""
    if limit <= 0:
        return
    sql = sqlfiles.render(
        "checks/examples",
        value=check.value,
        violation=check.condition,
        rows=state.relation.rows,
        order="" if state.relation.ordered else 'ORDER BY "index"\n',
    )
    state.step("examples")
    try:
        rows = state.query(
            sql,
            {
                "files": state.files(group.indices),
                "offsets": [state.offsets[i] for i in group.indices],
                "limit": limit,
                **check.bound,
            },
        )
    except duckdb.Error:
        return
    for index, shard, row, value in sorted(rows, key=lambda r: int(r[0])):
        tally.examples.append(state.example(index, shard, row, value))
