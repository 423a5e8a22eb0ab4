"""Executors of a validation plan: in this process, task by task, or over torch.distributed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..common.progress import Progress
from ..core.runtime import TASK_DONE, run_here
from ..errors import ArgumentError, UndertaleDuckError
from .model import ValidationReport
from .rowscan import row_checks_for_group
from .state import RunState, ShardGroup
from .taskplan import (
    Partitions,
    ShardTask,
    TaskResult,
    ValidationPlan,
    build_plan,
    merge,
    reduce_partition,
    run_task,
)
from .unique import UniquePartial, unique_checks

#: Every rank's result of a step: its results, or why it failed.
_Gathered = tuple[list[TaskResult], str | None]

T = TypeVar("T")
R = TypeVar("R")


class Executor:
    """Runs the row and uniqueness checks of a validation run (the layout checks run first).

    The base class runs them in this process on the dataset's own DuckDB connection, one
    scan per group of shards: the default, ``InProcessExecutor``.

    Every executor also runs independent per-shard tasks of other passes (``describe
    --scan``, a view's indexing pass) through :meth:`map`, the loading core's
    ``core.runtime.TaskMap`` protocol.

    Attributes:
        task_peaks: After a run by tasks, each task's peak resident memory in bytes as the
            process that ran it measured it (``resource.getrusage``), in task order.
    """

    task_peaks: tuple[int, ...] = ()

    def map(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        progress: Progress | None = None,
        *,
        memory_bytes: int = 0,
    ) -> list[R]:
        """Run ``function(task)`` for every task, here, one after another.

        Args:
            function: A module-level function of one task.
            tasks: The tasks (plain data).
            progress: Called as each task finishes.
            memory_bytes: The memory one task may use (a scheduler's hint; unused here).

        Returns:
            The results, in task order.
        """
        return run_here(function, tasks, progress)

    def checks(self, state: RunState, groups: Sequence[ShardGroup]) -> None:
        """Run every row check and uniqueness check of a run, filling its tallies.

        Args:
            state: The run, its layout checks done.
            groups: The readable shards grouped by DuckDB schema.
        """
        for group in groups:
            row_checks_for_group(state, group)
        unique_checks(state, groups)

    def settle(self, report: ValidationReport) -> None:
        """Make the finished report the same wherever it was made (nothing to do here)."""


class InProcessExecutor(Executor):
    """Validate in this process: one DuckDB scan per group of shards (the default)."""


class TaskExecutor(Executor):
    """Runs the plan as tasks (:mod:`.taskplan`), then merges them into one report.

    Subclasses say where tasks run (:meth:`execute`). Uniqueness is a hash-partitioned
    exchange: no process holds every value of a ``Unique`` field.
    """

    def checks(self, state: RunState, groups: Sequence[ShardGroup]) -> None:
        """Plan, run the tasks with :meth:`execute`, merge (see :class:`Executor`)."""
        if state.relation.view is not None:
            raise ArgumentError(
                f"executor={type(self).__name__}(...) validates a dataset's shards, not a view "
                "(its side tables live in this process); drop executor= to check the view here"
            )
        plan = build_plan(state, groups)
        results, partials = self.execute(plan, state.step)
        self.task_peaks = tuple(r.peak_rss for r in sorted(results, key=lambda r: r.number))
        merge(state, groups, plan, results, partials)

    def execute(
        self, plan: ValidationPlan, progress: Progress
    ) -> tuple[list[TaskResult], list[dict[int, UniquePartial]]]:
        """Run every task and every partition's reduce.

        Args:
            plan: The plan.
            progress: Called as each task finishes.

        Returns:
            Every task's result and every partition's reduce.
        """
        raise NotImplementedError


class SerialExecutor(TaskExecutor):
    """Run the plan's tasks one after another in this process (a reference for the others).

    Each task opens its shards and its own DuckDB connection as a task on a cluster does, and
    uniqueness goes through the same hash partitions; the report equals the in-process one.

    Args:
        shards_per_task: Shards one task scans together.
        partitions: Hash partitions of the uniqueness exchange.
    """

    def __init__(self, *, shards_per_task: int = 1, partitions: int = 2) -> None:
        self.shards_per_task = positive(shards_per_task, "shards_per_task")
        self.partitions = positive(partitions, "partitions")

    def execute(
        self, plan: ValidationPlan, progress: Progress
    ) -> tuple[list[TaskResult], list[dict[int, UniquePartial]]]:
        """Run the tasks and reduces here (see :meth:`TaskExecutor.execute`)."""
        results: list[TaskResult] = []
        outputs: list[Partitions] = []
        for task in plan.tasks(self.shards_per_task):
            result, parts = run_task(plan, task, self.partitions)
            results.append(result)
            outputs.append(parts)
            progress(TASK_DONE)
        partials = [reduce_partition(plan, [o[p] for o in outputs]) for p in range(self.partitions)]
        return results, partials


class TorchDistributedExecutor(TaskExecutor):
    """Split the shards over the ranks of a ``torch.distributed`` job; every rank gets the report.

    A collective, like a barrier: every rank calls ``report`` with this executor. Each rank
    scans a share of every group; results are gathered with ``all_gather_object`` and the
    uniqueness keys are exchanged by hash partition (rank ``r`` reduces partition ``r``), so
    no rank holds every key. Works with the ``gloo`` backend (CPU only).

    Args:
        group: The process group (default: the default group).
    """

    def __init__(self, *, group: Any = None) -> None:
        self.group = group

    def _dist(self) -> Any:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise ArgumentError(
                "executor=TorchDistributedExecutor() needs torch.distributed initialized "
                "(torch.distributed.init_process_group) on every rank"
            )
        return dist

    def execute(
        self, plan: ValidationPlan, progress: Progress
    ) -> tuple[list[TaskResult], list[dict[int, UniquePartial]]]:
        """Run this rank's tasks, exchange and reduce (see :meth:`TaskExecutor.execute`)."""
        dist = self._dist()
        world = dist.get_world_size(self.group)
        rank = dist.get_rank(self.group)
        mine: list[tuple[TaskResult, Partitions]] = []
        failure: str | None = None
        try:
            for task in _pieces(plan, world):
                if task.number % world == rank:
                    mine.append(run_task(plan, task, world))
                    progress(TASK_DONE)
        except UndertaleDuckError as exc:  # every rank must reach the collectives below
            failure = f"rank {rank}: {exc}"
        gathered: list[_Gathered | None] = [None] * world
        dist.all_gather_object(gathered, ([r for r, _ in mine], failure), group=self.group)
        failures = [g[1] for g in gathered if g is not None and g[1] is not None]
        if failures:
            raise UndertaleDuckError("validation failed on a rank: " + "; ".join(failures))
        results = [r for g in gathered if g is not None for r in g[0]]
        received: list[Mapping[int, Any]] = []
        for dst in range(world):
            inbox: list[Any] | None = [None] * world if rank == dst else None
            sent = [parts[dst] for _, parts in mine]
            dist.gather_object(sent, inbox, dst=_global(dist, self.group, dst), group=self.group)
            if inbox is not None:
                received = [d for got in inbox for d in got]
        partial = reduce_partition(plan, received)
        partials: list[dict[int, UniquePartial] | None] = [None] * world
        dist.all_gather_object(partials, partial, group=self.group)
        return results, [p for p in partials if p is not None]

    def map(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        progress: Progress | None = None,
        *,
        memory_bytes: int = 0,
    ) -> list[R]:
        """Run task ``i`` on rank ``i % world``; every rank gets every result (a collective).

        Args:
            function: A module-level function of one task.
            tasks: The tasks, the same on every rank.
            progress: Called as each of this rank's tasks finishes.
            memory_bytes: The memory one task may use (unused: a rank runs its own tasks).

        Returns:
            The results, in task order, on every rank.

        Raises:
            UndertaleDuckError: If a task raised ours on any rank (on every rank).
        """
        dist = self._dist()
        world = dist.get_world_size(self.group)
        rank = dist.get_rank(self.group)
        mine: dict[int, Any] = {}
        failure: str | None = None
        try:
            for i in range(rank, len(tasks), world):
                mine[i] = function(tasks[i])
                if progress is not None:
                    progress(TASK_DONE)
        except UndertaleDuckError as exc:  # every rank must reach the collective below
            failure = f"rank {rank}: {exc}"
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, (mine, failure), group=self.group)
        failures = [g[1] for g in gathered if g is not None and g[1] is not None]
        if failures:
            raise UndertaleDuckError("a task failed on a rank: " + "; ".join(failures))
        merged: dict[int, Any] = {}
        for g in gathered:
            merged.update(g[0])
        return [merged[i] for i in range(len(tasks))]

    def settle(self, report: ValidationReport) -> None:
        """Give every rank rank 0's ``seconds``, so every rank's report is the same."""
        dist = self._dist()
        message = [report.seconds]
        dist.broadcast_object_list(message, src=_global(dist, self.group, 0), group=self.group)
        report.seconds = float(message[0])


def _global(dist: Any, group: Any, rank: int) -> int:
    """The global rank of a group's rank (the collectives' ``dst``/``src`` are global)."""
    return rank if group is None else int(dist.get_global_rank(group, rank))


def _pieces(plan: ValidationPlan, pieces: int) -> list[ShardTask]:
    """Split each group into ``pieces`` near-equal runs of shards; piece ``j`` is task ``j``.

    Task numbers go ``group * pieces + j`` so ``number % pieces`` names the piece (the rank).
    """
    tasks = []
    for position, (indices, _) in enumerate(plan.groups):
        size = max(1, math.ceil(len(indices) / pieces))
        for j in range(pieces):
            part = indices[j * size : (j + 1) * size]
            if part:
                tasks.append(ShardTask(position * pieces + j, position, part))
    return tasks


def positive(value: int, name: str) -> int:
    """Check a count argument (a positive int); return it or raise ``ArgumentError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{name} must be a positive integer, not {value!r}")
    return value


__all__ = [
    "Executor", "InProcessExecutor", "SerialExecutor", "TaskExecutor", "TorchDistributedExecutor",
]
