"""Batches from DataLoader workers: one shared-memory block per batch against one per tensor.

A DataLoader worker hands each batch to the main process through shared memory; torch moves
each tensor there alone (a shared-memory file, a file descriptor sent over a socket and
mapped again, per tensor). ``collate`` and ``load()`` place a worker's batch in one block
(``one_block``). This runs epochs of the same dataset both ways in one process, the two
taking turns in every round, through torch's ``DataLoader`` over a ``ChunkedSampler``
(``plain``) and through ``load()`` (``load``), at each number of workers; ``floor`` is a
dataset that makes its batch's tensors from nothing (``torch.zeros`` of the same shapes),
the cost of torch's hand-over alone; ``encoding`` is ``load()`` with a user's collator that
returns its batch as a ``UserDict`` (as Hugging Face tokenizers' ``BatchEncoding`` is).
Every row is checked (its label and mask against its
id) and every row must come exactly once. Writes ``workers.json`` and ``workers.md`` to
``benchmarks/results`` (``--out``)::

    python benchmarks/bench_workers.py --workers 1,2 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import time
from collections import UserDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import common
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from undertale_duck import ChunkedSampler, ParquetDataset, collate, load, one_block

LOADERS = ("plain", "load", "floor", "encoding")


class Zeros(Dataset[Any]):
    """Batches of the benchmark's shapes made from nothing: torch's hand-over alone."""

    def __init__(self, rows: int, block: bool) -> None:
        self.rows = rows
        self.block = block

    def __len__(self) -> int:
        return self.rows

    def __getitems__(self, indices: list[int]) -> dict[str, Any]:
        n = len(indices)
        label = torch.tensor(indices) % 1000
        lengths = torch.tensor(indices) % common.TOKENS + 1
        batch = {
            "id": [f"row-{i:09d}" for i in indices],
            "tokens": torch.zeros(n, common.TOKENS, dtype=torch.int32),
            "mask": (torch.arange(common.TOKENS)[None, :] < lengths[:, None]).to(torch.int8),
            "label": label,
        }
        return one_block(batch) if self.block else batch


def _as_is(batch: Any) -> Any:
    return batch


class Encoding(UserDict[str, Any]):
    """A batch the way a tokenizer returns one: a ``UserDict`` with its own state."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.sequences = len(data["id"])


def _encoded(rows: Any) -> Encoding:
    return Encoding(collate(rows, one_block=False))


class Seen:
    """Checks every row of batches that come in any order; each row must come once."""

    def __init__(self, rows: int) -> None:
        self.seen = np.zeros(rows, dtype=np.int8)

    def __call__(self, batch: Mapping[str, Any]) -> int:
        """Check one batch's rows; return how many it holds."""
        # numpy, not torch: torch's ops on the main thread start its thread pool, whose
        # spinning threads would take the CPU the workers need
        index = np.array([int(s[4:]) for s in batch["id"]], dtype=np.int64)
        if not np.array_equal(batch["label"].numpy(), index % 1000):
            raise AssertionError(f"wrong labels in rows {index.tolist()[:4]}...")
        if not np.array_equal(batch["mask"].numpy().sum(axis=1, dtype=np.int64),
                              index % common.TOKENS + 1):
            raise AssertionError(f"wrong masks in rows {index.tolist()[:4]}...")
        self.seen[index] += 1
        return len(index)

    def check(self) -> None:
        """Refuse an epoch that missed or repeated a row."""
        if not (self.seen == 1).all():
            raise AssertionError(f"{int((self.seen != 1).sum())} rows missing or repeated")


def batches(loader: str, ds: ParquetDataset, batch: int, workers: int,
            block: bool) -> Iterable[Any]:
    """One epoch of ``loader`` with ``workers``, each batch in one block or not."""
    if loader == "floor":
        return DataLoader(Zeros(len(ds), block), batch_size=batch, num_workers=workers,
                          collate_fn=_as_is)
    coll = collate if block else functools.partial(collate, one_block=False)
    if loader == "plain":
        sampler = ChunkedSampler(ds, batch, workers, drop_last=False)
        return DataLoader(ds, batch_size=batch, sampler=sampler, collate_fn=coll,
                          num_workers=workers)
    if loader == "encoding":
        return load(ds, None, _encoded, batch, workers, drop_last=False, one_block=block)
    return load(ds, None, coll, batch, workers, drop_last=False)


