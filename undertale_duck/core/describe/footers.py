"""Describe a dataset from its footers: shards, totals, column types, statistics, schema drift.

This is the data only; ``undertale-duck describe`` renders it (cli/render_describe.py).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from ...common.jsonvalue import jsonable
from ...common.progress import Progress
from ...common.sizes import parse_size
from ...common.text import first_line, redact_url
from ...errors import ColumnError, SourceError
from ..bounds import VectorBound
from ..parquet import footers
from ..runtime import (
    TaskMap,
    connect,
    default_duckdb_config,
    duckdb_path,
    interruptible,
    nan_safe,
    sqlfiles,
    threads_of,
)
from ..source import (
    Shard,
    ShardDrift,
    SourceFiles,
    SourceLike,
    check_column_names,
    reference_columns,
    schema_drift,
    source_text,
)


@dataclass
class ShardInfo:
    """One shard as describe reports it.

    Attributes:
        path: Absolute path.
        rows: Rows from the footer (0 when unreadable).
        row_groups: Number of row groups.
        bytes: File size in bytes.
        created_by: The writer recorded in the footer.
        columns: ``(name, DuckDB type)`` pairs in file order.
        error: Why the shard cannot be read, or None.
    """

    path: str
    rows: int = 0
    row_groups: int = 0
    bytes: int = 0
    created_by: str = ""
    columns: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass
class ColumnInfo:
    """One column as describe reports it.

    Attributes:
        name: Column name.
        type: DuckDB type in the reference layout (the most common one; see core/drift.py),
            or in the first readable shard that has the column when the reference lacks it.
        shards: Number of readable shards that have the column.
        null_count: NULLs over those shards, or None when some footer has no statistics.
        min: Smallest value, or None when unknown (or every value is NULL).
        max: Largest value, or None when unknown.
        min_length: For list columns after ``--scan``: the shortest list.
        max_length: For list columns after ``--scan``: the longest list.
    """

    name: str
    type: str
    shards: int = 0
    null_count: int | None = 0
    min: Any = None
    max: Any = None
    min_length: int | None = None
    max_length: int | None = None
    _known: bool = True

    @property
    def min_max_known(self) -> bool:
        """Whether ``min`` and ``max`` describe every readable shard (False: unknown)."""
        return self._known

    def _merge_min_max(self, lo: Any, hi: Any) -> None:
        try:
            if lo is not None:
                self.min = lo if self.min is None else min(self.min, lo)
            if hi is not None:
                self.max = hi if self.max is None else max(self.max, hi)
        except TypeError:  # drifting types cannot be compared
            self.min = self.max = None
            self._known = False


@dataclass
class Description:
    """Everything ``undertale-duck describe`` reports.

    Attributes:
        source: The source as given.
        shards: Every resolved shard, readable or not, in dataset order.
        columns: The reference layout's columns, then columns only other shards have.
        drift: Shards whose columns or types differ from the reference layout (the most
            common one among readable shards; see core/drift.py).
        scanned: Whether statistics come from a full scan (exact) or from footers.
    """

    source: str
    shards: list[ShardInfo]
    columns: list[ColumnInfo]
    drift: list[ShardDrift]
    scanned: bool

    @property
    def errors(self) -> list[ShardInfo]:
        """Shards that cannot be read."""
        return [s for s in self.shards if s.error is not None]

    @property
    def rows(self) -> int:
        """Total rows over the readable shards."""
        return sum(s.rows for s in self.shards)

    @property
    def bytes(self) -> int:
        """Total file bytes over every shard."""
        return sum(s.bytes for s in self.shards)

    @property
    def row_groups(self) -> int:
        """Total row groups over the readable shards."""
        return sum(s.row_groups for s in self.shards)

    def to_dict(self) -> dict[str, Any]:
        """Return the description as JSON-ready data (values converted like ``sql --format json``).

        Returns:
            A mapping with ``source``, ``totals``, ``shards``, ``columns``, ``drift``,
            ``errors`` and ``statistics`` (``"footer"`` or ``"scan"``).
        """
        return {
            "source": redact_url(self.source),
            "statistics": "scan" if self.scanned else "footer",
            "totals": {
                "shards": len(self.shards),
                "rows": self.rows,
                "row_groups": self.row_groups,
                "bytes": self.bytes,
            },
            "shards": [
                {
                    "path": redact_url(s.path),  # shown: without a URL's secrets
                    "rows": s.rows,
                    "row_groups": s.row_groups,
                    "bytes": s.bytes,
                    "created_by": s.created_by,
                    "error": s.error and redact_url(s.error),
                }
                for s in self.shards
            ],
            "columns": [
                {
                    "name": c.name,
                    "type": c.type,
                    "shards": c.shards,
                    "null_count": c.null_count,
                    "min": jsonable(c.min),
                    "max": jsonable(c.max),
                    **(
                        {"min_length": c.min_length, "max_length": c.max_length}
                        if c.min_length is not None
                        else {}
                    ),
                }
                for c in self.columns
            ],
            "drift": [
                {
                    "path": redact_url(d.path),
                    "missing": d.missing,
                    "extra": d.extra,
                    "changed": [
                        {"column": n, "type": mine, "expected": reference}
                        for n, reference, mine in d.changed
                    ],
                }
                for d in self.drift
            ],
            "errors": [
                {"path": redact_url(s.path), "error": s.error and redact_url(s.error)}
                for s in self.errors
            ],
        }


def is_nested(duck_type: str) -> bool:
    """Whether a DuckDB type is a list, array, struct, map or union."""
    return duck_type.endswith("]") or duck_type.startswith(("STRUCT", "MAP", "UNION"))


def _is_list(duck_type: str) -> bool:
    return duck_type.endswith("[]")


# --------------------------------------------------------------------------- reading


def _read_shard(
    con: duckdb.DuckDBPyConnection, path: str, files: SourceFiles
) -> tuple[ShardInfo, Shard | None]:
    try:
        size = files.size(path)
    except OSError as exc:
        return ShardInfo(path, error=f"cannot open: {exc.strerror}"), None
    try:
        shard = files.footer(path)
    except SourceError as exc:
        return ShardInfo(path, bytes=size, error=_reason(str(exc), path)), None
    info = ShardInfo(
        path=path,
        rows=shard.rows,
        row_groups=len(shard.row_groups),
        bytes=shard.size,
        created_by=shard.created_by,
    )
    if not shard.schema.names and not shard.rows:
        # pyarrow's file for a table without columns: it holds nothing, and a dataset
        # leaves it out (DuckDB cannot read it), so it is listed, not called unreadable
        return info, None
    try:
        params = {"path": duckdb_path(path)}
        text = sqlfiles.sql_text("describe_columns")
        table = interruptible(con, lambda: con.sql(text, params=params).to_arrow_table())
    except SourceError as exc:
        info.error = str(exc)
        return info, None
    except duckdb.Error as exc:
        info.error = "DuckDB cannot read its schema: " + first_line(exc, limit=4000)
        return info, None
    info.columns = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    renamed = [name for name, _ in info.columns] != list(shard.schema.names)
    if renamed or any("\x00" in name for name in shard.schema.names):
        # DuckDB renames a column whose name another one shares (ignoring case) or that is
        # empty ("A" beside "a" becomes "A_1"): its statistics would be shown, and scanned,
        # under a name the file does not have, so say why the shard cannot be served; no
        # query can name a column holding a NUL character
        try:
            check_column_names([shard], shard.schema.names)
            why = f"DuckDB reads its columns under other names: {[n for n, _ in info.columns]}"
        except ColumnError as exc:
            why = str(exc)
        info.columns, info.error = [], _reason(why.replace(f"shard {path} ", ""), path)
        return info, None
    return info, shard


def _reason(message: str, path: str) -> str:
    # our SourceError messages start with the path; the report already shows it
    shown = redact_url(path)  # as our messages name it
    text = message.replace(f"Parquet shard {shown} ", "").replace(f"{shown} ", "")
    return text


def _footer_stats(path: str, files: SourceFiles) -> dict[str, tuple[int | None, Any, Any, bool]]:
    """Per top-level primitive column: (null count, min, max, statistics complete)."""
    meta = files.metadata(path)
    footers.check_statistics(path, meta)  # pyarrow aborts on malformed statistics
    stats: dict[str, tuple[int | None, Any, Any, bool]] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if group.num_rows == 0:
            continue
        for j in range(group.num_columns):
            chunk = group.column(j)
            name = chunk.path_in_schema
            if "." in name and name not in meta.schema.names:
                continue  # a leaf of a nested column: footer statistics do not describe rows
            nulls, lo, hi, known = stats.get(name, (0, None, None, True))
            st = chunk.statistics
            if st is None or not st.has_null_count:
                nulls = None
            elif nulls is not None:
                nulls += int(st.null_count)
            if st is not None and st.has_min_max:
                try:
                    low, high = _stat_values(st)
                    lo = low if lo is None else min(lo, low)
                    hi = high if hi is None else max(hi, high)
                except (TypeError, OverflowError, ValueError, struct.error):
                    # TypeError: drifting types; struct.error: a float16 statistic not two
                    # bytes long; the others: a date or time Python cannot hold (DuckDB's
                    # 'infinity', a year past 9999), so min/max are unknown
                    known = False
            elif st is None or st.null_count != chunk.num_values:
                known = known and group.num_rows == 0
            stats[name] = (nulls, lo, hi, known)
    return stats


def _stat_values(st: Any) -> tuple[Any, Any]:
    """A column chunk's footer min and max as Python values."""
    if str(st.logical_type) == "Float16":
        # pyarrow gives a float16's statistics as their two raw little-endian bytes, which
        # would be shown (and compared) as bytes: decode them as the numbers they are
        low, high = struct.unpack("<e", st.min)[0], struct.unpack("<e", st.max)[0]
    else:
        low, high = st.min, st.max
    # Parquet writers store a zero minimum as -0.0 whether or not the data holds one (the
    # format's rule): it says "zero", shown as the scan shows the data's +0.0
    if isinstance(low, float) and low == 0:
        low = 0.0
    return low, high


