"""The ``undertale-duck`` command line: commands, output writers, the shell and rendering."""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import main

#: Exit status after Ctrl-C (128 + SIGINT); the same as ``app.EXIT_INTERRUPTED``.
_INTERRUPTED = 130


def entry() -> None:
    """Console-script entry point: exit with :func:`main`'s status.

    The command line's modules (DuckDB, pyarrow, pydantic) are imported here, inside the
    handler, so that Ctrl-C during those imports ends with one line and status 130 as it does
    while a command runs, never with a traceback.
    """
    try:
        try:
            from .app import main

            status = main()
        finally:
            # From here on the process only exits: a Ctrl-C pressed again (or one that
            # arrives late) must not print a second line or a traceback from the exit hooks,
            # nor turn status 130 into death by SIGINT
            _ignore_interrupts()
    except KeyboardInterrupt:  # before main() could say so (the imports), or after it did
        # main() may have said it and returned when a second Ctrl-C arrived: one line only
        app = sys.modules.get(f"{__name__}.app")
        if not getattr(app, "interruption_reported", False):
            _interrupted()
        status = _INTERRUPTED
    sys.exit(status)


def _ignore_interrupts() -> None:
    with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
        signal.signal(signal.SIGINT, _ignore)


def _ignore(signum: int, frame: object) -> None:
    """A SIGINT handler that does nothing (a Python one: a pending signal then runs it)."""


def _interrupted() -> None:
    with contextlib.suppress(OSError, ValueError, KeyboardInterrupt):
        print("undertale-duck: interrupted", file=sys.stderr, flush=True)


def __getattr__(name: str) -> Any:
    if name == "main":
        from .app import main

        return main
    raise AttributeError(f"module 'undertale_duck.cli' has no attribute {name!r}")


__all__ = ["entry", "main"]