def epoch(loader: str, ds: ParquetDataset, batch: int, workers: int,
          block: bool) -> dict[str, float]:
    """Time one epoch: rows a second, main-process and workers' CPU a row."""
    seen = Seen(len(ds))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time()
    start = time.perf_counter()
    rows = sum(seen(b) for b in batches(loader, ds, batch, workers, block))
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seen.check()
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"rows": rows, "rate": rows / seconds, "main_us": cpu / rows * 1e6,
            "workers_us": children / rows * 1e6}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-rows", type=int, default=25_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default=None, help="the dataset's root")
    parser.add_argument("--out", default=str(common.RESULTS))
    parser.add_argument("--name", default="workers")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the rounds, print and write the table; return the results."""
    args = parse(argv)
    root = None if args.data is None else Path(args.data)
    directory = common.write_dataset(args.shards, args.shard_rows, root=root)
    ds = ParquetDataset(directory, format="torch")
    workers = [int(w) for w in args.workers.split(",")]
    loaders = [name for name in args.loaders.split(",") if name]
    unknown = sorted(set(loaders) - set(LOADERS))
    if unknown:
        raise SystemExit(f"unknown loaders {unknown}; choose from {', '.join(LOADERS)}")
    load_before = os.getloadavg()[0]
    runs: list[dict[str, Any]] = []
    for k in range(args.rounds):
        for w in workers:
            for name in loaders:
                # the two ways take turns, the first of each pair rotating with the round
                for block in ((True, False) if (k + w) % 2 == 0 else (False, True)):
                    result = epoch(name, ds, args.batch, w, block)
                    runs.append({"round": k, "workers": w, "loader": name, "block": block,
                                 **result})
                    print(runs[-1], flush=True)
    rows = []
    ratios: dict[str, float] = {}
    for w in workers:
        for name in loaders:
            def median(block: bool, key: str, w: int = w, name: str = name) -> float:
                return statistics.median(r[key] for r in runs if r["workers"] == w
                                         and r["loader"] == name and r["block"] is block)
            pairs = [a["rate"] / b["rate"] for a in runs for b in runs
                     if a["workers"] == b["workers"] == w and a["loader"] == b["loader"] == name
                     and a["round"] == b["round"] and a["block"] and not b["block"]]
            ratio = statistics.median(pairs)
            ratios[f"{name}, workers {w}"] = ratio
            rows.append([name, w,
                         f"{median(False, 'rate'):,.0f}", f"{median(True, 'rate'):,.0f}",
                         f"{ratio:.2f} ({min(pairs):.2f}-{max(pairs):.2f})",
                         f"{median(False, 'main_us'):.1f} -> {median(True, 'main_us'):.1f}",
                         f"{median(False, 'workers_us'):.1f} -> {median(True, 'workers_us'):.1f}"])
    table = common.markdown_table(
        ["loader", "workers", "rows/s, a block per tensor", "rows/s, one block",
         "one block / per tensor (per round)", "main process CPU us/row",
         "workers' CPU us/row"], rows)
    caption = (
        f"# DataLoader workers: one shared-memory block per batch\n\n"
        f"`python benchmarks/bench_workers.py --workers {args.workers} --rounds "
        f"{args.rounds}`: {args.shards} x {args.shard_rows:,} rows (id, 512 int32 tokens, "
        f"512 int8 mask, label), batch {args.batch}, `format=\"torch\"`, medians of "
        f"{args.rounds} rounds in one process, every row checked; {{machine}}; 1-minute "
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.")
    results = common.write_results(args.out, args.name, args, runs, table, caption)
    results["ratios"] = ratios
    return results


if __name__ == "__main__":
    main()