def scan_aggregates(columns: list[tuple[str, str]]) -> str:
    """The aggregates of a full scan: for column k its nulls, and min/max (of lengths for lists).

    Args:
        columns: ``(name, DuckDB type)`` pairs; names are quoted by :mod:`sqlfiles`.

    Returns:
        SQL select items ``n_k``, ``lo_k``, ``hi_k`` for ``describe_scan`` and
        ``describe_view_scan``; read back with :func:`scan_values`.
    """
    parts = []
    for k, (name, duck_type) in enumerate(columns):
        q = sqlfiles.quote_identifier(name)
        parts.append(f"count(*) - count({q}) AS n_{k}")
        if _is_list(duck_type):
            parts += [f"min(len({q})) AS lo_{k}", f"max(len({q})) AS hi_{k}"]
        elif is_nested(duck_type):
            parts += [f"NULL AS lo_{k}", f"NULL AS hi_{k}"]
        else:
            parts += [f"min({q}) AS lo_{k}", f"max({q}) AS hi_{k}"]
    return ", ".join(parts)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


#: A scanned min or max with no Python value (a date or time out of Python's range): the
#: column's min/max are then unknown, never taken for "every value NULL".
UNKNOWN = _Unknown()


def scan_row(table: pa.Table) -> dict[str, Any]:
    """The one row of a :func:`scan_aggregates` result as Python values.

    Args:
        table: The scan's one-row result.

    Returns:
        ``{column name: value}``, with :data:`UNKNOWN` for a value Python cannot hold (a
        date such as DuckDB's ``'infinity'``, a timestamp past year 9999).
    """
    row: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            row[name] = column.to_pylist()[0]
        except (OverflowError, ValueError):
            row[name] = UNKNOWN
    return row


