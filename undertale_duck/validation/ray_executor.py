"""Run a validation plan on a Ray cluster: per-shard tasks, a hash-partitioned key exchange."""

from __future__ import annotations

import contextlib
import importlib
import logging
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from ..common.progress import Progress
from ..common.sizes import format_size
from ..common.text import first_line
from ..core.runtime import TASK_DONE
from ..errors import ArgumentError, UndertaleDuckError
from .executors import TaskExecutor, positive
from .taskplan import ShardTask, TaskResult, ValidationPlan, reduce_partition, run_task
from .unique import UniquePartial

T = TypeVar("T")
R = TypeVar("R")

#: What ``ray.init`` gets when this executor starts a local Ray (``address=None``): its own
#: log lines ("Started a local Ray instance", the token notice of a cluster that lives only
#: for this run) went to stderr, around the CLI's output; its errors still do.
LOCAL_DEFAULTS: dict[str, Any] = {
    "include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR,
}


def import_ray() -> Any:
    """Import Ray, or say which extra installs it.

    Returns:
        The ``ray`` module.

    Raises:
        ArgumentError: If Ray is not installed.
    """
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ArgumentError(
            "validating on Ray needs the ray package: pip install 'undertale_duck[ray]'"
        ) from None


def _task(plan: ValidationPlan, task: ShardTask, parts: int) -> tuple[Any, ...]:
    """A Ray task: one task of the plan, its result then one object per hash partition."""
    result, partitions = run_task(plan, task, parts)
    return (result, *partitions)


def _reduce(plan: ValidationPlan, *received: Mapping[int, pa.Table]) -> dict[int, UniquePartial]:
    """A Ray task: reduce one hash partition (its tables from every task arrive here only)."""
    return reduce_partition(plan, received)


#: Seconds to wait for a Ray head's port to answer before the address is refused (Ray itself
#: retries an unreachable head for a minute or more).
CONNECT_SECONDS = 10.0


