"""Translate a schema class into SQL checks, run them over every shard, build a ValidationReport."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import os
import sys
import time
import types
import typing
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import duckdb
from pydantic import BaseModel, Field

from ..core import sqlfiles
from ..core.source import Shard, SourceLike, duckdb_path, read_footer, resolve
from ..errors import SourceError
from . import schemas as schemamod

#: Called before each query with a short label (the CLI drives a progress bar with it).
Progress = Callable[[str], None]

#: How many offending rows each failed check keeps as examples by default.
DEFAULT_EXAMPLES = 5

_NESTED_TYPES = frozenset({"list", "array", "struct", "map", "union"})
_NULL_TEMPLATES = frozenset({"not_null", "not_null_elements"})
_READABLE = "every shard can be read (footer and checked columns)"
_PRESENT = "column in every shard"
_PRESENT_OPTIONAL = "column in every shard or in none (the field has a default)"
_MAX_VALUE_CHARS = 120

INTEGER_TYPES = frozenset(
    {
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "uhugeint",
    }
)
FLOAT_TYPES = frozenset({"float", "double", "decimal"}) | INTEGER_TYPES
TIMESTAMP_TYPES = frozenset(
    {"timestamp", "timestamp with time zone", "timestamp_ms", "timestamp_ns", "timestamp_s"}
)
LIST_TYPES = frozenset({"list", "array"})

#: Which DuckDB types (by ``DuckDBPyType.id``) satisfy each scalar Python type.
SCALAR_TYPES: dict[type, frozenset[str]] = {
    bool: frozenset({"boolean"}),
    int: INTEGER_TYPES,
    float: FLOAT_TYPES,
    str: frozenset({"varchar", "enum"}),
    bytes: frozenset({"blob"}),
    dt.datetime: TIMESTAMP_TYPES,
    dt.date: frozenset({"date"}),
    dt.time: frozenset({"time", "time with time zone"}),
    dt.timedelta: frozenset({"interval"}),
    decimal.Decimal: frozenset({"decimal"}),
    uuid.UUID: frozenset({"uuid"}),
}

CheckKind = Literal[
    "readable",
    "shard_schema",
    "present",
    "type",
    "not_null",
    "unique",
    "range",
    "length",
    "pattern",
    "literal",
    "multiple_of",
]


# =========================================================================== report model


class Example(BaseModel):
    """One offending row (or, for shard-level checks, one offending shard).

    Attributes:
        index: Global row index in the dataset (None for shard-level checks).
        shard: Path of the shard.
        row: Row number inside the shard (None for shard-level checks).
        value: The offending value, made JSON-safe and shortened for display (for shard-level
            checks: the type found, or the error).
    """

    index: int | None = None
    shard: str
    row: int | None = None
    value: Any = None


class CheckResult(BaseModel):
    """The outcome of one check.

    Attributes:
        check: Kind of check: ``readable``, ``shard_schema``, ``present``, ``type``,
            ``not_null``, ``unique``, ``range``, ``length``, ``pattern``, ``literal`` or
            ``multiple_of``.
        column: The column (``parent.child`` inside structs), or None for dataset-wide checks.
        description: What the check requires, e.g. ``label >= 0``.
        passed: Whether no row (and no shard) violates it.
        violations: Offending rows (for ``unique``: rows whose value occurs more than once;
            for ``present``, ``type`` and ``shard_schema``: rows of the offending shards; for
            ``readable``: unreadable shards).
        per_shard: Violations per shard path (only shards with violations).
        examples: A few offending rows in dataset order (for ``unique``: grouped by value).
        condition: SQL condition true for an offending row, when the check is per row.
        sql: The query that ran (``$files`` is the list of shard paths).
        error: Why the check could not run, when it could not (it then counts as failed).
    """

    check: CheckKind
    column: str | None = None
    description: str = ""
    passed: bool
    violations: int = 0
    per_shard: dict[str, int] = Field(default_factory=dict)
    examples: list[Example] = Field(default_factory=list)
    condition: str | None = None
    sql: str = ""
    error: str | None = None


class ShardSummary(BaseModel):
    """One shard as validation saw it.

    Attributes:
        path: The shard's path.
        rows: Rows from its footer (None when unreadable).
        readable: Whether its footer and data could be read.
        violations: Violations of all checks in this shard together.
        error: Why it could not be read.
    """

    path: str
    rows: int | None
    readable: bool = True
    violations: int = 0
    error: str | None = None


class ValidationReport(BaseModel):
    """Every check of a schema over every shard of a dataset.

    Attributes:
        passed: True when every check passed.
        source: The dataset source as given.
        schema_name: The schema class, ``module.Class``.
        rows: Rows over all readable shards.
        shards: Number of shards (readable or not).
        checks: Every check, in a stable order (dataset-wide checks first, then by column).
        shard_summaries: Per-shard row and violation counts, in dataset order.
        seconds: Wall-clock time the checks took.
    """

    passed: bool
    source: str
    schema_name: str
    rows: int
    shards: int
    checks: list[CheckResult]
    shard_summaries: list[ShardSummary] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[CheckResult]:
        """The checks that failed."""
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        """Return a one-paragraph summary naming each failed check with its count.

        Returns:
            ``"... passed N checks"`` or a list of the failed checks.
        """
        head = f"{self.source} against {self.schema_name} ({self.rows} rows, {self.shards} shards)"
        if self.passed:
            return f"{head}: all {len(self.checks)} checks passed"
        parts = []
        for c in self.failed:
            where = f"({c.column})" if c.column else ""
            unit = "shards" if c.check == "readable" else "rows"
            what = c.error if c.error else f"{c.violations} {unit}"
            parts.append(f"{c.check}{where}: {what} [{c.description}]")
        return f"{head}: {len(parts)} of {len(self.checks)} checks failed: " + "; ".join(parts)


# =========================================================================== schema -> targets


@dataclasses.dataclass(frozen=True)
class Target:
    """A column, or a field of a struct column, that a schema field describes.

    Attributes:
        label: ``column`` or ``column.field`` for nested models.
        path: Column name then struct field names.
        annotation: The Python type with ``None`` removed from a union.
        nullable: Whether ``None`` is allowed.
        required: Whether the field has no default (a column with a default may be absent).
        metadata: Pydantic constraint objects of the field.
    """

    label: str
    path: tuple[str, ...]
    annotation: Any
    nullable: bool
    required: bool
    metadata: tuple[Any, ...]


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) != len(args)
        if len(rest) == 1:
            inner, inner_nullable = _strip_optional(rest[0])
            return inner, nullable or inner_nullable
        return typing.Union[tuple(rest)], nullable  # noqa: UP007
    if origin is typing.Annotated:
        return _strip_optional(typing.get_args(annotation)[0])
    return annotation, annotation is type(None) or annotation is Any


def _model_class(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def targets(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[Target]:
    """List the columns (and nested struct fields) a schema describes, in field order.

    Args:
        model: A pydantic model class.
        prefix: The struct path above this model (for nested models).

    Returns:
        One target per field, depth first.
    """
    out: list[Target] = []
    for name, info in model.model_fields.items():
        column = info.alias or name
        annotation, nullable = _strip_optional(info.annotation)
        path = (*prefix, column)
        out.append(
            Target(
                label=".".join(path),
                path=path,
                annotation=annotation,
                nullable=nullable,
                required=info.is_required(),
                metadata=tuple(info.metadata),
            )
        )
        nested = _model_class(annotation)
        if nested is not None:
            out.extend(targets(nested, path))
    return out


# =========================================================================== type compatibility


def describe_type(annotation: Any) -> str:
    """Describe which DuckDB types satisfy a Python type.

    Args:
        annotation: A Python type annotation (``None`` already stripped).

    Returns:
        Text such as ``"any integer type"`` or ``"list of any integer type"``.
    """
    annotation, _ = _strip_optional(annotation)
    if annotation is Any or annotation is object:
        return "any type"
    if annotation in SCALAR_TYPES:
        names = {
            bool: "BOOLEAN",
            int: "any integer type",
            float: "any float, decimal or integer type",
            str: "VARCHAR",
            bytes: "BLOB",
            dt.datetime: "TIMESTAMP",
            dt.date: "DATE",
            dt.time: "TIME",
            dt.timedelta: "INTERVAL",
            decimal.Decimal: "DECIMAL",
            uuid.UUID: "UUID",
        }
        return names[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, set, frozenset, tuple) or _is_sequence(origin):
        inner = args[0] if args else Any
        return f"list of {describe_type(inner)}"
    if origin in (dict,) or _is_mapping(origin):
        key, value = (*args, Any, Any)[:2]
        return f"MAP of {describe_type(key)} to {describe_type(value)}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    model = _model_class(annotation)
    if model is not None:
        return f"STRUCT with the fields of {model.__name__}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in annotation)
    return f"any type ({annotation!r} is not checked)"


def _is_sequence(origin: Any) -> bool:
    return isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str


def _is_mapping(origin: Any) -> bool:
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _children(dtype: Any) -> list[tuple[str, Any]]:
    try:
        return list(dtype.children)
    except duckdb.Error:
        return []


def mismatch(annotation: Any, dtype: Any) -> str | None:
    """Tell why a DuckDB type does not satisfy a Python type.

    Args:
        annotation: The Python type (``X | None`` allowed).
        dtype: A ``duckdb.DuckDBPyType``.

    Returns:
        None when compatible, else a short reason.
    """
    annotation, _ = _strip_optional(annotation)
    kind = str(dtype.id)
    if kind == "null" or annotation is Any or annotation is object:
        return None  # an all-NULL column is compatible with anything (not_null decides)
    found = str(dtype)
    if annotation in SCALAR_TYPES:
        if kind in SCALAR_TYPES[annotation]:
            return None
        return f"found {found}, expected {describe_type(annotation)}"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        values = [a.value if isinstance(a, enum.Enum) else a for a in args]
        kinds = {type(v) for v in values}
        if any(kind in SCALAR_TYPES.get(k, frozenset()) for k in kinds):
            return None
        return f"found {found}, expected a type holding {describe_type(annotation)}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return mismatch(Literal[tuple(m.value for m in annotation)], dtype)
    if origin in (list, set, frozenset, tuple) or _is_sequence(origin):
        if kind not in LIST_TYPES:
            return f"found {found}, expected {describe_type(annotation)}"
        inner = args[0] if args else Any
        child = dict(_children(dtype)).get("child")
        reason = None if child is None else mismatch(inner, child)
        return None if reason is None else f"list element: {reason}"
    if origin is dict or _is_mapping(origin):
        if kind != "map":
            return f"found {found}, expected {describe_type(annotation)}"
        key, value = (*args, Any, Any)[:2]
        children = dict(_children(dtype))
        for part, python, duck in (("key", key, children.get("key")), ("value", value, None)):
            duck = children.get(part) if duck is None else duck
            reason = None if duck is None else mismatch(python, duck)
            if reason is not None:
                return f"map {part}: {reason}"
        return None
    if origin in (typing.Union, types.UnionType):
        reasons = [mismatch(a, dtype) for a in args]
        if any(r is None for r in reasons):
            return None
        return f"found {found}, expected {describe_type(annotation)}"
    model = _model_class(annotation)
    if model is not None:
        if kind != "struct":
            return f"found {found}, expected {describe_type(annotation)}"
        fields = dict(_children(dtype))
        for name, info in model.model_fields.items():
            column = info.alias or name
            if column not in fields:
                if info.is_required():
                    return f"STRUCT {found} has no field {column!r}"
                continue
            reason = mismatch(info.annotation, fields[column])
            if reason is not None:
                return f"field {column!r}: {reason}"
        return None
    return None  # types we cannot judge are accepted (described as "not checked")


def _field_type(dtype: Any, path: Sequence[str]) -> Any | None:
    for name in path:
        if str(dtype.id) != "struct":
            return None
        dtype = dict(_children(dtype)).get(name)
        if dtype is None:
            return None
    return dtype


# =========================================================================== per-row checks


@dataclasses.dataclass(frozen=True)
class RowCheck:
    """One per-row check: a violation condition built from a ``sql/checks`` fragment.

    Attributes:
        kind: The report's check kind.
        target: The column or struct field checked.
        template: The fragment under ``sql/checks/`` (``not_null``, ``ge``, ...).
        bound: The bound value (bound as a parameter), or None.
        description: What the check requires.
    """

    kind: CheckKind
    target: Target
    template: str
    bound: Any
    description: str

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity of the check across shard groups."""
        return (self.kind, self.target.label, self.description)


