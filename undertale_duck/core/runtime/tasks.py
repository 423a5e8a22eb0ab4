"""Independent per-shard tasks and where they run: the map protocol executors implement."""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from ...common.progress import Progress

T = TypeVar("T")
R = TypeVar("R")

#: The label progress is called with as each task finishes.
TASK_DONE = "shard task"


@runtime_checkable
class TaskMap(Protocol):
    """Runs one function over a list of tasks somewhere, results back in task order.

    ``function`` is a module-level function and every task plain data, so both travel to
    other processes (a Ray cluster, the ranks of a ``torch.distributed`` job); a task opens
    what it reads itself. The validation executors (``undertale_duck.validation.executors``,
    ``RayExecutor``) implement it; :func:`run_here` is the in-process one.
    """

    def map(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        progress: Progress | None = None,
        *,
        memory_bytes: int = 0,
    ) -> list[R]:
        """Run ``function(task)`` for every task; return the results in task order.

        Args:
            function: A module-level function of one task.
            tasks: The tasks.
            progress: Called with :data:`TASK_DONE` as each task finishes.
            memory_bytes: The memory one task may use (0: not stated), for a scheduler.

        Returns:
            One result per task, in the order of ``tasks``.
        """
        ...


def peak_rss() -> int:
    """The peak resident memory of this process so far, in bytes.

    On Linux, ``VmHWM`` of ``/proc/self/status``: the peak of this program's own memory
    (``getrusage``'s ``ru_maxrss`` keeps the peak of the program a process ran before
    ``exec``, such as the launcher of a spawned rank). Elsewhere ``getrusage``.

    Returns:
        Bytes.
    """
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii", errors="replace") as status,
    ):
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def run_here(
    function: Callable[[T], R], tasks: Sequence[T], progress: Progress | None = None
) -> list[R]:
    """Run the tasks one after another in this process (what no executor means).

    Args:
        function: A function of one task.
        tasks: The tasks.
        progress: Called with :data:`TASK_DONE` as each task finishes.

    Returns:
        One result per task, in order.
    """
    results = []
    for task in tasks:
        results.append(function(task))
        if progress is not None:
            progress(TASK_DONE)
    return results


__all__ = ["TASK_DONE", "TaskMap", "peak_rss", "run_here"]
