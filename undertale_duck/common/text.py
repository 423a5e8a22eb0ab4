"""Plain-text helpers shared by every layer: one line from an exception, aligned columns."""

from __future__ import annotations

from collections.abc import Sequence


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


def aligned(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """Lay out plain text columns (no colors, no box), one line per row.

    Args:
        headers: Column titles.
        rows: Cell texts, already rendered (see :func:`cell`).
        indent: Text put before every line.

    Returns:
        The lines, each ending with a newline.
    """
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = []
    for r in [list(headers), ["-" * w for w in widths], *rows]:
        text = "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
        lines.append((indent + text).rstrip())
    return "\n".join(lines) + "\n"
