"""Uniform random access, first pass: ours with a fresh disk tier against Hugging Face's.

Run ``python benchmarks/bench_random_first.py`` (``--help`` for the options). The data is
issue 29's: 8 shards x 25,000 rows of ``id`` string, ``tokens`` list<int32>[512], ``mask``
list<int8>[512] and ``label`` int64, row groups of 10,000 (:func:`common.write_dataset`),
read on all four columns by torch's ``RandomSampler`` (a fixed seed), batch 64, a pass of
``--rows`` rows (12,800 by default), ``memory=96`` (the data is about 5x that) and a fresh
``disk=`` tier in a new directory. The peer is Hugging Face ``datasets``
(``Dataset.from_parquet(...).with_format("torch")`` into a fresh cache directory, then the
same pass), its conversion counted, when it is installed (the ``bench`` extra).

Each measurement runs in a fresh Python process (``--one``) after the shards' page cache is
dropped (``os.posix_fadvise(..., POSIX_FADV_DONTNEED)``); nothing is warmed. The clock
starts before the dataset is opened (or converted), so the time to the first batch counts
opening it. Rounds rotate the order of the loaders; ratios are taken within a round, then
the median over rounds is reported. CPU time is ``resource.getrusage`` of the process (every
thread) and its reaped children; peak RSS is the process's own ``VmHWM`` (``ru_maxrss``
keeps the launching process's peak across ``exec``). Every row of every batch is checked
against the sampler's indices (its ``id``, ``label``, ``mask`` and ``tokens`` are functions
of the row index). The load average is recorded beside every figure. Writes
``random_first.json`` and ``random_first.md`` to ``benchmarks/results``.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

COLUMNS = ["id", "tokens", "mask", "label"]
LOADERS = ("ours", "hf")


def expected_tokens(index: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The ``tokens`` of rows ``index`` as :func:`common.make_table` writes them."""
    mixed = (index[:, None].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             + np.arange(common.TOKENS, dtype=np.uint64)[None, :] * np.uint64(0xBF58476D1CE4E5B9))
    mixed ^= mixed >> np.uint64(29)
    mixed *= np.uint64(0x94D049BB133111EB)
    mixed ^= mixed >> np.uint64(32)
    return (mixed % np.uint64(50_000)).astype(np.int32)


