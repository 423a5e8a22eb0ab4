"""``undertale-duck head`` and ``row``: rows exactly as ``ParquetDataset`` returns them."""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow as pa

from ..common.jsonvalue import jsonable
from ..common.text import cells, pad, terminal_safe
from ..errors import ArgumentError
from . import writers
from .command import (
    EXIT_OK,
    NAMES_HELP,
    Command,
    add_memory,
    add_view_options,
    count,
    open_dataset,
    print_rows,
    storage_options,
    view_arguments,
)


def run_head(args: argparse.Namespace) -> int:
    """Run ``head``: the first N rows, in dataset order, to standard output.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status.
    """
    fmt = writers.choose_format(args.format, None, sys.stdout.isatty())
    with open_dataset(
        args.source, args.columns, storage_options(args), view_arguments(args),
        memory=args.memory,
    ) as ds:
        rows = ds.__getitems__(list(range(min(args.n, len(ds)))))
    table = pa.Table.from_pylist(rows, schema=ds.schema)
    print_rows(table, fmt)
    return EXIT_OK


def run_row(args: argparse.Namespace) -> int:
    """Run ``row``: one row with its shard and the row's place in it.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status.

    Raises:
        ArgumentError: If INDEX is out of range.
    """
    with open_dataset(
        args.source, args.columns, storage_options(args), view_arguments(args),
        memory=args.memory,
    ) as ds:
        total = len(ds)
        try:
            shard, local = ds.locate(args.index)
        except IndexError:
            valid = (
                f"(valid: 0..{total - 1}, or -{total}..-1 from the end)" if total
                else "(no index is valid)"  # not "0..-1, or -0..-1"
            )
            raise ArgumentError(
                f"INDEX {args.index} is out of range: the dataset has {total} rows {valid}"
            ) from None
        index = args.index % total
        values = ds[index]
    if args.format == "json":
        record = {"index": index, "shard": shard, "shard_row": local, "row": jsonable(values)}
        print(json.dumps(record, ensure_ascii=False, allow_nan=False, indent=2))
        return EXIT_OK
    print(f"row {index} of {total}: row {local} of shard {terminal_safe(shard)}")
    names = {key: terminal_safe(key) for key in values}  # values print as repr: escaped
    width = max((cells(n) for n in names.values()), default=0)
    for key, value in values.items():
        print(f"  {pad(names[key], width)}  {value!r}")
    return EXIT_OK


def _head_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", type=count, default=10, metavar="N", help="rows to show (default 10)")
    p.add_argument("--columns", "-c", metavar="A,B",
                   help=f"only these columns, in this order: {NAMES_HELP}")
    p.add_argument(
        "--format",
        "-f",
        choices=("table", "csv", "json", "jsonl"),
        help="output format (default: table on a terminal, csv in a pipe)",
    )
    add_memory(p, "the windows the rows are read from")
    add_view_options(p)


def _row_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "index", type=int, metavar="INDEX", help="global row index (negative: from the end)"
    )
    p.add_argument("--columns", "-c", metavar="A,B",
                   help=f"only these columns, in this order: {NAMES_HELP}")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    add_memory(p, "the window the row is read from")
    add_view_options(p)


HEAD = Command(
    name="head",
    summary="Show the first rows of a dataset, in dataset order.",
    examples="  undertale-duck head data/train\n"
    "  undertale-duck head data/train -n 3 --columns id,label\n"
    "  undertale-duck head data/train -n 1000 --format jsonl > first.jsonl\n",
    arguments=_head_arguments,
    run=run_head,
)

ROW = Command(
    name="row",
    summary="Show one row exactly as ParquetDataset returns it, with its shard and local row.",
    examples="  undertale-duck row data/train 12345\n"
    "  undertale-duck row data/train -1                 # the last row\n"
    "  undertale-duck row data/train 7 --format json --columns id,tokens\n"
    "\n"
    "Text output shows each value as Python's repr() of what ds[INDEX] returns; json\n"
    "converts it as `sql --format json` does (bytes base64, times ISO 8601).",
    arguments=_row_arguments,
    run=run_row,
)
