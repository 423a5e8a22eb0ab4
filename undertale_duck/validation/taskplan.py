"""The validation plan as tasks: per-shard scans anywhere, then a reduce into one report."""

from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from ..core.query import memory_limit
from ..core.runtime import connect, peak_rss
from ..core.source import Shard, SourceFiles
from ..errors import SourceError
from .relation import Relation
from .rowscan import GroupScan, plan_group, scan_group
from .state import CheckKey, RunState, ShardGroup, Tally
from .unique import (
    UniquePartial,
    UniquePlan,
    merge_unique,
    plan_unique,
    unique_keys,
    unique_partition,
)

#: DuckDB settings that name this process's private spill directory (a task uses its own).
_PROCESS_SETTINGS = ("temp_directory", "max_temp_directory_size")


@dataclasses.dataclass(frozen=True)
class ShardTask:
    """Some shards of one group: what one task scans.

    Attributes:
        number: The task's place in the plan (results merge in this order).
        group: The group's position in :attr:`ValidationPlan.groups`.
        indices: Shard numbers, ascending.
    """

    number: int
    group: int
    indices: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ValidationPlan:
    """Everything a task needs, as plain data: no schema class, no connection, no footer.

    Attributes:
        paths: Shard paths (or URLs) by shard number.
        offsets: Global index of each shard's first row.
        storage_options: Options of a remote source's store.
        config: DuckDB settings of a task's connection (the memory budget included).
        memory_bytes: The memory budget of one task (0: none).
        threads: DuckDB's threads in a task.
        limit: Examples kept per check.
        rows: SQL of the rows checked (``sql/checks/rows.sql``).
        keys: The tallies a task starts with, in report order.
        groups: Per group of shards sharing a schema: its shards and its scan (None when no
            row check needs one).
        unique: The ``Unique`` fields' checks.
    """

    paths: tuple[str, ...]
    offsets: tuple[int, ...]
    storage_options: dict[str, Any] | None
    config: dict[str, Any]
    memory_bytes: int
    threads: int
    limit: int
    rows: str
    keys: tuple[CheckKey, ...]
    groups: tuple[tuple[tuple[int, ...], GroupScan | None], ...]
    unique: tuple[UniquePlan, ...]

    def tasks(self, shards_per_task: int = 1) -> list[ShardTask]:
        """Split every group into tasks of at most ``shards_per_task`` consecutive shards.

        Args:
            shards_per_task: Shards one task scans together (one query).

        Returns:
            The tasks, in shard order within each group, groups in order.
        """
        size = max(1, int(shards_per_task))
        tasks: list[ShardTask] = []
        for position, (indices, _) in enumerate(self.groups):
            for start in range(0, len(indices), size):
                tasks.append(ShardTask(len(tasks), position, indices[start : start + size]))
        return tasks


@dataclasses.dataclass
class TaskResult:
    """What one task found: tallies to add, shards found unreadable, uniqueness failures.

    Attributes:
        number: The task's number.
        group: The task's group.
        tallies: The task's tallies that changed, by key.
        errors: Why shards are unreadable, by shard number.
        unique_failures: Why a ``Unique`` field's query failed, by its position in the plan.
        peak_rss: The peak resident memory of the process that ran the task, in bytes, as
            it measured it when the task ended (``resource.getrusage``).
    """

    number: int
    group: int
    tallies: dict[CheckKey, Tally]
    errors: dict[int, str]
    unique_failures: dict[int, str]
    peak_rss: int = 0


#: One task's hash partitions: for each partition, the ``Unique`` fields' tables by position.
Partitions = list[dict[int, pa.Table]]


def build_plan(state: RunState, groups: Sequence[ShardGroup]) -> ValidationPlan:
    """Describe a run's row and uniqueness checks as tasks (reads footers only, no rows).

    The tallies are left as they were: :func:`merge` plans each group again on them, so
    what planning records lands in the same order as in a run in one process.

    Args:
        state: The run, its layout checks done.
        groups: The readable shards grouped by DuckDB schema.

    Returns:
        The plan.
    """
    real = state.tallies, state.order
    state.tallies, state.order = copy.deepcopy(state.tallies), list(state.order)
    try:  # planned on copies of the tallies: the real ones are planned again by merge()
        scans = [plan_group(state, g) for g in groups]
        keys = tuple(state.order)
    finally:
        state.tallies, state.order = real
    config = {k: v for k, v in state.config.items() if k not in _PROCESS_SETTINGS}
    config.setdefault("preserve_insertion_order", True)
    config.setdefault("autoinstall_known_extensions", False)
    config["threads"] = state.threads  # the memory bound judged the driver's threads
    if state.memory_bytes > 0:
        config.setdefault("memory_limit", memory_limit(state.memory_bytes))
    return ValidationPlan(
        paths=tuple(state.paths),
        offsets=tuple(state.offsets),
        storage_options=state.storage_options,
        config=config,
        memory_bytes=state.memory_bytes,
        threads=state.threads,
        limit=state.limit,
        rows=state.relation.rows,
        keys=keys,
        groups=tuple((tuple(g.indices), scan) for g, scan in zip(groups, scans, strict=True)),
        unique=tuple(plan_unique(state, groups)),
    )


