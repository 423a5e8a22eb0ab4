"""One validation run's shared state: shards, one tally per check, the DuckDB cursor, progress."""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import duckdb
import pyarrow as pa
from pydantic import BaseModel

from ..common.jsonvalue import jsonable
from ..common.progress import Progress
from ..common.text import first_line
from ..core.runtime import duckdb_path, interruptible, sqlfiles
from ..core.source import Shard
from .model import CheckKind, CheckResult, Example
from .relation import Relation, ViewPositions, shard_rows
from .targets import targets

#: Descriptions of the dataset-wide and per-column structural checks.
READABLE = "every shard can be read (footer and checked columns)"
SAME_LAYOUT = "every shard has the same columns and types"
PRESENT = "column in every shard"
PRESENT_OPTIONAL = "column may be absent from any shard (the field has a default)"

#: Description of the ``extra`` check (a model with ``ConfigDict(extra="forbid")``).
NO_EXTRA = "no column the schema does not name (extra='forbid')"

#: Longest JSON text of an example value kept in a report (longer values are cut).
MAX_VALUE_CHARS = 120

#: A check's identity: (kind, column or "", description).
CheckKey = tuple[str, str, str]

T = TypeVar("T")


@dataclasses.dataclass
class ShardGroup:
    """Readable shards that share one DuckDB schema (checked with one scan).

    Attributes:
        indices: Shard numbers, ascending.
        types: ``{column: duckdb.DuckDBPyType}`` in the first member's column order.
        durations: ``{column: Arrow type}`` of the columns holding Arrow durations (at any
            depth): DuckDB reads them as ``BIGINT`` counts while the dataset serves
            ``datetime.timedelta`` (the shards' own rows only; a view serves DuckDB's).
        zones: ``{column: time zones}`` of the columns holding Arrow timestamps in a zone
            other than UTC (at any depth, in any member): DuckDB keeps only the instant.
    """

    indices: list[int]
    types: dict[str, Any]
    durations: dict[str, str] = dataclasses.field(default_factory=dict)
    zones: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Tally:
    """A check's counts, examples and SQL, accumulated over shard groups until the report."""

    check: CheckKind
    column: str | None
    description: str
    violations: int = 0
    per_shard: Counter[str] = dataclasses.field(default_factory=Counter)
    examples: list[Example] = dataclasses.field(default_factory=list)
    condition: str | None = None
    sql: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None
    failed_shards: bool = False

    def add(self, shard: str, count: int) -> None:
        """Count ``count`` violations in one shard."""
        if count:
            self.violations += count
            self.per_shard[shard] += count

    def finish(self) -> CheckResult:
        """The check's result for the report (each distinct query once)."""
        sql = "\n;\n".join(dict.fromkeys(self.sql))
        return CheckResult(
            check=self.check,
            column=self.column,
            description=self.description,
            passed=self.violations == 0 and self.error is None and not self.failed_shards,
            violations=self.violations,
            per_shard=dict(self.per_shard),
            examples=self.examples,
            condition=self.condition,
            sql=sql,
            error=self.error,
        )


def display(value: Any) -> Any:
    """Make an example value JSON-safe (the one convention: common.jsonvalue) and short.

    Args:
        value: A value as DuckDB returns it.

    Returns:
        The JSON value, or its JSON text cut to :data:`MAX_VALUE_CHARS` with an ellipsis
        (and the item count for containers) when longer.
    """
    safe = jsonable(value)
    text = json.dumps(safe, ensure_ascii=False)
    if len(text) <= MAX_VALUE_CHARS:
        return safe
    size = f" ({len(value)} items)" if isinstance(value, list | dict) else ""
    return text[: MAX_VALUE_CHARS - 1] + "…" + size


