"""What every subcommand shares: the Command record, exit statuses, argument types, sources."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..common.sizes import MIB, parse_size
from ..common.text import not_utf8
from ..errors import ArgumentError

if TYPE_CHECKING:
    from ..core.query import QuerySession, SqlFiles
    from ..core.source import Source
    from ..dataset import ParquetDataset

#: Exit statuses shared by every subcommand.
EXIT_OK = 0
EXIT_FAILED = 1  # a query failed or was refused, or validation found problems
EXIT_USAGE = 2  # bad usage or bad input (paths, options, files), or an unexpected error
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)

#: The memory budget of ad hoc SQL in MiB unless ``--memory`` says (``ParquetDataset``'s).
DEFAULT_MEMORY_MIB = 4096
#: ``--memory`` must be below this many bytes (1 PiB, 2**30 MiB: what ``memory=`` refuses as a
#: byte count given by mistake).
MOST_MEMORY = 1 << 50

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
        flags: The library's names for the values the command's own flags pass on, as its
            messages give them (``pack.length``, ``split.key``, ``rank``), and the flag
            typed for each (``--length``, ``--key``, ``--rank``): the command's errors and
            warnings name the flag (:func:`~undertale_duck.cli.wording.for_the_command_line`;
            ``columns``, ``memory``, ``tables`` and ``storage_options`` hold for every
            command there).
    """

    name: str
    summary: str
    examples: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    flags: Mapping[str, str] = field(default_factory=dict)

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


#: The largest whole number an option takes unless it says less (a signed 64-bit integer).
MAX_COUNT = (1 << 63) - 1


def count(text: str) -> int:
    """An argparse type for a whole number from 0 to :data:`MAX_COUNT`.

    Args:
        text: The argument as typed.

    Returns:
        The number.

    Raises:
        argparse.ArgumentTypeError: If it is not a whole number in that range.
    """
    return count_up_to(MAX_COUNT)(text)


