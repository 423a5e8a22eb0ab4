"""``ParquetDataset``: a map-style torch Dataset over Parquet shards, read window by window."""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from torch.utils.data import Dataset

from . import query as querymod
from . import windows as win
from .cache import CacheStats, WindowCache
from .errors import ArgumentError
from .reader import WindowReader
from .source import Connection, Source, SourceLike

Row = dict[str, Any]


def default_duckdb_config() -> dict[str, Any]:
    """Return the DuckDB settings each process's database opens with.

    Insertion order is preserved (windows come back in file order without a sort), spills go
    to the system temporary directory (never next to the dataset), and no extension is
    auto-installed (nothing is downloaded).

    Returns:
        A DuckDB ``config`` mapping.
    """
    return {
        "preserve_insertion_order": True,
        "temp_directory": os.path.join(tempfile.gettempdir(), "undertale_duck"),
        "autoinstall_known_extensions": False,
        "threads": min(2, os.cpu_count() or 1),
    }


class ParquetDataset(Dataset[Row]):
    """A Parquet-backed dataset with random access through a byte-bounded window cache.

    Rows are read in *windows* (contiguous row ranges aligned to the shards' row groups), one
    DuckDB query per window, and windows are kept in an LRU cache of at most ``memory``
    megabytes per process. The shards are also attached as a DuckDB view named ``dataset``
    for :meth:`sql`.

    Args:
        source: A Parquet file, a directory of shards (sorted by name; hidden files,
            ``_SUCCESS``, ``*.crc`` and non-Parquet files ignored), a glob, or a list of files.
        memory: Cache limit in megabytes, per process.
        columns: Columns to keep (in this order); None keeps all.
        window_bytes: Target uncompressed bytes per window; by default a sixteenth of
            ``memory`` between 1 MiB and 64 MiB.
        duckdb_config: DuckDB settings overriding :func:`default_duckdb_config`.

    Raises:
        SourceError: If the source cannot be resolved or a shard's footer cannot be read
            (``NotParquetError``, ``CorruptShardError`` and ``ColumnError`` are subclasses).
        ArgumentError: If ``memory`` or ``window_bytes`` is not a sensible number.
    """

    def __init__(
        self,
        source: SourceLike,
        memory: int = 4096,
        *,
        columns: Sequence[str] | None = None,
        window_bytes: int | None = None,
        duckdb_config: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(memory, bool) or not isinstance(memory, int | float) or memory < 0:
            raise ArgumentError(f"memory must be a number of megabytes >= 0, got {memory!r}")
        if window_bytes is not None and (
            isinstance(window_bytes, bool) or not isinstance(window_bytes, int) or window_bytes < 1
        ):
            raise ArgumentError(f"window_bytes must be a positive integer, got {window_bytes!r}")
        self.memory = memory
        self.memory_bytes = int(memory * (1 << 20))
        if isinstance(columns, str):
            raise ArgumentError("columns must be a list of column names, not a single string")
        self._columns = None if columns is None else list(columns)
        self.window_bytes = window_bytes or win.default_window_bytes(self.memory_bytes)
        self.duckdb_config = {**default_duckdb_config(), **(duckdb_config or {})}
        self._open(source)

    def _open(self, source: SourceLike) -> None:
        self._spec = source
        self.source = Source(source, self._columns)
        self.windows = win.plan([s.row_groups for s in self.source.shards], self.window_bytes)
        self._starts = win.starts(self.windows)
        self._reader: WindowReader | None = None

    # ------------------------------------------------------------------ lazy process state
    @property
    def reader(self) -> WindowReader:
        """The process's window reader (connection and cache), created on first use."""
        if self._reader is None:
            self._reader = WindowReader(
                self.source,
                self.windows,
                WindowCache(self.memory_bytes),
                Connection(self.source.paths, self.source.columns, self.duckdb_config),
            )
        return self._reader

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_reader"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def refresh(self) -> None:
        """Reopen the dataset as it is on disk now (re-reading footers, emptying the cache).

        Raises:
            SourceError: If the source can no longer be resolved or read.
        """
        self.close()
        self._open(self._spec)

    def close(self) -> None:
        """Close this process's DuckDB connection and empty the cache (reopened on next use)."""
        if self._reader is not None:
            self._reader.connection.close()
            self._reader.cache.clear()
        self._reader = None

    # ------------------------------------------------------------------ metadata
    @property
    def columns(self) -> list[str]:
        """Names of the columns each row holds."""
        return list(self.source.columns)

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of a row (the first shard's, projected onto ``columns``)."""
        return self.source.schema

    @property
    def shards(self) -> list[str]:
        """Paths of the shards, in dataset order."""
        return self.source.paths

    @property
    def cache_stats(self) -> CacheStats:
        """Hit, miss and eviction counts and bytes held by this process's cache."""
        return self.reader.cache.stats

    def locate(self, index: int) -> tuple[str, int]:
        """Return the shard and local row number of a global index.

        Args:
            index: A global row index (negative counts from the end).

        Returns:
            ``(shard path, local row)``.

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
        """
        i = win.normalize_index(index, len(self))
        w = self.windows[win.locate(self._starts, i)]
        return self.source.shards[w.shard].path, w.start + (i - w.offset)

    def __len__(self) -> int:
        return self.source.rows

    def __repr__(self) -> str:
        return (
            f"ParquetDataset({self.source.spec!r}, memory={self.memory}, rows={len(self)}, "
            f"shards={len(self.source.shards)}, windows={len(self.windows)})"
        )

    # ------------------------------------------------------------------ rows
    def __getitem__(self, index: int) -> Row:
        """Return one row as ``{column: value}`` with the values pyarrow's ``as_py()`` gives.

        Args:
            index: Global row index; negative indices count from the end.

        Returns:
            The row.

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
            SourceError: If the shard changed on disk or cannot be decoded.
        """
        i = win.normalize_index(index, len(self))
        position = win.locate(self._starts, i)
        table = self.reader.window(position)
        rows: list[Row] = table.slice(i - self.windows[position].offset, 1).to_pylist()
        return rows[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Row]:
        """Return many rows, reading each window they touch once (torch's batched fetch).

        Args:
            indices: Global row indices, in any order, repeats allowed.

        Returns:
            The rows in the order of ``indices``.

        Raises:
            IndexError: If an index is out of range.
            TypeError: If an index is not an integer.
            SourceError: If a shard changed on disk or cannot be decoded.
        """
        n = len(self)
        groups: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for out, index in enumerate(indices):
            i = win.normalize_index(index, n)
            groups[win.locate(self._starts, i)].append((out, i))
        result: list[Row | None] = [None] * len(indices)
        for position, members in groups.items():
            table = self.reader.window(position)
            offset = self.windows[position].offset
            local = pa.array([i - offset for _, i in members], type=pa.int64())
            for (out, _), row in zip(members, table.take(local).to_pylist(), strict=True):
                result[out] = row
        return [r for r in result if r is not None]

    # ------------------------------------------------------------------ SQL
    def sql(self, query: str, params: querymod.Params = None) -> pa.Table:
        """Run read-only SQL in which ``dataset`` is the view over every shard.

        Args:
            query: SQL text, e.g. ``"SELECT label, count(*) FROM dataset GROUP BY label"``.
            params: Values for ``$name`` (mapping) or ``?`` (sequence) placeholders.

        Returns:
            The result as an Arrow table.

        Raises:
            QueryError: If the SQL fails.
            ReadOnlyError: If the SQL would write or change state (``COPY``, ``ATTACH`` ...).
        """
        return querymod.run(self.reader.connection.cursor(), query, params)