def _reachable(address: str) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) address whose port does not answer.

    Other forms (``"auto"``, ``"local"``) are left to Ray.

    Raises:
        ArgumentError: Naming the address and why it cannot be reached.
    """
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except (OSError, ValueError, OverflowError) as exc:
        raise ArgumentError(
            f"cannot reach the Ray cluster at address {address!r}: {first_line(exc)}. Check "
            "that its head is running ('ray start --head') and the address is the head's "
            "'host:port' (or 'auto' on one of its nodes)"
        ) from None


class RayExecutor(TaskExecutor):
    """Validate on a Ray cluster: one task per shard (or a few), each within the memory budget.

    Each task opens its shards where it runs (shards in object storage are read there, never
    through this process) with a DuckDB connection capped at the dataset's ``memory`` budget,
    and asks Ray for that much memory. Values of ``Unique`` fields go to hash partitions that
    separate reduce tasks check, so no process holds every key. Progress advances as tasks
    finish. The report equals the in-process one.

    Args:
        address: The cluster: None starts a local Ray for this run (``init_options`` such as
            ``num_cpus`` and ``object_store_memory`` apply), ``"auto"`` joins the cluster
            this machine belongs to, ``"host:port"`` joins that one. When Ray is already
            initialized in this process, that connection is used and left open.
        shards_per_task: Shards one task scans together.
        partitions: Hash partitions of the uniqueness exchange (default: the cluster's CPUs,
            at most one per task).
        init_options: More keyword arguments for ``ray.init``.

    Raises:
        ArgumentError: If Ray is not installed (``pip install 'undertale_duck[ray]'``), an
            argument is not usable, or (when the checks run) the cluster cannot be joined.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        shards_per_task: int = 1,
        partitions: int | None = None,
        init_options: Mapping[str, Any] | None = None,
    ) -> None:
        import_ray()
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ArgumentError(f"address must be None, 'auto' or 'host:port', not {address!r}")
        self.address = address
        self.shards_per_task = positive(shards_per_task, "shards_per_task")
        self.partitions = None if partitions is None else positive(partitions, "partitions")
        self.init_options = dict(init_options or {})

    def execute(
        self, plan: ValidationPlan, progress: Progress
    ) -> tuple[list[TaskResult], list[dict[int, UniquePartial]]]:
        """Run the tasks and reduces on the cluster (see :meth:`TaskExecutor.execute`)."""
        with self._cluster() as ray:
            return self._run(ray, plan, progress)

    def map(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        progress: Progress | None = None,
        *,
        memory_bytes: int = 0,
    ) -> list[R]:
        """Run ``function(task)`` for every task as a Ray task; results in task order.

        Args:
            function: A module-level function of one task.
            tasks: The tasks (plain data).
            progress: Called as each task finishes.
            memory_bytes: The memory one task may use: Ray places no more tasks on a node
                than fit (0: not stated).

        Returns:
            The results, in task order.

        Raises:
            UndertaleDuckError: If a task failed (ours as the task raised it).
            ArgumentError: If the cluster cannot be joined or no node has ``memory_bytes``.
        """
        with self._cluster() as ray:
            resources = _resources(ray, memory_bytes)
            remote = ray.remote(function).options(**resources)
            refs = [remote.remote(task) for task in tasks]
            where = {ref: i for i, ref in enumerate(refs)}
            results: dict[int, Any] = {}
            pending = list(refs)
            with _task_errors(ray):
                while pending:
                    done, pending = ray.wait(pending, num_returns=1)
                    results[where[done[0]]] = ray.get(done[0])
                    if progress is not None:
                        progress(TASK_DONE)
            return [results[i] for i in range(len(tasks))]

    @contextlib.contextmanager
    def _cluster(self) -> Iterator[Any]:
        """Ray, initialized for this run (and shut down after it, when this run started it)."""
        ray = import_ray()
        started = not ray.is_initialized()
        if started:
            options = dict(self.init_options)
            if self.address is None:
                options = {**LOCAL_DEFAULTS, **options}
            else:
                _reachable(self.address)
            # ValueError: an address Ray cannot parse, or ray:// without the ray[client] extra
            refused = (ConnectionError, ray.exceptions.RayError) + (
                (ValueError,) if self.address is not None else ()
            )
            try:
                ray.init(address=self.address, **options)
            except refused as exc:  # e.g. no token
                raise ArgumentError(
                    f"cannot join the Ray cluster at address {self.address!r}: "
                    f"{first_line(exc)}. Check the "
                    "address (the head's 'host:port', or 'auto' on one of its nodes); a cluster "
                    "started by 'ray start' uses token authentication, which Ray enables for an "
                    "explicit address only with RAY_AUTH_MODE=token in the environment"
                ) from None
        try:
            yield ray
        finally:
            if started:
                ray.shutdown()

    def _run(
        self, ray: Any, plan: ValidationPlan, progress: Progress
    ) -> tuple[list[TaskResult], list[dict[int, UniquePartial]]]:
        tasks = plan.tasks(self.shards_per_task)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        parts = self.partitions or max(1, min(len(tasks), cpus))
        resources = _resources(ray, plan.memory_bytes)
        plan_ref = ray.put(plan)
        scan = ray.remote(_task).options(num_returns=1 + parts, **resources)
        outputs = [scan.remote(plan_ref, task, parts) for task in tasks]
        pending = [refs[0] for refs in outputs]
        results: list[TaskResult] = []
        with _task_errors(ray):
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                results.extend(ray.get(done))
                progress(TASK_DONE)
            reduce = ray.remote(_reduce).options(**resources)
            partials = ray.get(
                [reduce.remote(plan_ref, *[refs[1 + p] for refs in outputs]) for p in range(parts)]
            )
        return results, list(partials)


def _resources(ray: Any, memory_bytes: int) -> dict[str, Any]:
    """What one task asks Ray for: a CPU, and the memory budget when there is one."""
    resources: dict[str, Any] = {"num_cpus": 1}
    if memory_bytes > 0:
        _check_fits(ray, memory_bytes)
        resources["memory"] = memory_bytes  # Ray places no more tasks than fit
    return resources


@contextlib.contextmanager
def _task_errors(ray: Any) -> Iterator[None]:
    """A failed task is our error: the one it raised, or one naming Ray's."""
    try:
        yield
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, UndertaleDuckError):
            raise cause from None  # ours, as one process would raise it
        raise UndertaleDuckError(
            f"a task failed on the Ray cluster: {first_line(exc)}"
        ) from None


def _check_fits(ray: Any, memory_bytes: int) -> None:
    """Refuse a budget no node of the cluster has (Ray would wait for one forever)."""
    largest = max(
        (float(n.get("Resources", {}).get("memory", 0)) for n in ray.nodes() if n.get("Alive")),
        default=0.0,
    )
    if largest and memory_bytes > largest:
        raise ArgumentError(
            f"memory={format_size(memory_bytes)} per validation task is more than any node of "
            f"the Ray cluster offers ({format_size(int(largest))}); lower memory"
        )


__all__ = ["LOCAL_DEFAULTS", "RayExecutor", "import_ray"]