def count_up_to(maximum: int) -> Callable[[str], int]:
    """An argparse type for a whole number from 0 to ``maximum``, checked before any use.

    Args:
        maximum: The largest number accepted.

    Returns:
        The type function (its errors are one clean line, exit status 2).
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not 0 <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from 0 to {maximum}, got {value}"
            )
        return value

    parse.__name__ = "count"  # argparse names the type in its messages
    return parse


def add_sql_files(parser: argparse.ArgumentParser) -> None:
    """Add ``--sql-files dataset|any`` and ``--memory MIB`` (ad hoc SQL's limits; docs/sql.md).

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
    add_memory(
        parser,
        "DuckDB's memory limit, and a query whose result would hold more string values at "
        "once than it allows (a dictionary bomb) is refused before it runs",
    )


def add_memory(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--memory MIB`` (the command's memory budget; ``0``: none).

    Args:
        parser: A command's parser.
        what: What the budget bounds, for the help text.
    """
    parser.add_argument(
        "--memory",
        type=memory_size,
        default=DEFAULT_MEMORY_MIB,
        metavar="SIZE",
        help=f"memory budget: MiB, or a size such as 2GiB or 500MB (default "
        f"{DEFAULT_MEMORY_MIB}, as ParquetDataset's memory=): {what}; 0: no budget",
    )


def memory_size(text: str) -> float:
    """An argparse type for ``--memory``: MiB, or a size with its unit (``2GiB``, ``500MB``).

    Args:
        text: The argument as typed.

    Returns:
        The budget in MiB.

    Raises:
        argparse.ArgumentTypeError: If it is not a size (:func:`parse_size`), or is 1 PiB or
            more.
    """
    try:
        size = parse_size(text, "--memory", "MiB")
    except ArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size >= MOST_MEMORY:
        # passed on in MiB, so many would be refused downstream as "a byte count by
        # mistake" under the name memory=, which the user never typed: refused here instead
        raise argparse.ArgumentTypeError(
            f"--memory must be less than 1 PiB, got {text!r}; 0 turns the budget off"
        )
    return size / MIB


def query_session(
    source: Source, sql_files: SqlFiles, memory: float
) -> QuerySession:
    """A read-only ad hoc SQL session over a source, within a memory budget.

    Args:
        source: The opened source.
        sql_files: ``--sql-files``.
        memory: ``--memory`` in MiB (0: no budget).

    Returns:
        The session (close it when done).
    """
    from ..core.query import QuerySession, memory_limit
    from ..core.runtime import default_duckdb_config

    config = default_duckdb_config()
    budget = int(memory * MIB)
    if budget:
        config["memory_limit"] = memory_limit(budget)
    return QuerySession(source, config, sql_files=sql_files, memory_bytes=budget)


def storage_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--storage-option KEY=VALUE`` arguments as a mapping (None when none was given).

    A local path ignores them, as ``ParquetDataset`` does (docs/storage.md); one warning
    line says so, since a typed option that changes nothing is easy to miss.

    Args:
        args: The parsed arguments.

    Returns:
        The options of a URL source's store (docs/storage.md).
    """
    from ..common.text import terminal_safe
    from ..core.source import is_remote, parse_storage_options

    options = parse_storage_options(args.storage_option) or None
    source = args.source
    local = not is_remote(source) and source[:7].lower() != "file://"  # file://: checked
    if options and local and not getattr(args, "storage_option_warned", False):
        args.storage_option_warned = True  # commands may ask more than once
        print(
            "undertale-duck: warning: --storage-option applies only to URL sources "
            f"(s3://, gs://, https://, file:// ...); ignored for the local source "
            f"{terminal_safe(source)}",
            file=sys.stderr, flush=True,
        )
    return options


#: Arguments that are text (SQL, names, an address), not paths, by ``dest``: how they are
#: typed. Paths (SOURCE, ``--output``, ``@FILE``, a side table's file) may hold any bytes.
TEXT_ARGUMENTS = {
    "query": "QUERY", "view_query": "--query", "view_where": "--where", "where": "--where",
    "columns": "--columns", "column": "--column", "alongside": "--alongside", "key": "--key",
    "ray": "--ray", "view_tables": "--table NAME",
}


def check_text_arguments(args: argparse.Namespace) -> None:
    """Refuse text arguments holding bytes that are not UTF-8 (no path may be one).

    Python passes such bytes on as lone surrogates, which DuckDB, pyarrow and the UTF-8
    codec then refuse with their own errors, far from the argument that holds them.

    Args:
        args: The parsed arguments.

    Raises:
        ArgumentError: Naming the argument.
    """
    for dest, name in TEXT_ARGUMENTS.items():
        value = getattr(args, dest, None)
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str) or item == "-" or (
                dest in ("query", "view_query") and item.startswith("@")
            ):
                continue
            text = item.partition("=")[0] if dest == "view_tables" else item
            shown = not_utf8(text)
            if shown is not None:
                raise ArgumentError(
                    f"{name} '{shown}' is not valid UTF-8 text: type it in UTF-8 (check the "
                    "terminal's locale)"
                )


#: Help text of the flags that take column names (``--columns``, ``--alongside``).
NAMES_HELP = 'names separated by commas; a name holding a comma goes in double quotes: \'"a,b",id\''


def column_names(text: str, flag: str) -> list[str]:
    """The column names of a flag such as ``--columns``: names separated by commas.

    A name in double quotes, as SQL quotes one, is taken as it is written, commas and
    spaces included (``"a,b"``; ``""`` inside is one ``"``); other names lose the spaces
    around them. ``id, label`` and ``"a,b",id`` are two names each.

    Args:
        text: The flag's value as typed.
        flag: The flag, for messages (``--columns``).

    Returns:
        The names, in order.

    Raises:
        ArgumentError: If a name is empty, a quote is not closed, or text follows a quoted
            name before the next comma.
    """
    names: list[str] = []
    i, end = 0, len(text)
    while True:
        while i < end and text[i].isspace():
            i += 1
        if i < end and text[i] == '"':
            opened, parts = i, []
            i += 1
            while True:
                close = text.find('"', i)
                if close < 0:
                    raise ArgumentError(
                        f"{flag}: the name in double quotes from character {opened + 1} of "
                        f"{text!r} has no closing quote; end it with \" (and write \"\" for "
                        "a quote inside a name)"
                    )
                parts.append(text[i:close])
                i = close + 1
                if not text.startswith('"', i):
                    break
                parts.append('"')  # "" inside quotes: one quote
                i += 1
            name = "".join(parts)
            while i < end and text[i].isspace():
                i += 1
            if i < end and text[i] != ",":
                raise ArgumentError(
                    f"{flag}: text follows the quoted name {name!r} in {text!r}; separate "
                    "names with commas"
                )
        else:
            comma = text.find(",", i)
            stop = end if comma < 0 else comma
            name, i = text[i:stop].strip(), stop
        if not name:
            raise ArgumentError(
                f"{flag} takes names separated by commas, got {text!r}; put a name holding "
                'a comma in double quotes: \'"a,b"\''
            )
        names.append(name)
        if i >= end:
            return names
        i += 1  # the comma


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
        if not name:  # Path("") is the working directory: "Is a directory" would puzzle
            raise ArgumentError(f"{what} '@' needs a file name after it, as in @query.sql")
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


def add_view_options(parser: argparse.ArgumentParser, *, adhoc: bool = False) -> None:
    """Add ``--query``, ``--where`` and ``--table``, which make a command work on a view.

    The parsed values are read by :func:`view_arguments` (``--query`` lands in
    ``view_query``, so that a command's own positional QUERY keeps ``query``).

    Args:
        parser: A command's parser.
        adhoc: The command also runs ad hoc SQL (``sql``, ``shell``): the help says that
            the view is ``dataset_view`` there.
    """
    seen = "; QUERY sees the view as dataset_view, dataset stays every shard" if adhoc else ""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--query",
        dest="view_query",
        metavar="VIEW_SQL" if adhoc else "SQL",
        help=("define a view (not the SQL to run): " if adhoc else "work on a view: ")
        + f"SQL over dataset that can be served row by row (text, @file.sql, or -){seen}",
    )
    group.add_argument(
        "--where",
        dest="view_where",
        metavar="CONDITION",
        help=f"work on the view keeping the rows matching CONDITION{seen}",
    )
    parser.add_argument(
        "--table",
        dest="view_tables",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a side table the --query view may join: a Parquet or CSV file (repeatable)",
    )


def view_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """``query=``, ``where=`` and ``tables=`` for ``ParquetDataset`` from the view options.

    Args:
        args: The parsed arguments (of a command with :func:`add_view_options`).

    Returns:
        The keyword arguments; all None when no view was asked for.

    Raises:
        ArgumentError: If ``--query`` cannot be read or a ``--table`` is not ``NAME=FILE``.
    """
    query = getattr(args, "view_query", None)
    if query is not None:
        query = read_text_argument(query, "--query")
    tables: dict[str, str] = {}
    for item in getattr(args, "view_tables", None) or []:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path:
            raise ArgumentError(f"--table takes NAME=FILE (a Parquet or CSV file), got {item!r}")
        if name.strip() in tables:
            raise ArgumentError(f"--table {name.strip()} is given twice")
        tables[name.strip()] = os.path.expanduser(path)
    if tables and query is None:
        raise ArgumentError("--table is for views: pass --query joining the side table as well")
    return {"query": query, "where": getattr(args, "view_where", None), "tables": tables or None}


def input_files(args: argparse.Namespace) -> list[str]:
    """The input files an output file must never replace (even with ``--force``).

    The side tables (``--table NAME=FILE``), query texts given as ``@FILE`` (``QUERY``,
    ``--query``) and a schema given as ``path/to/file.py:Class``.
    """
    items = getattr(args, "view_tables", None) or []
    files = [path for _, sep, path in (i.partition("=") for i in items) if sep]
    for value in (getattr(args, "query", None), getattr(args, "view_query", None)):
        if isinstance(value, str) and value.startswith("@"):
            files.append(value[1:])
    schema = getattr(args, "schema", None)
    if isinstance(schema, str) and schema.rpartition(":")[0].endswith(".py"):
        files.append(schema.rpartition(":")[0])
    return [os.path.expanduser(path) for path in files]


def has_view(view: Mapping[str, Any]) -> bool:
    """Whether :func:`view_arguments` asked for a view."""
    return view.get("query") is not None or view.get("where") is not None


@contextlib.contextmanager
def open_dataset(
    source: str,
    columns: str | None = None,
    options: dict[str, Any] | None = None,
    view: Mapping[str, Any] | None = None,
    *,
    sql_files: SqlFiles = "any",
    memory: float = DEFAULT_MEMORY_MIB,
) -> Iterator[ParquetDataset]:
    """Open a source as a ``ParquetDataset`` (rows as the library returns them).

    Args:
        source: The SOURCE argument.
        columns: ``--columns``: names separated by commas (:func:`column_names`), or None
            for all.
        options: ``--storage-option`` values for a URL source.
        view: ``query``/``where``/``tables`` from :func:`view_arguments`, for a view.
        sql_files: ``--sql-files`` for the dataset's ad hoc SQL (``ds.sql``).
        memory: The dataset's memory budget in MiB (``--memory``).

    Yields:
        The dataset, closed on the way out (its read-ahead thread must not be inside DuckDB
        at exit).

    Raises:
        ArgumentError: If ``columns`` holds an empty name or an unclosed quote.
    """
    from ..dataset import ParquetDataset

    names = None if columns is None else column_names(columns, "--columns")
    view = view or {}
    ds = ParquetDataset(
        source,
        columns=names,
        storage_options=options,
        query=view.get("query"),
        where=view.get("where"),
        tables=view.get("tables"),
        sql_files=sql_files,
        memory=memory,
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
