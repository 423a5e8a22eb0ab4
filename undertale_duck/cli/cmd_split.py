"""``undertale-duck split``: the exact sizes and conditions of a train/validation split."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..common.text import terminal_safe
from .command import (
    EXIT_OK,
    Command,
    add_memory,
    storage_options,
)
from .wording import shell_word


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def run(args: argparse.Namespace) -> int:
    """Run ``split``: each part's rows, condition and fingerprint.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status.
    """
    from ..core.views import Split
    from ..dataset import ParquetDataset

    parts: dict[str, dict[str, Any]] = {}
    for part in ("train", "validation"):
        split = Split(key=args.key, fraction=args.fraction, part=part, seed=args.seed)
        ds = ParquetDataset(args.source, args.memory, storage_options=storage_options(args),
                            split=split, where=args.where)
        try:
            parts[part] = {"rows": len(ds), "where": split.where(args.where),
                           "fingerprint": ds.fingerprint}
        finally:
            ds.close()
    rows = sum(p["rows"] for p in parts.values())
    result = {"source": args.source, "key": args.key, "fraction": args.fraction,
              "seed": args.seed, "rows": rows, "parts": parts}
    if args.format == "json":
        json.dump(result, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    print(terminal_safe(
        f"split of {args.source} by {args.key!r}, fraction {args.fraction}, seed {args.seed}"
    ))
    for part, info in parts.items():
        share = info["rows"] / rows if rows else 0.0
        print(f"  {part:<10} {info['rows']:>12,} rows ({share:.2%})  fingerprint "
              f"{info['fingerprint']}")
        print(f"             --where {shell_word(info['where'])}")
    print("Counts are exact for these shards; adding shards adds rows to both parts but "
          "moves none.")
    return EXIT_OK


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", required=True, help="the key column (integers or strings)")
    p.add_argument("--fraction", required=True, type=_fraction,
                   help="share of keys in the validation part (between 0 and 1)")
    p.add_argument("--seed", type=int, default=0, help="hash seed (default 0)")
    p.add_argument("--where", metavar="CONDITION", help="split only the rows matching this")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    add_memory(p, "the indexing passes of both parts")


COMMAND = Command(
    name="split",
    summary="Show the exact sizes of a train/validation split by a hashed key column.",
    examples="  undertale-duck split data/train --key id --fraction 0.02\n"
    "  undertale-duck split data/train --key doc_id --fraction 0.1 --seed 3 --format json\n"
    "\n"
    "Each part is ParquetDataset(SOURCE, split=Split(key, fraction, part, seed))\n"
    "(docs/packing.md#splits); its --where condition serves it in any other command.",
    arguments=_arguments,
    run=run,
    flags={"split.key": "--key", "split.fraction": "--fraction", "split.seed": "--seed"},
)
