"""Run every check of a schema over every shard and build the ValidationReport."""

from __future__ import annotations

import operator
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
from pydantic import BaseModel

from ..common.progress import Progress
from ..common.sizes import parse_size
from ..common.text import redact_url
from ..core.query import memory_limit
from ..core.runtime import connect, nan_safe, threads_of
from ..core.source import Shard, SourceFiles, SourceLike, source_text
from ..errors import ArgumentError, SourceError
from . import schemas
from .executors import Executor, InProcessExecutor
from .layout import layout_checks, shard_groups
from .model import Example, ShardSummary, ValidationReport
from .relation import Relation
from .state import PRESENT, PRESENT_OPTIONAL, READABLE, SAME_LAYOUT, RunState
from .targets import describe_type

#: How many offending rows each failed check keeps as examples by default.
DEFAULT_EXAMPLES = 5


def schema_name(model: type[BaseModel]) -> str:
    """Name a schema class for a report: ``module.Class``, or ``file.py:Class`` for a file.

    Args:
        model: The schema class.

    Returns:
        The name.
    """
    module = sys.modules.get(model.__module__)
    path = getattr(module, "__file__", None)
    if model.__module__.startswith(schemas.FILE_MODULE_PREFIX) and path:
        return f"{path}:{model.__qualname__}"
    return f"{model.__module__}.{model.__qualname__}"


def _example_count(examples: object) -> int:
    """Check ``examples`` (a whole number of rows, 0 to 2**63 - 1); return it.

    Raises:
        ArgumentError: If it is not one (a negative ``LIMIT`` is a DuckDB error).
    """
    try:
        number = -1 if isinstance(examples, bool) else operator.index(examples)  # type: ignore[arg-type]
    except TypeError:
        number = -1
    if not 0 <= number < 1 << 63:
        raise ArgumentError(
            f"examples must be a whole number of rows from 0 to 2**63 - 1, not {examples!r}"
        )
    return number


def _validate(state: RunState, executor: Executor | None = None) -> ValidationReport:
    """Run every check in report order (dataset-wide first, then by column); build the report.

    The layout checks run here (footers only); the row and uniqueness checks run where
    ``executor`` says (default: in this process).
    """
    executor = executor or InProcessExecutor()
    start = time.perf_counter()
    readable = state.tally("readable", None, READABLE)
    state.tally("shard_schema", None, SAME_LAYOUT)
    for target in state.targets:
        if len(target.path) == 1:
            need = PRESENT if target.required else PRESENT_OPTIONAL
            state.tally("present", target.label, need)
            state.tally("type", target.label, describe_type(target.annotation))
    for i, shard in enumerate(state.shards):
        if shard is not None and i not in state.errors:
            try:
                shard.check_unchanged()
            except SourceError as exc:
                state.errors[i] = str(exc)
    groups = shard_groups(state)
    layout_checks(state, groups)
    executor.checks(state, groups)
    for i, message in sorted(state.errors.items()):
        readable.add(state.paths[i], 1)
        readable.examples.append(Example(shard=state.paths[i], value=message))
    results = [state.tallies[k].finish() for k in state.order]
    summaries = []
    for i, path in enumerate(state.paths):
        ok = i not in state.errors and state.shards[i] is not None
        summaries.append(
            ShardSummary(
                path=path,
                rows=state.rows(i) if ok else None,
                readable=ok,
                violations=sum(r.per_shard.get(path, 0) for r in results if r.check != "readable"),
                error=state.errors.get(i),
            )
        )
    report = ValidationReport(
        passed=all(r.passed for r in results),
        source="",
        schema_name=schema_name(state.model),
        rows=sum(state.rows(i) for i in state.readable()),
        shards=len(state.paths),
        query=None if state.relation.view is None else state.relation.view.query.sql,
        checks=results,
        shard_summaries=summaries,
        seconds=round(time.perf_counter() - start, 4),
    )
    executor.settle(report)
    return report


