"""The ``undertale-duck`` command line: the parser, dispatch, exit statuses and one error handler.

Each subcommand lives in its own module as a :class:`~undertale_duck.cli.command.Command`
and is listed in :data:`COMMANDS`; adding a command means writing a module and adding it there.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

import duckdb

from ..common.text import first_line, redact_url, terminal_safe
from ..errors import MemoryBudgetError, QueryError, UndertaleDuckError
from . import (
    cmd_batch,
    cmd_describe,
    cmd_inspect,
    cmd_pack,
    cmd_shell,
    cmd_split,
    cmd_sql,
    cmd_validate,
)
from .command import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    check_text_arguments,
)
from .wording import for_the_command_line

__all__ = [
    "COMMANDS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

#: Every subcommand, in the order ``--help`` lists them.
COMMANDS: tuple[Command, ...] = (
    cmd_sql.COMMAND,
    cmd_describe.COMMAND,
    cmd_inspect.HEAD,
    cmd_inspect.ROW,
    cmd_shell.COMMAND,
    cmd_validate.COMMAND,
    cmd_batch.BATCH,
    cmd_pack.COMMAND,
    cmd_split.COMMAND,
)

#: Longest error line printed (a message naming many paths is cut with an ellipsis).
ERROR_LENGTH = 4000


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every command of :data:`COMMANDS` registered.

    Returns:
        The top-level parser; a parsed command's name is in ``command_name``.
    """
    from .. import __version__

    parser = _Parser(
        prog="undertale-duck",
        description="Inspect, query and validate sharded Parquet datasets through DuckDB.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.add_to(commands)
    return parser


def _say(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr itself may be gone
        # any error or warning, ours or a client's: URLs without their secrets
        print(f"undertale-duck: {terminal_safe(redact_url(message))}", file=sys.stderr,
              flush=True)


#: Whether this process has said "interrupted": ``cli.entry`` reads it so that a Ctrl-C
#: pressed again after :func:`main` returned does not print the line a second time.
interruption_reported = False


def _say_interrupted() -> int:
    global interruption_reported
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C again: still one line
        if not interruption_reported:
            _say("interrupted")
        interruption_reported = True
    return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; never raises (except ``SystemExit`` from ``--help``/usage).

    Every error becomes one line on stderr: our errors with their own text, anything else
    with its type, so that no traceback ever reaches the user.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit status: 0 success, 1 failed or refused query / failed validation, 2 usage,
        input or unexpected error, 130 interrupted (Ctrl-C).
    """
    global interruption_reported
    interruption_reported = False  # main may run more than once in a process (tests, tools)
    with warnings.catch_warnings():  # restored on the way out (main may run in-process)
        warnings.showwarning = _warning_display({})
        return _main(argv)


def _warning_display(flags: Mapping[str, str]) -> Callable[..., None]:
    """A ``warnings.showwarning`` saying a library warning as one line, in ``flags``' words."""

    def show(
        message: Warning | str, category: type[Warning], filename: str, lineno: int,
        file: TextIO | None = None, line: str | None = None,
    ) -> None:
        """Show a warning as one line, as errors are (not Python's two with a path)."""
        text = first_line(message, ERROR_LENGTH) if isinstance(message, Warning) else message
        _say(f"warning: {for_the_command_line(' '.join(str(text).split()), flags)}")

    return show


def _main(argv: Sequence[str] | None) -> int:
    """:func:`main` without its warnings' display."""
    flags: Mapping[str, str] = {}
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        name: str | None = getattr(args, "command_name", None)
        if name is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        command = next(c for c in COMMANDS if c.name == name)
        flags = command.flags
        warnings.showwarning = _warning_display(flags)
        check_text_arguments(args)
        return command.run(args)
    except KeyboardInterrupt:
        return _say_interrupted()
    except Exception as exc:
        return _report(exc, flags)


def _report(exc: Exception, flags: Mapping[str, str]) -> int:
    """Say what went wrong in one line and return the exit status for it.

    ``flags`` are the running command's (:attr:`Command.flags`); a failed query's message
    may quote its SQL, whose words are never taken for arguments.
    """
    if _interrupted(exc):  # DuckDB reported Ctrl-C as its own error
        return _say_interrupted()
    if isinstance(exc, QueryError):  # failed or refused (docs/cli.md)
        _say(f"error: {for_the_command_line(first_line(exc, ERROR_LENGTH))}")
        return EXIT_FAILED
    if isinstance(exc, MemoryBudgetError):  # refused (docs/cli.md)
        _say(f"error: {for_the_command_line(first_line(exc, ERROR_LENGTH), flags)}")
        return EXIT_FAILED
    if isinstance(exc, UndertaleDuckError):
        _say(f"error: {for_the_command_line(first_line(exc, ERROR_LENGTH), flags)}")
        return EXIT_USAGE
    if isinstance(exc, BrokenPipeError):
        # the reader of our output (e.g. `| head`) went away: not an error; point stdout at
        # /dev/null so that the interpreter's final flush does not complain either
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    if isinstance(exc, MemoryError):
        _say("error: out of memory; use a smaller query or a machine with more memory")
        return EXIT_USAGE
    _say(f"error: unexpected {type(exc).__name__}: {first_line(exc, ERROR_LENGTH)}")
    return EXIT_USAGE


def _interrupted(exc: BaseException | None) -> bool:
    """Whether an error is, or was raised while handling, DuckDB's interrupt of a query.

    Queries run through ``core/interrupt.py`` raise ``KeyboardInterrupt`` themselves; this
    catches DuckDB's own report of Ctrl-C reaching us from any other path.
    """
    for _ in range(10):
        if exc is None:
            return False
        if isinstance(exc, duckdb.InterruptException):
            return True
        if isinstance(exc, RuntimeError) and str(exc).strip() == "Query interrupted":
            return True
        exc = exc.__cause__ or exc.__context__
    return False
