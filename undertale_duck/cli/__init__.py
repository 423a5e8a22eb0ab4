"""The ``undertale-duck`` command line: commands, output writers, the shell and rendering."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import main

#: Exit status after Ctrl-C (128 + SIGINT); the same as ``app.EXIT_INTERRUPTED``.
_INTERRUPTED = 130


def entry() -> None:
    """Console-script entry point: exit with :func:`main`'s status.

    The command line's modules (DuckDB, pyarrow, pydantic) are imported here, inside the
    handler, so that Ctrl-C during those imports ends with one line and status 130 as it does
    while a command runs, never with a traceback or an aborted process.
    """
    try:
        try:
            main = _import_deferring_interrupts()
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
    # Python's own handler (``_ignore``) lasts until the interpreter tears down its signal
    # handling, after the exit hooks; from then SIGINT's default action, death by SIGINT,
    # would be back. The kernel's SIG_IGN outlives that teardown. Set only now: a Ctrl-C
    # already received is handled by ``_ignore`` as this call sets it (Python runs pending
    # handlers first), where under SIG_IGN it would print "ignored due to race condition".
    _set_sigint(signal.SIG_IGN)
    _forget_escaped_interrupt()
    sys.exit(status)


def _import_deferring_interrupts() -> Callable[[], int]:
    """Import the command line, holding a Ctrl-C pressed meanwhile until the imports end.

    A KeyboardInterrupt raised inside a native module's initialisation is not survivable:
    DuckDB's extension module aborts the process (SIGABRT, "Critical nanobind error") when
    one arrives while it creates its enums, and other libraries re-raise it as another
    exception. So the signal is only recorded here and raised once the imports are done.
    """
    pending: list[int] = []

    def record(signum: int, frame: object) -> None:
        pending.append(signum)

    previous = signal.getsignal(signal.SIGINT)
    # a process started ignoring Ctrl-C keeps ignoring it
    deferring = previous is not signal.SIG_IGN and _set_sigint(record)
    try:
        from .app import main
    finally:
        if deferring:  # None: a handler set outside Python; Python's own is what it had
            _set_sigint(signal.default_int_handler if previous is None else previous)
    if pending:
        raise KeyboardInterrupt
    return main


def _forget_escaped_interrupt() -> None:
    """Clear CPython's record that a KeyboardInterrupt left code run by ``exec``.

    CPython notes, for the whole process, every KeyboardInterrupt that leaves a string run
    by ``exec`` or ``eval``, even one caught afterwards, and at exit then kills the process
    with SIGINT instead of exiting with its status. ``dataclasses`` and ``namedtuple`` build
    their methods with ``exec`` when a module defining them is imported, so a Ctrl-C landing
    in a command's lazy import of torch (under load, seconds of it) turned status 130 into
    death by SIGINT. Running an empty string resets that record; called once SIGINT is
    ignored, so no later Ctrl-C can set it again.
    """
    exec("")


def _ignore_interrupts() -> None:
    _set_sigint(_ignore)


def _set_sigint(handler: Callable[[int, Any], object] | int) -> bool:
    """Install ``handler`` for SIGINT; False where it cannot be (not the main thread)."""
    try:
        signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):  # ValueError: not the main thread
        return False
    return True


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
