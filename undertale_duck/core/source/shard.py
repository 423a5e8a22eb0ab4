"""One Parquet shard as its footer describes it: read once, checked against its file."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from ...errors import (
    ArgumentError,
    ColumnError,
    NotParquetError,
    ShardChangedError,
    SourceError,
)
from ..parquet import decoded_sizes, footers
from .local import MAGIC
from .windows import planned

__all__ = ["Shard", "check_column_names", "read_footer", "reference_schema"]


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
        ctime_ns: The file's status-change time when the footer was read: part of the
            identity every cached artefact (view index, kept weight, window file) is keyed
            by, so a file rewritten in place with its size and mtime restored is weighed
            and indexed anew. Reads compare the footer when it moved (a ``chmod`` is no
            change of rows; a rewrite in place with its mtime put back is).
        footer_xxh3: The XXH3-64 of the footer bytes when they were read (0: unknown).
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
    ctime_ns: int = field(default=0, compare=False, repr=False)
    footer_xxh3: int = field(default=0, compare=False, repr=False)

    @property
    def stable_path(self) -> str:
        """The path as saved states name the file (a remote shard's without its signature)."""
        return self.path

    @property
    def identity(self) -> list[object]:
        """What a cached artefact derived from this file is keyed by (JSON values)."""
        return [self.path, self.size, self.mtime_ns, list(self.inode), self.ctime_ns,
                getattr(self, "version", None)]

    @property
    def planned_groups(self) -> list[tuple[int, int]]:
        """``(rows, bytes)`` of each row group as windows are cut (:func:`windows.planned`)."""
        return planned(self.row_groups, self.decoded)

    def local(
        self,
        groups: Sequence[int] | None = None,
        columns: Sequence[str] | None = None,
        *,
        behind: bool = True,
    ) -> contextlib.AbstractContextManager[Shard]:
        """The local file DuckDB reads for this shard: itself (a remote shard's cached copy).

        Args:
            groups: The row groups the read needs (None: all); a remote shard not cached
                fetches only these by range requests.
            columns: The top-level columns the read needs (None: all).
            behind: Whether a remote shard read by ranges may then download whole in the
                background (for later reads of it).

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
        if self.footer_xxh3 and self.ctime_ns and st.st_ctime_ns != self.ctime_ns:
            self._check_footer(st)

    def _check_footer(self, st: os.stat_result) -> None:
        """Compare the footer of a file whose status changed (once per status-change time)."""
        seen = (self.path, st.st_ino, st.st_ctime_ns)
        with _footers_seen_lock:
            if _footers_seen.get(seen) == self.footer_xxh3:
                return
        now = footers.footer_digest(footers.footer_bytes(self.path, st.st_size))
        if now != self.footer_xxh3:
            raise ShardChangedError(
                f"shard {self.path} changed on disk after the dataset was opened (rewritten "
                "in place: same size and modification time, another footer); call "
                "refresh() to reopen the dataset as it is now",
                self.path,
            )
        with _footers_seen_lock:
            _footers_seen[seen] = now
            while len(_footers_seen) > _FOOTERS_SEEN:
                _footers_seen.pop(next(iter(_footers_seen)))


#: Footers found unchanged after a file's status changed (a chmod), by (path, inode,
#: ctime): compared once, not at every read.
_footers_seen: dict[tuple[str, int, int], int] = {}
_footers_seen_lock = threading.Lock()
_FOOTERS_SEEN = 4096


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
    key = footers.file_key(path, st)
    # a footer parsed before from this version of the file (a dataset opened again) is
    # checked again below, not parsed again
    meta = footers.kept_metadata(key)
    if meta is None:
        try:
            meta = footers.read_metadata(path)
        except (OSError, pa.ArrowException, ValueError) as exc:
            footers.check_encryption(path, None, st.st_size)
            raise footers.unreadable_footer(path, exc) from None
    # read once: the encryption check walks them, and their digest is kept (_check_footer)
    tail = footers.footer_bytes(path, st.st_size)
    footers.check_encryption(path, meta, st.st_size, key=key, footer=tail)
    schema = footers.arrow_schema(path, meta)
    groups = footers.checked_row_groups(path, meta, st.st_size)
    decoded = decoded_sizes(meta)
    # the read path checks this parse rather than parsing again (a footer of 100,000 row
    # groups is 198 MiB in pyarrow); kept only while the file is the version parsed
    footers.keep_metadata(key, meta)
    return Shard(
        path=path,
        rows=sum(rows for rows, _ in groups),
        row_groups=groups,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        schema=schema,
        created_by=str(meta.created_by or ""),
        inode=(st.st_dev, st.st_ino),
        decoded=decoded,
        ctime_ns=st.st_ctime_ns,
        footer_xxh3=footers.footer_digest(tail),
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
            of a shard, has an empty name or one holding a NUL character, or a shard has a
            column named ``file_row_number``.
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
            if "\x00" in name and name in columns:
                raise ColumnError(
                    f"shard {shard.path} has a column named {name!r}, holding a NUL character, "
                    "which no SQL identifier may hold; pass columns=[...] without it",
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
            f"columns: column(s) {missing} not found in {shards[0].path}; choose from "
            f"its columns {schema.names}",
            shards[0].path,
            missing,
        )
    return pa.schema([schema.field(c) for c in cols], metadata=schema.metadata)
