"""Load the SQL texts in ``sql/``, render their placeholders safely, quote names and values."""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable
from pathlib import Path

import duckdb

_PACKAGE = Path(__file__).resolve().parents[2]  # undertale_duck
#: Installed wheels ship ``sql/`` inside the package; a source checkout keeps it beside it.
SQL_DIRS = (_PACKAGE.parent / "sql", _PACKAGE.parent.parent / "sql")

#: A placeholder: ``{name}``, substituted by :func:`render` with an already-quoted fragment.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateError(ValueError):
    """An SQL template or a fragment for it is unsafe or incomplete (a bug in this package)."""


@functools.cache
def sql_text(name: str) -> str:
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


def templates() -> list[str]:
    """Return the name of every SQL file shipped with the package (as :func:`sql_text` takes it).

    Returns:
        Sorted names such as ``"dataset_view"`` and ``"checks/not_null"``.
    """
    for directory in SQL_DIRS:
        if directory.is_dir():
            return sorted(
                p.relative_to(directory).with_suffix("").as_posix()
                for p in directory.rglob("*.sql")
            )
    return []


def tokens(text: str) -> list[tuple[int, int, duckdb.token_type]]:
    """Split SQL into DuckDB's tokens.

    Args:
        text: SQL text.

    Returns:
        ``(start, end, type)`` of each token as character offsets into ``text`` (DuckDB's
        tokenizer counts UTF-8 bytes), whitespace after a token included in it.
    """
    spans = duckdb.tokenize(text)
    if text.isascii():
        starts = [start for start, _ in spans]
    else:
        byte_ends = list(itertools.accumulate(len(c.encode("utf-8")) for c in text))
        starts = [bisect.bisect_right(byte_ends, start) for start, _ in spans]
    ends = [*starts[1:], len(text)] if starts else []
    return [(a, b, kind) for a, b, (_, kind) in zip(starts, ends, spans, strict=True)]


def _tokens(text: str) -> tuple[list[int], list[duckdb.token_type]]:
    found = tokens(text)
    return [start for start, _, _ in found], [kind for _, _, kind in found]


def _token_at(starts: list[int], position: int) -> int:
    """Index of the token that holds character ``position`` (-1 before the first token)."""
    return bisect.bisect_right(starts, position) - 1


@functools.cache
def placeholders(name: str) -> tuple[tuple[int, int, str], ...]:
    """Return the placeholders of an SQL file, refusing any that is not in SQL code.

    Args:
        name: SQL file name, as for :func:`sql_text`.

    Returns:
        ``(start, end, placeholder name)`` of each placeholder, in text order.

    Raises:
        TemplateError: If a placeholder sits inside a comment, a string or a quoted identifier.
    """
    return scan_template(sql_text(name), f"sql/{name}.sql")


def scan_template(text: str, where: str = "SQL template") -> tuple[tuple[int, int, str], ...]:
    """Find the placeholders of a template text, refusing any that is not in SQL code.

    A placeholder inside a comment, a string literal or a quoted identifier would let a
    fragment end that comment or string (a column name holding a newline ends a ``--``
    comment) and run the rest as SQL, so such a template is refused before any use.
    DuckDB's own tokenizer decides where comments and strings are.

    Args:
        text: The template.
        where: What to call the template in an error.

    Returns:
        ``(start, end, placeholder name)`` of each placeholder, in text order.

    Raises:
        TemplateError: If a placeholder sits inside a comment, a string or a quoted identifier.
    """
    starts, kinds = _tokens(text)
    found = []
    for match in PLACEHOLDER.finditer(text):
        opening = _token_at(starts, match.start())
        word = _token_at(starts, match.start() + 1)
        closing = _token_at(starts, match.end() - 1)
        in_code = (
            opening >= 0
            and kinds[opening] == duckdb.token_type.operator
            and starts[word] == match.start() + 1
            and kinds[word] in (duckdb.token_type.identifier, duckdb.token_type.keyword)
            and kinds[closing] == duckdb.token_type.operator
        )
        if not in_code:
            line = text.count("\n", 0, match.start()) + 1
            raise TemplateError(
                f"{where} line {line}: placeholder {match.group()} is inside a comment, "
                "a string or a quoted identifier; a fragment substituted there could end it and "
                "run as SQL. Move the placeholder into SQL code"
            )
        found.append((match.start(), match.end(), match.group(1)))
    return tuple(found)