def run_task(plan: ValidationPlan, task: ShardTask, parts: int) -> tuple[TaskResult, Partitions]:
    """Run one task where it is: open its shards, scan them, split its uniqueness keys.

    Args:
        plan: The plan.
        task: The task.
        parts: How many hash partitions the uniqueness exchange has.

    Returns:
        The task's result and its partitions.
    """
    wanted = list(dict.fromkeys(plan.paths[i] for i in task.indices))
    files = SourceFiles(wanted, plan.storage_options)
    shards: list[Shard | None] = [None] * len(plan.paths)
    errors: dict[int, str] = {}
    for i in task.indices:
        try:
            shards[i] = files.footer(plan.paths[i])
        except SourceError as exc:
            errors[i] = str(exc)
    connection = connect(plan.config)
    files.attach(connection)
    try:
        state = RunState(
            BaseModel, shards, plan.paths, errors, connection, plan.limit, None,
            Relation(plan.rows, ""), memory_bytes=plan.memory_bytes, threads=plan.threads,
            offsets=plan.offsets,
        )
        blank = {key: Tally(key[0], key[1] or None, key[2]) for key in plan.keys}  # type: ignore[arg-type]
        state.tallies = copy.deepcopy(blank)
        state.order = list(plan.keys)
        _, scan = plan.groups[task.group]
        group = ShardGroup([i for i in task.indices if i not in state.errors], {})
        if scan is not None:
            scan_group(state, group, scan, lambda key: plan.limit)
        partitions: Partitions = [{} for _ in range(parts)]
        failures: dict[int, str] = {}
        for u, unique in enumerate(plan.unique):
            tables, failure = unique_keys(state, unique, task.indices, parts)
            if failure is not None:
                failures[u] = failure
            for p, table in enumerate(tables):
                partitions[p][u] = table
    finally:
        connection.close()
    changed = {k: t for k, t in state.tallies.items() if t != blank[k]}
    new_errors = {i: m for i, m in state.errors.items() if i in task.indices}
    result = TaskResult(task.number, task.group, changed, new_errors, failures, peak_rss())
    return result, partitions


def reduce_partition(
    plan: ValidationPlan, received: Sequence[Mapping[int, pa.Table]]
) -> dict[int, UniquePartial]:
    """Reduce one hash partition: for each ``Unique`` field, its duplicates in the partition.

    Args:
        plan: The plan.
        received: The partition's tables from every task.

    Returns:
        What the partition found, by field position.
    """
    found = {}
    for u in range(len(plan.unique)):
        tables = [r[u] for r in received if u in r and r[u].num_rows]
        found[u] = unique_partition(tables, plan.limit, plan.config)
    return found


def merge(
    state: RunState,
    groups: Sequence[ShardGroup],
    plan: ValidationPlan,
    results: Sequence[TaskResult],
    partials: Sequence[Mapping[int, UniquePartial]],
) -> None:
    """Merge every task's result into the run's tallies: the report one process would make.

    Groups merge in order, each planned again first (as one process plans a group right
    before scanning it); a group's counts add up, its examples are the first by index over
    its tasks; then the uniqueness checks take every partition's finding.

    Args:
        state: The run whose :func:`build_plan` made ``plan``.
        groups: The groups it was made from.
        plan: The plan.
        results: Every task's result.
        partials: Every partition's reduce.
    """
    results = sorted(results, key=lambda r: r.number)
    by_group: dict[int, list[TaskResult]] = defaultdict(list)
    for result in results:
        by_group[result.group].append(result)
    for position, group in enumerate(groups):
        scan = plan_group(state, group)
        done = by_group.get(position, [])
        for result in done:
            state.errors.update(result.errors)
        group.indices = [i for i in group.indices if i not in state.errors]
        wanted = {key: state.limit - len(t.examples) for key, t in state.tallies.items()}
        for result in done:
            for key, found in result.tallies.items():
                tally = state.tallies[key]
                tally.violations += found.violations
                tally.per_shard.update(found.per_shard)
                tally.sql.extend(found.sql)
                tally.error = tally.error or found.error
        if scan is None:
            continue
        for check in scan.checks:
            tally = state.tallies[check.key]
            examples = sorted(
                (e for r in done if check.key in r.tallies for e in r.tallies[check.key].examples),
                key=lambda e: e.index if e.index is not None else -1,
            )
            tally.examples.extend(examples[: max(wanted[check.key], 0)])
    failures: list[str | None] = []
    for u in range(len(plan.unique)):
        failure = next((r.unique_failures[u] for r in results if u in r.unique_failures), None)
        failures.append(failure)
    reduced = [[p[u] for p in partials if u in p] for u in range(len(plan.unique))]
    merge_unique(state, plan.unique, reduced, failures)


__all__ = [
    "Partitions", "ShardTask", "TaskResult", "ValidationPlan", "build_plan", "merge",
    "reduce_partition", "run_task",
]
