"""Load the SQL texts shipped in ``sql/`` and quote identifiers and literals safely."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent  # undertale_duck/core
#: Installed wheels ship ``sql/`` inside the package; a source checkout keeps it beside it.
SQL_DIRS = (_PACKAGE.parent / "sql", _PACKAGE.parent.parent / "sql")


@functools.cache
def load(name: str) -> str:
    """Return the text of an SQL file shipped with the package.

    Args:
        name: Path below ``sql/`` without the ``.sql`` suffix, e.g. ``"read_window"`` or
            ``"checks/not_null"``.

    Returns:
        The SQL text.

    Raises:
        FileNotFoundError: If no such file is shipped (a packaging bug).
    """
    for directory in SQL_DIRS:
        path = directory.joinpath(*f"{name}.sql".split("/"))
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"SQL file {name}.sql is not shipped in any of {SQL_DIRS}")


def render(name: str, **identifiers: str) -> str:
    """Load an SQL file and substitute already-quoted identifier fragments into it.

    Only identifiers and lists of identifiers are substituted (``{columns}`` placeholders);
    values are always bound as ``$name`` parameters when the query runs.

    Args:
        name: SQL file name, as for :func:`load`.
        **identifiers: Placeholder values, each built with :func:`quote_identifier`,
            :func:`column_list` or :func:`quote_literal`.

    Returns:
        The SQL text ready to run.
    """
    return load(name).format(**identifiers)


def quote_identifier(name: str) -> str:
    """Quote an SQL identifier (column or view name) for DuckDB.

    Args:
        name: Any string, including quotes, spaces, unicode and SQL fragments.

    Returns:
        The identifier in double quotes with embedded double quotes doubled.

    Raises:
        ValueError: If the name contains a NUL character, which no identifier may hold.
    """
    if "\x00" in name:
        raise ValueError(f"identifier {name!r} contains a NUL character")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """Quote a string literal, for the few places DuckDB cannot bind a parameter (views).

    Args:
        value: Any string.

    Returns:
        The value in single quotes with embedded single quotes doubled.

    Raises:
        ValueError: If the value contains a NUL character.
    """
    if "\x00" in value:
        raise ValueError(f"literal {value!r} contains a NUL character")
    return "'" + value.replace("'", "''") + "'"


def column_list(names: Iterable[str]) -> str:
    """Return a comma-separated list of quoted identifiers.

    Args:
        names: Column names.

    Returns:
        ``"a", "b", ...`` ready to splice into a SELECT list.
    """
    return ", ".join(quote_identifier(n) for n in names)