def scan_values(
    row: Mapping[str, Any], columns: list[tuple[str, str]]
) -> dict[str, tuple[int, Any, Any, bool]]:
    """``{name: (nulls, min, max, is a list)}`` from :func:`scan_row`'s row."""
    return {
        name: (int(row[f"n_{k}"]), row[f"lo_{k}"], row[f"hi_{k}"], _is_list(duck_type))
        for k, (name, duck_type) in enumerate(columns)
    }


def _scan_stats(
    con: duckdb.DuckDBPyConnection, path: str, columns: list[tuple[str, str]]
) -> dict[str, tuple[int, Any, Any, bool]]:
    text = sqlfiles.render("describe_scan", aggregates=scan_aggregates(columns))
    params = {"path": duckdb_path(path)}
    # Ctrl-C stops the scan at once (core/interrupt.py), not after it
    table = interruptible(con, lambda: con.sql(text, params=params).to_arrow_table())
    return scan_values(scan_row(table), columns)


def _check_vectors(files: SourceFiles, path: str, limit: int, threads: int) -> None:
    """Refuse to scan a shard whose scan would hold more string bytes than ``limit``."""
    if limit <= 0:
        return
    shard = files.footer(path)  # an object in object storage: weighed by range reads
    bound = VectorBound(shard.schema)
    bound.check([shard], bound.columns(None, True), limit, threads,
                what="describe --scan would read",
                hint="Raise the budget (--memory) if the shard is trusted; the footer's "
                "statistics (describe without --scan) need no scan")


