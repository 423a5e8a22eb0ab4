"""Turn a DuckDB or pyarrow failure on a shard into our error naming the shard and the cause."""

from __future__ import annotations

import re
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from ...common.text import first_line
from ...errors import (
    CorruptShardError,
    EncryptedShardError,
    MemoryBudgetError,
    OutOfRangeError,
    SourceError,
    StorageError,
    UnsupportedShardError,
)
from .cachedir import unheld

#: Nesting Arrow's C data interface accepts (DuckDB hands results to pyarrow through it).
ARROW_MAX_NESTING = 64

_UNSUPPORTED = (
    "not supported", "unsupported", "only supported", "not implemented", "need at least one",
)
# Words of DuckDB's I/O errors that are about the file system, not the file's content.
_IO = ("could not", "permission", "no such file", "input/output", "interrupted")
_CORRUPT = (
    "corrupt", "out of buffer", "magic", "truncat", "too small", "invalid", "missing",
    "negative", "not enough", "mismatch", "decompress", "unexpected", "checksum", "crc",
    "overflow", "exceeds", "out of bounds", "bad ",
)
# A value the target type cannot hold (DuckDB's "Int96 timestamp is out of range", "Date out
# of range"): not corruption. Index, offset or length "out of range" is, and says "corrupt".
_OUT_OF_RANGE = re.compile(r"\b(timestamp|date|time|interval|decimal|value)\b[^.]*out of range")

# pyarrow's codecs refusing a page's bytes: gzip's CRC-32 or length check, a deflate, zstd,
# snappy, lz4 or brotli stream that does not decode, a page decompressing to another size
# than its header's. Not an unknown codec ("Unsupported compression codec value").
_CODEC = re.compile(
    r"codec failed|corrupt \w+ compressed data|decompression failed"
    r"|didn't decompress to expected size",
    re.IGNORECASE,
)

#: DuckDB's working memory per column a scan reads, at least: one 2048-value vector of
#: 8-byte values (it also keeps each column's page buffers; 5,000 int64 columns of a few
#: rows took more than 128 MiB, about 26 KiB each).
COLUMN_WORKING_BYTES = 16 << 10


def message(exc: BaseException) -> str:
    """DuckDB's or pyarrow's message on one line, without DuckDB's advice and SQL context."""
    text = unheld(str(exc).strip().split("\n\n")[0].split("\nLINE ")[0])
    return first_line(Exception(text)) if text else type(exc).__name__


def looks_corrupt(exc: BaseException) -> bool:
    """Whether a DuckDB or pyarrow message uses the words of a damaged file's failures."""
    # the message's words, not its kind's: "Invalid Input Error: boom" (the SQL's error()
    # call, a missing parameter) holds "invalid" whatever went wrong
    low = _KIND.sub("", message(exc), count=1).lower()
    return any(k in low for k in _CORRUPT)


#: The name of DuckDB's error kind that starts its messages ("Invalid Input Error: ").
_KIND = re.compile(r"^[A-Za-z ]+ Error: ")


def is_codec_failure(exc: BaseException) -> bool:
    """Whether a pyarrow error is a compressed page its codec refuses (the bytes are damaged).

    DuckDB checks less than pyarrow's codecs (not gzip's CRC-32): a window it read instead
    would be served the damaged bytes as values.
    """
    return isinstance(exc, OSError | pa.ArrowException) and bool(_CODEC.search(str(exc)))


def is_interrupt(exc: BaseException) -> bool:
    """Whether a DuckDB error is the interrupt of a query (Ctrl-C), not a failure."""
    return isinstance(exc, duckdb.InterruptException)


def is_fatal(exc: BaseException) -> bool:
    """Whether DuckDB invalidated its database with this error (it must be reopened)."""
    return isinstance(exc, duckdb.InternalException | duckdb.FatalException)


