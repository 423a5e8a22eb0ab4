"""``undertale-duck shell``: registers the interactive prompt (the prompt itself is shell.py)."""

from __future__ import annotations

import argparse

from ..errors import ArgumentError
from .command import Command, add_sql_files, add_view_options, storage_options, view_arguments


def run(args: argparse.Namespace) -> int:
    """Run ``shell``: an interactive (or piped) read-only SQL prompt.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status: 1 when a piped statement failed.
    """
    from . import shell

    if args.view_query == "-":
        raise ArgumentError(
            "the shell reads its statements from standard input: give --query as text or "
            "@file.sql"
        )
    return shell.main(
        args.source,
        fmt=args.format,
        sql_files=args.sql_files,
        memory=args.memory,
        storage_options=storage_options(args),
        view=view_arguments(args),
    )


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        "-f",
        choices=("table", "csv", "json", "jsonl"),
        default="table",
        help="how results are shown (default table; .format changes it)",
    )
    add_sql_files(p)
    add_view_options(p, adhoc=True)


COMMAND = Command(
    name="shell",
    summary="An interactive read-only SQL prompt in which `dataset` is the view over every shard.",
    examples="  undertale-duck shell data/train\n"
    "  duck> SELECT label, count(*) FROM dataset\n"
    "    ...> GROUP BY label;\n"
    "  duck> .help\n"
    "  printf 'SELECT count(*) FROM dataset;\\n' | undertale-duck shell data/train\n"
    "  undertale-duck shell data/train --where 'len(tokens) < 512'\n"
    "  duck> SELECT count(*) FROM dataset_view;\n"
    "\n"
    "With --query VIEW_SQL or --where (and --table side tables) statements see the view\n"
    "as dataset_view, as ParquetDataset.sql does; dataset is still every shard.\n"
    "Statements end with ';' and may span lines; .help lists the dot commands. On a\n"
    "terminal: line editing and a history file ($XDG_STATE_HOME/undertale-duck/\n"
    "shell_history, else ~/.cache/undertale-duck/shell_history). With piped input there\n"
    "is no prompt, errors name their line, and the exit status is 1 if a statement failed.",
    arguments=_arguments,
    run=run,
)
