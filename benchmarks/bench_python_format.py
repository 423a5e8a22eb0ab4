"""The default ``format="python"`` and Python's garbage collector: cached epochs at GC thresholds.

``format="python"`` hands out each row as a dict of ``as_py()`` values: a token list is a
Python list, which CPython's cyclic garbage collector tracks and traverses (every element)
at each young-generation collection it lives through; one is started every 700 new
containers (the default threshold), so every batch of list rows is traversed at least once
while it is alive. This measures cached epochs (the first one fills the cache, untimed) of
the documented loop (``ChunkedSampler``, torch's ``DataLoader``, the rows as they come) at
each threshold in turns, so drift from other jobs hits them alike, and counts the
collections and the seconds spent in them. Writes ``python_format.md`` and ``.json`` to
``benchmarks/results``.

    .venv/bin/python benchmarks/bench_python_format.py                  # ~1 min here
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

from undertale_duck import ChunkedSampler, ParquetDataset


def _rows(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return batch  # the rows as they come, for the user's own collator


class Collections:
    """Counts the garbage collector's runs and the seconds they take (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.runs = 0
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """Note a collection's start or its end."""
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.runs += 1
            self.seconds += time.perf_counter() - self._start


def epoch(ds: ParquetDataset, batch: int, check: bool) -> int:
    """One epoch of the documented loop; the rows it handed out (checked if ``check``)."""
    rows = 0
    loader = DataLoader(ds, batch_size=batch, sampler=ChunkedSampler(ds, batch, 0),
                        collate_fn=_rows)
    for part in loader:
        if check:
            for k, row in enumerate(part):
                i = rows + k
                if row["label"] != i % 1000 or sum(row["mask"]) != i % common.TOKENS + 1:
                    raise AssertionError(f"wrong row {i}")
        rows += len(part)
    return rows


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--rows", type=int, default=25_000, help="rows per shard")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--thresholds", type=lambda s: [int(t) for t in s.split(",")],
                   default=[700, 10_000], help="young-generation thresholds, the first CPython's")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--check", action="store_true", help="check every row's label and mask")
    p.add_argument("--label", default="", help="a name for this run's files")
    p.add_argument("--data", type=Path, default=common.DATA)
    p.add_argument("--out", type=Path, default=common.RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the rounds; print and write the table; return the results."""
    args = parse(argv)
    directory = common.write_dataset(args.shards, args.rows, root=args.data,
                                     row_group=common.ROW_GROUP)
    ds = ParquetDataset(directory, memory=4096)
    epoch(ds, args.batch, False)  # fills the cache
    before = gc.get_threshold()
    counter = Collections()
    gc.callbacks.append(counter)
    entries: list[dict[str, Any]] = []
    load_before = os.getloadavg()[0]
    try:
        for _ in range(args.repeat):
            for threshold in args.thresholds:
                gc.set_threshold(threshold, *before[1:])
                counter.runs, counter.seconds = 0, 0.0
                wall, cpu = time.perf_counter(), time.process_time()
                rows = epoch(ds, args.batch, args.check)
                seconds = time.perf_counter() - wall
                entries.append({
                    "threshold": threshold, "rows": rows, "rate": rows / seconds,
                    "cpu_us_per_row": (time.process_time() - cpu) / rows * 1e6,
                    "collections": counter.runs, "gc_share": counter.seconds / seconds,
                })
    finally:
        gc.callbacks.remove(counter)
        gc.set_threshold(*before)
        ds.close()

    def med(threshold: int, key: str) -> float:
        return statistics.median(e[key] for e in entries if e["threshold"] == threshold)

    first = args.thresholds[0]
    rows = [[t, med(t, "rate"), med(t, "cpu_us_per_row"), med(t, "collections"),
             f"{med(t, 'gc_share'):.0%}", med(t, "rate") / med(first, "rate")]
            for t in args.thresholds]
    results = {"entries": entries, "batch": args.batch, "rows": args.shards * args.rows,
               "load_before": load_before, "load_after": os.getloadavg()[0]}
    text = (f"{args.shards * args.rows:,} rows of 512 tokens (`id`, `tokens`, `mask`, `label`), "
            f"`format=\"python\"`, cached epochs, batch {args.batch}, workers=0, the rows as "
            f"they come{', every row checked' if args.check else ''}; medians of "
            f"{args.repeat} rounds, thresholds in turns; 1-minute load average "
            f"{results['load_before']:.2f} before, {results['load_after']:.2f} after.\n\n"
            + common.markdown_table(["gc threshold 0", "rows/s", "CPU us/row",
                                     "collections", "time in GC", f"x {first}"], rows) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/bench_python_format.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    name = "python_format" + (f"_{args.label}" if args.label else "")
    (args.out / f"{name}.md").write_text(f"`{command.strip()}`\n\n{text}")
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1))
    print(text)
    return results


if __name__ == "__main__":
    main()
