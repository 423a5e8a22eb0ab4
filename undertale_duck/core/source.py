"""A dataset's Parquet shards (resolved by ``resolve.py``) and their footers, read once."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..common.text import first_line
from ..errors import (
    ArgumentError,
    ColumnError,
    CorruptShardError,
    NotParquetError,
    ShardChangedError,
    SourceError,
)
from . import footers, lifecycle
from .connection import Connection
from .duck import duckdb_path
from .group_sizes import decoded_sizes
from .readable import check_types
from .resolve import MAGIC, PARQUET_SUFFIXES, SourceLike, resolve
from .windows import planned

__all__ = [
    "MAGIC", "PARQUET_SUFFIXES", "Shard", "Source", "SourceLike", "check_column_names",
    "read_footer", "reference_schema", "resolve",
]


@dataclass(frozen=True)
class Shard:
    """One Parquet file of a dataset, as its footer describes it.

    Attributes:
        path: Absolute path of the file.
        rows: Number of rows in the file.
        row_groups: ``(rows, uncompressed bytes)`` of each row group, in file order.
        size: File size in bytes when the footer was read.
        mtime_ns: Modification time in nanoseconds when the footer was read.
        schema: The Arrow schema pyarrow reads from the footer.
        created_by: The writer recorded in the footer.
        inode: ``(device, inode)`` of the file when the footer was read, so a file replaced
            by a rename with the same size and modification time is still detected.
        decoded: Each row group's estimated size once decoded to Arrow
            (:func:`group_sizes.decoded_sizes`; empty if unknown), for planning windows.
    """

    path: str
    rows: int
    row_groups: tuple[tuple[int, int], ...]
    size: int
    mtime_ns: int
    schema: pa.Schema
    created_by: str
    inode: tuple[int, int] = (0, 0)
    decoded: tuple[int, ...] = field(default=(), compare=False, repr=False)

    @property
    def planned_groups(self) -> list[tuple[int, int]]:
        """``(rows, bytes)`` of each row group as windows are cut (:func:`windows.planned`)."""
        return planned(self.row_groups, self.decoded)

    def local(self) -> contextlib.AbstractContextManager[Shard]:
        """The local file DuckDB reads for this shard: itself (a remote shard's cached copy).

        Returns:
            A context manager yielding a local :class:`Shard`, held while the block runs.
        """
        return contextlib.nullcontext(self)

    def check_unchanged(self) -> None:
        """Check that the file on disk is still the one whose footer we read.

        Raises:
            ShardChangedError: If the file was deleted, replaced, truncated or extended.
        """
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise ShardChangedError(
                f"shard {self.path} disappeared after the dataset was opened ({exc.strerror}); "
                "call refresh() to reopen the dataset as it is now",
                self.path,
            ) from None
        replaced = self.inode != (0, 0) and (st.st_dev, st.st_ino) != self.inode
        if st.st_size != self.size or st.st_mtime_ns != self.mtime_ns or replaced:
            raise ShardChangedError(
                f"shard {self.path} changed on disk after the dataset was opened "
                f"(size {self.size} -> {st.st_size} bytes, mtime changed: "
                f"{st.st_mtime_ns != self.mtime_ns}, replaced by another file: {replaced}); "
                "call refresh() to reopen the dataset as it is now",
                self.path,
            )


def read_footer(path: str) -> Shard:
    """Read one shard's footer (no data pages) and check it against the file.

    The footer is checked before anything trusts it (:mod:`footers`): an encrypted footer
    or encrypted columns are refused without touching a column's metadata (pyarrow aborts
    the process on those), and the row groups' row counts must fit the file's size. The
    shard's row count is the sum of its row groups' (what DuckDB reads), whatever the
    footer's own total says.

    Args:
        path: Path of a Parquet file.

    Returns:
        The shard's description.

    Raises:
        NotParquetError: If the file is not a Parquet file.
        EncryptedShardError: If its footer or columns are encrypted.
        UnsupportedShardError: If its schema uses a type Arrow cannot represent.
        CorruptShardError: If the footer is truncated, corrupt, or claims more rows than
            the file can hold.
        SourceError: If the file cannot be opened.
    """
    try:
        st = os.stat(path)
        head, _ = footers.file_magic(path)
    except OSError as exc:
        raise SourceError(f"cannot open dataset file {path}: {exc.strerror}", path) from None
    if head == footers.ENCRYPTED_MAGIC:
        footers.check_encryption(path, None, st.st_size)
    if head != MAGIC:
        raise NotParquetError(
            f"{path} is not a Parquet file (it does not start with the Parquet magic bytes)", path
        )
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        footers.check_encryption(path, None, st.st_size)
        raise CorruptShardError(
            f"Parquet shard {path} is truncated or corrupt: its footer cannot be read "
            f"({first_line(exc)})",
            path,
        ) from None
    footers.check_encryption(path, meta, st.st_size)
    schema = footers.arrow_schema(path, meta)
    groups = footers.row_groups(path, meta, st.st_size)
    return Shard(
        path=path,
        rows=sum(rows for rows, _ in groups),
        row_groups=groups,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        schema=schema,
        created_by=str(meta.created_by or ""),
        inode=(st.st_dev, st.st_ino),
        decoded=decoded_sizes(meta),
    )


def check_column_names(shards: Sequence[Shard], columns: Sequence[str]) -> None:
    """Refuse column names that DuckDB would bind to the wrong column.

    DuckDB matches identifiers case-insensitively, even quoted ones, so in a file with
    columns ``A`` and ``a`` both names select ``A``; and the row-number column a window
    query needs clashes with a data column named ``file_row_number``.

    Args:
        shards: The dataset's shards.
        columns: The columns the dataset reads.

    Raises:
        ColumnError: If a column read shares its name, ignoring case, with another column
            of a shard, has an empty name, or a shard has a column named
            ``file_row_number``.
    """
    wanted = {c.casefold() for c in columns}
    for shard in shards:
        seen: dict[str, str] = {}
        for name in shard.schema.names:
            if not name and name in columns:
                raise ColumnError(
                    f"shard {shard.path} has a column with an empty name, which DuckDB cannot "
                    "select (it renames it); pass columns=[...] without it",
                    shard.path,
                )
            folded = name.casefold()
            if folded == "file_row_number":
                raise ColumnError(
                    f"shard {shard.path} has a column named {name!r}, which clashes with the "
                    "row-number column DuckDB adds to read a window; rename that column",
                    shard.path,
                )
            if folded in seen and folded in wanted:
                how = "two columns named" if seen[folded] == name else "columns"
                raise ColumnError(
                    f"shard {shard.path} has {how} {seen[folded]!r} and {name!r}, which differ "
                    "at most in case; DuckDB matches column names case-insensitively and would "
                    "return one for the other: rename one of them or leave both out of columns",
                    shard.path,
                )
            seen.setdefault(folded, name)


def reference_schema(shards: Sequence[Shard], columns: Sequence[str] | None) -> pa.Schema:
    """Return the dataset's schema: the first shard's, projected onto ``columns``.

    Args:
        shards: The dataset's shards (at least one).
        columns: Column names to keep, in this order, or None for all.

    Returns:
        The Arrow schema of a row.

    Raises:
        ColumnError: If a requested column is not in the first shard.
        ArgumentError: If ``columns`` is empty or names a column twice.
    """
    schema = shards[0].schema
    if columns is None:
        return schema
    if isinstance(columns, str):
        raise ArgumentError("columns must be a list of column names, not a single string")
    cols = list(columns)
    if not cols:
        raise ArgumentError("columns must name at least one column (or be None for all)")
    if len(set(cols)) != len(cols):
        raise ArgumentError(f"columns names a column twice: {cols}")
    missing = [c for c in cols if schema.get_field_index(c) < 0]
    if missing:
        raise ColumnError(
            f"column(s) {missing} not found in {shards[0].path}; available columns: "
            f"{schema.names}",
            shards[0].path,
        )
    return pa.schema([schema.field(c) for c in cols], metadata=schema.metadata)


# --------------------------------------------------------------------------- connections


class Source:
    """The resolved shards of a dataset with their footers, offsets and reference schema.

    Args:
        source: A file, directory, glob or list of files (see :func:`resolve`); or an fsspec
            URL (``s3://bucket/prefix/``), glob URL or list of URLs (see ``core/remote.py``).
        columns: Columns to keep, or None for all.
        storage_options: Options of the fsspec filesystem of a remote source.
        cache_dir: The shard cache directory of a remote source (``core/shard_cache.py``).
        cache_limit: The shard cache's byte limit.
        retries: Retries of a failed store request.

    Raises:
        SourceError: If the source cannot be resolved or a shard cannot be read.
    """

    def __init__(
        self,
        source: SourceLike,
        columns: Sequence[str] | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        retries: int | None = None,
    ) -> None:
        self.spec = source if isinstance(source, str) else _describe(source)
        self.store: Any = None  # a store.Store when the shards are in object storage
        if _remote_source(source):
            from . import remote
            from . import store as storemod
            from .shard_cache import ShardCache

            self.store = storemod.open_store(
                source,  # type: ignore[arg-type]
                storage_options,
                ShardCache(cache_dir, cache_limit),
                storemod.RETRIES if retries is None else retries,
            )
            self.shards: tuple[Shard, ...] = tuple(
                remote.open_shards(self.store, source)  # type: ignore[arg-type]
            )
        else:
            self.shards = tuple(read_footer(p) for p in resolve(source))
            self._protect()
        self.schema = reference_schema(self.shards, columns)
        self.columns: tuple[str, ...] = tuple(self.schema.names)
        for shard in self.shards:
            duckdb_path(shard.path)  # refuse paths DuckDB cannot read before any query
        check_column_names(self.shards, self.columns)
        check_types(self.shards, self.columns)
        offsets = [0]
        for shard in self.shards:
            offsets.append(offsets[-1] + shard.rows)
        self.offsets: tuple[int, ...] = tuple(offsets)

    def _protect(self) -> None:
        """Keep spill files and caches of this process out of the dataset's directories."""
        homes = [os.path.dirname(s.path) for s in self.shards]
        if isinstance(self.spec, str) and os.path.isdir(self.spec):
            homes.append(self.spec)
        lifecycle.protect(homes)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.store is None:  # in a spawned worker too
            self._protect()

    @property
    def rows(self) -> int:
        """Total number of rows over all shards."""
        return self.offsets[-1]

    @property
    def paths(self) -> list[str]:
        """Shard paths in dataset order."""
        return [s.path for s in self.shards]

    def check_unchanged(self) -> None:
        """Check that no shard changed on disk since its footer was read.

        Raises:
            ShardChangedError: If a shard was deleted, replaced, truncated or extended.
        """
        if self.store is not None:  # one request per object: ask many at once
            self.store.check_all(self.shards)
            return
        for shard in self.shards:
            shard.check_unchanged()

    def connection(
        self,
        config: dict[str, Any] | None = None,
        setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> Connection:
        """Return a new lazily opened :class:`Connection` with the ``dataset`` view.

        For a remote source DuckDB reads the objects through the store's fsspec filesystem
        (range reads of the row groups a query needs), not through the shard cache.

        Args:
            config: DuckDB settings.
            setup: Called with the database once it is open (see :class:`Connection`).

        Returns:
            The connection holder (nothing is opened until first use).
        """
        fs = None if self.store is None else self.store.filesystem
        return Connection(self.paths, self.columns, config, setup, filesystem=fs)


def _remote_source(source: object) -> bool:
    """Whether a source is a URL or list of URLs (``core/remote.py`` reads those)."""
    from .store import is_remote

    return is_remote(source)


def _describe(source: object) -> str:
    if isinstance(source, os.PathLike):
        return str(os.fspath(source))
    try:
        items = [str(os.fspath(s)) for s in source]  # type: ignore[attr-defined]
    except TypeError:
        return repr(source)
    if len(items) <= 3:
        return ", ".join(items)
    return f"{items[0]}, ... ({len(items)} files)"
