"""The ``undertale-duck`` command line: one subcommand per job, errors as one line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import duckdb
import pyarrow as pa

from ..common.jsonvalue import jsonable
from ..errors import ArgumentError, QueryError, UndertaleDuckError

if TYPE_CHECKING:
    from ..core.source import Connection, Source
    from ..dataset import ParquetDataset as ParquetDatasetT

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
    from .. import __version__

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


# --------------------------------------------------------------------------- inspection commands
# sql, describe, head, row, shell: ad hoc, read-only inspection of a dataset (README "Command
# line"). Output writers live in output.py, describe's report in describe.py, the prompt in
# shell.py.


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _subparser(
    commands: argparse._SubParsersAction[_Parser], name: str, summary: str, examples: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a Parquet file, a directory of shards, or a quoted glob such as 'data/*.parquet'",
    )
    _add_storage_option(parser)
    return parser


def _add_storage_option(parser: argparse.ArgumentParser) -> None:
    # SOURCE may be a URL (s3://bucket/prefix/, gs://, https://...): docs/storage.md
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of a URL source's store (repeatable; JSON values; a dotted KEY "
        "nests: client_kwargs.endpoint_url=http://host:9000); see docs/storage.md",
    )


def _storage_options(args: argparse.Namespace) -> dict[str, object] | None:
    from ..core.store import parse_storage_options

    return parse_storage_options(args.storage_option) or None


@contextlib.contextmanager
def _open_dataset(
    source: str, columns: str | None = None, options: dict[str, object] | None = None
) -> Iterator[ParquetDatasetT]:
    # closed on the way out: its read-ahead thread must not be inside DuckDB at exit
    from ..dataset import ParquetDataset

    names = None
    if columns is not None:
        names = [c.strip() for c in columns.split(",")]
        if not all(names):
            raise ArgumentError(f"--columns takes names separated by commas, got {columns!r}")
    ds = ParquetDataset(source, columns=names, storage_options=options)
    try:
        yield ds
    finally:
        ds.close()


@contextlib.contextmanager
def _open_view(
    source: str, options: dict[str, object] | None = None
) -> Iterator[tuple[Source, Connection]]:
    # The `dataset` view alone, as ParquetDataset attaches it, without importing torch (the
    # `sql` and `shell` commands need no rows as Python objects): starts about 2 s faster.
    from ..core.duck import default_duckdb_config
    from ..core.source import Source

    src = Source(source, storage_options=options)
    con = src.connection(default_duckdb_config())
    try:
        yield src, con
    finally:
        con.close()


def _protected_directories(source: str, shards: Sequence[str]) -> list[str]:
    if os.path.isdir(source):
        return [source]
    if os.path.isfile(source):
        return []
    # a glob: the shards' directories and the directory the pattern starts from
    cut = min((source.find(c) for c in "*?[" if c in source), default=len(source))
    root = os.path.dirname(source[:cut]) or "."
    return sorted({root, *(os.path.dirname(s) for s in shards)})


def _write_result(
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    fmt: str,
    output_path: str | None,
    *,
    table_rows: int | None,
) -> None:
    from . import output

    def write(stream: IO[str]) -> None:
        if fmt == "csv":
            output.write_csv(schema, batches, stream)
        elif fmt == "json":
            output.write_json(schema, batches, stream)
        elif fmt == "jsonl":
            output.write_jsonl(schema, batches, stream)
        else:
            tty = stream.isatty()
            output.write_table(
                schema,
                batches,
                stream,
                max_rows=table_rows,
                width=shutil.get_terminal_size().columns if tty else None,
                color=tty,
            )

    if output_path is None:
        write(sys.stdout)
        sys.stdout.flush()
        return
    try:
        with output.atomic_file(output_path) as tmp:
            if fmt == "parquet":
                output.write_parquet(schema, batches, tmp)
            else:
                with open(tmp, "w", encoding="utf-8", newline="") as stream:
                    write(stream)
    except OSError as exc:
        raise ArgumentError(
            f"cannot write --output {output_path}: {exc.strerror or exc}"
        ) from None


def _query_text(query: str) -> str:
    if query == "-":
        text = sys.stdin.read()
        where = "standard input"
    elif query.startswith("@"):
        name = query[1:]
        try:
            text = Path(name).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ArgumentError(f"cannot read the query file {name}: {reason}") from None
        where = f"the query file {name}"
    else:
        text, where = query, "QUERY"
    if not text.strip():
        raise ArgumentError(f"{where} holds no SQL")
    return text


def _sql(args: argparse.Namespace) -> int:
    from . import output

    text = _query_text(args.query)
    fmt = output.choose_format(args.format, args.output, sys.stdout.isatty())
    with _open_view(args.source, _storage_options(args)) as (src, con):
        return _run_sql(src, con, args, text, fmt)


def _run_sql(
    src: Source, con: Connection, args: argparse.Namespace, text: str, fmt: str
) -> int:
    from ..core import query as querymod
    from . import output

    target = None
    if args.output is not None:
        target = output.check_output_path(
            args.output,
            shards=src.paths,
            directories=_protected_directories(args.source, src.paths),
            force=args.force,
        )
    querymod.check_read_only(text)
    src.check_unchanged()
    try:
        relation = con.cursor().sql(text)
        if relation is None:  # a statement without a result
            return EXIT_OK
        reader = relation.to_arrow_reader(8192)
    except (duckdb.Error, pa.ArrowException) as exc:
        raise QueryError("query failed: " + " ".join(str(exc).split())) from None

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from reader
        except (duckdb.Error, pa.ArrowException) as exc:
            raise QueryError("query failed: " + " ".join(str(exc).split())) from None

    table_rows = args.limit if args.limit is not None else output.TABLE_ROWS
    try:
        _write_result(
            reader.schema,
            output.limit(batches(), args.limit),
            fmt,
            target,
            table_rows=table_rows,
        )
    finally:
        reader.close()
    return EXIT_OK


def register_sql(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``undertale-duck sql``.

    Args:
        commands: The subparsers of the top-level parser.
    """
    p = _subparser(
        commands,
        "sql",
        "Run read-only SQL in which `dataset` is the view over every shard.",
        "  undertale-duck sql data/train \\\n"
        "      \"SELECT label, count(*) AS n FROM dataset GROUP BY label\"\n"
        "  undertale-duck sql data/train 'SELECT * FROM dataset WHERE len(tokens) > 500' "
        "--format jsonl | head\n"
        "  undertale-duck sql data/train @query.sql --output result.parquet\n"
        "  echo 'SELECT count(*) FROM dataset' | undertale-duck sql data/train -\n"
        "\n"
        "Only SELECT, EXPLAIN and CALL run (COPY, ATTACH, CREATE ... are refused): the dataset\n"
        "is read-only and results are written only to --output. The default format is table on\n"
        "a terminal and csv in a pipe; with --output it follows the file's suffix (.csv, .json,\n"
        ".jsonl, .parquet). In csv/json/jsonl, bytes are base64 and times ISO 8601.\n"
        "Exit status: 0 ok, 1 the query failed or was refused, 2 bad usage or input.",
    )
    p.add_argument("query", metavar="QUERY", help="SQL text, '-' for standard input, or @FILE.sql")
    p.add_argument(
        "--format",
        "-f",
        choices=("table", "csv", "json", "jsonl", "parquet"),
        help="output format (default: table on a terminal, csv in a pipe, or --output's suffix)",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the result to FILE (never inside the dataset; needed for parquet)",
    )
    p.add_argument("--force", action="store_true", help="replace --output if it exists")
    p.add_argument(
        "--limit",
        type=_count,
        metavar="N",
        help="stop after N rows (a table shows at most 100 rows unless --limit is given)",
    )
    p.set_defaults(handler=_sql)


