"""An interactive, read-only SQL prompt over the ``dataset`` view (``undertale-duck shell``)."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa

from ..common.text import aligned, first_line, not_utf8, redact_url, terminal_safe
from ..core.query import QuerySession, SqlFiles
from ..core.query import statements as split_statements
from ..errors import UndertaleDuckError
from . import writers as output
from .history import line_editing
from .statements import scan

if TYPE_CHECKING:
    from ..core.source import Source

PROMPT = "duck> "
CONTINUATION = "  ...> "
SCHEMA_QUERY = "SELECT column_name, column_type FROM (DESCRIBE dataset);"
#: Longest error message of ours shown (DuckDB's own text inside it is already cut).
MESSAGE_LIMIT = 2000
#: The longest input line and the largest statement read (characters): input without line
#: ends, such as ``shell < /dev/zero``, stops with an error instead of filling memory.
MAX_STATEMENT_CHARS = 1 << 20
#: Rows per batch fetched from a query: a table shows the first rows and stops the query.
FETCH_ROWS = 1024
#: Exit status after Ctrl-C with piped input (128 + SIGINT).
EXIT_INTERRUPTED = 130

HELP = """\
End each SQL statement with ';' (a statement may span several lines).
`dataset` is the view over every shard; only SELECT (also WITH, DESCRIBE, SUMMARIZE, SHOW)
and EXPLAIN run: the dataset is read-only. Ctrl-C stops a running query. Examples:
  SELECT count(*) FROM dataset;
  SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label;
  DESCRIBE dataset;
Commands (on a line of their own):
  .help               this text
  .schema             the dataset's columns and their DuckDB types
  .shards             the shard files with their row counts
  .format FORMAT      how results are shown: table, csv, json or jsonl (now: {fmt};
                      .format alone shows it)
  .rows N             show at most N rows of a table (now: {rows}); 0 shows every row
                      (.rows alone shows the number)
                      (only the rows shown are fetched: the query stops there)
  .quit, .exit        leave (Ctrl-D too); Ctrl-C clears the statement being typed
"""


class InputTooLong(UndertaleDuckError):
    """A line or statement of the shell's input is longer than :data:`MAX_STATEMENT_CHARS`."""


