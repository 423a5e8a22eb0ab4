"""An interactive, read-only SQL prompt over the ``dataset`` view (``undertale-duck shell``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import duckdb
import pyarrow as pa

from ..common.text import aligned
from ..core import query as querymod
from ..errors import ArgumentError, QueryError
from . import output

PROMPT = "duck> "
CONTINUATION = "  ...> "
HISTORY_LENGTH = 1000
SCHEMA_QUERY = "SELECT column_name, column_type FROM (DESCRIBE dataset);"

HELP = """\
End each SQL statement with ';' (a statement may span several lines).
`dataset` is the view over every shard; only SELECT, EXPLAIN and CALL run (the dataset is
read-only). Examples:
  SELECT count(*) FROM dataset;
  SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label;
  DESCRIBE dataset;
Commands (on a line of their own):
  .help               this text
  .schema             the dataset's columns and their DuckDB types
  .shards             the shard files with their row counts
  .format FORMAT      how results are shown: table, csv, json or jsonl (now: {fmt})
  .rows N             show at most N rows of a table (now: {rows}); 0 shows every row
  .quit, .exit        leave (Ctrl-D too); Ctrl-C clears the statement being typed
"""


def history_path() -> Path:
    """Return the shell's history file: under ``$XDG_STATE_HOME``, else ``~/.cache``.

    Returns:
        ``$XDG_STATE_HOME/undertale-duck/shell_history`` when that variable is set, else
        ``~/.cache/undertale-duck/shell_history``.
    """
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else Path.home() / ".cache"
    return base / "undertale-duck" / "shell_history"


def statement_complete(text: str) -> bool:
    """Tell whether SQL text ends with a ``;`` that is outside quotes and comments.

    Args:
        text: The lines typed so far.

    Returns:
        True when the last significant character is a terminating semicolon.
    """
    last = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            while end != -1 and end + 1 < n and text[end + 1] == c:  # doubled quote
                end = text.find(c, end + 2)
            if end == -1:
                return False
            last, i = c, end + 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:
                return False
            i = end + 2
            continue
        if not c.isspace():
            last = c
        i += 1
    return last == ";"


class Shell:
    """A read-eval-print loop over the ``dataset`` view.

    Args:
        cursor: Returns the DuckDB cursor that has the ``dataset`` view.
        shards: ``(path, rows)`` of each shard (for ``.shards``).
        out: Where results go.
        err: Where errors go.
        interactive: Whether a person types at a terminal (prompts, banner, history).
        fmt: Initial result format (``table``, ``csv``, ``json`` or ``jsonl``).
    """

    def __init__(
        self,
        cursor: Callable[[], duckdb.DuckDBPyConnection],
        shards: list[tuple[str, int]],
        out: IO[str],
        err: IO[str],
        *,
        interactive: bool,
        fmt: str = "table",
    ) -> None:
        self._cursor = cursor
        self._shards = shards
        self.out = out
        self.err = err
        self.interactive = interactive
        self.fmt = fmt
        self.rows: int = output.TABLE_ROWS
        self.failures = 0
        self._pending = False
        self._color = interactive and out.isatty()

    # ------------------------------------------------------------------ input
    def _lines(self) -> Iterator[tuple[int, str]]:
        number = 0
        if not self.interactive:
            for number, line in enumerate(sys.stdin, start=1):
                yield number, line.rstrip("\n")
            return
        pending = False
        while True:
            try:
                line = input(CONTINUATION if pending else PROMPT)
            except EOFError:
                self.out.write("\n")
                return
            except KeyboardInterrupt:
                self.out.write("^C\n")
                yield -1, ""  # a signal to drop the statement being typed
                pending = False
                continue
            number += 1
            yield number, line
            pending = self._pending

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        """Read statements and dot commands until ``.quit`` or end of input.

        Returns:
            0, or 1 when input was piped and at least one statement failed.
        """
        if self.interactive:
            rows = sum(r for _, r in self._shards)
            self.out.write(
                f"undertale-duck shell: `dataset` is the view over {len(self._shards)} shard"
                f"{'' if len(self._shards) == 1 else 's'} ({rows:,} rows). End statements "
                "with ';'. .help for help, .quit to leave.\n"
            )
        buffer: list[str] = []
        start = 0
        for number, line in self._lines():
            if number == -1:
                buffer = []
                self._pending = False
                continue
            if not buffer and line.strip().startswith("."):
                if not self._command(line.strip(), number):
                    break
                continue
            if not buffer:
                if not line.strip():
                    continue
                start = number
            buffer.append(line)
            text = "\n".join(buffer)
            if statement_complete(text):
                self._execute(text, start)
                buffer = []
            self._pending = bool(buffer)
        if buffer and "\n".join(buffer).strip():
            self._execute("\n".join(buffer), start)
        return 1 if self.failures and not self.interactive else 0

    def _error(self, message: str, line: int) -> None:
        self.failures += 1
        where = "" if self.interactive else f" (line {line})"
        self.err.write(f"error{where}: {message}\n")
        self.err.flush()

    def _command(self, line: str, number: int) -> bool:
        word, _, rest = line.partition(" ")
        arg = rest.strip().rstrip(";").strip()
        if word in (".quit", ".exit", ".q"):
            return False
        if word == ".help":
            self.out.write(HELP.format(fmt=self.fmt, rows=self.rows or "all"))
        elif word == ".schema":
            self._execute(SCHEMA_QUERY, number)
        elif word == ".shards":
            rows = [[p, f"{r:,}"] for p, r in self._shards]
            self.out.write(aligned(["shard", "rows"], rows, indent=""))
        elif word == ".format":
            if arg not in ("table", "csv", "json", "jsonl"):
                self._error(f".format takes table, csv, json or jsonl, got {arg!r}", number)
            else:
                self.fmt = arg
        elif word == ".rows":
            if not arg.isdigit():
                self._error(f".rows takes a number of rows (0 for all), got {arg!r}", number)
            else:
                self.rows = int(arg)
        else:
            self._error(f"unknown command {word}; .help lists the commands", number)
        self.out.flush()
        return True

    def _execute(self, text: str, line: int) -> None:
        try:
            querymod.check_read_only(text)
            statements = duckdb.extract_statements(text)
        except QueryError as exc:
            self._error(str(exc), line)
            return
        except duckdb.Error as exc:  # pragma: no cover - check_read_only parsed it already
            self._error(" ".join(str(exc).split()), line)
            return
        for statement in statements:
            try:
                table = querymod.run(self._cursor(), statement.query)
                self._show(table)
            except (QueryError, ArgumentError) as exc:
                self._error(str(exc), line)
                return
            except duckdb.Error as exc:  # opening the view failed
                self._error(" ".join(str(exc).split()), line)
                return
            except KeyboardInterrupt:
                with contextlib.suppress(duckdb.Error):
                    self._cursor().interrupt()
                self._error("interrupted", line)
                return

    def _show(self, table: pa.Table) -> None:
        batches = table.to_batches()
        if self.fmt == "csv":
            output.write_csv(table.schema, batches, self.out)
        elif self.fmt == "json":
            output.write_json(table.schema, batches, self.out)
        elif self.fmt == "jsonl":
            output.write_jsonl(table.schema, batches, self.out)
        else:
            width = shutil.get_terminal_size().columns if self.out.isatty() else None
            output.write_table(
                table.schema,
                batches,
                self.out,
                max_rows=self.rows or None,
                width=width,
                color=self._color,
            )
        self.out.flush()


@contextlib.contextmanager
def line_editing(enabled: bool) -> Iterator[None]:
    """Turn on readline editing and the history file for the duration of the block.

    Args:
        enabled: False for piped input (nothing is read or written then).

    Yields:
        Nothing.
    """
    if not enabled:
        yield
        return
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows without pyreadline
        yield
        return
    path = history_path()
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)
