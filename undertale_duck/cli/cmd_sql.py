"""``undertale-duck sql``: run read-only SQL over the ``dataset`` view and write the result."""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from ..common.text import first_line
from ..errors import ArgumentError, QueryError, UndertaleDuckError
from . import writers
from .command import (
    EXIT_OK,
    Command,
    add_sql_files,
    add_view_options,
    count,
    has_view,
    input_files,
    open_dataset,
    query_session,
    read_text_argument,
    storage_options,
    to_stdout,
    view_arguments,
)
from .guard import OutputFile, Protected

if TYPE_CHECKING:
    from ..core.query import QuerySession

#: Rows DuckDB hands over per record batch.
BATCH_ROWS = 8192


def _write(
    reader: pa.RecordBatchReader, fmt: str, target: OutputFile | None, rows: int | None
) -> None:
    batches = writers.limit(reader, rows)
    # the first batch is computed before the output file is created: a long query runs
    # before the target is judged, not after
    first = next(batches, None)
    result: Iterator[pa.RecordBatch] = itertools.chain([] if first is None else [first], batches)
    table_rows = rows if rows is not None else writers.TABLE_ROWS
    if target is None:
        terminal = sys.stdout.isatty()
        writers.write_text(
            fmt, reader.schema, result, sys.stdout, table_rows=table_rows, terminal=terminal
        )
        sys.stdout.flush()
        return
    if fmt == "table" and rows is None:
        result = _whole_table(result)
    with target.open() as stream:
        if fmt == "parquet":
            writers.write_parquet(reader.schema, result, stream)
            return
        text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
        try:
            writers.write_text(fmt, reader.schema, result, text, table_rows=table_rows)
        finally:
            text.detach()  # flushes; the guard syncs and closes the file


def _whole_table(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, refusing a result longer than a table shows (a file loses no row silently)."""
    seen = 0
    for batch in batches:
        seen += batch.num_rows
        if seen > writers.TABLE_ROWS:
            raise ArgumentError(
                f"the result has more than {writers.TABLE_ROWS} rows, more than a table file "
                "holds: give --limit N to write its first N rows as a table, or write .csv, "
                ".jsonl or .parquet, which keep every row"
            )
        yield batch


@contextlib.contextmanager
def _session(args: argparse.Namespace) -> Iterator[tuple[QuerySession, list[str]]]:
    """The read-only session the QUERY runs in, with the shard paths the output must avoid.

    With ``--query``/``--where`` it is the session of ``ds.sql`` on the view's dataset:
    ``dataset`` is every shard and ``dataset_view`` the view.
    """
    from ..core.source import Source

    view = view_arguments(args)
    if has_view(view):
        with open_dataset(
            args.source, None, storage_options(args), view, sql_files=args.sql_files,
            memory=args.memory,
        ) as ds:
            yield ds.sql_session, ds.source.paths
        return
    src = Source(args.source, storage_options=storage_options(args))
    # the session runs each batch so that Ctrl-C interrupts DuckDB at once (core/interrupt.py)
    session = query_session(src, args.sql_files, args.memory)
    try:
        yield session, src.paths
    finally:
        session.close()


def run(args: argparse.Namespace) -> int:
    """Run ``sql``: stream one read-only statement's result to stdout or a guarded file.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status.
    """
    if args.query == "-" and args.view_query == "-":
        raise ArgumentError("QUERY and --query cannot both be read from standard input")
    text = read_text_argument(args.query, "QUERY")
    output = None if to_stdout(args.output) else args.output
    if output is None:
        fmt = writers.choose_format(args.format, output, sys.stdout.isatty())
    with _session(args) as (session, paths):
        target = None
        if output is not None:  # fail fast; judged again when the file is created
            protected = Protected.of(args.source, paths, files=input_files(args))
            target = OutputFile(output, protected=protected, force=args.force)
            # after the guard: a refused target is named as such, not for its suffix
            fmt = writers.choose_format(args.format, output, sys.stdout.isatty())
        with session.batches(text, batch_rows=BATCH_ROWS) as reader:
            try:
                _write(reader, fmt, target, args.limit)
            except UndertaleDuckError:
                raise
            except (ValueError, OverflowError, pa.ArrowException) as exc:
                # a value the format cannot hold (a date outside Python's range, an interval
                # in Parquet): the query ran, its result cannot be written
                raise QueryError(
                    f"cannot write the result as {fmt}: {first_line(exc, limit=2000)}"
                ) from None
    return EXIT_OK


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "query",
        metavar="QUERY",
        help="the SQL to run: text, '-' for standard input, or @FILE.sql (1 MiB at most); "
        "dataset is every row of every shard, and with --query/--where, dataset_view is "
        "the view",
    )
    p.add_argument(
        "--format",
        "-f",
        choices=writers.RESULT_FORMATS,
        help="output format (default: table on a terminal, csv in a pipe, or --output's suffix)",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the result to FILE ('-': standard output; never inside the dataset; "
        "needed for parquet)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace --output if it is an existing regular file"
    )
    p.add_argument(
        "--limit",
        type=count,
        metavar="N",
        help="stop after N rows (a table shows at most 100 rows unless --limit is given)",
    )
    add_sql_files(p)
    add_view_options(p, adhoc=True)


COMMAND = Command(
    name="sql",
    summary="Run read-only SQL in which `dataset` is the view over every shard.",
    examples="  undertale-duck sql data/train \\\n"
    "      \"SELECT label, count(*) AS n FROM dataset GROUP BY label\"\n"
    "  undertale-duck sql data/train 'SELECT * FROM dataset WHERE len(tokens) > 500' "
    "--format jsonl | head\n"
    "  undertale-duck sql data/train @query.sql --output result.parquet\n"
    "  echo 'SELECT count(*) FROM dataset' | undertale-duck sql data/train -\n"
    "  undertale-duck sql data/train --where 'len(tokens) < 512' \\\n"
    "      'SELECT label, count(*) FROM dataset_view GROUP BY label'\n"
    "\n"
    "QUERY is the SQL to run. --query VIEW_SQL (or --where, with --table side tables)\n"
    "defines a view, as ParquetDataset(query=...) does: QUERY then sees it as dataset_view\n"
    "(in no set order: add ORDER BY), while dataset is still every row of every shard.\n"
    "A view that cannot be served row by row is refused (exit 1).\n"
    "One statement; only SELECT and EXPLAIN SELECT run (COPY, ATTACH, CREATE, CALL ... are\n"
    "refused), and it reads only the dataset's files unless --sql-files any: the dataset\n"
    "is read-only and results are written only to --output, never inside the dataset, never\n"
    "through a link or onto a special file, and over an existing file only with --force. The\n"
    "default format is table on a terminal and csv in a pipe; with --output it follows the\n"
    "file's suffix (.csv, .json, .jsonl, .parquet). In csv/json/jsonl, bytes are base64 and\n"
    "times ISO 8601. Ctrl-C stops a running query.\n"
    "Exit status: 0 ok, 1 the query failed or was refused, 2 bad usage or input,\n"
    "130 interrupted.",
    arguments=_arguments,
    run=run,
)