def run(
    schema: type[BaseModel],
    shards: Sequence[Shard],
    cursor: duckdb.DuckDBPyConnection,
    *,
    source: str = "",
    examples: int = DEFAULT_EXAMPLES,
    progress: Progress | None = None,
    relation: Relation | None = None,
    memory_bytes: int = 0,
    threads: int = 1,
    executor: Executor | None = None,
    config: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ValidationReport:
    """Check every shard of an opened dataset against a schema.

    Args:
        schema: A pydantic model class (see :mod:`undertale_duck.schema`).
        shards: The dataset's shards, footers already read.
        cursor: A DuckDB connection to run the checks on (with a view's side tables).
        source: How the dataset was given, for the report.
        examples: Offending rows to keep per failed check.
        progress: Called before each query with a short label.
        relation: What to check: the shards' own rows (default), or a view's rows
            (:func:`undertale_duck.validation.relation.view_rows`).
        memory_bytes: The memory budget of the row checks' scans (0: none): a local shard
            whose checked string values DuckDB would hold at once pass it (a dictionary
            bomb) is reported unreadable with the reason instead of scanned.
        threads: DuckDB's threads on ``cursor``.
        executor: Where the row and uniqueness checks run (default: here, on ``cursor``;
            :mod:`undertale_duck.validation.executors`, ``RayExecutor``).
        config: DuckDB settings of ``cursor`` (tasks elsewhere connect with them).
        storage_options: Options of a remote source's store (tasks elsewhere reopen it).

    Returns:
        The report; problems in the data are failed checks, never exceptions.

    Raises:
        ArgumentError: If ``schema`` is not a pydantic model class or has a field whose
            verdict the checks cannot give (a validation alias naming several columns, a
            pattern pydantic matches with Python's ``re``), or ``examples`` is not a whole
            number from 0.
    """
    model = schemas.check_schema(schema)
    examples = _example_count(examples)
    paths = [s.path for s in shards]
    state = RunState(model, shards, paths, {}, cursor, examples, progress, relation,
                     memory_bytes=memory_bytes, threads=threads, config=config,
                     storage_options=storage_options)
    report = _validate(state, executor)
    report.source = redact_url(source)  # shown and written: a URL without its secrets
    return report


def report_for(
    source: SourceLike,
    schema: type[BaseModel],
    *,
    examples: int = DEFAULT_EXAMPLES,
    progress: Progress | None = None,
    duckdb_config: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    memory: float | str = 4096,
    executor: Executor | None = None,
) -> ValidationReport:
    """Validate a dataset given as a path, also when some shards cannot be read at all.

    Shards whose footer is truncated or corrupt, or that are not Parquet files, become a
    failed ``readable`` check naming the file; the other shards are checked as usual.

    Args:
        source: A Parquet file, a directory of shards, a glob or a list of files.
        schema: A pydantic model class.
        examples: Offending rows to keep per failed check.
        progress: Called before each query with a short label.
        duckdb_config: DuckDB settings for the connection the checks run on.
        storage_options: Options of a remote source's store (docs/storage.md).
        memory: The memory budget in MiB, or a size such as ``"2GiB"`` (0: none), as
            ``ParquetDataset``'s ``memory=``; :func:`run`'s ``memory_bytes``.
        executor: Where the row and uniqueness checks run (default: in this process).

    Returns:
        The report.

    Raises:
        SourceError: If the source itself cannot be resolved (no such path, no Parquet files).
        ArgumentError: If ``schema`` is not a pydantic model class or has a field whose
            verdict the checks cannot give (a validation alias naming several columns, a
            pattern pydantic matches with Python's ``re``), or ``examples`` is not a whole
            number from 0, or ``memory`` is not a size.
    """
    model = schemas.check_schema(schema)
    examples = _example_count(examples)
    budget = parse_size(memory, "memory", "MiB")  # "2GiB" as ParquetDataset takes it
    files = SourceFiles(source, storage_options)  # local paths or URLs
    paths = files.paths
    shards: list[Shard | None] = []
    errors: dict[int, str] = {}
    for i, path in enumerate(paths):
        if progress is not None:
            progress("footers")
        try:
            shards.append(files.footer(path))
        except SourceError as exc:
            shards.append(None)
            errors[i] = str(exc)
    config: dict[str, Any] = {
        "preserve_insertion_order": True,
        "autoinstall_known_extensions": False,
    }
    config.update(duckdb_config or {})
    if budget > 0:
        config.setdefault("memory_limit", memory_limit(budget))
    config = nan_safe(config)  # every scan sees NaN, whatever the statistics say
    connection = connect(config)
    files.attach(connection)
    try:
        state = RunState(model, shards, paths, errors, connection, examples, progress,
                         memory_bytes=budget,
                         threads=threads_of(config.get("threads")),
                         config=config, storage_options=storage_options)
        report = _validate(state, executor)
    finally:
        connection.close()
    report.source = source_text(source)
    return report


__all__ = ["DEFAULT_EXAMPLES", "report_for", "run", "schema_name"]