def _value_sql(path: Sequence[str]) -> str:
    expr = sqlfiles.quote_identifier(path[0])
    for name in path[1:]:
        expr = f"struct_extract({expr}, {sqlfiles.quote_literal(name)})"
    return expr


def _fragment(name: str, **parts: str) -> str:
    text = sqlfiles.render(f"checks/{name}", **parts)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("--")]
    return " ".join(line.strip() for line in lines)


def _length_function(dtype: Any) -> str | None:
    kind = str(dtype.id)
    if kind in ("varchar", "enum"):
        return "length"
    if kind == "blob":
        return "octet_length"
    if kind in LIST_TYPES:
        return "len"
    if kind == "map":
        return "cardinality"
    return None


def condition(check: RowCheck, dtype: Any, bound_name: str | None) -> str | None:
    """Build the SQL condition that is true for a row violating a check.

    Args:
        check: The check.
        dtype: The DuckDB type of the checked value in this group of shards.
        bound_name: The ``$name`` placeholder holding the check's bound.

    Returns:
        The condition, or None when the check does not apply to this type (e.g. a length
        constraint on a number).
    """
    value = _value_sql(check.target.path)
    bound = f"${bound_name}" if bound_name else ""
    if check.template == "not_null":
        parent = check.target.path[:-1]
        guard = f"{_value_sql(parent)} IS NOT NULL AND " if parent else ""
        return _fragment("not_null", value=value, guard=guard)
    kind = str(dtype.id)
    if check.template in ("ge", "gt", "le", "lt", "multiple_of") and kind in _NESTED_TYPES:
        return None
    if check.template == "pattern" and kind not in ("varchar", "enum"):
        return None
    if check.template in ("min_length", "max_length"):
        length = _length_function(dtype)
        if length is None:
            return None
        return _fragment(check.template, value=value, bound=bound, length=length)
    return _fragment(check.template, value=value, bound=bound)