def shard_error(
    exc: BaseException,
    path: str,
    what: str,
    rows: tuple[int, int] | None = None,
    *,
    memory: int = 0,
    footer_bytes: int | None = None,
    columns: int = 0,
    culprits: Sequence[str] = (),
) -> SourceError:
    """Return our error for a failure of DuckDB or pyarrow while reading a shard.

    Only failures that are corruption are called corrupt: an encrypted shard, a feature
    DuckDB or Arrow does not support, a value out of range, a read that ran out of the
    memory budget, and DuckDB's own internal errors each get their own wording (and class).

    Args:
        exc: The DuckDB or pyarrow exception.
        path: The shard.
        what: What was read, e.g. ``"rows 0..9 (local rows 0..9)"``.
        rows: The global row range read, when known.
        memory: The memory budget in bytes (0: none), for the out-of-memory wording.
        footer_bytes: The bytes the footer records for what was read, when known.
        columns: The number of columns read (0: unknown), to tell a shard too wide for
            the budget from one whose pages decompress to more than its footer records.
        culprits: The columns found to use the feature DuckDB cannot read, when known
            (DuckDB's message names none).

    Returns:
        The error to raise (a :class:`SourceError` subclass).
    """
    text = message(exc)
    low = text.lower()
    if isinstance(exc, duckdb.OutOfMemoryException):
        budget = f"the memory budget (memory={memory / (1 << 20):.4g} MiB)" if memory else (
            "DuckDB's memory_limit"
        )
        if memory and 2 * columns * COLUMN_WORKING_BYTES >= memory:
            # the columns' own working memory takes half the budget or more: the shard is
            # too wide for it, whatever its pages hold (calling it a bomb would be false)
            return MemoryBudgetError(
                f"reading {what} of shard {path} needs more memory than {budget} allows: "
                f"the shard is too wide for the budget, DuckDB needs working memory for "
                f"each of the {columns} columns read (at least "
                f"{COLUMN_WORKING_BYTES >> 10} KiB each, whatever their size): {text}. "
                "Raise memory=, or select fewer columns with columns=[...]",
                path,
                rows,
            )
        recorded = (
            f"; its footer records {footer_bytes} bytes for them, so the file understates "
            "what they decompress to (a decompression bomb, or a writer's error)"
            if footer_bytes is not None
            else ""
        )
        return MemoryBudgetError(
            f"reading {what} of shard {path} needs more memory than {budget} allows"
            f"{recorded}: {text}. Raise memory (or duckdb_config['memory_limit']) if the "
            "shard is trusted",
            path,
            rows,
        )
    if "support range requests" in low:  # fsspec's HTTP client, for DuckDB's reads
        return StorageError(
            f"shard {path} cannot be read ({what}): its HTTP server does not answer byte-range "
            "requests, which DuckDB needs to read parts of a remote file (ds.sql, views, "
            "describe); serve the shards from a server that supports ranges (S3-compatible "
            "stores and most web servers do), or copy them to a local directory",
            path,
        )
    if "maximum total string size" in low:  # Arrow's 2 GiB of strings in one batch
        return MemoryBudgetError(
            f"reading {what} of shard {path} decodes to more than 2 GiB of strings in one "
            f"batch, more than Arrow holds ({text}); a dictionary bomb (a long value repeated "
            "by many rows) or values far too large: set memory (a budget bounds each value)",
            path,
            rows,
        )
    if "encrypt" in low:
        return EncryptedShardError(
            f"shard {path} is encrypted (Parquet modular encryption): {text}; undertale_duck "
            "cannot read encrypted files: decrypt it, or remove it from the dataset",
            path,
        )
    if isinstance(exc, pa.ArrowException):
        if "recursion" in low or "nest" in low:
            return UnsupportedShardError(
                f"shard {path}: {what} cannot be handed to Arrow: a column is nested deeper "
                f"than the {ARROW_MAX_NESTING} levels Arrow's C data interface allows "
                f"({text}); leave that column out with columns=[...]",
                path,
            )
        return UnsupportedShardError(
            f"shard {path}: {what} cannot be converted to Arrow: {text}", path
        )
    if isinstance(exc, duckdb.NotImplementedException) or any(k in low for k in _UNSUPPORTED):
        which = (
            f"column{'s' if len(culprits) > 1 else ''} "
            + ", ".join(repr(name) for name in culprits)
            if culprits
            else "the column"
        )
        return UnsupportedShardError(
            f"shard {path} uses a Parquet feature DuckDB cannot read ({what}): {text}; the "
            f"file is not corrupt: rewrite it with common settings, or leave {which} out "
            "with columns=[...]",
            path,
        )
    if isinstance(exc, duckdb.OutOfRangeException | duckdb.ConversionException) or (
        _OUT_OF_RANGE.search(low) and "corrupt" not in low
    ):
        return OutOfRangeError(
            f"shard {path} holds a value DuckDB cannot represent in {what}: {text}", path, rows
        )
    if is_fatal(exc):
        return SourceError(
            f"DuckDB failed internally reading {what} of shard {path}: {text} (the shard "
            "may be malformed in a way DuckDB does not check; the connection was reopened)",
            path,
        )
    if isinstance(exc, duckdb.IOException):
        detail = low.split("error:", 1)[-1]  # without DuckDB's "IO Error:" prefix
        if any(k in detail for k in _IO):
            return SourceError(f"cannot read {what} of shard {path}: {text}", path)
        if not any(k in detail for k in _CORRUPT):
            # DuckDB's reader refuses a layout it does not handle (a map without values, a
            # schema shape): the file is not corrupt, other readers may read it.
            return UnsupportedShardError(
                f"shard {path} has a layout DuckDB cannot read ({what}): {text}; the file is "
                "not necessarily corrupt: rewrite it with common settings, or leave the "
                "column out with columns=[...]",
                path,
            )
    return CorruptShardError(
        f"shard {path} is corrupt: {what} cannot be read: {text}", path, rows
    )
