"""Plain-text helpers shared by every layer: one line from an exception, aligned columns.

Also :func:`terminal_safe`, the one escape of control characters in text meant for a
terminal (paths, names, echoed queries and error lines); machine formats stay raw; and
:func:`redact_url`, the one way a URL is shown (its secrets replaced).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

#: What replaces a shown URL's user information, query string and fragment.
REDACTED = "<redacted>"
#: A URL inside text: scheme, user information, host and path, query, fragment. The query
#: runs to white space, a quote or ``<`` (a pre-signed URL's query holds no unescaped ones);
#: text already redacted matches nothing more (redacting twice changes nothing).
_URL = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/?#'\"<>]*@)?"
    r"(?P<rest>[^\s?#'\"<>]*)(?P<query>\?[^\s#'\"<>]+)?(?P<fragment>#[^\s'\"<>]+)?"
)


def _redacted(match: re.Match[str]) -> str:
    user = f"{REDACTED}@" if match["user"] else ""
    query = f"?{REDACTED}" if match["query"] else ""
    fragment = f"#{REDACTED}" if match["fragment"] else ""
    tail = match["fragment"] or match["query"] or ""
    # the sentence's punctuation after the URL ("...?sig=x; call refresh()") stays
    kept = tail[len(tail.rstrip(";,.)]")):] if query or fragment else ""
    return f"{match['scheme']}{user}{match['rest']}{query}{fragment}{kept}"


def redact_url(text: str) -> str:
    """A URL (or any text holding URLs) as it may be shown, logged or written to disk.

    Each URL keeps its scheme, host and path; its user information (``user:password@``),
    query string (a pre-signed URL's ``X-Amz-Signature=``, ``sig=``, ``token=`` ...) and
    fragment are replaced by :data:`REDACTED`: credentials in a URL never reach a message,
    a ``repr``, a log line, the command line's output or a file we write. Local paths and
    text without URLs are returned as they are.

    Args:
        text: A URL, a path, or a message holding URLs.

    Returns:
        The text with every URL's secrets replaced.
    """
    if "://" not in text:
        return text
    return _URL.sub(_redacted, text)


def not_utf8(text: str) -> str | None:
    r"""``text`` with its bytes that are not UTF-8 shown as ``\xNN``, or None if it has none.

    Python passes such bytes (from a command line or a file name) on as lone surrogates,
    which DuckDB, pyarrow and the UTF-8 codec refuse with their own errors far from the
    argument that held them; callers refuse the argument by name instead.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is 1: ``1 shard``, ``3 rows``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The message of an exception on one line (whitespace collapsed), for error text.

    Args:
        exc: Any exception.
        limit: Longest text returned; longer messages are cut with an ellipsis.

    Returns:
        The collapsed message, or the exception's type name when the message is empty.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def terminal_safe(text: str) -> str:
    r"""``text`` with every non-printable character escaped, for a terminal.

    Control characters (an escape sequence's ``ESC``, ``\r``, ``\n``, ``\b``, ``DEL``, the
    C1 controls) and Unicode format characters (bidirectional overrides such as U+202E)
    become Python escapes (``\x1b``, ``\n``, ``\u202e``), so a shard name, column name or
    query cannot move the cursor, rewrite the screen or hide text. Printable text, letters
    of any script included, is unchanged (and an escaped text escapes to itself). A byte
    that is not UTF-8 in a path or argument (which Python holds as a lone surrogate,
    ``os.fsdecode``'s ``surrogateescape``) is shown as that byte, ``\xff``, as
    :func:`not_utf8` shows it, not as the surrogate ``\udcff``.

    Args:
        text: Any text.

    Returns:
        The text, safe to print on one line.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _escaped(character: str) -> str:
    r"""A non-printable character as a Python escape; an escaped byte as ``\xNN``."""
    if "\udc80" <= character <= "\udcff":  # surrogateescape's stand-in for a byte
        return character.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
    return character.encode("unicode_escape").decode("ascii")


def cells(text: str) -> int:
    """The terminal columns ``text`` takes: wide characters (CJK) two, combining marks none.

    Args:
        text: Printable text (:func:`terminal_safe`).

    Returns:
        Its width on a terminal, as rich (which draws the command line's tables) counts it.
    """
    from rich.cells import cell_len  # imported when text is laid out, not with the package

    return cell_len(text)


def pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (:func:`cells`).

    Args:
        text: Printable text.
        width: The columns it should take.
        right: Pad on the left (right-aligned) instead of on the right.

    Returns:
        The padded text (``text`` itself when it is already as wide).
    """
    fill = " " * max(0, width - cells(text))
    return fill + text if right else text + fill


def aligned(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    indent: str = "  ",
    *,
    right: Collection[int] = (),
) -> str:
    """Lay out plain text columns (no colors, no box), one line per row.

    Args:
        headers: Column titles.
        rows: Cell texts, already rendered (e.g. with ``cli.writers.cell``); control
            characters are escaped (:func:`terminal_safe`).
        indent: Text put before every line.
        right: Numbers of the columns to right-align (numbers, counts); others are left-aligned.

    Returns:
        The lines (header, a dashed rule, the rows), trailing spaces removed, each ending with a
        newline.
    """
    headers = [terminal_safe(h) for h in headers]
    rows = [[terminal_safe(c) for c in r] for r in rows]
    # terminal columns, not code points: a name or value in CJK would push its line askew
    widths = [cells(h) for h in headers]
    for r in rows:
        widths = [max(w, cells(c)) for w, c in zip(widths, r, strict=True)]
    lines = []
    for r in [list(headers), ["-" * w for w in widths], *rows]:
        text = "  ".join(
            pad(c, w, right=k in right) for k, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        lines.append((indent + text).rstrip())
    return "\n".join(lines) + "\n"
