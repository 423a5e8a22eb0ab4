"""Argument checks of the core dataset: columns, DuckDB settings, read limits."""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping, Sequence, Set
from typing import Any, NamedTuple

import duckdb
import numpy as np

from ...common.sizes import parse_size
from ...common.text import first_line, not_utf8
from ...errors import ArgumentError
from ..runtime import default_duckdb_config, duck

#: Least budget (bytes) a DataLoader worker's share of the default budget falls to: one
#: window of the largest default size (64 MiB), its read and a few cached windows.
WORKER_BUDGET_FLOOR = 512 << 20


def worker_budget(memory_bytes: int, workers: int) -> int:
    """One DataLoader worker's share of a default budget of ``memory_bytes``.

    The budget divided between the workers (as DuckDB's ``memory_limit`` is), but at least
    :data:`WORKER_BUDGET_FLOOR` and never more than the budget. The window plan is cut
    from the whole budget in the main process, so it (and every order and resume state)
    does not depend on the number of workers.

    Args:
        memory_bytes: The dataset's budget in bytes (0: nothing cached).
        workers: The DataLoader's workers.

    Returns:
        The worker's budget in bytes.
    """
    if memory_bytes <= 0 or workers <= 1:
        return memory_bytes
    return min(memory_bytes, max(memory_bytes // workers, WORKER_BUDGET_FLOOR))


def read_limit(memory_bytes: int) -> int:
    """Return the most bytes one window read may decompress or decode for a budget.

    The budget, but at least :data:`READ_LIMIT_FLOOR` (DuckDB needs working memory, and a
    tiny budget still serves small windows); 0 (no limit) for ``memory=0``. DuckDB's own
    ``memory_limit`` is set to twice this (unless ``duckdb_config`` sets it).

    Args:
        memory_bytes: The dataset's memory budget in bytes.

    Returns:
        The limit in bytes, or 0.
    """
    return max(memory_bytes, READ_LIMIT_FLOOR) if memory_bytes > 0 else 0


#: Smallest read limit (and DuckDB ``memory_limit``) a positive budget gets.
READ_LIMIT_FLOOR = 64 << 20


def bytes_setting(value: object) -> int:
    """Bytes of a DuckDB ``"...MB"``/``"...MiB"`` setting we wrote ourselves (0 if unknown)."""
    if not isinstance(value, str):
        return 0
    for suffix, scale in (("MiB", 1 << 20), ("MB", 1 << 20), ("GiB", 1 << 30), ("GB", 1 << 30)):
        if value.endswith(suffix) and value[: -len(suffix)].strip().isdigit():
            return int(value[: -len(suffix)]) * scale
    return 0


def check_columns(columns: Sequence[str] | None) -> list[str] | None:
    """Check the ``columns`` argument: None, or a list of non-empty column names.

    Raises:
        ArgumentError: If it is a single string or holds something else than names.
    """
    if columns is None:
        return None
    if isinstance(columns, str | bytes):
        raise ArgumentError("columns must be a list of column names, not a single string")
    try:
        names = list(columns)
    except TypeError:
        raise ArgumentError(
            f"columns must be a list of column names, got {type(columns).__name__}"
        ) from None
    for name in names:
        if not isinstance(name, str):
            raise ArgumentError(f"columns must hold column names (str), got {name!r}")
        if not name:
            raise ArgumentError(
                "columns holds an empty column name; DuckDB cannot select a column named ''"
            )
        _check_utf8(name, "columns holds the name")
    return names


def _check_utf8(text: str, what: str) -> None:
    """Refuse text holding bytes that are not UTF-8 (lone surrogates), naming the argument."""
    shown = not_utf8(text)
    if shown is not None:
        raise ArgumentError(
            f"{what} '{shown}', which is not valid UTF-8 text (bytes passed through as "
            "surrogates, as from a file name or a terminal of another locale): give it as "
            "UTF-8 text"
        )


def check_duckdb_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check ``duckdb_config`` by opening a DuckDB database with it once.

    Raises:
        ArgumentError: If it is not a mapping of setting names to values, or DuckDB
            refuses a name or a value.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ArgumentError(
            f"duckdb_config must be a mapping of DuckDB setting names to values, got "
            f"{type(config).__name__}"
        )
    settings = dict(config)
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise ArgumentError(f"duckdb_config keys must be DuckDB setting names, got {key!r}")
        if not isinstance(value, str | int | float | bool):
            raise ArgumentError(
                f"duckdb_config[{key!r}] must be a string, number or bool, got {value!r}"
            )
    try:
        duck.connect({**default_duckdb_config(), **settings}).close()
    except (duckdb.Error, TypeError, ValueError, RuntimeError) as exc:
        raise ArgumentError(f"duckdb_config is refused by DuckDB: {first_line(exc)}") from None
    return settings


def view_query(
    query: str | None, where: str | None, tables: Mapping[str, Any] | None
) -> str | None:
    """Return the view's query from ``query=`` or ``where=`` (None: a plain dataset).

    Raises:
        ArgumentError: If both are given, ``where`` is not an SQL condition, or ``tables``
            is not a mapping or comes without a query.
    """
    if query is not None and where is not None:
        raise ArgumentError("pass query= or where=, not both (put the filter in the query)")
    if isinstance(query, str):
        _check_utf8(query, "query is")
    if where is not None:
        if not isinstance(where, str) or not where.strip():
            raise ArgumentError(f"where must be an SQL condition, got {where!r}")
        _check_utf8(where, "where is")
        query = f"SELECT * FROM dataset WHERE {where}"
    if tables is not None and not isinstance(tables, Mapping):
        raise ArgumentError(
            "tables must be a dict of {name: path to a Parquet or CSV file, or a "
            f"pyarrow.Table}}, got {type(tables).__name__}"
        )
    if tables and query is None:
        raise ArgumentError("tables= is for views: pass query= joining them as well")
    return query


def check_positions(positions: object, count: int, noun: str = "window") -> list[int]:
    """Check ``prefetch``'s positions: integers (numpy ones too) in ``[0, count)``.

    ``int(p)`` would read 1.5 and True as 1 and the string "7" as 7: a hint for other
    windows than meant, said by no error.

    Args:
        positions: The positions given (a list, a 1-d array or tensor).
        count: How many windows (or runs) there are.
        noun: What a position names, for the errors.

    Returns:
        The positions as Python ints.

    Raises:
        TypeError: If ``positions`` is not a sequence of integers.
        IndexError: If a position is outside ``[0, count)``.
    """
    # a set would give its own order, a dict its keys: a hint for another order than meant
    if isinstance(positions, str | bytes | bytearray | Set | Mapping) or not hasattr(
        positions, "__iter__"
    ):
        raise TypeError(
            f"prefetch takes a list of {noun} positions in the order they will be read (or "
            f"None), got {type(positions).__name__}"
        )
    order = []
    for k, p in enumerate(positions):
        try:
            if isinstance(p, bool) or not hasattr(p, "__index__"):
                raise TypeError
            order.append(operator.index(p))
        except (TypeError, RuntimeError):  # an array row, a float tensor, a meta tensor
            raise TypeError(
                f"prefetch: {noun} positions must be integers, got {p!r:.60} at {k} (a "
                f"{type(p).__name__}); pass a 1-d list of ints"
            ) from None
    bad = [p for p in order if not 0 <= p < count]
    if bad:
        raise IndexError(f"{noun} position {bad[0]} out of range for {count} {noun}s")
    return order


#: Row indices as ``prefetch(rows=)`` takes them: a list of ints or a 1-d integer array.
RowList = Sequence[int] | np.ndarray[Any, np.dtype[np.integer[Any]]]


def check_expected_rows(rows: object, length: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Check ``prefetch``'s ``rows``: a 1-d array or list of integer row indices in ``[0, length)``.

    Returns:
        The rows as an int64 array (the array given, not copied, when it is one already).

    Raises:
        TypeError: If ``rows`` is not a 1-d sequence of integers.
        IndexError: If a row is outside ``[0, length)`` (negative ones included: the rows
            are the indices a loader will ask for, as it asks for them).
    """
    if isinstance(rows, str | bytes | bytearray | Set | Mapping) or not hasattr(rows, "__len__"):
        raise TypeError(
            f"prefetch: rows must be a 1-d list or array of row indices, got {type(rows).__name__}"
        )
    array = np.asarray(rows)
    if array.ndim != 1 or (len(array) and array.dtype.kind not in "iu"):
        raise TypeError(
            f"prefetch: rows must be a 1-d list or array of integer row indices, got an array "
            f"of {array.dtype} with shape {array.shape}"
        )
    if len(array) and (int(array.min()) < 0 or int(array.max()) >= length):
        bad = int(array.min()) if int(array.min()) < 0 else int(array.max())
        raise IndexError(f"prefetch: row {bad} out of range for {length} rows")
    return array.astype(np.int64, copy=False)


def check_read_ahead(read_ahead: object) -> int | None:
    """Return how many windows to read ahead at once (None: chosen from the cores; 0: none).

    Raises:
        ArgumentError: If ``read_ahead`` is not a bool or an int >= 0.
    """
    if not isinstance(read_ahead, int) or read_ahead < 0:
        raise ArgumentError(
            f"read_ahead must be True, False or a number of windows >= 0, got {read_ahead!r}"
        )
    return None if read_ahead is True else int(read_ahead)


class Sizes(NamedTuple):
    """A dataset's size arguments in bytes (see :func:`check_sizes`)."""

    memory_bytes: int
    window_bytes: int | None
    disk_bytes: int | None


def check_sizes(memory: object, window_bytes: object, disk: object, disk_dir: object) -> Sizes:
    """Read the budget, window size and disk tier arguments of a dataset.

    ``memory`` and ``disk`` are MiB when given as numbers, ``window_bytes`` bytes; each may
    also be a string with its own unit (``"4GiB"``, ``"500MB"``: :func:`parse_size`).

    Returns:
        The three sizes in bytes (``window_bytes`` and ``disk`` None when not given).

    Raises:
        ArgumentError: Naming the argument that is not a sensible size.
    """
    memory_bytes = parse_size(memory, "memory", "MiB")
    windows = None
    if window_bytes is not None:
        windows = parse_size(window_bytes, "window_bytes", "bytes")
        if windows < 1:
            raise ArgumentError(f"window_bytes must be at least 1 byte, got {window_bytes!r}")
    disk_bytes = None if disk is None else parse_size(disk, "disk", "MiB")
    if disk_dir is not None and disk is None:
        raise ArgumentError("disk_dir needs disk= (the disk tier's size, e.g. disk='8GiB')")
    if disk_dir is not None and not isinstance(disk_dir, str | os.PathLike):
        raise ArgumentError(
            f"disk_dir must be a directory path (a str or a Path), got {type(disk_dir).__name__}"
        )
    return Sizes(memory_bytes, windows, disk_bytes)
