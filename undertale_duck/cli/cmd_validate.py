"""``undertale-duck validate``: check every shard against a schema and print or save the report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..common.text import terminal_safe
from ..validation.render import REPORT_FORMATS
from ..validation.runner import DEFAULT_EXAMPLES
from .command import (
    EXIT_FAILED,
    EXIT_OK,
    Command,
    add_memory,
    add_view_options,
    count,
    input_files,
    open_dataset,
    storage_options,
    to_stdout,
    view_arguments,
)

#: Report formats guessed from an ``--output`` file's suffix when ``--format`` is not given.
REPORT_SUFFIXES = {
    ".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html",
    ".htm": "html",
}


def run(args: argparse.Namespace) -> int:
    """Run ``validate``: the report to standard output or, through the output guard, a file.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status: 0 every check passed, 1 a check failed.
    """
    from ..common.progress import progress_bar
    from ..core.source import is_remote, local_paths
    from ..validation import render, runner, schemas
    from .guard import OutputFile, Protected

    model = schemas.load_schema(args.schema)
    output = None if to_stdout(args.output) else args.output
    fmt: str = args.format or REPORT_SUFFIXES.get(Path(output or "").suffix.lower(), "text")
    target = None
    if output is not None:  # fail fast; judged again when the file is created
        # a URL source has no local directory to protect
        shards = [] if is_remote(args.source) else local_paths(args.source)
        protected = Protected.of(args.source, shards, files=input_files(args))
        target = OutputFile(output, protected=protected, force=args.force)
    view = view_arguments(args)
    executor = None
    if args.ray is not None:
        from ..validation.ray_executor import RayExecutor

        executor = RayExecutor(args.ray or None)  # --ray alone: a local Ray for this run
    if view["query"] is not None or view["where"] is not None:
        # a view: its rows are checked (computed and joined columns included)
        with open_dataset(args.source, None, storage_options(args), view,
                          memory=args.memory) as ds:
            result = ds.report(model, executor=executor, examples=args.examples)
    else:
        with progress_bar("validating", unit=" queries") as progress:
            result = runner.report_for(
                args.source,
                model,
                examples=args.examples,
                progress=progress,
                storage_options=storage_options(args),
                memory=args.memory,
                executor=executor,
            )
    text = render.render(result, fmt)
    if target is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with target.open() as stream:
            stream.write(text.encode("utf-8"))
        print(f"undertale-duck: {terminal_safe(result.summary())}", file=sys.stderr)
    return EXIT_OK if result.passed else EXIT_FAILED


def _arguments(p: argparse.ArgumentParser) -> None:
    add_view_options(p)
    add_memory(
        p,
        "DuckDB's memory limit, and a shard whose checked string values the scan would hold "
        "at once pass it (a dictionary bomb) is reported unreadable instead of scanned",
    )
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
        choices=(*REPORT_FORMATS, "md"),
        help="report format (default: text, or --output's suffix; md is markdown)",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the report to FILE ('-': standard output; never inside the dataset)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace --output if it is an existing regular file"
    )
    p.add_argument(
        "--examples",
        type=count,
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"offending rows shown per failed check (default {DEFAULT_EXAMPLES})",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the checks as tasks on a Ray cluster: ADDRESS is 'auto' or 'host:port' "
        "(alone: a local Ray for this run); needs pip install 'undertale_duck[ray]'",
    )


COMMAND = Command(
    name="validate",
    summary="Check every shard of a dataset against a schema and print a validation report.",
    examples="  undertale-duck validate data/train --schema TokenizedClassificationDataset\n"
    "  undertale-duck validate 'data/*.parquet' --schema myproject.schemas:Functions\n"
    "  undertale-duck validate data/train --schema schemas.py:Functions --format json\n"
    "  undertale-duck validate data/train --schema TokenizedDataset --output report.html\n"
    "  undertale-duck validate s3://bucket/train --schema TokenizedDataset --ray 10.0.0.5:6379\n"
    "\n"
    "SCHEMA is a built-in schema name (TokenizedDataset, FunctionDataset, ...; see\n"
    "undertale_duck.schema), 'module:Class' for an importable module, or\n"
    "'path/to/file.py:Class'. Unreadable shards are reported as failed 'readable' checks.\n"
    "With --output the format follows the suffix (.json, .md, .html/.htm) unless --format is\n"
    "given; the file is never written inside the dataset, and an existing one is replaced\n"
    "only with --force. With --ray the same report is made by tasks on a Ray cluster.\n"
    "Exit status: 0 every check passed, 1 a check failed, 2 bad usage or\n"
    "input, 130 interrupted.",
    arguments=_arguments,
    run=run,
)
