"""The exception hierarchy of undertale_duck: every error we raise is an UndertaleDuckError."""

from __future__ import annotations


class UndertaleDuckError(Exception):
    """Root of every error raised by undertale_duck."""


class ArgumentError(UndertaleDuckError, ValueError):
    """An argument has a value we cannot use; the message names the argument."""


class SourceError(UndertaleDuckError):
    """The dataset source cannot be resolved or read.

    Attributes:
        path: The file or directory the problem is about, when there is one.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NotParquetError(SourceError):
    """A file that should be a Parquet shard is not a Parquet file."""


class CorruptShardError(SourceError):
    """A shard is truncated or corrupt; the message names the shard and, when known, the rows.

    Attributes:
        rows: The global ``(start, stop)`` row range that could not be read, when known.
    """

    def __init__(
        self, message: str, path: str | None = None, rows: tuple[int, int] | None = None
    ) -> None:
        super().__init__(message, path)
        self.rows = rows


class ShardChangedError(SourceError):
    """A shard changed on disk (replaced, truncated, extended, deleted) after it was opened."""


class ColumnError(SourceError):
    """A requested column does not exist in the dataset."""


class SchemaError(UndertaleDuckError):
    """The dataset does not conform to a schema.

    Attributes:
        report: The ``ValidationReport`` with every check, when one was produced.
    """

    def __init__(self, message: str, report: object | None = None) -> None:
        super().__init__(message)
        self.report = report


class QueryError(UndertaleDuckError):
    """An SQL query failed or was refused."""


class ReadOnlyError(QueryError):
    """A statement would write to, modify or delete the dataset's files."""


class MemoryBudgetWarning(UserWarning):
    """``memory`` is too small to cache a window beside the memory one window read needs."""


class RandomAccessWarning(UserWarning):
    """Rows are read in a uniform random order over data larger than the memory budget.

    Each window read then serves only a few rows before it is evicted, so nearly every row
    costs a window decode. Emitted once per process.
    """
