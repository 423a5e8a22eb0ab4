"""What every subcommand shares: the Command record, exit statuses, argument types, sources."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import ArgumentError

if TYPE_CHECKING:
    from ..dataset import ParquetDataset

#: Exit statuses shared by every subcommand.
EXIT_OK = 0
EXIT_FAILED = 1  # a query failed or was refused, or validation found problems
EXIT_USAGE = 2  # bad usage or bad input (paths, options, files), or an unexpected error
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)

#: Longest query text read from ``@FILE`` or standard input (and given as QUERY).
MAX_QUERY_BYTES = 1 << 20

#: Help text of the SOURCE argument.
SOURCE_HELP = "a Parquet file, a directory of shards, or a quoted glob such as 'data/*.parquet'"


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, help, arguments and the function that runs it.

    Attributes:
        name: The word typed after ``undertale-duck``.
        summary: One line for ``--help``.
        examples: The epilog: example invocations and notes (exit statuses).
        arguments: Adds the command's arguments (after SOURCE) to its parser.
        run: Runs the command with the parsed arguments; returns the exit status.
    """

    name: str
    summary: str
    examples: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]

    def add_to(self, commands: argparse._SubParsersAction[Any]) -> None:
        """Register the command's parser (SOURCE first, then its own arguments).

        Args:
            commands: The top-level parser's subparsers.
        """
        parser: argparse.ArgumentParser = commands.add_parser(
            self.name,
            help=self.summary,
            description=self.summary,
            epilog="examples:\n" + self.examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("source", metavar="SOURCE", help=SOURCE_HELP)
        parser.add_argument(
            "--storage-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="an option of a URL source's store (repeatable; JSON values; a dotted KEY "
            "nests: client_kwargs.endpoint_url=http://host:9000); see docs/storage.md",
        )
        self.arguments(parser)
        parser.set_defaults(command_name=self.name)


def count(text: str) -> int:
    """An argparse type for a whole number >= 0.

    Args:
        text: The argument as typed.

    Returns:
        The number.

    Raises:
        argparse.ArgumentTypeError: If it is not a whole number >= 0.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def add_sql_files(parser: argparse.ArgumentParser) -> None:
    """Add ``--sql-files dataset|any`` (what files ad hoc SQL may read; docs/sql.md).

    Args:
        parser: A command's parser.
    """
    parser.add_argument(
        "--sql-files",
        choices=("dataset", "any"),
        default="dataset",
        help="files SQL may read: only the dataset's shards (default), or any file the user "
        "can read (e.g. to join a CSV)",
    )


def storage_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--storage-option KEY=VALUE`` arguments as a mapping (None when none was given).

    Args:
        args: The parsed arguments.

    Returns:
        The options of a URL source's store (docs/storage.md).
    """
    from ..core.store import parse_storage_options

    return parse_storage_options(args.storage_option) or None


def to_stdout(output: str | None) -> bool:
    """Whether an ``--output`` value means standard output (not given, or ``-``)."""
    return output is None or output == "-"


def read_text_argument(value: str, what: str) -> str:
    """The text of an argument that may be ``-`` (standard input) or ``@FILE``.

    At most :data:`MAX_QUERY_BYTES` bytes are read, so that ``@/dev/zero`` or an endless pipe
    fails at once instead of filling memory.

    Args:
        value: The argument: the text itself, ``-``, or ``@`` followed by a file name.
        what: The argument's name in messages (``QUERY``).

    Returns:
        The text (UTF-8).

    Raises:
        ArgumentError: If the file cannot be read, is not UTF-8, is larger than the limit or
            holds only whitespace.
    """
    limit = MAX_QUERY_BYTES
    if value == "-":
        where = "standard input"
        stream = getattr(sys.stdin, "buffer", None)
        raw: bytes | str = (stream or sys.stdin).read(limit + 1)
    elif value.startswith("@"):
        name = value[1:]
        where = f"the {what} file {name}"
        try:
            with open(Path(name).expanduser(), "rb") as fh:
                raw = fh.read(limit + 1)
        except OSError as exc:
            raise ArgumentError(f"cannot read {where}: {exc.strerror or exc}") from None
    else:
        where, raw = what, value
    size = len(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
    if size > limit:
        raise ArgumentError(
            f"{where} is larger than {limit // (1 << 20)} MiB, the limit for {what} text; "
            "put large inputs in the dataset, not in the query"
        )
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ArgumentError(f"cannot read {where}: it is not UTF-8 text") from None
    else:
        text = raw
    if not text.strip():
        raise ArgumentError(f"{where} holds no SQL")
    return text


def add_view_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--query`` and ``--where``, which make the command work on a view (docs/views.md)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--query",
        metavar="SQL",
        help="work on a view: SQL over dataset that can be served row by row (text, "
        "@file.sql, or - for standard input)",
    )
    group.add_argument(
        "--where", metavar="CONDITION", help="work on the view keeping rows matching CONDITION"
    )


def view_arguments(args: argparse.Namespace) -> dict[str, str | None]:
    """``query=``/``where=`` for ``ParquetDataset`` from ``--query``/``--where``."""
    query = getattr(args, "query", None)
    if query is not None:
        query = read_text_argument(query, "--query")
    return {"query": query, "where": getattr(args, "where", None)}


@contextlib.contextmanager
def open_dataset(
    source: str,
    columns: str | None = None,
    options: dict[str, Any] | None = None,
    view: dict[str, str | None] | None = None,
) -> Iterator[ParquetDataset]:
    """Open a source as a ``ParquetDataset`` (rows as the library returns them).

    Args:
        source: The SOURCE argument.
        columns: ``--columns``: names separated by commas, or None for all.
        options: ``--storage-option`` values for a URL source.
        view: ``query``/``where`` from :func:`view_arguments`, for a view.

    Yields:
        The dataset, closed on the way out (its read-ahead thread must not be inside DuckDB
        at exit).

    Raises:
        ArgumentError: If ``columns`` holds an empty name.
    """
    from ..dataset import ParquetDataset

    names = None
    if columns is not None:
        names = [c.strip() for c in columns.split(",")]
        if not all(names):
            raise ArgumentError(f"--columns takes names separated by commas, got {columns!r}")
    view = view or {}
    ds = ParquetDataset(
        source,
        columns=names,
        storage_options=options,
        query=view.get("query"),
        where=view.get("where"),
    )
    try:
        yield ds
    finally:
        ds.close()


def print_rows(table: pa.Table, fmt: str) -> None:
    """Write a small result (every row, no table cut-off) to standard output in ``fmt``.

    Args:
        table: The rows.
        fmt: ``table``, ``csv``, ``json`` or ``jsonl``.
    """
    from . import writers

    writers.write_text(
        fmt, table.schema, table.to_batches(), sys.stdout, table_rows=None,
        terminal=sys.stdout.isatty(),
    )
    sys.stdout.flush()
