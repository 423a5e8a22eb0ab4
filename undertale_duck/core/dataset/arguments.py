"""Argument checks of the core dataset: columns, DuckDB settings, read limits."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from ...common.text import first_line
from ...errors import ArgumentError
from ..runtime import default_duckdb_config, duck


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
    return names


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
            comes without a query.
    """
    if query is not None and where is not None:
        raise ArgumentError("pass query= or where=, not both (put the filter in the query)")
    if where is not None:
        if not isinstance(where, str) or not where.strip():
            raise ArgumentError(f"where must be an SQL condition, got {where!r}")
        query = f"SELECT * FROM dataset WHERE {where}"
    if tables and query is None:
        raise ArgumentError("tables= is for views: pass query= joining them as well")
    return query


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


def check_sizes(memory: object, window_bytes: object, disk: object, disk_dir: object) -> None:
    """Check the budget, window size and disk tier arguments of a dataset.

    Raises:
        ArgumentError: Naming the argument that is not a sensible number.
    """
    if (
        isinstance(memory, bool)
        or not isinstance(memory, int | float)
        or not math.isfinite(memory)
        or memory < 0
        or memory * (1 << 20) >= 1 << 62
    ):
        raise ArgumentError(f"memory must be a finite number of megabytes >= 0, got {memory!r}")
    if window_bytes is not None and (
        isinstance(window_bytes, bool) or not isinstance(window_bytes, int) or window_bytes < 1
    ):
        raise ArgumentError(f"window_bytes must be a positive integer, got {window_bytes!r}")
    if disk is not None and (
        isinstance(disk, bool) or not isinstance(disk, int | float) or not disk >= 0
    ):
        raise ArgumentError(f"disk must be a number of megabytes >= 0 or None, got {disk!r}")
    if disk_dir is not None and disk is None:
        raise ArgumentError("disk_dir needs disk= (the disk tier's size in megabytes)")