def _describe(args: argparse.Namespace) -> int:
    from ..common.progress import progress_bar
    from . import describe

    with progress_bar("scanning shards", unit=" shards") as progress:
        report = describe.describe(
            args.source, scan=args.scan, progress=progress, storage_options=_storage_options(args)
        )
    if args.format == "json":
        json.dump(report.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(report.to_text())
    sys.stdout.flush()
    bad = report.errors
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        print(
            f"undertale-duck: error: shard {bad[0].path} cannot be read: {bad[0].error}{more}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK


def register_describe(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``undertale-duck describe``.

    Args:
        commands: The subparsers of the top-level parser.
    """
    p = _subparser(
        commands,
        "describe",
        "Describe a dataset: shards, totals, column types, null counts, min/max, schema drift.",
        "  undertale-duck describe data/train\n"
        "  undertale-duck describe data/train --scan            # exact statistics, reads "
        "every value\n"
        "  undertale-duck describe 'data/*.parquet' --format json | jq .totals\n"
        "\n"
        "Without --scan only the footers are read: null counts and min/max come from the\n"
        "writers' statistics ('?' when a writer recorded none; nested columns have none).\n"
        "Shards whose columns or types differ from the first shard's are listed as drift.\n"
        "Exit status: 0 ok, 2 when the source is missing or a shard cannot be read (the other\n"
        "shards are still described).",
    )
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.add_argument(
        "--scan", action="store_true", help="read every value for exact statistics (slow)"
    )
    p.set_defaults(handler=_describe)


def _head(args: argparse.Namespace) -> int:
    from . import output

    fmt = output.choose_format(args.format, None, sys.stdout.isatty())
    with _open_dataset(args.source, args.columns, _storage_options(args)) as ds:
        rows = ds.__getitems__(list(range(min(args.n, len(ds)))))
    table = pa.Table.from_pylist(rows, schema=ds.schema)
    _write_result(table.schema, table.to_batches(), fmt, None, table_rows=None)
    return EXIT_OK


def register_head(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``undertale-duck head``.

    Args:
        commands: The subparsers of the top-level parser.
    """
    p = _subparser(
        commands,
        "head",
        "Show the first rows of a dataset, in dataset order.",
        "  undertale-duck head data/train\n"
        "  undertale-duck head data/train -n 3 --columns id,label\n"
        "  undertale-duck head data/train -n 1000 --format jsonl > first.jsonl\n",
    )
    p.add_argument("-n", type=_count, default=10, metavar="N", help="rows to show (default 10)")
    p.add_argument("--columns", "-c", metavar="A,B", help="only these columns, in this order")
    p.add_argument(
        "--format",
        "-f",
        choices=("table", "csv", "json", "jsonl"),
        help="output format (default: table on a terminal, csv in a pipe)",
    )
    p.set_defaults(handler=_head)


def _row(args: argparse.Namespace) -> int:

    with _open_dataset(args.source, args.columns, _storage_options(args)) as ds:
        total = len(ds)
        try:
            shard, local = ds.locate(args.index)
        except IndexError:
            raise ArgumentError(
                f"INDEX {args.index} is out of range: the dataset has {total} rows "
                f"(valid: 0..{total - 1}, or -{total}..-1 from the end)"
            ) from None
        index = args.index % total
        values = ds[index]
    if args.format == "json":
        record = {
            "index": index,
            "shard": shard,
            "shard_row": local,
            "row": jsonable(values),
        }
        print(json.dumps(record, ensure_ascii=False, allow_nan=False, indent=2))
        return EXIT_OK
    print(f"row {index} of {total}: row {local} of shard {shard}")
    width = max((len(k) for k in values), default=0)
    for key, value in values.items():
        print(f"  {key.ljust(width)}  {value!r}")
    return EXIT_OK


def register_row(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``undertale-duck row``.

    Args:
        commands: The subparsers of the top-level parser.
    """
    p = _subparser(
        commands,
        "row",
        "Show one row exactly as ParquetDataset returns it, with its shard and local row.",
        "  undertale-duck row data/train 12345\n"
        "  undertale-duck row data/train -1                 # the last row\n"
        "  undertale-duck row data/train 7 --format json --columns id,tokens\n"
        "\n"
        "Text output shows each value as Python's repr() of what ds[INDEX] returns; json\n"
        "converts it as `sql --format json` does (bytes base64, times ISO 8601).",
    )
    p.add_argument(
        "index", type=int, metavar="INDEX", help="global row index (negative: from the end)"
    )
    p.add_argument("--columns", "-c", metavar="A,B", help="only these columns, in this order")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.set_defaults(handler=_row)


def _shell(args: argparse.Namespace) -> int:
    from . import shell

    return shell.main(
        args.source, fmt=args.format, sql_files=args.sql_files,
        storage_options=_storage_options(args),
    )


def register_shell(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``undertale-duck shell``.

    Args:
        commands: The subparsers of the top-level parser.
    """
    p = _subparser(
        commands,
        "shell",
        "An interactive read-only SQL prompt in which `dataset` is the view over every shard.",
        "  undertale-duck shell data/train\n"
        "  duck> SELECT label, count(*) FROM dataset\n"
        "    ...> GROUP BY label;\n"
        "  duck> .help\n"
        "  printf 'SELECT count(*) FROM dataset;\\n' | undertale-duck shell data/train\n"
        "\n"
        "Statements end with ';' and may span lines; .help lists the dot commands. On a\n"
        "terminal: line editing and a history file ($XDG_STATE_HOME/undertale-duck/\n"
        "shell_history, else ~/.cache/undertale-duck/shell_history). With piped input there\n"
        "is no prompt, errors name their line, and the exit status is 1 if a statement failed.",
    )
    p.add_argument(
        "--format",
        "-f",
        choices=("table", "csv", "json", "jsonl"),
        default="table",
        help="how results are shown (default table; .format changes it)",
    )
    p.add_argument(
        "--sql-files",
        choices=("dataset", "any"),
        default="dataset",
        help="files SQL may read: only the dataset's shards (default), or any file the user "
        "can read (e.g. to join a CSV)",
    )
    p.set_defaults(handler=_shell)


REGISTRY.extend([register_sql, register_describe, register_head, register_row, register_shell])


# --------------------------------------------------------------------------- validate
# `undertale-duck validate`: schema checks over every shard (README "Validation").

_REPORT_SUFFIXES = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html"}


def _validate(args: argparse.Namespace) -> int:
    from ..common.progress import progress_bar
    from ..validation import render as report
    from ..validation import runner
    from ..validation import schemas as schema

    model = schema.load_schema(args.schema)
    fmt: str = args.format or _REPORT_SUFFIXES.get(Path(args.output or "").suffix.lower(), "text")
    if args.output is not None:
        target = os.path.realpath(args.output)
        if os.path.isdir(target):
            raise ArgumentError(f"--output {args.output} is a directory; give a file name")
    with progress_bar("validating", unit=" queries") as progress:
        result = runner.report_for(
            args.source, model, examples=args.examples, progress=progress,
            storage_options=_storage_options(args),
        )
    text = report.render(result, fmt)
    if args.output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        target = os.path.realpath(args.output)
        shards = {os.path.realpath(s.path) for s in result.shard_summaries}
        if target in shards:
            raise ArgumentError(f"--output {args.output} is a shard of the dataset; refusing it")
        tmp = f"{target}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(tmp, target)
        except OSError as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise ArgumentError(f"cannot write --output {args.output}: {exc.strerror}") from None
        print(f"undertale-duck: {result.summary()}", file=sys.stderr)
    return EXIT_OK if result.passed else EXIT_FAILED


def register_validate(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``undertale-duck validate``.

    Args:
        commands: The subparsers of the top-level parser.
    """
    from ..validation.render import REPORT_FORMATS
    from ..validation.runner import DEFAULT_EXAMPLES

    summary = "Check every shard of a dataset against a schema and print a validation report."
    p: argparse.ArgumentParser = commands.add_parser(
        "validate",
        help=summary,
        description=summary,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  undertale-duck validate data/train --schema TokenizedClassificationDataset\n"
        "  undertale-duck validate 'data/*.parquet' --schema myproject.schemas:Functions\n"
        "  undertale-duck validate data/train --schema schemas.py:Functions --format json\n"
        "  undertale-duck validate data/train --schema TokenizedDataset --output report.html\n"
        "\n"
        "SCHEMA is a built-in schema name (TokenizedDataset, FunctionDataset, ...; see\n"
        "undertale_duck.schema), 'module:Class' for an importable module, or\n"
        "'path/to/file.py:Class'. Unreadable shards are reported as failed 'readable' checks.\n"
        "With --output the format follows the suffix (.json, .md, .html) unless --format is\n"
        "given. Exit status: 0 every check passed, 1 a check failed, 2 bad usage or input.",
    )
    p.add_argument(
        "source",
        metavar="SOURCE",
        help="a Parquet file, a directory of shards, or a quoted glob such as 'data/*.parquet'",
    )
    _add_storage_option(p)
    p.add_argument(
        "--schema",
        "-s",
        required=True,
        metavar="SCHEMA",
        help="built-in schema name, module:Class or path/to/file.py:Class",
    )
    p.add_argument(
        "--format",
        "-f",
        choices=REPORT_FORMATS,
        help="report format (default: text, or --output's suffix)",
    )
    p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    p.add_argument(
        "--examples",
        type=_count,
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"offending rows shown per failed check (default {DEFAULT_EXAMPLES})",
    )
    p.set_defaults(handler=_validate)


REGISTRY.append(register_validate)