#: Per column: (null count, min, max, flag): the flag is "is a list" after a scan, "the
#: footer statistics are complete" from footers.
Stats = dict[str, tuple[int | None, Any, Any, bool]]


def _shard_stats(
    con: duckdb.DuckDBPyConnection,
    files: SourceFiles,
    path: str,
    columns: Sequence[tuple[str, str]],
    scan: bool,
    budget: int,
    threads: int,
) -> tuple[Stats | None, str | None]:
    """One shard's statistics (a scan's, or its footer's), or why it cannot be read."""
    try:
        if scan:
            _check_vectors(files, path, budget, threads)
            return dict(_scan_stats(con, path, list(columns))), None
        return _footer_stats(path, files), None
    except SourceError as exc:
        return None, _reason(str(exc), path)
    except (duckdb.Error, OSError, pa.ArrowException) as exc:
        return None, "cannot be read: " + first_line(exc, limit=4000)


@dataclass(frozen=True)
class ScanTask:
    """One shard's ``describe --scan``, as plain data a task in another process runs.

    Attributes:
        path: The shard (a path or URL).
        columns: Its ``(name, DuckDB type)`` pairs.
        storage_options: Options of a remote source's store.
        config: The DuckDB settings of the task's connection.
        budget: The memory budget in bytes (0: none).
        threads: DuckDB's threads.
    """

    path: str
    columns: tuple[tuple[str, str], ...]
    storage_options: Mapping[str, Any] | None
    config: Mapping[str, Any]
    budget: int
    threads: int


def scan_task(task: ScanTask) -> tuple[Stats | None, str | None]:
    """Run one :class:`ScanTask` where it is: open the shard, scan it, close.

    Args:
        task: The task.

    Returns:
        The shard's statistics, or None and why it cannot be read.
    """
    files = SourceFiles([task.path], task.storage_options)
    con = connect(dict(task.config))
    try:
        files.attach(con)
        return _shard_stats(con, files, task.path, task.columns, True, task.budget, task.threads)
    finally:
        con.close()


