"""The ``undertale-duck`` command line: commands, output writers, the shell and rendering."""

from __future__ import annotations

import contextlib
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
        from .app import main

        status = main()
    except KeyboardInterrupt:
        status = _interrupted()
    sys.exit(status)


def _interrupted() -> int:
    with contextlib.suppress(OSError, ValueError, KeyboardInterrupt):
        print("undertale-duck: interrupted", file=sys.stderr, flush=True)
    return _INTERRUPTED


def __getattr__(name: str) -> Any:
    if name == "main":
        from .app import main

        return main
    raise AttributeError(f"module 'undertale_duck.cli' has no attribute {name!r}")


__all__ = ["entry", "main"]