def row_checks(target: Target) -> list[RowCheck]:
    """Translate one field's nullability and ``Field``/``Literal`` constraints into checks.

    Args:
        target: The column or struct field.

    Returns:
        The per-row checks (``not_null`` first, then constraints in metadata order).
    """
    label = target.label
    out: list[RowCheck] = []
    if not target.nullable:
        out.append(RowCheck("not_null", target, "not_null", None, f"{label} is not null"))
    element = _list_element(target.annotation)
    if element is not None and not _strip_optional(element)[1]:
        out.append(
            RowCheck("not_null", target, "not_null_elements", None, f"{label} has no null elements")
        )
    operators = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    for item in target.metadata:
        for attr, op in operators.items():
            bound = getattr(item, attr, None)
            if bound is not None:
                out.append(RowCheck("range", target, attr, bound, f"{label} {op} {bound!r}"))
        for attr, op in (("min_length", ">="), ("max_length", "<=")):
            bound = getattr(item, attr, None)
            if bound is not None:
                out.append(RowCheck("length", target, attr, bound, f"length({label}) {op} {bound}"))
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            out.append(
                RowCheck("pattern", target, "pattern", pattern, f"{label} matches {pattern!r}")
            )
        multiple = getattr(item, "multiple_of", None)
        if multiple is not None:
            out.append(
                RowCheck(
                    "multiple_of",
                    target,
                    "multiple_of",
                    multiple,
                    f"{label} is a multiple of {multiple!r}",
                )
            )
    values = _literal_values(target.annotation)
    if values is not None:
        out.append(
            RowCheck(
                "literal",
                target,
                "literal",
                values,
                f"{label} in {{{', '.join(repr(v) for v in values)}}}",
            )
        )
    return out


