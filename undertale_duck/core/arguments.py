"""Argument checks of the core dataset: columns, DuckDB settings, read limits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from ..common.text import first_line
from ..errors import ArgumentError
from . import duck
from .duck import default_duckdb_config


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