def check_fragment(fragment: str) -> None:
    """Refuse a fragment that could change an SQL text's structure beyond its own place.

    Fragments are built from :func:`quote_identifier`, :func:`quote_literal`, numbers,
    operators and ``$name`` parameters; a comment, a ``;`` or an unterminated quote can only
    come from a name or value spliced in unquoted.

    Args:
        fragment: The text to substitute for one placeholder.

    Raises:
        TemplateError: If the fragment holds a comment, a ``;`` outside quotes, an
            unterminated quoted identifier or string, or a NUL character.
    """
    if "\x00" in fragment:
        raise TemplateError("an SQL fragment holds a NUL character")
    starts, kinds = _tokens(fragment)
    for k, (start, kind) in enumerate(zip(starts, kinds, strict=True)):
        token = fragment[start : starts[k + 1] if k + 1 < len(starts) else len(fragment)].strip()
        problem = ""
        if kind == duckdb.token_type.comment:
            problem = "a comment"
        elif kind == duckdb.token_type.operator and ";" in token:
            problem = "a ';'"
        elif token[:1] in ('"', "'") and not _closed(token):
            problem = "an unterminated quote"
        if problem:
            raise TemplateError(
                f"an SQL fragment holds {problem} ({fragment[:80]!r}): names and values must be "
                "quoted with quote_identifier() or quote_literal(), or bound as parameters"
            )


def _closed(token: str) -> bool:
    """Whether a quoted token ends with its quote (inner quotes all doubled)."""
    quote = token[0]
    inner = token[1:-1]
    return len(token) >= 2 and token[-1] == quote and quote not in inner.replace(quote * 2, "")


def render(name: str, **fragments: str) -> str:
    """Load an SQL file and substitute already-quoted fragments for its placeholders.

    Only identifiers, lists of identifiers and literals, and expressions built from them are
    substituted (``{columns}`` placeholders); values are bound as ``$name`` parameters when
    the query runs. The template is checked first (:func:`placeholders`), and so is every
    fragment (:func:`check_fragment`).

    Args:
        name: SQL file name, as for :func:`sql_text`.
        **fragments: One value per placeholder, each built with :func:`quote_identifier`,
            :func:`column_list` or :func:`quote_literal`.

    Returns:
        The SQL text ready to run.

    Raises:
        TemplateError: If the template has a placeholder outside SQL code, a placeholder
            is missing from ``fragments``, or a fragment is unsafe (fragments the template
            does not use are ignored).
    """
    text = sql_text(name)
    spots = placeholders(name)
    wanted = {n for _, _, n in spots}
    missing = wanted - set(fragments)
    if missing:
        raise TemplateError(
            f"sql/{name}.sql takes the placeholders {sorted(wanted)}, "
            f"given {sorted(fragments)}"
        )
    for key in wanted:
        check_fragment(fragments[key])
    parts = []
    position = 0
    for start, end, key in spots:
        parts += [text[position:start], fragments[key]]
        position = end
    parts.append(text[position:])
    return "".join(parts)


#: Stands for the ``k``-th part while a fragment's template is put on one line.
_PART = re.compile(r"__undertale_part_(\d+)__")


def fragment(name: str, **parts: str) -> str:
    """An expression template on one line, without comments, with ``parts`` substituted.

    What :func:`render` gives, for a template that is a piece of another query (a column's
    conversion, a check's test): the template is put on one line, its comments dropped,
    before the parts go in, since a quoted name may hold a newline or a line starting with
    ``--``, which must reach DuckDB as it is.

    Args:
        name: SQL file name, as for :func:`sql_text`.
        **parts: One already-quoted fragment per placeholder (see :func:`render`).

    Returns:
        The expression, ready to be a fragment of another template.

    Raises:
        TemplateError: As :func:`render`.
    """
    keys = list(parts)
    for part in parts.values():
        check_fragment(part)
    text = render(name, **{key: f"__undertale_part_{k}__" for k, key in enumerate(keys)})
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("--")]
    line = " ".join(ln.strip() for ln in lines)
    # one pass: a part holding a marker's text is never substituted into again
    return _PART.sub(lambda m: parts[keys[int(m.group(1))]], line)


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
        The value in single quotes with embedded single quotes doubled (DuckDB's standard
        strings take backslashes literally).

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


def literal_list(values: Iterable[str]) -> str:
    """Return a DuckDB list literal of quoted strings.

    Args:
        values: Strings, e.g. escaped shard paths.

    Returns:
        ``['a', 'b', ...]`` ready to splice where a list value is expected.
    """
    return "[" + ", ".join(quote_literal(v) for v in values) + "]"
