"""The validation report model: Example, CheckResult, ShardSummary, ValidationReport (pydantic)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..common.text import counted, redact_url


def _shown(value: str | None) -> str | None:
    """A report's shard path, source or error as shown and written: URLs without secrets."""
    return None if value is None else redact_url(value)

#: The kinds of check a report holds (``CheckResult.check``).
CheckKind = Literal[
    "readable",
    "shard_schema",
    "present",
    "type",
    "extra",
    "not_null",
    "unique",
    "range",
    "length",
    "pattern",
    "ascii",
    "literal",
    "multiple_of",
    "finite",
    "digits",
]


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

    @field_validator("shard")
    @classmethod
    def _shard(cls, value: str) -> str:
        return redact_url(value)  # a report is shown and written: URLs without secrets

    @model_validator(mode="after")
    def _error(self) -> Example:
        if self.row is None and isinstance(self.value, str):  # a shard's error, not data
            self.value = redact_url(self.value)
        return self


class CheckResult(BaseModel):
    """The outcome of one check.

    Attributes:
        check: Kind of check: ``readable``, ``shard_schema``, ``present``, ``type``,
            ``not_null``, ``unique``, ``range``, ``length``, ``pattern``, ``literal``,
            ``multiple_of``, ``finite`` or ``digits``.
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

    @field_validator("per_shard")
    @classmethod
    def _per_shard(cls, value: dict[str, int]) -> dict[str, int]:
        return {redact_url(path): count for path, count in value.items()}

    @field_validator("error")
    @classmethod
    def _error(cls, value: str | None) -> str | None:
        return _shown(value)


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

    @field_validator("path", "error")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return _shown(value)


class ValidationReport(BaseModel):
    """Every check of a schema over every shard of a dataset.

    Attributes:
        passed: True when every check passed.
        source: The dataset source as given.
        schema_name: The schema class, ``module.Class``.
        rows: Rows over all readable shards.
        shards: Number of shards (readable or not).
        query: For a view, its query (as DuckDB writes it back): the checks then apply to
            the view's rows, ``rows`` and shard rows count the view's rows, and an example's
            ``index`` is its index in the view (``row`` stays the source row in its shard).
        checks: Every check, in a stable order (dataset-wide checks first, then by column).
        shard_summaries: Per-shard row and violation counts, in dataset order.
        seconds: Wall-clock time the checks took.
    """

    passed: bool
    source: str
    schema_name: str
    rows: int
    shards: int
    query: str | None = None
    checks: list[CheckResult]
    shard_summaries: list[ShardSummary] = Field(default_factory=list)
    seconds: float = 0.0

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        return redact_url(value)

    @property
    def failed(self) -> list[CheckResult]:
        """The checks that failed."""
        return [c for c in self.checks if not c.passed]

    def __repr__(self) -> str:
        # the fields hold every check and example: show what a reader looks for instead
        failed = ", ".join(
            f"{c.check}({c.column})" if c.column else c.check for c in self.failed
        )
        view = "" if self.query is None else f", query={self.query!r}"
        return (
            f"ValidationReport({self.source!r}{view}, schema={self.schema_name}, "
            f"rows={self.rows}, shards={self.shards}, passed={self.passed}, "
            f"checks={len(self.checks)}, failed=[{failed}])"
        )

    def summary(self) -> str:
        """Return a one-paragraph summary naming each failed check with its count.

        Returns:
            ``"... passed N checks"`` or a list of the failed checks.
        """
        head = (
            f"{self.source} against {self.schema_name} "
            f"({counted(self.rows, 'row')}, {counted(self.shards, 'shard')})"
        )
        if self.passed:
            return f"{head}: all {len(self.checks)} checks passed"
        parts = []
        for c in self.failed:
            where = f"({c.column})" if c.column else ""
            unit = "shard" if c.check == "readable" else "row"
            what = c.error if c.error else counted(c.violations, unit)
            parts.append(f"{c.check}{where}: {what} [{c.description}]")
        text = f"{head}: {len(parts)} of {len(self.checks)} checks failed: " + "; ".join(parts)
        if any(c.check == "present" for c in self.failed):
            # a missing column is the first-hour mistake: say what the schema needs in full
            needed = [c.column for c in self.checks if c.check == "present" and c.column]
            # the class: after a file's or module's ':' ("/d/sch.py:Cls"), then the last '.'
            name = self.schema_name.rpartition(":")[2].rpartition(".")[2]
            text += f". {name} needs the columns {', '.join(needed)}"
        return text


__all__ = ["CheckKind", "CheckResult", "Example", "ShardSummary", "ValidationReport"]
