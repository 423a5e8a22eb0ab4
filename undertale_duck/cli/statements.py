"""Where a SQL statement typed line by line ends: quotes, comments and the final ``;``."""

from __future__ import annotations


def statement_complete(text: str) -> bool:
    """Tell whether SQL text ends with a ``;`` that is outside quotes and comments.

    Args:
        text: The lines typed so far.

    Returns:
        True when the last significant character is a terminating semicolon.
    """
    return scan(text) == ("", ";")


def scan(text: str, mode: str = "", last: str = "") -> tuple[str, str]:
    """Scan SQL text from a state, for reading a statement line by line in linear time.

    Args:
        text: The next piece of text.
        mode: Where the previous text ended: ``""`` in code, ``"'"`` or ``'"'`` inside
            a quoted string or identifier, ``"*"`` inside a ``/* */`` comment.
        last: The last significant character of the previous text.

    Returns:
        ``(mode, last)`` after ``text``.
    """
    i, n = 0, len(text)
    while i < n or mode:
        if mode in ("'", '"'):
            end = text.find(mode, i)
            while end != -1 and end + 1 < n and text[end + 1] == mode:  # doubled quote
                end = text.find(mode, end + 2)
            if end == -1:
                return mode, last
            last, mode, i = mode, "", end + 1
            continue
        if mode == "*":
            end = text.find("*/", i)
            if end == -1:
                return mode, last
            mode, i = "", end + 2
            continue
        c = text[i]
        if c in "'\"":
            mode, i = c, i + 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
            continue
        if text.startswith("/*", i):
            mode, i = "*", i + 2
            continue
        if not c.isspace():
            last = c
        i += 1
    return mode, last


__all__ = ["scan", "statement_complete"]