class Shell:
    """A read-eval-print loop over the ``dataset`` view.

    Args:
        session: The read-only query session with the ``dataset`` view.
        shards: ``(path, rows)`` of each shard (for ``.shards``).
        out: Where results go.
        err: Where errors go.
        interactive: Whether a person types at a terminal (prompts, banner, history).
        fmt: Initial result format (``table``, ``csv``, ``json`` or ``jsonl``).
        stdin: Where piped input is read from (default ``sys.stdin``).
    """

    def __init__(
        self,
        session: QuerySession,
        shards: list[tuple[str, int]],
        out: IO[str],
        err: IO[str],
        *,
        interactive: bool,
        fmt: str = "table",
        stdin: IO[str] | None = None,
    ) -> None:
        self.session = session
        self._shards = shards
        self.out = out
        self.err = err
        self.interactive = interactive
        self.fmt = fmt
        self.rows: int = output.TABLE_ROWS
        self.failures = 0
        self._pending = False
        self._color = interactive and out.isatty()
        self._stdin = stdin
        self._buffer: list[str] = []
        self._size = 0
        self._start = 0
        self._scan = ("", "")
        #: Rows of the view given with ``shell --query``/``--where`` (None: no view).
        self.view_rows: int | None = None

    # ------------------------------------------------------------------ input
    def _piped_lines(self) -> Iterator[tuple[int, str]]:
        stream = self._stdin if self._stdin is not None else sys.stdin
        number = 0
        while True:
            try:
                line = stream.readline(MAX_STATEMENT_CHARS + 1)
            except UnicodeDecodeError:
                raise InputTooLong(
                    f"line {number + 1} of the input is not UTF-8 text; the shell reads SQL text"
                ) from None
            if not line:
                return
            number += 1
            # a stdin decoding with surrogateescape lets bytes through
            if not_utf8(line) is not None:
                raise InputTooLong(
                    f"line {number} of the input is not UTF-8 text; the shell reads SQL text"
                )
            if len(line) > MAX_STATEMENT_CHARS:
                raise InputTooLong(
                    f"line {number} of the input is longer than {MAX_STATEMENT_CHARS:,} "
                    "characters; the shell stops reading (is the input SQL text?)"
                )
            yield number, line.rstrip("\n")

    def _lines(self) -> Iterator[tuple[int, str]]:
        if not self.interactive:
            yield from self._piped_lines()
            return
        number = 0
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
            if not_utf8(line) is not None:
                self._error("the line is not UTF-8 text; the statement was dropped", number)
                yield -1, ""
                pending = False
                continue
            yield number, line
            pending = self._pending

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        """Read statements and dot commands until ``.quit`` or end of input.

        Returns:
            0; with piped input 1 when at least one statement failed, 2 when the input is
            not SQL text (a line or statement beyond :data:`MAX_STATEMENT_CHARS`) and 130
            after Ctrl-C.
        """
        try:
            return self._loop()
        except InputTooLong as exc:
            self._error(str(exc), 0)
            return 2
        except KeyboardInterrupt:
            self.err.write("interrupted\n")
            self.err.flush()
            return EXIT_INTERRUPTED

    def _loop(self) -> int:
        if self.interactive:
            rows = sum(r for _, r in self._shards)
            self.out.write(
                f"undertale-duck shell: `dataset` is the view over {len(self._shards)} shard"
                f"{'' if len(self._shards) == 1 else 's'} ({rows:,} rows). End statements "
                "with ';'. .help for help, .quit to leave.\n"
            )
            if self.view_rows is not None:
                self.out.write(
                    f"`dataset_view` is the view given with --query/--where ({self.view_rows:,}"
                    " rows, in no set order: add ORDER BY).\n"
                )
        for number, line in self._lines():
            try:
                if not self._step(number, line):
                    return self._status()
            except KeyboardInterrupt:  # at the prompt, Ctrl-C stops what runs and goes on
                if not self.interactive:
                    raise
                self._drop()
                self.out.flush()
                self._error("interrupted", 0)
        if self._buffer and "\n".join(self._buffer).strip():
            self._execute("\n".join(self._buffer), self._start)
        return self._status()

    def _status(self) -> int:
        return 1 if self.failures and not self.interactive else 0

    def _drop(self) -> None:
        self._buffer, self._size = [], 0
        self._scan = ("", "")
        self._pending = False

    def _step(self, number: int, line: str) -> bool:
        """Take one input line; False when the shell should stop (``.quit``)."""
        if number == -1:
            self._drop()
            return True
        if not self._buffer and line.strip().startswith("."):
            return self._command(line.strip(), number)
        if not self._buffer:
            if not line.strip():
                return True
            self._start = number
        self._size += len(line) + 1
        if self._size > MAX_STATEMENT_CHARS:
            self._drop()
            message = (
                f"the statement starting on line {self._start} is longer than "
                f"{MAX_STATEMENT_CHARS:,} characters without a ';' ending it"
            )
            if not self.interactive:
                raise InputTooLong(message + "; the shell stops reading")
            self._error(message + "; it was dropped", self._start)
            return True
        self._buffer.append(line)
        self._scan = scan(line + "\n", *self._scan)
        if self._scan == ("", ";"):
            text = "\n".join(self._buffer)
            self._drop()
            self._execute(text, self._start)
        self._pending = bool(self._buffer)
        return True

    def _error(self, message: str, line: int) -> None:
        self.failures += 1
        where = "" if self.interactive or line <= 0 else f" (line {line})"
        self.err.write(f"error{where}: {terminal_safe(message)}\n")
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
        elif word == ".format" and not arg:
            self.out.write(f"{self.fmt}\n")
        elif word == ".rows" and not arg:
            self.out.write(f"{self.rows or 'all'}\n")
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
            statements = split_statements(text)
        except UndertaleDuckError as exc:
            self._error(first_line(exc, limit=MESSAGE_LIMIT), line)
            return
        for statement in statements:
            try:
                try:
                    reader = self.session.batches(statement.query, batch_rows=FETCH_ROWS)
                    with contextlib.closing(reader):
                        self._show(reader)
                finally:
                    self.session.end_streams()  # a table stops reading after its rows
            except KeyboardInterrupt:
                if not self.interactive:
                    raise
                self.out.flush()
                self._error("interrupted: the query was stopped", line)
                return
            except UndertaleDuckError as exc:  # our own messages say what to do: kept whole
                self._error(first_line(exc, limit=MESSAGE_LIMIT), line)
                return
            except Exception as exc:  # a value the writers cannot show: the shell lives on
                self._error(f"cannot show the result: {type(exc).__name__}: "
                            f"{redact_url(first_line(exc))}", line)
                return

    def _show(self, reader: pa.RecordBatchReader) -> None:
        schema = reader.schema
        if self.fmt == "csv":
            output.write_csv(schema, reader, self.out)
        elif self.fmt == "json":
            output.write_json(schema, reader, self.out)
        elif self.fmt == "jsonl":
            output.write_jsonl(schema, reader, self.out)
        else:
            width = shutil.get_terminal_size().columns if self.out.isatty() else None
            output.write_table(
                schema,
                reader,
                self.out,
                max_rows=self.rows or None,
                width=width,
                color=self._color,
                hint=".rows N (0: all), or .format csv for all",
            )
        self.out.flush()