def _bind_paths(sql: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Escape shard paths for ``read_parquet`` (which globs ``*?[``), keeping the real ones.

    ``$path``/``$files`` are what DuckDB reads; ``$paths`` (when the SQL uses it) holds the
    real paths, which is what DuckDB reports in the ``filename`` column.
    """
    bound = dict(params)
    if "path" in bound:
        bound["path"] = duckdb_path(bound["path"])
    if "files" in bound:
        real = list(bound["files"])
        bound["files"] = [duckdb_path(f) for f in real]
        if "$paths" in sql:
            bound["paths"] = real
    return bound


class RunState:
    """One validation run: the shards, the tallies in report order, the cursor and progress.

    Attributes:
        model: The schema class.
        shards: Footers by shard number (None for shards whose footer cannot be read).
        paths: Shard paths by shard number.
        errors: Why shards are unreadable, by shard number (grows while checks run).
        cursor: The DuckDB connection the checks run on.
        limit: Examples kept per failed check.
        relation: What the checks scan (the shards' rows, or a view's).
        offsets: Global index of each shard's first source row (unreadable footers count 0
            rows); the checks' SQL orders examples by it.
        memory_bytes: The memory budget the row checks' scans must fit (0: not checked).
        threads: DuckDB's threads on the cursor.
        config: DuckDB settings of the cursor (a task in another process connects with them).
        storage_options: Options of a remote source's store (a task reopens the shards).
        targets: The schema's columns and struct fields.
        tallies: One tally per check.
        order: Check keys in report order.
    """

    def __init__(
        self,
        model: type[BaseModel],
        shards: Sequence[Shard | None],
        paths: Sequence[str],
        errors: Mapping[int, str],
        cursor: duckdb.DuckDBPyConnection,
        examples: int,
        progress: Progress | None,
        relation: Relation | None = None,
        *,
        memory_bytes: int = 0,
        threads: int = 1,
        offsets: Sequence[int] | None = None,
        config: Mapping[str, Any] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.memory_bytes = memory_bytes
        self.threads = threads
        self.config = dict(config or {})
        self.storage_options = None if storage_options is None else dict(storage_options)
        self.shards = list(shards)
        self.paths = list(paths)
        self.errors = dict(errors)
        self.cursor = cursor
        self.limit = examples
        self._progress = progress
        self.relation = relation or shard_rows()
        view = self.relation.view
        self._view = None if view is None else ViewPositions(view, self.paths, self.query)
        if offsets is None:  # a task holding some shards is given the whole dataset's
            offsets = [0]
            for shard in self.shards:
                offsets.append(offsets[-1] + (shard.rows if shard is not None else 0))
        self.offsets = list(offsets)
        self.targets = targets(model)
        self.tallies: dict[CheckKey, Tally] = {}
        self.order: list[CheckKey] = []
        self._once: dict[tuple[str, ...], Any] = {}

    def once(self, key: tuple[str, ...], compute: Callable[[], T]) -> T:
        """What planning learns from footers, computed once per run.

        A plan made for tasks is planned again when their results merge
        (:func:`..taskplan.merge`); by then the cursor may be closed (this package closes
        its connections before a ``fork()``, which starting Ray does), and the answers must
        be the same anyway.

        Args:
            key: What is computed (a kind, then its inputs).
            compute: Computes it.

        Returns:
            The answer.
        """
        if key not in self._once:
            self._once[key] = compute()
        return cast(T, self._once[key])

    def step(self, label: str) -> None:
        """Report progress before a query."""
        if self._progress is not None:
            self._progress(label)

    def tally(self, kind: CheckKind, column: str | None, description: str) -> Tally:
        """The tally of a check, created (and placed in report order) on first use."""
        key = (kind, column or "", description)
        if key not in self.tallies:
            self.tallies[key] = Tally(kind, column, description)
            self.order.append(key)
        return self.tallies[key]

    def rows(self, index: int) -> int:
        """Rows checked in one shard: its footer's or the view's (0 for an unreadable footer)."""
        shard = self.shards[index]
        if shard is None:
            return 0
        return shard.rows if self._view is None else self._view.rows(index)

    def example(self, source_index: int, shard: str, row: int, value: Any) -> Example:
        """An offending row as an example; for a view, its index is the view's.

        Args:
            source_index: The row's global index among the shards' rows (as the SQL gives it).
            shard: The shard's path.
            row: The row's number in its shard.
            value: The offending value as DuckDB returns it.

        Returns:
            The example (for a view whose data changed since indexing, without an index).
        """
        index: int | None = int(source_index)
        if self._view is not None:
            number = bisect.bisect_right(self.offsets, int(source_index)) - 1
            index = self._view.index(number, int(row))
        return Example(index=index, shard=shard, row=row, value=display(value))

    def query(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run a query with shard paths escaped for ``read_parquet``; return every row.

        Ctrl-C interrupts the query at once and raises ``KeyboardInterrupt`` (never a
        ``duckdb.Error`` that a check would take for an unreadable shard).
        """
        bound = _bind_paths(sql, params)
        cursor = self.cursor

        def work() -> list[tuple[Any, ...]]:
            return cursor.execute(sql, bound).fetchall()

        return interruptible(cursor, work)

    def arrow(self, sql: str, params: Mapping[str, Any]) -> pa.Table:
        """Run a query like :meth:`query`; return its rows as an Arrow table."""
        bound = _bind_paths(sql, params)
        cursor = self.cursor

        def work() -> pa.Table:
            return cursor.sql(sql, params=bound).to_arrow_table()

        return interruptible(cursor, work)

    def files(self, indices: Sequence[int]) -> list[str]:
        """The paths of some shards."""
        return [self.paths[i] for i in indices]

    def decodes(self, index: int) -> bool:
        """Decode every column of one shard; record it as unreadable when that fails."""
        readable_sql = sqlfiles.sql_text("checks/readable").strip()
        tally = self.tallies[("readable", "", READABLE)]
        if readable_sql not in tally.sql:
            tally.sql.append(readable_sql)
        self.step("readable")
        try:
            self.query(readable_sql, {"path": self.paths[index]})
        except duckdb.Error as exc:
            self.errors[index] = f"data cannot be decoded: {first_line(exc)}"
            return False
        return True

    def readable(self) -> list[int]:
        """Shard numbers whose footer was read and that no check found unreadable so far."""
        return [i for i, s in enumerate(self.shards) if s is not None and i not in self.errors]
