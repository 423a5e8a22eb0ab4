"""``undertale-duck describe``: shards, totals, column types, statistics and schema drift."""

from __future__ import annotations

import argparse
import json
import sys

from ..common.text import redact_url, terminal_safe
from ..errors import ArgumentError
from .command import (
    EXIT_OK,
    EXIT_USAGE,
    Command,
    add_memory,
    add_view_options,
    has_view,
    open_dataset,
    storage_options,
    view_arguments,
)


def run(args: argparse.Namespace) -> int:
    """Run ``describe``: print the description as text or JSON.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status: 2 when a shard cannot be read (the others are still described).
    """
    from ..common.progress import progress_bar
    from ..core.describe import describe, describe_view
    from .render_describe import to_text, view_to_text

    view, described = view_arguments(args), None
    if has_view(view):  # the view first: a refused query fails before the footers are read
        with open_dataset(args.source, None, storage_options(args), view) as ds:
            described = describe_view(ds, scan=args.scan)
    executor = None
    if args.ray is not None:
        if not args.scan:
            raise ArgumentError("--ray runs describe's --scan as tasks on Ray; add --scan")
        from ..validation.ray_executor import RayExecutor

        executor = RayExecutor(args.ray or None)  # --ray alone: a local Ray for this run
    with progress_bar("scanning shards", unit=" shards") as progress:
        description = describe(
            args.source,
            scan=args.scan,
            progress=progress,
            storage_options=storage_options(args),
            memory=args.memory,
            executor=executor,
        )
    if args.format == "json":
        data = description.to_dict()
        if described is not None:
            data["view"] = described.to_dict()
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(to_text(description))
        if described is not None:
            sys.stdout.write(view_to_text(described))
    sys.stdout.flush()
    bad = description.errors
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        print(
            terminal_safe(
                redact_url(
                    # the reason is the report's ("cannot be read: ...", "is truncated ...")
                    f"undertale-duck: error: shard {bad[0].path}: {bad[0].error}{more}"
                )
            ),
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.add_argument(
        "--scan", action="store_true", help="read every value for exact statistics (slow); "
        "with a view, the view's rows too"
    )
    add_memory(
        p,
        "a shard whose string values --scan would hold at once pass it (a dictionary bomb) "
        "is reported instead of scanned",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run --scan as one task per shard on a Ray cluster: ADDRESS is 'auto' or "
        "'host:port' (alone: a local Ray for this run); needs pip install 'undertale_duck[ray]'",
    )
    add_view_options(p)


COMMAND = Command(
    name="describe",
    summary="Describe a dataset: shards, totals, column types, null counts, min/max, schema drift.",
    examples="  undertale-duck describe data/train\n"
    "  undertale-duck describe data/train --scan            # exact statistics, reads "
    "every value\n"
    "  undertale-duck describe 'data/*.parquet' --format json | jq .totals\n"
    "  undertale-duck describe data/train --where 'len(tokens) < 512' --scan\n"
    "  undertale-duck describe data/train --scan --ray 10.0.0.5:6379  # one task per shard\n"
    "\n"
    "With --query or --where (and --table side tables) the view's columns, DuckDB types\n"
    "and exact row count (from its index) follow the source's description (JSON: key\n"
    "view); with --scan the view's rows are scanned as well, for exact statistics.\n"
    "Without --scan only the footers are read: null counts and min/max come from the\n"
    "writers' statistics ('?' when a writer recorded none; nested columns have none).\n"
    "Shards whose columns or types differ from the layout most shards share are listed\n"
    "as drift.\n"
    "Exit status: 0 ok, 2 when the source is missing or a shard cannot be read (the other\n"
    "shards are still described).",
    arguments=_arguments,
    run=run,
)