def main(
    source: str,
    *,
    fmt: str = "table",
    sql_files: SqlFiles = "dataset",
    storage_options: Mapping[str, Any] | None = None,
    view: Mapping[str, Any] | None = None,
    memory: float = 4096,
) -> int:
    """Run the shell over a dataset source (``undertale-duck shell``).

    Args:
        source: A Parquet file, a directory of shards or a glob.
        fmt: Initial result format.
        sql_files: ``"dataset"`` (default) confines SQL to the dataset's own shards;
            ``"any"`` lets it read any file (e.g. to join a CSV of labels).
        storage_options: Options of a URL source's store (docs/storage.md).
        view: ``query=``/``where=``/``tables=`` of a view (``shell --query``): statements
            then see it as ``dataset_view``, as ``ds.sql`` does; ``dataset`` stays every
            shard.
        memory: The memory budget in MiB (``--memory``; 0: none).

    Returns:
        The exit status (see :meth:`Shell.run`).

    Raises:
        SourceError: If the source cannot be opened.
        QueryError: If the view's query cannot be served row by row.
    """
    src, session, close, view_rows = _open(source, sql_files, storage_options, view, memory)
    interactive = sys.stdin.isatty()
    try:
        with line_editing(interactive, src.paths, source):
            shell = Shell(
                session,
                [(s.path, s.rows) for s in src.shards],
                sys.stdout,
                sys.stderr,
                interactive=interactive,
                fmt=fmt,
            )
            shell.view_rows = view_rows
            return shell.run()
    finally:
        close()


def _open(
    source: str,
    sql_files: SqlFiles,
    storage_options: Mapping[str, Any] | None,
    view: Mapping[str, Any] | None,
    memory: float,
) -> tuple[Source, QuerySession, Callable[[], None], int | None]:
    """The source, the session statements run in, what closes it, and the view's rows.

    With a view the session is the view's dataset's (``ds.sql``): ``dataset_view`` is the
    view. The view is opened (indexed) here, so a refused query fails before any prompt.
    """
    from ..core.source import Source
    from .command import has_view, open_dataset, query_session

    if view is not None and has_view(view):
        stack = contextlib.ExitStack()
        ds = stack.enter_context(
            open_dataset(source, None, dict(storage_options or {}) or None, view,
                         sql_files=sql_files, memory=memory)
        )
        return ds.source, ds.sql_session, stack.close, len(ds)
    src = Source(source, storage_options=storage_options)
    session = query_session(src, sql_files, memory)
    return src, session, session.close, None
