"""Resolve a source into Parquet shards and read their footers once."""

from __future__ import annotations

import contextlib
import glob as globlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
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
from .duck import GLOB_CHARS, duckdb_path
from .readable import check_types

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
MAGIC = b"PAR1"

SourceLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


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
    """

    path: str
    rows: int
    row_groups: tuple[tuple[int, int], ...]
    size: int
    mtime_ns: int
    schema: pa.Schema
    created_by: str
    inode: tuple[int, int] = (0, 0)

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


def _is_hidden(name: str) -> bool:
    return name.startswith((".", "_")) or name.endswith(".crc")


def _has_magic(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            if head != MAGIC:
                return False
            fh.seek(-4, os.SEEK_END)
            return fh.read(4) == MAGIC
    except OSError:
        return False


def _not_regular(path: str) -> str:
    """Why a path named like a shard cannot be one: not a regular file (or a broken link)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"dataset file {path} cannot be opened: {exc.strerror} (a broken symbolic link?)"
    kind = (
        "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(
            mode
        ) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    )
    return (
        f"dataset file {path} is {kind}, not a Parquet file: remove it from the dataset "
        "(undertale_duck reads only regular files)"
    )


def _directory_files(directory: Path) -> list[str]:
    """List the Parquet shards of a directory, sorted by name."""
    files: list[str] = []
    nested = False
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if _is_hidden(entry.name):
            continue
        named = entry.name.lower().endswith(PARQUET_SUFFIXES)
        try:
            if entry.is_dir():
                nested = nested or any(
                    f.endswith(PARQUET_SUFFIXES) for _, _, fs in os.walk(entry.path) for f in fs
                )
                continue
            regular = entry.is_file()
        except OSError as exc:  # a symbolic link loop, an unreadable entry
            if named:
                raise SourceError(
                    f"cannot open dataset file {entry.path}: {exc.strerror}", entry.path
                ) from None
            continue
        if not regular:
            if named:  # a shard that vanished or is not a file: never silently skipped
                raise SourceError(_not_regular(entry.path), entry.path)
            continue
        if named or _has_magic(entry.path):
            files.append(os.path.abspath(entry.path))
    if not files:
        hint = (
            " (its subdirectories hold Parquet files: pass a glob such as "
            f"'{directory}/**/*.parquet')"
            if nested
            else ""
        )
        raise SourceError(f"directory {directory} holds no Parquet files{hint}", str(directory))
    return files


def _glob_files(pattern: str) -> list[str]:
    matches = sorted(globlib.glob(pattern, recursive=True))
    files = []
    for m in matches:
        if _is_hidden(os.path.basename(m)) or os.path.isdir(m):
            continue
        if not os.path.isfile(m):  # a FIFO, a device, a broken link: never silently skipped
            raise SourceError(_not_regular(m), m)
        files.append(os.path.abspath(m))
    if not files:
        raise SourceError(f"no Parquet files match the pattern {pattern!r}", pattern)
    return files


def resolve(source: SourceLike) -> list[str]:
    """Resolve a source into the ordered list of its Parquet shard paths.

    Args:
        source: One Parquet file; a directory of shards (sorted by name; hidden files,
            ``_SUCCESS``, ``*.crc`` and other non-Parquet files ignored); a glob pattern;
            or a list of files, kept in the given order.

    Returns:
        Absolute paths of the shards.

    Raises:
        SourceError: If a path does not exist, a directory holds no Parquet files, a glob
            matches nothing, or the list is empty.
    """
    if isinstance(source, str | os.PathLike):
        text = os.fspath(source)
        if not text:
            raise SourceError("the dataset source is an empty path", text)
        path = Path(text).expanduser()
        if path.is_dir():
            return _directory_files(path)
        if path.is_file():
            return [str(path.absolute())]
        if GLOB_CHARS & set(text):
            return _glob_files(str(path))
        if os.path.lexists(path):
            raise SourceError(_not_regular(str(path)), text)
        raise SourceError(f"dataset source {text} does not exist", text)
    if isinstance(source, bytes):
        raise SourceError("the dataset source must be a path, a glob or a list of paths, not bytes")
    items = list(source)
    if not items:
        raise SourceError("the dataset source is an empty list of files")
    files: list[str] = []
    for item in items:
        if not isinstance(item, str | os.PathLike):
            raise SourceError(
                f"the dataset source list holds {item!r}, which is not a path", str(item)
            )
        path = Path(os.fspath(item)).expanduser()
        if path.is_dir():
            files.extend(_directory_files(path))
        elif path.is_file():
            files.append(str(path.absolute()))
        elif os.path.lexists(path):
            raise SourceError(_not_regular(str(path)), str(path))
        else:
            raise SourceError(f"dataset file {os.fspath(item)} does not exist", os.fspath(item))
    return files


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
