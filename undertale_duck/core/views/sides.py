"""A view's side tables: the files or Arrow tables its query may join, checked and fingerprinted."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

import duckdb
import pyarrow as pa

from ...errors import ArgumentError
from ..runtime import duckdb_path, sqlfiles

SideTable: TypeAlias = str | os.PathLike[str] | pa.Table


@dataclass(frozen=True)
class Side:
    """A side table a view may join: a Parquet or CSV file, or an Arrow table.

    Attributes:
        name: The name the query uses.
        path: The file, when the table is read from one.
        table: The Arrow table, when one was passed.
        fingerprint: What identifies its content (file identity, or the table's hash).
    """

    name: str
    path: str | None
    table: pa.Table | None
    fingerprint: str

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make the table visible to queries on ``con`` under :attr:`name`."""
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
        template = "side_csv" if self.path.lower().endswith((".csv", ".tsv")) else "side_parquet"
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
    for name, value in sorted((tables or {}).items()):
        if not isinstance(name, str) or not name or name.lower() == "dataset":
            raise ArgumentError(f"tables= names must be non-empty and not 'dataset', got {name!r}")
        if isinstance(value, pa.Table):
            digest = hashlib.sha256()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, value.schema) as writer:
                writer.write_table(value)
            digest.update(sink.getvalue().to_pybytes())
            out.append(Side(name, None, value, f"arrow:{digest.hexdigest()}"))
            continue
        if not isinstance(value, str | os.PathLike):
            raise ArgumentError(
                f"tables[{name!r}] must be a path to a Parquet or CSV file or a pyarrow.Table, "
                f"got {type(value).__name__}"
            )
        path = os.path.abspath(os.fspath(value))
        try:
            st = os.stat(path)
        except OSError as exc:
            raise ArgumentError(f"tables[{name!r}]: cannot read {path}: {exc.strerror}") from None
        out.append(Side(name, path, None, f"file:{path}:{st.st_size}:{st.st_mtime_ns}"))
    return tuple(out)
