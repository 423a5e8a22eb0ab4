"""A view's side tables: the files or Arrow tables its query may join, checked and fingerprinted."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

import duckdb
import pyarrow as pa

from ...common.text import first_line, not_utf8
from ...errors import ArgumentError, ShardChangedError, SourceError
from ..bounds import RepeatedValues, arrow_values, csv_values
from ..runtime import duckdb_path, sqlfiles
from ..source import Shard, read_footer

SideTable: TypeAlias = str | os.PathLike[str] | pa.Table

#: Names a side table may not take: the dataset and the view itself (any case: DuckDB's
#: identifiers are case-insensitive).
RESERVED = frozenset({"dataset", "dataset_view"})
#: The Parquet magic bytes, at both ends of a Parquet file.
_MAGIC = b"PAR1"
#: File suffixes read as CSV (anything else must be Parquet).
CSV_SUFFIXES = (".csv", ".tsv")


def _identity(path: str, st: os.stat_result) -> str:
    """A file's identity: path, size, mtime, inode and ctime (a rename or rewrite changes it)."""
    return f"file:{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}"


@dataclass(frozen=True)
class Side:
    """A side table a view may join: a Parquet or CSV file, or an Arrow table.

    Attributes:
        name: The name the query uses.
        path: The file, when the table is read from one.
        table: The Arrow table, when one was passed.
        fingerprint: What identifies its content (file identity, or the table's hash).
        footer: A Parquet file's footer, as a shard's (its string columns are bounded by the
            memory budget like the shards').
        values: A CSV file's or an Arrow table's largest values, bounded by the memory
            budget as a join may repeat them (:mod:`.bounds.repeated`).
    """

    name: str
    path: str | None
    table: pa.Table | None
    fingerprint: str
    footer: Shard | None = field(default=None, compare=False, repr=False)
    values: RepeatedValues | None = field(default=None, compare=False, repr=False)

    def check_unchanged(self) -> None:
        """Check that a file side table is still the file that was fingerprinted.

        Raises:
            ShardChangedError: If it was changed, replaced or removed (its rows could make
                the view's index, and rows served by it, wrong).
        """
        if self.path is None:
            return
        try:
            now = _identity(self.path, os.stat(self.path))
        except OSError as exc:
            now = f"gone ({exc.strerror})"
        if now != self.fingerprint:
            raise ShardChangedError(
                f"side table {self.name!r} ({self.path}) changed on disk after the view was "
                "indexed; call refresh() to index the view again",
                self.path,
            )

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make the table visible to queries on ``con`` under :attr:`name`.

        Raises:
            ArgumentError: If the file cannot be read as its kind (Parquet or CSV).
        """
        try:
            self._register(con)
        except duckdb.Error as exc:
            kind = "CSV" if self.path and self.path.lower().endswith(CSV_SUFFIXES) else "Parquet"
            raise ArgumentError(
                f"tables[{self.name!r}]: {self.path or 'the Arrow table'} cannot be read as a "
                f"{kind} side table: {first_line(exc)}"
            ) from None

    def _register(self, con: duckdb.DuckDBPyConnection) -> None:
        if self.table is not None:
            con.register("__ud_side_arrow", self.table)
            try:
                con.execute(
                    sqlfiles.render("side_arrow", table=sqlfiles.quote_identifier(self.name))
                )
            finally:
                con.unregister("__ud_side_arrow")
            return
        assert self.path is not None
        template = "side_csv" if self.path.lower().endswith(CSV_SUFFIXES) else "side_parquet"
        con.execute(
            sqlfiles.render(
                template,
                table=sqlfiles.quote_identifier(self.name),
                path=sqlfiles.quote_literal(duckdb_path(self.path)),
            )
        )


def side_tables(tables: Mapping[str, SideTable] | None) -> tuple[Side, ...]:
    """Check the ``tables=`` argument of a view and fingerprint each table.

    Args:
        tables: ``{name: path to a Parquet/CSV file, or a pyarrow.Table}``.

    Returns:
        One :class:`Side` per table, sorted by name.

    Raises:
        ArgumentError: If a name or a table is not usable.
    """
    out = []
    seen: dict[str, str] = {}
    for name in tables or {}:
        if not isinstance(name, str):  # also before sorting: names of mixed types do not sort
            raise ArgumentError(
                f"tables= names are strings (the names the query uses), got {name!r}"
            )
    for name, value in sorted((tables or {}).items()):
        if not name or name.lower() in RESERVED:
            raise ArgumentError(
                "tables= names must be non-empty and not 'dataset' or 'dataset_view' (in any "
                f"case), got {name!r}"
            )
        if "\x00" in name:  # no DuckDB identifier can hold one (quoting it would fail later)
            raise ArgumentError(
                f"tables= name {name!r} holds a NUL character, which no SQL name can hold; "
                "give the table another name"
            )
        if name.lower() in seen:  # one table in DuckDB: the last registered would serve both
            raise ArgumentError(
                f"tables= names {seen[name.lower()]!r} and {name!r} differ only in case, and "
                "DuckDB's names are case-insensitive; give the tables distinct names"
            )
        seen[name.lower()] = name
        if isinstance(value, pa.Table):
            digest = hashlib.sha256()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, value.schema) as writer:
                writer.write_table(value)
            digest.update(sink.getvalue().to_pybytes())
            out.append(Side(name, None, value, f"arrow:{digest.hexdigest()}",
                            values=arrow_values(name, value)))
            continue
        if not isinstance(value, str | os.PathLike):
            raise ArgumentError(
                f"tables[{name!r}] must be a path to a Parquet or CSV file or a pyarrow.Table, "
                f"got {type(value).__name__}"
            )
        path = os.path.abspath(os.fspath(value))
        st = _checked_file(name, path)
        identity = _identity(path, st)
        if path.lower().endswith(CSV_SUFFIXES):
            out.append(Side(name, path, None, identity, values=csv_values(name, path, st.st_size)))
            continue
        try:
            footer = read_footer(path)
        except SourceError as exc:
            raise ArgumentError(
                f"tables[{name!r}]: {path} cannot be read as a Parquet side table: {exc}"
            ) from None
        out.append(Side(name, path, None, identity, footer))
    return tuple(out)


def _checked_file(name: str, path: str) -> os.stat_result:
    """Check that a side table's file is a regular, readable Parquet (or CSV) file.

    Special files (a FIFO, a device, a directory) are refused from their status alone,
    without opening them (a FIFO would block); the file is opened without blocking.

    Returns:
        The file's status.

    Raises:
        ArgumentError: If its path is not UTF-8, or it is missing, not a regular file,
            unreadable, or (not named ``.csv``/``.tsv``) not a Parquet file.
    """
    where = f"tables[{name!r}]: {path}"
    if not_utf8(path) is not None:  # else pyarrow calls the file corrupt, which it is not
        raise ArgumentError(
            f"tables[{name!r}]: '{not_utf8(path)}' has a path that is not valid UTF-8, which "
            "DuckDB and pyarrow cannot open: rename it (or the directory holding it)"
        )
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ArgumentError(f"{where} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ArgumentError(f"{where} is {kind}; pass a Parquet or CSV file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            now = os.fstat(fd)
            if not stat.S_ISREG(now.st_mode):  # swapped since the stat
                raise ArgumentError(f"{where} is not a regular file; pass a Parquet or CSV file")
            head = os.pread(fd, 4, 0)
            tail = os.pread(fd, 4, max(now.st_size - 4, 0))
        finally:
            os.close(fd)
    except OSError as exc:
        raise ArgumentError(f"{where} cannot be read: {exc.strerror}") from None
    if not path.lower().endswith(CSV_SUFFIXES) and (head != _MAGIC or tail != _MAGIC):
        raise ArgumentError(
            f"{where} is not a Parquet file (it lacks the Parquet magic bytes); pass a "
            "Parquet file, or a CSV file named .csv or .tsv"
        )
    return now
