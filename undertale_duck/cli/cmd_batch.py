"""``undertale-duck batch``: the rows a rank received at a training step, without replaying."""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow as pa

from ..common.jsonvalue import jsonable
from ..errors import ArgumentError
from . import writers
from .command import (
    EXIT_OK,
    Command,
    add_view_options,
    count,
    count_up_to,
    open_dataset,
    print_rows,
    storage_options,
    view_arguments,
)

#: Ranges of the run's settings, checked before anything is allocated for them.
MAX_BATCH = (1 << 31) - 1
MAX_WORKERS = 4096
MAX_RANKS = 1 << 20


def run_batch(args: argparse.Namespace) -> int:
    """Run ``batch``: batch STEP of an epoch on one rank, as the sampler settings make it.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status.
    """
    from ..training.lookup import batch_rows
    from ..training.sampler import ChunkedSampler

    rank = args.rank if args.rank is not None else 0
    if args.rank is None and args.ranks > 1:
        # rank 0's batch would be a wrong answer for every other rank
        raise ArgumentError(
            f"--ranks {args.ranks} needs --rank: give the rank whose batch to show "
            f"(0 to {args.ranks - 1})"
        )
    fmt = writers.choose_format(args.format, None, sys.stdout.isatty())
    with open_dataset(args.source, None, storage_options(args), view_arguments(args)) as ds:
        sampler = ChunkedSampler(
            ds,
            args.batch,
            args.workers,
            args.ranks,
            rank,
            shuffle=args.shuffle,
            seed=args.seed,
            mix=args.mix,
            drop_last=not args.keep_last,
        )
        rows = batch_rows(sampler, args.step, epoch=args.epoch, values=args.values)
    for r in rows:
        r.pop("source")  # one dataset here: no mixture stream to name
        if "row" in r:
            r["row"] = json.dumps(jsonable(r["row"]), ensure_ascii=False)
    table = pa.Table.from_pylist(rows)
    print_rows(table, fmt)
    return EXIT_OK


def _batch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step", type=count, required=True, help="batch number within the epoch")
    p.add_argument("--batch", type=count_up_to(MAX_BATCH), required=True,
                   help="batch size of the training run")
    p.add_argument("--epoch", type=count, default=0, help="the epoch (default 0)")
    p.add_argument("--workers", type=count_up_to(MAX_WORKERS), default=0,
                   help="DataLoader workers (default 0)")
    p.add_argument("--ranks", type=count_up_to(MAX_RANKS), default=1,
                   help="distributed ranks (default 1)")
    p.add_argument("--rank", type=count_up_to(MAX_RANKS), default=None,
                   help="the rank to look at (needed with --ranks above 1)")
    p.add_argument("--shuffle", action="store_true", help="the run shuffled (ChunkedSampler)")
    p.add_argument("--seed", type=count, default=0, help="the run's shuffle seed (default 0)")
    p.add_argument("--mix", type=count, default=1, help="the run's mix (default 1)")
    p.add_argument("--keep-last", action="store_true",
                   help="the run kept every row: its sampler had drop_last=False (evaluation)")
    p.add_argument("--values", action="store_true", help="add each row's values as JSON")
    p.add_argument(
        "--format",
        "-f",
        choices=("table", "csv", "json", "jsonl"),
        help="output format (default: table on a terminal, csv in a pipe)",
    )
    add_view_options(p)


BATCH = Command(
    name="batch",
    summary="Show which rows made a training batch: index, shard and row in the shard.",
    examples="  undertale-duck batch data/train --step 1234 --batch 64 --workers 2 --shuffle\n"
    "  undertale-duck batch data/train --step 10 --batch 32 --ranks 8 --rank 3 --epoch 2 \\\n"
    "      --shuffle --seed 7 --values -f jsonl\n"
    "  undertale-duck batch data/train --where 'len(tokens) < 512' --step 0 --batch 16\n"
    "\n"
    "Give the training run's settings (batch, workers, ranks, shuffle, seed, mix, keep-last\n"
    "and any view); the order is a pure function of them and the epoch, so nothing is replayed.",
    arguments=_batch_arguments,
    run=run_batch,
    # ChunkedSampler's and batch_rows' arguments
    flags={"batch": "--batch", "workers": "--workers", "ranks": "--ranks", "rank": "--rank",
           "seed": "--seed", "mix": "--mix", "step": "--step", "epoch": "--epoch"},
)
