"""``undertale-duck pack``: how a dataset packs into fixed-length blocks, and the first blocks."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..common.jsonvalue import jsonable
from .command import (
    EXIT_OK,
    NAMES_HELP,
    Command,
    add_memory,
    add_view_options,
    column_names,
    count,
    storage_options,
    view_arguments,
)


def spec_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``Pack`` fields given on the command line.

    Raises:
        ArgumentError: If ``--alongside`` holds an empty name or an unclosed quote.
    """
    alongside = [] if args.alongside is None else column_names(args.alongside, "--alongside")
    return {
        "column": args.column,
        "length": args.length,
        "eod": args.eod,
        "last": args.last,
        "pad": args.pad,
        "alongside": tuple(alongside),
    }


def run(args: argparse.Namespace) -> int:
    """Run ``pack``: the blocks' count and layout, then the first ``-n`` blocks.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status.
    """
    from ..core.pack import Pack
    from ..dataset import PackedDataset, ParquetDataset

    spec = Pack(**spec_of(args))
    view = view_arguments(args)
    ds = ParquetDataset(
        args.source,
        args.memory,
        storage_options=storage_options(args),
        query=view["query"],
        where=view["where"],
        tables=view["tables"],
        pack=spec,
    )
    assert isinstance(ds, PackedDataset)
    try:
        plan = ds.blocks.plan
        shown = []
        for k in range(min(args.n, len(ds))):
            documents = ds.documents_of(k)
            shown.append({"index": k, "documents": [documents.start, documents.stop],
                          "block": jsonable(ds[k])})
        summary = {
            "source": str(args.source),
            "documents": len(ds.documents),
            "tokens": plan.total,
            "block_length": spec.length,
            "blocks": len(ds),
            "dropped_tokens": plan.total - min(len(ds) * spec.length, plan.total),
            "padded_tokens": max(len(ds) * spec.length - plan.total, 0),
            "columns": ds.columns,
            "fingerprint": ds.fingerprint,
        }
    finally:
        ds.close()
    if args.format == "json":
        json.dump({**summary, "first": shown}, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        shown_value = f"{value:,}" if isinstance(value, int) else value
        print(f"{key.replace('_', ' ').ljust(width)}  {shown_value}")
    for entry in shown:
        first, stop = entry["documents"]
        print(f"block {entry['index']} (documents {first}..{stop - 1}):")
        for name, values in entry["block"].items():
            print(f"  {name}: {values}")
    return EXIT_OK


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--column", required=True, help="the list column of tokens to pack")
    p.add_argument("--length", required=True, type=int, help="tokens per block")
    p.add_argument("--eod", type=int, help="a token appended after every document")
    p.add_argument("--last", choices=("drop", "pad"), default="drop",
                   help="drop the last short block (default) or pad it with --pad")
    p.add_argument("--pad", type=int, default=0, help="padding token of --last pad")
    p.add_argument("--alongside", metavar="A,B",
                   help=f"list columns packed with the tokens: {NAMES_HELP}")
    p.add_argument("-n", type=count, default=0, metavar="N",
                   help="also show the first N blocks (default 0)")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    add_memory(p, "the documents' window cache and reads")
    add_view_options(p)


COMMAND = Command(
    name="pack",
    summary="Count the fixed-length token blocks a dataset packs into; show the first ones.",
    examples="  undertale-duck pack data/train --column tokens --length 2048 --eod 2\n"
    "  undertale-duck pack data/train --column tokens --length 8 -n 2 --format json\n"
    "  undertale-duck pack data/train --column tokens --length 2048 --where 'lang = 1'\n"
    "\n"
    "The blocks are those of ParquetDataset(SOURCE, pack=Pack(...)) (docs/packing.md):\n"
    "the count is exact, from one indexing pass over the lengths (kept in the cache\n"
    "directory, so a second run reads nothing but the footers).",
    arguments=_arguments,
    run=run,
    flags={"pack.column": "--column", "pack.length": "--length", "pack.eod": "--eod",
           "pack.last": "--last", "pack.pad": "--pad", "pack.alongside": "--alongside"},
)
