"""Progress on stderr: one callback signature, a tqdm bar only when stderr is a terminal."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

#: Called once per step (a query, a shard) with a short label of what the step does.
Progress = Callable[[str], None]


def _silent(label: str) -> None:
    """A progress callback that shows nothing (stderr is a pipe, a file or closed)."""


def is_terminal(stream: TextIO) -> bool:
    """Whether a stream is an open terminal (a closed or unusual stream counts as not).

    Args:
        stream: A text stream such as ``sys.stderr``.

    Returns:
        True when a progress bar may be drawn on it.
    """
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def progress_bar(
    description: str, *, unit: str = " steps", stream: TextIO | None = None
) -> Iterator[Progress]:
    """Yield a :data:`Progress` callback that advances a tqdm bar, or does nothing.

    The bar is drawn only when ``stream`` (default: ``sys.stderr``, looked up at call time) is a
    terminal, so pipes, files and CI logs stay clean; it is removed when the block ends. Each
    call advances the bar by one and shows the label after the counts.

    Args:
        description: Text before the bar, e.g. ``"validating"``.
        unit: Name of one step, shown with the count and the rate (e.g. ``" queries"``).
        stream: Where to draw the bar.

    Yields:
        The callback.
    """
    stream = sys.stderr if stream is None else stream
    if not is_terminal(stream):
        yield _silent
        return
    from tqdm import tqdm  # imported only when a bar is drawn

    bar = tqdm(desc=description, unit=unit, file=stream, leave=False)

    def step(label: str) -> None:
        bar.set_postfix_str(label, refresh=False)
        bar.update(1)

    try:
        yield step
    finally:
        bar.close()


__all__ = ["Progress", "is_terminal", "progress_bar"]
