"""The ``undertale-duck`` command line: one subcommand per job, errors as one line on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .errors import QueryError, UndertaleDuckError

#: Exit statuses shared by every subcommand.
EXIT_OK = 0
EXIT_FAILED = 1  # a query failed, or validation found problems
EXIT_USAGE = 2  # bad usage or bad input (paths, options, files)

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand registered.

    Returns:
        The top-level parser; each subparser sets ``handler`` to its function.
    """
    parser = _Parser(
        prog="undertale-duck",
        description="Inspect, query and validate sharded Parquet datasets through DuckDB.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for register in REGISTRY:
        register(commands)
    return parser


#: Functions that add a subcommand to the parser (each module's ``register``).
REGISTRY: list[Callable[[argparse._SubParsersAction[_Parser]], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit status: 0 success, 1 failed query or validation, 2 usage or input error.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except QueryError as exc:
        print(f"undertale-duck: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UndertaleDuckError as exc:
        print(f"undertale-duck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("undertale-duck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output (e.g. `| head`) went away: not an error
        sys.stderr.close()
        return EXIT_OK


def entry() -> None:
    """Console-script entry point: exit with :func:`main`'s status."""
    sys.exit(main())