def check(batch: dict[str, Any], index: np.ndarray[Any, Any]) -> None:
    """Check that ``batch`` holds rows ``index`` in order, every column of every row."""
    import torch

    ids = [f"row-{i:09d}" for i in index.tolist()]
    if list(batch["id"]) != ids:
        raise AssertionError(f"wrong ids: {list(batch['id'])[:3]} for {ids[:3]}")
    rows = torch.from_numpy(index)
    if not torch.equal(batch["label"].to(torch.int64), rows % 1000):
        raise AssertionError(f"wrong labels in rows {ids[:3]}")
    if not torch.equal(batch["mask"].sum(dim=1, dtype=torch.int64), rows % 512 + 1):
        raise AssertionError(f"wrong masks in rows {ids[:3]}")
    if not np.array_equal(batch["tokens"].numpy(), expected_tokens(index)):
        raise AssertionError(f"wrong tokens in rows {ids[:3]}")


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this (fresh) process; returns its figures."""
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    directory = Path(args.data)
    common.drop_cache(directory)
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="bench-random-first-"))
    out: dict[str, Any] = {}
    clock = common.Stopwatch()
    ds: Any = None
    try:
        if args.loader == "hf":
            import datasets

            datasets.disable_progress_bars()
            ds = datasets.Dataset.from_parquet(
                [str(p) for p in common.shard_paths(directory)], cache_dir=str(work)
            ).with_format("torch")
            out["prepare_s"] = clock.elapsed()
            collate_fn = None
        else:
            from undertale_duck import ParquetDataset, collate

            ds = ParquetDataset(directory, memory=args.memory, format="torch", columns=COLUMNS,
                                disk=args.disk, disk_dir=work / "disk")
            collate_fn = collate
        length = len(ds)
        order = np.array(list(RandomSampler(range(length),
                                            generator=torch.Generator().manual_seed(args.seed))))
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(args.seed))
        loader: Iterable[dict[str, Any]] = DataLoader(ds, batch_size=args.batch,
                                                      sampler=sampler, collate_fn=collate_fn)
        rows = 0
        first = 0.0
        for batch in loader:
            if not rows:
                first = clock.elapsed()
            n = len(batch["label"])
            check(batch, order[rows:rows + n])
            rows += n
            if rows >= args.rows:
                break
        out.update(clock.figures(rows))
        out["first_batch_s"] = first
        out["cpu_s"] = out["cpu_us_per_row"] * rows / 1e6
        if args.loader == "ours":
            stats = ds.disk_stats
            direct = ds.reader.direct
            out["decoded"] = (ds.reader.decoder.stream_stats["streams"]  # group decodes begun
                              + (0 if direct is None else direct.stats["streams"]))
            out["windows"] = len(ds.reader.windows)
            out["disk"] = None if stats is None else dataclasses.asdict(stats)
            out["read_ahead"] = dict(ds.reader.read_ahead_stats)
            ds.close()
    finally:
        del ds
        shutil.rmtree(work, ignore_errors=True)
    return out


def measure(args: argparse.Namespace, data: Path, loader: str) -> dict[str, Any]:
    """Run one measurement in a fresh process."""
    command = [sys.executable, __file__, "--one", "--loader", loader, "--data", str(data),
               "--rows", str(args.rows), "--memory", str(args.memory), "--disk", str(args.disk),
               "--batch", str(args.batch), "--seed", str(args.seed)]
    return common.run_child(command, loader)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-rows", type=int, default=25_000)
    parser.add_argument("--rows", type=int, default=12_800, help="rows in the timed pass")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory", type=int, default=96)
    parser.add_argument("--disk", type=int, default=2048, help="the disk tier's bound, MB")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loaders", default=",".join(LOADERS))
    common.add_child_options(parser)
    args = parser.parse_args(argv)
    if args.one:
        return common.report_one(run_one(args))
    data = common.write_dataset(args.shards, args.shard_rows, root=Path(args.root))
    loaders = [name for name in args.loaders.split(",") if name]
    loaders = common.installed(loaders)
    runs = common.rotated_rounds(args.rounds, loaders, lambda name: measure(args, data, name))
    base = loaders[-1]
    lines = ["| loader | rows/s | first batch s | CPU us/row | peak RSS MiB | "
             f"x rows/s ({base}) | group decodes | load |",
             "|---|---|---|---|---|---|---|---|"]
    for name in loaders:
        def med(key: str, name: str = name) -> float:
            return float(statistics.median(r[name][key] for r in runs))
        ratio = statistics.median(r[name]["rate"] / r[base]["rate"] for r in runs)
        lines.append(
            f"| {name} | {med('rate'):,.0f} | {med('first_batch_s'):.2f} | "
            f"{med('cpu_us_per_row'):,.0f} | {med('peak_rss_mib'):,.0f} | {ratio:.2f} | "
            f"{runs[-1][name].get('decoded', '')} | "
            f"{common.load_range(runs, name)} |"
        )
    return common.write_results(
        args.out, "random_first", args, runs, "\n".join(lines),
        f"`benchmarks/bench_random_first.py --rounds {args.rounds}`, {{machine}}; "
        f"{args.shards} x {args.shard_rows:,} rows, a pass of {args.rows:,} rows, batch "
        f"{args.batch}, memory={args.memory}, a fresh disk tier, page cache of the shards "
        "dropped; medians of rotated rounds, one fresh process each; load = 1-minute load "
        "average.")


if __name__ == "__main__":
    main()
