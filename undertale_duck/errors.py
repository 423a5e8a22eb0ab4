"""The exception hierarchy of undertale_duck: every error we raise is an UndertaleDuckError.

The tree (documented in docs/errors.md)::

    UndertaleDuckError                 root of everything we raise
    ├── ArgumentError (ValueError)     an argument has a value we cannot use (names the argument)
    ├── SourceError                    the source cannot be resolved or read      .path
    │   ├── NotParquetError            a shard is not a Parquet file
    │   ├── CorruptShardError          a shard is truncated or corrupt           .rows
    │   ├── UnsupportedShardError      a shard uses a feature DuckDB/Arrow cannot read
    │   │   └── EncryptedShardError    a shard's footer or columns are encrypted
    │   ├── OutOfRangeError            a value the format cannot represent      .rows .column
    │   ├── MemoryBudgetError          a read would pass the memory budget       .rows
    │   ├── ShardChangedError          a shard changed on disk (or in its store) after opening
    │   ├── StorageError               object storage failed (retries, access, no client)
    │   └── ColumnError                a requested column does not exist          .missing
    ├── SchemaError                    the dataset does not conform to a schema   .report
    ├── QueryError                     ad hoc SQL failed or was refused
    │   └── ReadOnlyError              the statement would write or change state
    └── WorkerStartError (RuntimeError) DataLoader workers kept failing to start after fork()

    MemoryBudgetWarning (UserWarning)  `memory` is too small for one read and one cached window
    RandomAccessWarning (UserWarning)  uniform random access over data larger than `memory`
    EmptyEpochWarning (UserWarning)    the tail rule leaves a rank's epoch without a row
    WorkerStartWarning (UserWarning)   a forked DataLoader worker never started and was replaced
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .common.text import redact_url

#: Refusals (a query that would write, a read over the memory budget) are logged here at INFO.
_log = logging.getLogger("undertale_duck.refused")


class UndertaleDuckError(Exception):
    """Root of every error raised by undertale_duck.

    Every URL in its message is shown without its user information and query string
    (:func:`~undertale_duck.common.text.redact_url`): a pre-signed URL's signature or a
    ``user:password@`` never reaches a message, a log or a terminal.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_url(a) if isinstance(a, str) else a for a in args))


class ArgumentError(UndertaleDuckError, ValueError):
    """An argument has a value we cannot use; the message names the argument."""


class SourceError(UndertaleDuckError):
    """The dataset source cannot be resolved or read.

    Attributes:
        path: The file or directory the problem is about, when there is one.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else redact_url(path)


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


class UnsupportedShardError(SourceError):
    """A shard uses a Parquet feature DuckDB or Arrow cannot read.

    For example an encoding for a type DuckDB does not decode, a map without values,
    invalid GeoParquet metadata, or nesting deeper than Arrow allows. The shard is not
    corrupt: another reader may read it; rewriting it with common settings (or leaving the
    column out with ``columns=``) makes it readable here.
    """


class EncryptedShardError(UnsupportedShardError):
    """A shard's footer or columns are encrypted (Parquet modular encryption).

    undertale_duck reads no encrypted Parquet; it refuses such a shard without aborting.
    """


class OutOfRangeError(SourceError):
    """A shard holds a value the requested format cannot represent.

    For example a date beyond Python's ``datetime`` range, or an unsigned 64-bit integer of
    2**63 or more for ``format="torch"`` (which would wrap to a negative number).

    Attributes:
        rows: The global ``(start, stop)`` row range holding the value, when known.
        column: The column holding the value, when known.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        rows: tuple[int, int] | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(message, path)
        self.rows = rows
        self.column = column


class MemoryBudgetError(SourceError):
    """Reading a shard would need more memory than the ``memory`` budget allows.

    Row groups larger than the budget, or a decompression bomb: pages that decompress or
    decode to far more than the footer records.

    Attributes:
        rows: The global ``(start, stop)`` row range whose read was stopped, when known.
    """

    def __init__(
        self, message: str, path: str | None = None, rows: tuple[int, int] | None = None
    ) -> None:
        super().__init__(message, path)
        self.rows = rows
        _log.info("refused: %s", self)


class ShardChangedError(SourceError):
    """A shard changed on disk (replaced, truncated, extended, deleted) after it was opened."""


class StorageError(SourceError):
    """Object storage failed: unreachable, throttling or erroring after retries, or refusing access.

    The message names the object and what was tried; a missing store client names the extra
    to install (``pip install undertale_duck[s3]`` ...).
    """


class ColumnError(SourceError):
    """A requested column does not exist in the dataset, or the shard's names clash.

    Attributes:
        missing: The requested columns the dataset lacks (empty for a clash of names).
    """

    def __init__(
        self, message: str, path: str | None = None, missing: Sequence[str] = ()
    ) -> None:
        super().__init__(message, path)
        self.missing = tuple(missing)


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

    def __init__(self, message: str) -> None:
        super().__init__(message)
        _log.info("refused: %s", self)


class MemoryBudgetWarning(UserWarning):
    """``memory`` is too small to cache a window beside the memory one window read needs."""


class RandomAccessWarning(UserWarning):
    """Rows are read in a uniform random order over data larger than the memory budget.

    Each window read then serves only a few rows before it is evicted, so nearly every row
    costs a window decode. Emitted once per process.
    """


class EmptyEpochWarning(UserWarning):
    """A dataset has fewer rows than ranks x workers: with ``drop_last=True`` no rank gets one.

    The original tail rule drops fewer than ranks x workers rows per epoch, here every row,
    so each epoch would run without a batch.
    """


class WorkerStartWarning(UserWarning):
    """A forked DataLoader worker did not start in time; it was stopped and replaced.

    ``ChunkedLoader`` (what ``load()`` and ``DataModule`` return) then starts the epoch's
    workers again at the next batch: no batch is lost or served twice.
    """


class WorkerStartError(UndertaleDuckError, RuntimeError):
    """Forked DataLoader workers kept failing to start, more often than the loader retries."""
