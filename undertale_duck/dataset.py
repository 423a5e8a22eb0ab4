"""``ParquetDataset``: a map-style torch Dataset over Parquet shards, read window by window."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableSequence, Sequence
from typing import Any, Literal, overload

import numpy as np
import pyarrow as pa
import torch
from pydantic import BaseModel
from torch.utils.data import Dataset

from . import checks as checksmod
from . import query as querymod
from . import windows as win
from .cache import CacheStats
from .errors import ArgumentError, QueryError, SchemaError
from .reader import BudgetCache, WindowReader
from .source import (
    Connection,
    Source,
    SourceLike,
    default_duckdb_config,
    worker_duckdb_config,
)

Row = dict[str, Any]

#: What ``ParquetDataset(format=...)`` accepts.
Format = Literal["python", "numpy", "torch"]
FORMATS: tuple[str, ...] = ("python", "numpy", "torch")


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
        format: How row values are returned. ``"python"`` (default): exactly pyarrow's
            ``as_py()`` values, as the seed did. ``"numpy"``: numeric columns become numpy
            scalars and lists of numbers 1-d numpy arrays; ``"torch"``: the same as tensors
            (0-d for scalars). Both are built column-wise from one Arrow slice or take per
            window, without Python lists; other types (strings, structs, nested lists, lists
            holding nulls) keep their ``as_py()`` values and nulls are ``None``. Arrays and
            tensors never share memory with the cache.
        read_ahead: Read the next window in a background thread while one is consumed
            (the next in the :meth:`prefetch` order, else the following window when access
            is sequential), within the ``memory`` budget.

    Raises:
        SourceError: If the source cannot be resolved or a shard's footer cannot be read
            (``NotParquetError``, ``CorruptShardError`` and ``ColumnError`` are subclasses).
        ArgumentError: If ``memory`` or ``window_bytes`` is not a sensible number, or
            ``format`` is not one of ``"python"``, ``"numpy"``, ``"torch"``.
    """

    def __init__(
        self,
        source: SourceLike,
        memory: int = 4096,
        *,
        columns: Sequence[str] | None = None,
        window_bytes: int | None = None,
        duckdb_config: Mapping[str, Any] | None = None,
        format: Format = "python",
        read_ahead: bool = True,
    ) -> None:
        if format not in FORMATS:
            raise ArgumentError(f"format must be one of {list(FORMATS)}, got {format!r}")
        self.format: Format = format
        self.read_ahead = bool(read_ahead)
        self._order: list[int] | None = None
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
        self._user_config = frozenset(duckdb_config or {})
        self._open(source)

    def _open(self, source: SourceLike) -> None:
        self._spec = source
        self.source = Source(source, self._columns)
        self.windows = win.plan([s.row_groups for s in self.source.shards], self.window_bytes)
        self._starts = win.starts(self.windows)
        self._starts_array = np.asarray(self._starts, dtype=np.int64)
        self._reader: WindowReader | None = None

    # ------------------------------------------------------------------ lazy process state
    @property
    def reader(self) -> WindowReader:
        """The process's window reader (connection and cache), created on first use."""
        if self._reader is None:
            config = dict(self.duckdb_config)
            info = torch.utils.data.get_worker_info()
            if info is not None:  # a DataLoader worker process: share the cores and memory
                tuned = worker_duckdb_config(info.num_workers)
                config.update({k: v for k, v in tuned.items() if k not in self._user_config})
            self._reader = WindowReader(
                self.source,
                self.windows,
                BudgetCache(self.memory_bytes),
                Connection(self.source.paths, self.source.columns, config),
                read_ahead=self.read_ahead,
            )
            if self._order:
                self._reader.set_order(self._order)
        return self._reader

    def prefetch(self, windows: Sequence[int] | None) -> None:
        """Tell this process's reader the order in which it will consume windows.

        A read-ahead hint for locality-aware orders that are not sequential (a sampler that
        shuffles windows): while window ``windows[k]`` is consumed, ``windows[k + 1]`` is read
        in the background, and ``windows[0]`` is read right away. Positions index
        :attr:`windows` (see :meth:`window_of`). The hint is kept when the dataset is pickled
        to workers; call it again to replace it, or with None to clear it. Without a hint,
        sequential access is detected by itself.

        Args:
            windows: Window positions in the order they will be consumed, or None.

        Raises:
            IndexError: If a position is outside the window plan.
        """
        order = None if windows is None else [int(p) for p in windows]
        bad = [p for p in order or [] if not 0 <= p < len(self.windows)]
        if bad:
            raise IndexError(
                f"window position {bad[0]} out of range for {len(self.windows)} windows"
            )
        self._order = order
        if self._reader is not None or order:
            self.reader.set_order(order)

    def window_of(self, index: int) -> int:
        """Return the position in :attr:`windows` of the window holding row ``index``.

        Args:
            index: A global row index (negative counts from the end).

        Returns:
            The window's position.

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
        """
        return win.locate(self._starts, win.normalize_index(index, len(self)))

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
            self._reader.stop_read_ahead()
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
        local = i - self.windows[position].offset
        return _select(table, slice(local, local + 1), self.format)[0]

    def __getitems__(self, indices: Sequence[int]) -> MutableSequence[Row]:
        """Return many rows, reading each window they touch once (torch's batched fetch).

        Args:
            indices: Global row indices, in any order, repeats allowed.

        Returns:
            The rows in the order of ``indices``: a list in the ``python`` format; in the
            ``numpy``/``torch`` formats a :class:`RowBatch` (a list-like sequence that keeps
            the batch column-wise for :func:`undertale_duck.collate`).

        Raises:
            IndexError: If an index is out of range.
            TypeError: If an index is not an integer.
            SourceError: If a shard changed on disk or cannot be decoded.
        """
        index = self._normalize(indices)
        if len(index) == 0:
            return []
        positions = np.searchsorted(self._starts_array, index, side="right") - 1
        if positions[0] == positions[-1] and (positions == positions[0]).all():
            return self._window_part(int(positions[0]), index)
        order = np.argsort(positions, kind="stable")
        cuts = np.flatnonzero(np.diff(positions[order])) + 1
        groups = np.split(order, cuts)
        last = len(groups) - 1
        parts = [
            self._window_part(
                int(positions[m[0]]), index[m], advance=k == last, first=int(positions[order[0]])
            )
            for k, m in enumerate(groups)
        ]
        return _merge(parts, np.argsort(order, kind="stable"))

    def _normalize(self, indices: Sequence[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Check and normalize many indices at once (negative ones count from the end)."""
        n = len(self)
        if isinstance(indices, torch.Tensor):
            indices = indices.tolist()
        array = np.asarray(indices)
        if array.ndim != 1 or array.dtype.kind not in "iu":
            return np.fromiter(
                (win.normalize_index(i, n) for i in indices), dtype=np.int64, count=len(indices)
            )
        index = array.astype(np.int64, copy=False)
        if index.size and (index.min() < -n or index.max() >= n):
            bad = next(int(i) for i in index if not -n <= i < n)
            raise IndexError(f"dataset index {bad} out of range for {n} rows")
        return np.where(index < 0, index + n, index)

    def _window_part(
        self,
        position: int,
        index: np.ndarray[Any, np.dtype[np.int64]],
        *,
        advance: bool = True,
        first: int | None = None,
    ) -> MutableSequence[Row]:
        """The rows at global ``index`` (all in window ``position``): one slice or one take."""
        table = self.reader.window(position, advance=advance, first=first)
        local = index - self.windows[position].offset
        start = int(local[0])
        if int(local[-1]) - start == len(local) - 1 and (
            len(local) < 2 or bool((np.diff(local) == 1).all())
        ):
            return _select(table, slice(start, start + len(local)), self.format)
        return _select(table, local, self.format)

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
            ShardChangedError: If a shard changed on disk since the dataset was opened
                (checked before and after the query, so no answer mixes two versions).
        """
        self.source.check_unchanged()
        try:
            result = querymod.run(self.reader.connection.cursor(), query, params)
        except QueryError:
            self.source.check_unchanged()  # a shard changing mid-query is the real cause
            raise
        self.source.check_unchanged()
        return result

    # ------------------------------------------------------------------ validation
    def report(self, schema: type[BaseModel]) -> checksmod.ValidationReport:
        """Check every shard against a schema and return the report (never raises for data).

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.

        Returns:
            A ``ValidationReport``: one ``CheckResult`` per check, with counts and examples.

        Raises:
            ArgumentError: If ``schema`` is not a pydantic model class.
        """
        return checksmod.run(
            schema,
            self.source.shards,
            self.reader.connection.cursor(),
            source=str(self.source.spec),
        )

    def validate(self, schema: type[BaseModel]) -> None:
        """Validate every shard of this dataset against a schema.

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.

        Raises:
            SchemaError: If any check fails; the message lists the failed checks with their
                counts and ``.report`` holds the full ``ValidationReport``.
            ArgumentError: If ``schema`` is not a pydantic model class.
        """
        result = self.report(schema)
        if not result.passed:
            raise SchemaError(f"dataset does not conform: {result.summary()}", report=result)


# ---------------------------------------------------------------------- Arrow -> rows

_NUMERIC = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)


def _is_numeric(dtype: pa.DataType) -> bool:
    return any(check(dtype) for check in _NUMERIC)


class RowBatch(MutableSequence[Row]):
    """The rows ``__getitems__`` returns in the ``numpy`` and ``torch`` formats.

    A mutable sequence of row dicts (it behaves like a list and compares equal to one) that
    holds the batch column-wise: numeric columns as one array or tensor each (rows along
    the first axis). The row dicts are only built when the rows are first accessed, so
    :func:`undertale_duck.collate` turns an untouched batch into tensors without any per-row
    work; once rows are accessed, each row's numeric values are views of the batched ones.

    Args:
        names: Column names, in order.
        length: Number of rows.
        whole: Batched numeric columns (numpy arrays or tensors).
        values: Per-row values of the other columns.
    """

    def __init__(
        self, names: list[str], length: int, whole: dict[str, Any], values: dict[str, list[Any]]
    ) -> None:
        self._names = names
        self._length = length
        self._whole = whole
        self._values = values
        self._rows: list[Row] | None = None
        self._built: dict[str, list[Any]] = {}

    # -------------------------------------------------------------- columnar access
    def keys(self) -> list[str]:
        """Column names of the rows."""
        return list(self._names)

    @property
    def materialized(self) -> bool:
        """Whether the row dicts have been built (rows were accessed)."""
        return self._rows is not None

    def batched(self, key: str) -> Any | None:
        """Return column ``key`` as one array or tensor, or None if it has none.

        None also when the rows were changed since: a row's value for ``key`` is no longer
        the view of the batched column it was built as.

        Args:
            key: A column name.

        Returns:
            A numpy array or tensor with one row per row of the batch, or None.
        """
        whole = self._whole.get(key)
        if whole is None or self._rows is None:
            return whole
        built = self._built.get(key)
        if built is None or len(built) != len(self._rows):
            return None
        for row, value in zip(self._rows, built, strict=True):
            if row.get(key, None) is not value:
                return None
        return whole

    def column(self, key: str) -> list[Any]:
        """Return the rows' values of column ``key`` (without building the row dicts).

        Args:
            key: A column name.

        Returns:
            One value per row.

        Raises:
            KeyError: If a row has no such column.
        """
        if self._rows is not None:
            return [row[key] for row in self._rows]
        if key in self._values:
            return self._values[key]
        return self._split(key)

    def _split(self, key: str) -> list[Any]:
        whole = self._whole[key]
        return list(whole.unbind(0)) if isinstance(whole, torch.Tensor) else list(whole)

    @property
    def rows(self) -> list[Row]:
        """The row dicts (built on first access)."""
        if self._rows is None:
            columns = []
            for key in self._names:
                if key in self._values:
                    columns.append(self._values[key])
                else:
                    self._built[key] = self._split(key)
                    columns.append(self._built[key])
            names = self._names
            rows = [dict(zip(names, vals, strict=True)) for vals in zip(*columns, strict=True)]
            self._rows = rows if columns else [{} for _ in range(self._length)]
        return self._rows

    # -------------------------------------------------------------- list behaviour
    def __len__(self) -> int:
        return self._length if self._rows is None else len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        return self.rows[index]

    @overload
    def __setitem__(self, index: int, value: Row) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Row]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        self.rows[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self.rows[index]

    def insert(self, index: int, value: Row) -> None:
        """Insert a row before ``index`` (as ``list.insert``)."""
        self.rows.insert(index, value)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowBatch):
            return self.rows == other.rows
        if isinstance(other, list):
            return self.rows == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RowBatch({self.rows!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_row_batch, (self.rows,))


def _row_batch(rows: list[Row]) -> list[Row]:
    return rows


Selection = slice | np.ndarray[Any, np.dtype[np.int64]]


def _part(data: pa.Table | pa.ChunkedArray, sel: Selection) -> Any:
    if isinstance(sel, slice):
        return data.slice(sel.start, sel.stop - sel.start)
    return data.take(pa.array(sel, type=pa.int64()))


def _select(table: pa.Table, sel: Selection, fmt: Format) -> MutableSequence[Row]:
    """Rows ``sel`` (a slice or local indices) of a window, converted column by column."""
    names = table.column_names
    if fmt == "python":
        part = _part(table, sel)
        columns = [part.column(i).to_pylist() for i in range(part.num_columns)]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
    whole: dict[str, Any] = {}
    values: dict[str, list[Any]] = {}
    length = sel.stop - sel.start if isinstance(sel, slice) else len(sel)
    for name, chunked in zip(names, table.columns, strict=True):
        converted = _gather(chunked, sel, fmt)
        if converted is None:
            converted = _convert(_part(chunked, sel), fmt)
        if isinstance(converted, list):
            values[name] = converted
        else:
            whole[name] = converted
    return RowBatch(list(names), length, whole, values)


def _gather(chunked: pa.ChunkedArray, sel: Selection, fmt: Format) -> Any | None:
    """Numbers and equal-length lists of numbers straight from the window's buffers, or None.

    Arrow's ``take`` on list columns is slow (it takes every list element one by one); a
    numpy gather on the window's values copies just the selected rows.
    """
    if chunked.num_chunks != 1:
        return None
    array = chunked.chunk(0)
    dtype = array.type
    if array.null_count or pa.types.is_boolean(dtype):
        return None
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        data = np.array(array.to_numpy(zero_copy_only=False)[sel], copy=True)
        return _to_tensor(data) if fmt == "torch" else data
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return None
    child = dtype.value_type
    if not (pa.types.is_integer(child) or pa.types.is_floating(child)):
        return None
    offsets = array.offsets.to_numpy()
    if isinstance(sel, slice):  # only the selected rows' lengths matter
        bounds = offsets[sel.start:sel.stop + 1]
        if len(bounds) < 2:
            return None
        width = int(bounds[1] - bounds[0])
        if not (np.diff(bounds) == width).all():
            return None
        flat = array.values.slice(int(bounds[0]), int(bounds[-1] - bounds[0]))
        if flat.null_count:
            return None
        matrix = flat.to_numpy(zero_copy_only=False).reshape(len(bounds) - 1, width)
        data = np.array(matrix, copy=True)
        return _to_tensor(data) if fmt == "torch" else data
    if len(sel) == 0 or array.values.null_count:
        return None
    # Row k of a (rows, width) view of the values is right if row k starts at base + k*width
    # and holds width values: checked for the selected rows only (O(batch), not O(window)).
    base = int(offsets[0])
    starts = offsets[sel]
    width = int(offsets[sel[0] + 1] - starts[0])
    rows = len(array)
    if (
        int(offsets[-1]) - base != rows * width
        or not (offsets[sel + 1] - starts == width).all()
        or not (starts - base == sel * width).all()
    ):
        return None
    values = array.values.to_numpy(zero_copy_only=False)[base:base + rows * width]
    data = np.array(values.reshape(rows, width)[sel], copy=True)
    return _to_tensor(data) if fmt == "torch" else data


def _merge(
    parts: list[MutableSequence[Row]], back: np.ndarray[Any, np.dtype[np.int64]]
) -> MutableSequence[Row]:
    """Join per-window rows (in window order) and put them back in request order."""
    if not all(isinstance(p, RowBatch) for p in parts):
        rows = [r for p in parts for r in p]
        return [rows[k] for k in back.tolist()]
    batches: list[RowBatch] = [p for p in parts if isinstance(p, RowBatch)]
    names = batches[0].keys()
    whole: dict[str, Any] = {}
    values: dict[str, list[Any]] = {}
    for name in names:
        pieces: list[Any] = [b.batched(name) for b in batches]
        first = pieces[0]
        if first is not None and all(
            p is not None and type(p) is type(first) and p.shape[1:] == first.shape[1:]
            and p.dtype == first.dtype for p in pieces
        ):
            if isinstance(first, torch.Tensor):
                whole[name] = torch.cat(pieces)[torch.from_numpy(back)]
            else:
                whole[name] = np.concatenate(pieces)[back]
        else:
            column = [v for b in batches for v in b.column(name)]
            values[name] = [column[k] for k in back.tolist()]
    return RowBatch(names, len(back), whole, values)


def _convert(chunked: pa.ChunkedArray, fmt: Format) -> Any:
    """A column as one array/tensor (equal-shape numbers) or as a list of per-row values."""
    dtype = chunked.type
    if _is_numeric(dtype):
        return _scalars(_single(chunked), fmt)
    if (
        pa.types.is_list(dtype) or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    ) and _is_numeric(dtype.value_type):
        converted = _lists(_single(chunked), fmt)
        if converted is not None:
            return converted
    return list(chunked.to_pylist())


def _single(chunked: pa.ChunkedArray) -> pa.Array:
    return chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()


def _to_tensor(array: np.ndarray[Any, Any]) -> torch.Tensor:
    if array.dtype.kind == "u" and array.dtype.itemsize > 1:
        array = array.astype(np.int64)  # torch lacks general unsigned 16/32/64-bit support
    return torch.from_numpy(array)


def _with_nulls(values: list[Any], array: pa.Array) -> list[Any]:
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    for k in np.flatnonzero(~valid).tolist():
        values[k] = None
    return values


def _scalars(array: pa.Array, fmt: Format) -> Any:
    """Numbers as one array/tensor; with nulls, a list of scalars and None."""
    nulls = array.null_count
    if nulls:
        filled = array.fill_null(False if pa.types.is_boolean(array.type) else 0)
        data = np.array(filled.to_numpy(zero_copy_only=False), copy=True)
    else:
        data = np.array(array.to_numpy(zero_copy_only=False), copy=True)
    whole: Any = _to_tensor(data) if fmt == "torch" else data
    if not nulls:
        return whole
    values = list(whole.unbind(0)) if fmt == "torch" else list(data)
    return _with_nulls(values, array)


def _lists(array: pa.Array, fmt: Format) -> Any:
    """Lists of numbers: one 2-d array/tensor if equal lengths, else a list of 1-d ones.

    Returns None when a list holds a null value (the column keeps its ``as_py()`` values).
    """
    n = len(array)
    if pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * size
    else:
        offsets = array.offsets.to_numpy().astype(np.int64, copy=False)
    first, last = int(offsets[0]), int(offsets[-1])
    flat = array.values.slice(first, last - first)
    if flat.null_count:
        return None
    data = np.array(flat.to_numpy(zero_copy_only=False), copy=True)
    lengths = np.diff(offsets)
    values: list[Any]
    if n and (lengths == lengths[0]).all():
        matrix = data.reshape(n, int(lengths[0]))
        whole: Any = _to_tensor(matrix) if fmt == "torch" else matrix
        if not array.null_count:
            return whole
        values = list(whole.unbind(0)) if fmt == "torch" else list(matrix)
    elif fmt == "torch":
        values = list(torch.split(_to_tensor(data), lengths.tolist()))
    else:
        values = list(np.split(data, np.cumsum(lengths)[:-1]))
    return _with_nulls(values, array) if array.null_count else values