def _list_element(annotation: Any) -> Any | None:
    origin = typing.get_origin(annotation)
    if origin in (list, set, frozenset) or (_is_sequence(origin) and origin is not tuple):
        args = typing.get_args(annotation)
        return args[0] if args else Any
    return None


def _literal_values(annotation: Any) -> list[Any] | None:
    if typing.get_origin(annotation) is Literal:
        return [a.value if isinstance(a, enum.Enum) else a for a in typing.get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    return None


def _bound_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


# =========================================================================== running


@dataclasses.dataclass
class _Group:
    """Shards that share one DuckDB schema (one scan each)."""

    indices: list[int]
    types: dict[str, Any]


@dataclasses.dataclass
class _Result:
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
        if count:
            self.violations += count
            self.per_shard[shard] += count

    def finish(self) -> CheckResult:
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


def schema_name(model: type[BaseModel]) -> str:
    """Name a schema class for a report: ``module.Class``, or ``file.py:Class`` for a file.

    Args:
        model: The schema class.

    Returns:
        The name.
    """
    module = sys.modules.get(model.__module__)
    path = getattr(module, "__file__", None)
    if model.__module__.startswith(schemamod.FILE_MODULE_PREFIX) and path:
        return f"{path}:{model.__qualname__}"
    return f"{model.__module__}.{model.__qualname__}"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _display(value: Any) -> Any:
    """Make a value JSON-safe and short enough for a report."""
    safe = _jsonable(value)
    text = json.dumps(safe, ensure_ascii=False)
    if len(text) <= _MAX_VALUE_CHARS:
        return safe
    size = f" ({len(value)} items)" if isinstance(value, list | dict) else ""
    return text[: _MAX_VALUE_CHARS - 1] + "…" + size


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


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


class _Runner:
    """One validation run: the state shared by its steps."""

    def __init__(
        self,
        model: type[BaseModel],
        shards: Sequence[Shard | None],
        paths: Sequence[str],
        errors: Mapping[int, str],
        cursor: duckdb.DuckDBPyConnection,
        examples: int,
        progress: Progress | None,
    ) -> None:
        self.model = model
        self.shards = list(shards)
        self.paths = list(paths)
        self.errors = dict(errors)
        self.cursor = cursor
        self.limit = examples
        self.progress = progress
        offsets = [0]
        for shard in self.shards:
            offsets.append(offsets[-1] + (shard.rows if shard is not None else 0))
        self.offsets = offsets
        self.targets = targets(model)
        self.results: dict[tuple[str, str, str], _Result] = {}
        self.order: list[tuple[str, str, str]] = []

    # ---------------------------------------------------------------- helpers
    def _step(self, label: str) -> None:
        if self.progress is not None:
            self.progress(label)

    def _result(self, kind: CheckKind, column: str | None, description: str) -> _Result:
        key = (kind, column or "", description)
        if key not in self.results:
            self.results[key] = _Result(kind, column, description)
            self.order.append(key)
        return self.results[key]

    def _rows(self, index: int) -> int:
        shard = self.shards[index]
        return shard.rows if shard is not None else 0

    def _query(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.cursor.execute(sql, _bind_paths(sql, params)).fetchall()
        return rows

    def _files(self, indices: Sequence[int]) -> list[str]:
        return [self.paths[i] for i in indices]

    def _decodes(self, index: int) -> bool:
        """Decode every column of one shard; record it as unreadable when that fails."""
        readable_sql = sqlfiles.load("checks/readable").strip()
        result = self.results[("readable", "", _READABLE)]
        if readable_sql not in result.sql:
            result.sql.append(readable_sql)
        self._step("readable")
        try:
            self._query(readable_sql, {"path": self.paths[index]})
        except duckdb.Error as exc:
            self.errors[index] = f"data cannot be decoded: {_one_line(exc)}"
            return False
        return True

    def _readable(self) -> list[int]:
        return [i for i, s in enumerate(self.shards) if s is not None and i not in self.errors]

    # ---------------------------------------------------------------- steps
    def run(self) -> ValidationReport:
        start = time.perf_counter()
        readable = self._result("readable", None, _READABLE)
        self._result("shard_schema", None, "every shard has the same columns and types")
        for target in self.targets:
            if len(target.path) == 1:
                need = _PRESENT if target.required else _PRESENT_OPTIONAL
                self._result("present", target.label, need)
            if len(target.path) == 1:
                self._result("type", target.label, describe_type(target.annotation))
        for i, shard in enumerate(self.shards):
            if shard is not None and i not in self.errors:
                try:
                    shard.check_unchanged()
                except SourceError as exc:
                    self.errors[i] = str(exc)
        groups = self._groups()
        self._schema_checks(groups)
        for group in groups:
            self._row_checks(group)
        self._unique_checks(groups)
        for i, message in sorted(self.errors.items()):
            readable.add(self.paths[i], 1)
            readable.examples.append(Example(shard=self.paths[i], value=message))
        results = [self.results[k].finish() for k in self.order]
        summaries = []
        for i, path in enumerate(self.paths):
            ok = i not in self.errors and self.shards[i] is not None
            summaries.append(
                ShardSummary(
                    path=path,
                    rows=self._rows(i) if ok else None,
                    readable=ok,
                    violations=sum(
                        r.per_shard.get(path, 0) for r in results if r.check != "readable"
                    ),
                    error=self.errors.get(i),
                )
            )
        return ValidationReport(
            passed=all(r.passed for r in results),
            source="",
            schema_name=schema_name(self.model),
            rows=sum(self._rows(i) for i in self._readable()),
            shards=len(self.paths),
            checks=results,
            shard_summaries=summaries,
            seconds=round(time.perf_counter() - start, 4),
        )

    def _groups(self) -> list[_Group]:
        """Group readable shards by their DuckDB schema (one footer bind per Arrow schema)."""
        by_arrow: dict[tuple[tuple[str, str], ...], list[int]] = {}
        for i in self._readable():
            shard = self.shards[i]
            assert shard is not None
            key = tuple((f.name, str(f.type)) for f in shard.schema)
            by_arrow.setdefault(key, []).append(i)
        sql = sqlfiles.load("checks/column_types")
        by_duck: dict[tuple[tuple[str, str], ...], _Group] = {}
        for members in by_arrow.values():
            self._step("schemas")
            try:
                rel = self.cursor.sql(sql, params={"path": duckdb_path(self.paths[members[0]])})
                columns = dict(zip(rel.columns, rel.types, strict=True))
            except duckdb.Error as exc:
                for i in members:
                    self.errors[i] = f"the schema cannot be read: {_one_line(exc)}"
                continue
            key = tuple(sorted((name, str(t)) for name, t in columns.items()))  # by name
            if key in by_duck:
                by_duck[key].indices.extend(members)
            else:
                by_duck[key] = _Group(list(members), columns)
        groups = list(by_duck.values())
        for group in groups:
            group.indices.sort()
        groups.sort(key=lambda g: g.indices[0])
        return groups

    def _schema_checks(self, groups: Sequence[_Group]) -> None:
        sql = sqlfiles.load("checks/column_types").strip()
        drift = self._result("shard_schema", None, "every shard has the same columns and types")
        drift.sql.append(sql)
        if len(groups) > 1:
            shards_per = [len(g.indices) for g in groups]
            reference = shards_per.index(max(shards_per))
            ref_types = {n: str(t) for n, t in groups[reference].types.items()}
            for k, group in enumerate(groups):
                if k == reference:
                    continue
                types_ = {n: str(t) for n, t in group.types.items()}
                diff = []
                missing = [n for n in ref_types if n not in types_]
                extra = [n for n in types_ if n not in ref_types]
                changed = [
                    f"{n} {ref_types[n]} -> {types_[n]}"
                    for n in ref_types
                    if n in types_ and types_[n] != ref_types[n]
                ]
                if missing:
                    diff.append(f"missing {', '.join(missing)}")
                if extra:
                    diff.append(f"extra {', '.join(extra)}")
                if changed:
                    diff.append(f"types {'; '.join(changed)}")
                for i in group.indices:
                    drift.add(self.paths[i], self._rows(i))
                    drift.failed_shards = True
                    if len(drift.examples) < self.limit:
                        drift.examples.append(Example(shard=self.paths[i], value=", ".join(diff)))
        for target in self.targets:
            if len(target.path) != 1:
                continue
            column = target.path[0]
            present = self._result(
                "present",
                target.label,
                _PRESENT if target.required else _PRESENT_OPTIONAL,
            )
            typed = self._result("type", target.label, describe_type(target.annotation))
            present.sql.append(sql)
            typed.sql.append(sql)
            have = [g for g in groups if column in g.types]
            for group in groups:
                if column not in group.types:
                    if not target.required and not have:
                        continue  # an optional column absent everywhere is fine
                    for i in group.indices:
                        present.add(self.paths[i], self._rows(i))
                        present.failed_shards = True
                        if len(present.examples) < self.limit:
                            present.examples.append(
                                Example(shard=self.paths[i], value="column missing")
                            )
                    continue
                reason = mismatch(target.annotation, group.types[column])
                if reason is not None:
                    for i in group.indices:
                        typed.add(self.paths[i], self._rows(i))
                        typed.failed_shards = True
                        if len(typed.examples) < self.limit:
                            typed.examples.append(Example(shard=self.paths[i], value=reason))

    def _compatible(self, target: Target, group: _Group) -> Any | None:
        """The DuckDB type of a target in a group, or None when absent or incompatible."""
        root = group.types.get(target.path[0])
        if root is None:
            return None
        top = next((t for t in self.targets if t.path == target.path[:1]), None)
        if top is not None and mismatch(top.annotation, root) is not None:
            return None
        return _field_type(root, target.path[1:])

    def _row_checks(self, group: _Group) -> None:
        files = [self.paths[i] for i in group.indices]
        counts: list[str] = []
        params: dict[str, Any] = {"files": files}
        planned: list[tuple[RowCheck, str, dict[str, Any]]] = []
        no_null_leaves: set[str] | None = None
        for target in self.targets:
            dtype = self._compatible(target, group)
            if dtype is None:
                for check in row_checks(target):
                    self._result(check.kind, target.label, check.description)
                continue
            for check in row_checks(target):
                result = self._result(check.kind, target.label, check.description)
                name = f"p{len(planned)}" if check.bound is not None else None
                cond = condition(check, dtype, name)
                if cond is None:
                    result.error = result.error or (
                        f"{check.template} does not apply to {target.label} of type {dtype}"
                    )
                    continue
                bound = {name: _bound_value(check.bound)} if name else {}
                if check.kind == "pattern" and not self._pattern_ok(check, result):
                    continue
                if check.template in _NULL_TEMPLATES and len(target.path) == 1:
                    if no_null_leaves is None:
                        no_null_leaves = self._columns_without_null_leaves(files)
                    if target.path[0] in no_null_leaves:  # the footers prove it: no scan
                        result.condition = result.condition or cond
                        result.sql.append(sqlfiles.load("checks/leaf_nulls").strip())
                        continue
                result.condition = result.condition or cond
                counts.append(f'count_if({cond}) AS "c{len(planned)}"')
                params.update(bound)
                planned.append((check, cond, bound))
        if not planned:
            return
        sql = sqlfiles.render("checks/aggregate", counts=",\n    ".join(counts))
        self._step("row checks")
        try:
            rows = self._query(sql, params)
        except duckdb.Error:
            rows = self._per_shard(group, sql, params)
            group.indices = [i for i in group.indices if i not in self.errors]
        for row in rows:
            shard = row[0]
            for k, (check, _, _) in enumerate(planned):
                self.results[check.key].add(shard, int(row[2 + k] or 0))
        for check, cond, bound in planned:
            result = self.results[check.key]
            result.sql.append(sql)
            if result.violations and len(result.examples) < self.limit:
                self._examples(result, group, check.target, cond, bound)

    def _columns_without_null_leaves(self, files: Sequence[str]) -> set[str]:
        """Top-level columns whose leaves record zero nulls in every chunk's statistics."""
        self._step("statistics")
        try:
            rows = self._query(sqlfiles.load("checks/leaf_nulls"), {"files": list(files)})
        except duckdb.Error:
            return set()
        clean: dict[str, bool] = {}
        for path, chunks, without_nulls in rows:
            column = str(path).split(", ")[0]
            clean[column] = clean.get(column, True) and chunks == without_nulls
        return {column for column, ok in clean.items() if ok}

    def _pattern_ok(self, check: RowCheck, result: _Result) -> bool:
        try:
            self._query(sqlfiles.load("checks/pattern_valid"), {"pattern": check.bound})
        except duckdb.Error as exc:
            result.error = f"pattern {check.bound!r} is not a valid regular expression: " + (
                _one_line(exc)
            )
            return False
        return True

    def _per_shard(
        self, group: _Group, sql: str, params: Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Rerun a failed group scan shard by shard; unreadable shards become errors."""
        rows: list[tuple[Any, ...]] = []
        for i in group.indices:
            path = self.paths[i]
            self._step("row checks (per shard)")
            try:
                rows.extend(self._query(sql, {**params, "files": [path]}))
                continue
            except duckdb.Error as exc:
                failure = _one_line(exc)
            if not self._decodes(i):
                continue
            for key in self.order:  # readable, but the checks themselves fail on it
                result = self.results[key]
                if result.check not in ("readable", "shard_schema", "present", "type", "unique"):
                    result.error = result.error or f"the check query failed on {path}: {failure}"
        return rows

    def _examples(
        self, result: _Result, group: _Group, target: Target, cond: str, bound: Mapping[str, Any]
    ) -> None:
        files = [self.paths[i] for i in group.indices]
        offsets = [self.offsets[i] for i in group.indices]
        sql = sqlfiles.render("checks/examples", value=_value_sql(target.path), violation=cond)
        self._step("examples")
        try:
            rows = self._query(
                sql,
                {
                    "files": files,
                    "offsets": offsets,
                    "limit": self.limit - len(result.examples),
                    **bound,
                },
            )
        except duckdb.Error:
            return
        for index, shard, row, value in sorted(rows, key=lambda r: int(r[0])):
            result.examples.append(
                Example(index=index, shard=shard, row=row, value=_display(value))
            )

    def _unique_checks(self, groups: Sequence[_Group]) -> None:
        for target in self.targets:
            if not any(schemamod.is_unique_marker(m) for m in target.metadata):
                continue
            result = self._result("unique", target.label, f"{target.label} is unique")
            members = [g for g in groups if self._compatible(target, g) is not None]
            if not members:
                continue
            indices = sorted(i for g in members for i in g.indices if i not in self.errors)
            value = _value_sql(target.path)
            sql = sqlfiles.render("checks/unique", value=value)
            result.sql.append(sql)
            result.condition = f"{value} occurs in more than one row"
            self._step(f"unique {target.label}")
            try:
                (_, duplicated), *_ = self._query(sql, {"files": self._files(indices)})
            except duckdb.Error as exc:
                failure = _one_line(exc)
                kept = [i for i in indices if self._decodes(i)]
                try:
                    if len(kept) == len(indices) or not kept:
                        raise  # not a shard's fault (or nothing left to check)
                    indices = kept
                    (_, duplicated), *_ = self._query(sql, {"files": self._files(indices)})
                except duckdb.Error:
                    result.error = f"the uniqueness query failed: {failure}"
                    continue
            files = self._files(indices)
            if not duplicated:
                continue
            self._step(f"unique {target.label} per shard")
            per_shard_sql = sqlfiles.render("checks/unique_shards", value=value)
            examples_sql = sqlfiles.render("checks/unique_examples", value=value)
            try:
                for shard, count in self._query(per_shard_sql, {"files": files}):
                    result.add(shard, int(count))
                rows = self._query(
                    examples_sql,
                    {
                        "files": files,
                        "offsets": [self.offsets[i] for i in indices],
                        "limit": self.limit,
                    },
                )
            except duckdb.Error as exc:
                result.violations = max(result.violations, int(duplicated))
                result.error = f"the uniqueness query failed: {_one_line(exc)}"
                continue
            result.sql.extend([per_shard_sql, examples_sql])
            for index, shard, row, val in rows:
                result.examples.append(
                    Example(index=index, shard=shard, row=row, value=_display(val))
                )


def run(
    schema: type[BaseModel],
    shards: Sequence[Shard],
    cursor: duckdb.DuckDBPyConnection,
    *,
    source: str = "",
    examples: int = DEFAULT_EXAMPLES,
    progress: Progress | None = None,
) -> ValidationReport:
    """Check every shard of an opened dataset against a schema.

    Args:
        schema: A pydantic model class (see :mod:`undertale_duck.schema`).
        shards: The dataset's shards, footers already read.
        cursor: A DuckDB connection to run the checks on.
        source: How the dataset was given, for the report.
        examples: Offending rows to keep per failed check.
        progress: Called before each query with a short label.

    Returns:
        The report; problems in the data are failed checks, never exceptions.

    Raises:
        ArgumentError: If ``schema`` is not a pydantic model class.
    """
    model = schemamod.check_schema(schema)
    runner = _Runner(model, shards, [s.path for s in shards], {}, cursor, examples, progress)
    report = runner.run()
    report.source = source
    return report


def report_for(
    source: SourceLike,
    schema: type[BaseModel],
    *,
    examples: int = DEFAULT_EXAMPLES,
    progress: Progress | None = None,
    duckdb_config: Mapping[str, Any] | None = None,
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

    Returns:
        The report.

    Raises:
        SourceError: If the source itself cannot be resolved (no such path, no Parquet files).
        ArgumentError: If ``schema`` is not a pydantic model class.
    """
    model = schemamod.check_schema(schema)
    paths = resolve(source)
    shards: list[Shard | None] = []
    errors: dict[int, str] = {}
    for i, path in enumerate(paths):
        if progress is not None:
            progress("footers")
        try:
            shards.append(read_footer(path))
        except SourceError as exc:
            shards.append(None)
            errors[i] = str(exc)
    config: dict[str, Any] = {
        "preserve_insertion_order": True,
        "autoinstall_known_extensions": False,
    }
    config.update(duckdb_config or {})
    connection = duckdb.connect(":memory:", config=config)
    try:
        runner = _Runner(model, shards, paths, errors, connection, examples, progress)
        report = runner.run()
    finally:
        connection.close()
    if isinstance(source, str | os.PathLike):
        report.source = os.fspath(source)
    else:
        names = [os.fspath(p) for p in source]
        more = f", ... ({len(names)} files)" if len(names) > 3 else ""
        report.source = ", ".join(names[: 1 if more else 3]) + more
    return report


__all__ = [
    "DEFAULT_EXAMPLES",
    "CheckResult",
    "Example",
    "Progress",
    "RowCheck",
    "ShardSummary",
    "Target",
    "ValidationReport",
    "condition",
    "describe_type",
    "mismatch",
    "report_for",
    "row_checks",
    "run",
    "targets",
]