def describe(
    source: SourceLike,
    *,
    scan: bool = False,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
    memory: float | str = 4096,
    executor: TaskMap | None = None,
) -> Description:
    """Describe a dataset from its shards' footers (and, with ``scan``, one full scan).

    Unreadable shards (not Parquet, corrupt footer) are reported in the result instead of
    stopping the description; shards whose columns or types differ are reported as drift.

    Args:
        source: A Parquet file, a directory of shards, a glob or a list of shards (as
            ``ParquetDataset`` takes).
        scan: Read every value for exact null counts, min/max (and list lengths).
        progress: Called with each shard's file name before it is scanned.
        storage_options: Options of a remote source's store (footers are read by range
            reads; see docs/storage.md).
        memory: The scan's memory budget in MiB, or a size such as ``"2GiB"`` (0: none), as
            ``ParquetDataset``'s ``memory=``: a shard whose string and
            binary values the scan would hold at once pass it (a dictionary bomb) is
            reported with the reason instead of scanned (:mod:`vectors`).
        executor: Where ``scan`` runs: one task per shard through its ``map`` (e.g.
            ``RayExecutor``, ``TorchDistributedExecutor``; each task opens its shard where
            it runs); None scans here. The description is the same; ``progress`` is then
            called as each task finishes.

    Returns:
        The description.

    Raises:
        SourceError: If the source resolves to no file at all.
        ArgumentError: If ``memory`` is not a size.
    """
    budget = parse_size(memory, "memory", "MiB")  # "2GiB" as ParquetDataset takes it
    files = SourceFiles(source, storage_options)  # local paths or URLs
    paths = files.paths
    # a scan reads the values themselves: without the optimizers that trust footer
    # statistics (min/max that leave NaN out, counts marked exact by a lying footer, pages
    # never decoded)
    config = nan_safe({k: v for k, v in default_duckdb_config().items()})
    con = connect(config)
    files.attach(con)
    threads = threads_of(config.get("threads"))
    options = None if storage_options is None else dict(storage_options)
    try:
        infos: list[ShardInfo] = []
        for path in paths:
            info, _ = _read_shard(con, path, files)
            infos.append(info)
        # a shard without columns (and rows) is in no layout: it holds nothing
        readable = [s for s in infos if s.error is None and s.columns]
        layouts = [dict(s.columns) for s in readable]
        columns: dict[str, ColumnInfo] = {
            name: ColumnInfo(name, duck_type)
            for name, duck_type in reference_columns(layouts).items()
        }
        for s in readable:
            for name, duck_type in s.columns:
                columns.setdefault(name, ColumnInfo(name, duck_type)).shards += 1
        drift = schema_drift([(s.path, dict(s.columns)) for s in readable])
        found: dict[str, tuple[Stats | None, str | None]] = {}
        if scan and executor is not None:  # one task per readable shard, where it says
            tasks = [
                ScanTask(s.path, tuple(s.columns), options, config, budget, threads)
                for s in readable
            ]
            done = executor.map(scan_task, tasks, progress, memory_bytes=budget)
            found = {t.path: r for t, r in zip(tasks, done, strict=True)}
        for s in infos:
            if scan and progress is not None and executor is None:
                progress(os.path.basename(s.path))
            if s.error is not None or not s.columns:
                continue
            got_stats, error = found.get(s.path) or _shard_stats(
                con, files, s.path, s.columns, scan, budget, threads
            )
            if got_stats is None:
                s.error = error
                continue
            stats = got_stats
            for name, duck_type in s.columns:
                c = columns[name]
                if duck_type != c.type:
                    c.null_count = None
                    c._known = False
                    continue
                got = stats.get(name)
                if got is None:
                    if is_nested(duck_type):  # footer statistics do not describe whole values
                        c.null_count = None
                        c._known = False
                    continue  # else: a shard without row groups adds nothing
                nulls, lo, hi, flag = got
                if nulls is None or c.null_count is None:
                    c.null_count = None
                else:
                    c.null_count += nulls
                if scan and flag:  # list lengths
                    if lo is not None:
                        c.min_length = lo if c.min_length is None else min(c.min_length, lo)
                    if hi is not None:
                        c.max_length = hi if c.max_length is None else max(c.max_length, hi)
                    c._known = False
                    continue
                if (not scan and not flag) or lo is UNKNOWN or hi is UNKNOWN:
                    c._known = False
                if c._known:
                    c._merge_min_max(lo, hi)
        for c in columns.values():
            if not c._known:
                c.min = c.max = None
        # shards that failed during the statistics pass no longer count as readable
        for s in infos:
            if s.error is not None:
                s.columns = []
        return Description(
            source=source_text(source),
            shards=infos,
            columns=list(columns.values()),
            drift=[d for d in drift if not any(x.path == d.path and x.error for x in infos)],
            scanned=scan,
        )
    finally:
        con.close()
