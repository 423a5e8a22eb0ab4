r"""Write query results (Arrow record batches) as a table, CSV, JSON, JSON Lines or Parquet.

Writers write to a stream they are given; which file that stream is, and whether it may be
created or replaced, is decided by :mod:`undertale_duck.cli.guard` alone.

Conventions shared by every text format (documented in docs/cli.md):

- ``bytes`` values are written as standard base64 strings in CSV, JSON and JSON Lines, and as
  ``\xNN`` escapes in tables;
- dates and times are ISO 8601 (``2024-01-01T00:00:05``), decimals and UUIDs are strings;
- floats that JSON cannot hold (NaN and the infinities) are the strings ``"NaN"``,
  ``"Infinity"`` and ``"-Infinity"``;
- lists, structs and maps are nested JSON (in CSV: JSON text in the field); maps are lists
  of ``[key, value]`` pairs;
- in CSV, NULL is an empty field and an empty string is ``""``.

Plain-text tables elsewhere (``describe``, the shell's ``.shards``) use the one helper
:func:`undertale_duck.common.text.aligned`. :func:`write_table` is the one table writer built on
rich, because query results need what plain alignment does not give: cutting columns to fit
the terminal width with an ellipsis, right-aligned numbers and colors on a terminal.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ArgumentError, QueryError
from .result_values import CELL_WIDTH, cell, csv_field, json_line, result_rows, text_value

__all__ = [
    "CELL_WIDTH", "MIN_COLUMN", "RESULT_FORMATS", "SUFFIX_FORMATS", "TABLE_ROWS", "cell",
    "choose_format", "limit", "text_value", "write_csv", "write_json", "write_jsonl",
    "write_parquet", "write_table", "write_text",
]

#: Every format a query result can be written in, in the order ``--help`` lists them.
RESULT_FORMATS = ("table", "csv", "json", "jsonl", "parquet")

#: Output formats guessed from an ``--output`` file's suffix when ``--format`` is not given.
SUFFIX_FORMATS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".parq": "parquet",
    ".pq": "parquet",
    ".txt": "table",
}

#: Narrowest a column is cut to when a table must shrink to fit a terminal.
MIN_COLUMN = 10

#: Rows shown by a table when no limit is given.
TABLE_ROWS = 100


def choose_format(requested: str | None, output: str | None, stdout_is_tty: bool) -> str:
    """Pick the output format.

    Args:
        requested: The ``--format`` value, or None when it was not given.
        output: The ``--output`` path, or None for standard output.
        stdout_is_tty: Whether standard output is a terminal.

    Returns:
        ``requested`` when given; else the format of the output file's suffix; else
        ``table`` on a terminal and ``csv`` in a pipe.

    Raises:
        ArgumentError: If ``parquet`` is asked for without an output file, or the output
            file's suffix names no format and ``requested`` is None.
    """
    fmt = requested
    if fmt is None:
        if output is not None:
            suffix = Path(output).suffix.lower()
            if suffix not in SUFFIX_FORMATS:
                raise ArgumentError(
                    f"--output {output}: the format follows the file's suffix "
                    f"({', '.join(SUFFIX_FORMATS)}), and "
                    + (f"{suffix} is none of them" if suffix else "the name has no suffix")
                    + ": rename the file or give --format"
                )
            fmt = SUFFIX_FORMATS[suffix]
        else:
            fmt = "table" if stdout_is_tty else "csv"
    if fmt not in RESULT_FORMATS:
        raise ArgumentError(
            f"--format must be one of {', '.join(RESULT_FORMATS)}, got {fmt!r}"
        )
    if fmt == "parquet" and output is None:
        raise ArgumentError(
            "--format parquet needs --output FILE (Parquet is not written to a pipe)"
        )
    return fmt


# --------------------------------------------------------------------------- batches


def limit(batches: Iterable[pa.RecordBatch], rows: int | None) -> Iterator[pa.RecordBatch]:
    """Yield batches until ``rows`` rows have been yielded (all of them when None).

    Args:
        batches: Record batches.
        rows: The most rows to yield, or None.

    Yields:
        The batches, the last one sliced to fit.
    """
    left = rows
    for batch in batches:
        if left is None:
            yield batch
            continue
        if left <= 0:
            return
        if batch.num_rows > left:
            batch = batch.slice(0, left)
        left -= batch.num_rows
        yield batch


def _unique_names(schema: pa.Schema, fmt: str) -> None:
    names = schema.names
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise QueryError(
            f"the result has several columns named {', '.join(duplicates)}, which {fmt} cannot "
            "hold; give them distinct names with AS"
        )


def write_csv(schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: IO[str]) -> int:
    """Write a header line and one CSV line per row.

    Args:
        schema: The result's schema (its names make the header).
        batches: The result's record batches.
        out: A text stream.

    Returns:
        The number of rows written.
    """
    out.write(",".join(csv_field(n) for n in schema.names) + "\n")
    count = 0
    for values in result_rows(batches):
        out.write(",".join(csv_field(v) for v in values) + "\n")
        count += 1
    return count


def write_jsonl(schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: IO[str]) -> int:
    """Write one JSON object per line (JSON Lines).

    Args:
        schema: The result's schema.
        batches: The result's record batches.
        out: A text stream.

    Returns:
        The number of rows written.

    Raises:
        QueryError: If two result columns have the same name.
    """
    _unique_names(schema, "JSON")
    count = 0
    for values in result_rows(batches):
        out.write(json_line(schema.names, values) + "\n")
        count += 1
    return count


def write_json(schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: IO[str]) -> int:
    """Write one JSON array of objects, one object per row and per line.

    Args:
        schema: The result's schema.
        batches: The result's record batches.
        out: A text stream.

    Returns:
        The number of rows written.

    Raises:
        QueryError: If two result columns have the same name.
    """
    _unique_names(schema, "JSON")
    count = 0
    out.write("[")
    for values in result_rows(batches):
        out.write(("," if count else "") + "\n" + json_line(schema.names, values))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def write_parquet(
    schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: IO[bytes]
) -> int:
    """Write the result as one Parquet file.

    Args:
        schema: The result's schema.
        batches: The result's record batches.
        out: A binary stream (the caller's guarded output file).

    Returns:
        The number of rows written.

    Raises:
        QueryError: If two result columns have the same name.
    """
    _unique_names(schema, "Parquet")
    count = 0
    with pq.ParquetWriter(out, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
            count += batch.num_rows
    return count


def write_table(
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    out: IO[str],
    *,
    max_rows: int | None = TABLE_ROWS,
    width: int | None = None,
    color: bool = False,
    hint: str = "use --limit N, or --format csv for all",
) -> int:
    """Write an aligned table of at most ``max_rows`` rows and a row count line.

    Args:
        schema: The result's schema (column headers).
        batches: The result's record batches.
        out: A text stream.
        max_rows: The most rows shown; when the result has more, the count line says so.
        width: Terminal width; None lets every column take the room it needs.
        color: Whether to use terminal colors.
        hint: How to see every row, said when rows are left out (the command line's
            options; the shell's dot commands).

    Returns:
        The number of rows shown.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    shown: list[list[str]] = []
    more = False
    for values in result_rows(batches):
        if max_rows is not None and len(shown) >= max_rows:
            more = True
            break
        shown.append([cell(v) for v in values])
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
    natural = [
        max([len(cell(name)), *(len(r[i]) for r in shown)]) for i, name in enumerate(schema.names)
    ]
    smallest = [min(n, MIN_COLUMN) for n in natural]
    for name, field, least in zip(schema.names, schema, smallest, strict=True):
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
        table.add_column(
            cell(name),
            justify="right" if numeric else "left",
            no_wrap=True,
            overflow="ellipsis",
            min_width=least,
        )
    for values in shown:
        table.add_row(*values)
    if width is None or sum(smallest) + 3 * len(smallest) > width:
        # a table takes only the room it needs; one that cannot fit a terminal even with
        # its columns cut short is not squeezed into unreadable slivers (the terminal wraps)
        width = 1_000_000
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
    )
    if schema.names:
        console.print(table)
    n = len(shown)
    if more:
        console.print(
            f"(more than {n} rows; the first {n} are shown: {hint})"
        )
    else:
        console.print(f"({n} row{'' if n == 1 else 's'})")
    out.writelines(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
    return n


def write_text(
    fmt: str,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    out: IO[str],
    *,
    table_rows: int | None = TABLE_ROWS,
    terminal: bool = False,
) -> int:
    """Write a result in one of the text formats (every format but ``parquet``).

    Args:
        fmt: ``table``, ``csv``, ``json`` or ``jsonl``.
        schema: The result's schema.
        batches: The result's record batches.
        out: A text stream.
        table_rows: The most rows a table shows (None: all).
        terminal: Whether ``out`` is a terminal (a table then fits its width, with colors).

    Returns:
        The number of rows written.
    """
    if fmt == "csv":
        return write_csv(schema, batches, out)
    if fmt == "json":
        return write_json(schema, batches, out)
    if fmt == "jsonl":
        return write_jsonl(schema, batches, out)
    if fmt != "table":
        raise ArgumentError(f"{fmt} is not a text format")
    return write_table(
        schema,
        batches,
        out,
        max_rows=table_rows,
        width=shutil.get_terminal_size().columns if terminal else None,
        color=terminal,
    )
