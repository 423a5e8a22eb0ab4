"""Read windows through ``sql/read_window.sql`` into Arrow tables, through the window cache."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from . import sqlfiles
from .cache import WindowCache
from .errors import CorruptShardError, ShardChangedError, SourceError
from .source import Connection, Source
from .windows import Window


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Give a DuckDB result the Arrow types pyarrow reads from the footer, where they differ.

    DuckDB returns, for example, plain strings for dictionary-encoded columns and its own
    integer types for unsigned or narrow Parquet types; casting back keeps ``as_py()`` values
    identical to pyarrow's. Dictionary types are decoded (values are what ``as_py`` sees).

    Args:
        table: A window as DuckDB returned it, columns in ``schema`` order.
        schema: The dataset's reference schema.

    Returns:
        The table with each column cast to the reference type where that cast is safe.
    """
    columns = []
    fields = []
    changed = False
    for column, field in zip(table.columns, schema, strict=True):
        target = field.type
        if pa.types.is_dictionary(target):
            target = target.value_type
        if column.type != target:
            try:
                column = column.cast(target)
                changed = True
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        columns.append(column)
        fields.append(pa.field(field.name, column.type, nullable=field.nullable))
    if not changed:
        return table
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


class WindowReader:
    """Serve windows as Arrow tables: from the cache, or by one DuckDB query each.

    Args:
        source: The dataset's shards and schema.
        windows: The window plan.
        cache: Where window tables are kept.
        connection: The process's DuckDB connection holder.
    """

    def __init__(
        self,
        source: Source,
        windows: Sequence[Window],
        cache: WindowCache,
        connection: Connection,
    ) -> None:
        self.source = source
        self.windows = windows
        self.cache = cache
        self.connection = connection
        self._sql = sqlfiles.render("read_window", columns=sqlfiles.column_list(source.columns))

    def window(self, position: int) -> pa.Table:
        """Return the rows of one window, reading it unless it is cached.

        Args:
            position: The window's position in the plan.

        Returns:
            An Arrow table of the window's rows in order.

        Raises:
            ShardChangedError: If the shard changed on disk since it was opened.
            CorruptShardError: If the shard's data cannot be decoded.
            SourceError: If the shard lacks a column of the dataset.
        """
        table = self.cache.get(position)
        if table is None:
            table = self.read(position)
            self.cache.put(position, table)
        return table

    def read(self, position: int) -> pa.Table:
        """Read one window from disk, bypassing the cache.

        Args:
            position: The window's position in the plan.

        Returns:
            The window's rows as an Arrow table.

        Raises:
            ShardChangedError: If the shard changed on disk since it was opened.
            CorruptShardError: If the shard's data cannot be decoded.
            SourceError: If the shard lacks a column of the dataset.
        """
        win = self.windows[position]
        shard = self.source.shards[win.shard]
        shard.check_unchanged()
        params = {"path": shard.path, "start": win.start, "stop": win.stop}
        try:
            table = self.connection.cursor().sql(self._sql, params=params).to_arrow_table()
        except duckdb.BinderException as exc:
            shard.check_unchanged()
            raise SourceError(
                f"shard {shard.path} does not match the dataset's columns "
                f"{list(self.source.columns)} (schema drift between shards): {_first_line(exc)}",
                shard.path,
            ) from None
        except duckdb.Error as exc:
            shard.check_unchanged()
            raise CorruptShardError(
                f"shard {shard.path} is corrupt: rows {win.offset}..{win.end - 1} "
                f"(local rows {win.start}..{win.stop - 1}) cannot be read: {_first_line(exc)}",
                shard.path,
                (win.offset, win.end),
            ) from None
        shard.check_unchanged()
        if table.num_rows != win.rows:
            raise CorruptShardError(
                f"shard {shard.path} returned {table.num_rows} rows for local rows "
                f"{win.start}..{win.stop - 1} where its footer promises {win.rows}",
                shard.path,
                (win.offset, win.end),
            )
        return conform(table, self.source.schema)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["ShardChangedError", "WindowReader", "conform"]
