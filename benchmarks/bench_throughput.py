"""Epoch throughput to tensors: ours vs the original module's strategy, the decode limit, HF.

Run ``python benchmarks/bench_throughput.py`` (``--help`` for the sweep). Everything is measured
in one process on the same data, so ratios are comparable even on a noisy machine; a table is
printed and written to ``benchmarks/results/throughput.md`` with a plot of throughput against
workers and of RSS over time.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

from undertale_duck import ParquetDataset
from undertale_duck.training.collate import collate

try:
    from undertale_duck.training.sampler import ChunkedSampler
except ImportError:  # pragma: no cover - the sampler is optional for the benchmark
    ChunkedSampler = None  # type: ignore[assignment,misc]


def _ours(directory: Path, args: argparse.Namespace, workers: int, *, shuffle: bool = False,
          fmt: str = "torch", trace: common.RSSTrace | None = None) -> common.EpochResult:
    ds = ParquetDataset(directory, memory=args.memory, format=fmt)  # type: ignore[arg-type]
    if ChunkedSampler is not None:
        sampler: Any = ChunkedSampler(ds, args.batch, workers, 1, 0, shuffle=shuffle)
        loader = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=workers,
                            collate_fn=collate, multiprocessing_context="fork"
                            if workers else None)
        order = list(sampler)
    else:
        bounds = [(w.offset, w.end) for w in ds.windows]
        if shuffle:
            sampler = common.WindowShuffleSampler(bounds, seed=0)
            order = list(sampler)
            loader = DataLoader(ds, batch_size=args.batch, sampler=order, num_workers=workers,
                                collate_fn=collate)
        else:
            batches = common.contiguous_batches(len(ds), args.batch, workers)
            order = [i for b in batches for i in b]
            loader = DataLoader(ds, batch_sampler=batches, num_workers=workers,
                                collate_fn=collate)
    if shuffle and workers == 0:
        # The read-ahead hint a sampler gives: the windows in the order the epoch visits them.
        positions = np.searchsorted(np.asarray([w.offset for w in ds.windows]), order,
                                    side="right") - 1
        _, first = np.unique(positions, return_index=True)
        ds.prefetch([int(positions[k]) for k in sorted(first)])
    del order
    return common.time_epoch(loader, common.batch_rows)


def _seed(directory: Path, args: argparse.Namespace) -> common.EpochResult:
    ds = common.SeedDataset(directory, memory=args.memory)
    rows = min(len(ds), args.seed_rows)
    loader = DataLoader(ds, batch_size=args.batch, sampler=range(rows), collate_fn=collate)
    return common.time_epoch(loader, common.batch_rows)


def _hf(directory: Path, args: argparse.Namespace) -> tuple[common.EpochResult, float] | None:
    try:
        import datasets
    except ImportError:
        return None
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="hf-cache-") as cache:
        t0 = time.perf_counter()
        hf = datasets.Dataset.from_parquet(
            [str(p) for p in common.shard_paths(directory)], cache_dir=cache
        ).with_format("torch")
        prepare = time.perf_counter() - t0
        loader = DataLoader(hf, batch_size=args.batch)  # type: ignore[arg-type]
        result = common.time_epoch(loader, common.batch_rows)
        del hf, loader
    return result, prepare


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the sweep; return the measurements."""
    directory = common.write_dataset(args.shards, args.rows, root=args.data,
                                     row_group=args.row_group)
    results: dict[str, Any] = {"rows": args.shards * args.rows, "batch": args.batch,
                               "memory_mb": args.memory, "entries": []}
    traces: dict[str, list[tuple[float, int]]] = {}

    def record(name: str, workers: int | str, r: common.EpochResult, note: str = "") -> None:
        results["entries"].append({"name": name, "workers": workers, "rows": r.rows,
                                   "seconds": r.seconds, "rate": r.rate,
                                   "first_batch": r.first_batch, "note": note})
        print(f"  {name:<28} workers={workers!s:<3} {r.rate:>11,.0f} rows/s  "
              f"first batch {r.first_batch:.3f}s", flush=True)

    results["paired"] = []
    for rep in range(args.repeat):
        print(f"repeat {rep + 1}/{args.repeat}", flush=True)
        # The machine is shared and noisy: each repeat brackets our workers=0 epochs between
        # two decode-limit runs and keeps its own ratios (their median is reported).
        rows, seconds = common.decode_limit(directory)
        before = common.EpochResult(rows, seconds, float("nan"))
        record("pyarrow decode (limit)", 0, before, "read_table + to tensors")
        seed = _seed(directory, args)
        record("original module", 0, seed, f"first {args.seed_rows} rows")
        with common.RSSTrace() as trace:
            ours = _ours(directory, args, 0)
        record("undertale_duck torch", 0, ours)
        traces["sequential, workers=0"] = trace.samples
        with common.RSSTrace() as trace:
            shuffled = _ours(directory, args, 0, shuffle=True)
        record("undertale_duck torch shuffled", 0, shuffled)
        traces["shuffled, workers=0"] = trace.samples
        again = _ours(directory, args, 0)  # the shuffled epoch is bracketed by sequential ones
        record("undertale_duck torch", 0, again)
        rows, seconds = common.decode_limit(directory)
        after = common.EpochResult(rows, seconds, float("nan"))
        record("pyarrow decode (limit)", 0, after, "read_table + to tensors")
        decode = (before.rate + after.rate) / 2
        sequential = (ours.rate + again.rate) / 2
        results["paired"].append({"ours_vs_original": sequential / seed.rate,
                                  "ours_vs_decode": sequential / decode,
                                  "shuffled_vs_sequential": shuffled.rate / sequential})
        for workers in args.workers:
            if workers == 0:
                continue
            with common.RSSTrace() as trace:
                record("undertale_duck torch", workers, _ours(directory, args, workers))
            traces[f"sequential, workers={workers}"] = trace.samples
        record("undertale_duck python", 0, _ours(directory, args, 0, fmt="python"))
        if not args.no_hf:
            hf = _hf(directory, args)
            if hf is None:
                print("  (Hugging Face datasets not installed: skipped)")
            else:
                record("HF datasets torch", 0, hf[0], f"+{hf[1]:.1f}s from_parquet")
    results["traces"] = traces
    return results


def summarize(results: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """Median rate per (name, workers) and the target ratios, as markdown."""
    rates: dict[tuple[str, Any], list[float]] = {}
    firsts: dict[tuple[str, Any], list[float]] = {}
    notes: dict[tuple[str, Any], str] = {}
    for e in results["entries"]:
        key = (e["name"], e["workers"])
        rates.setdefault(key, []).append(e["rate"])
        firsts.setdefault(key, []).append(e["first_batch"])
        notes[key] = e["note"]
    med = {k: float(np.median(v)) for k, v in rates.items()}
    decode = med[("pyarrow decode (limit)", 0)]
    seed = med[("original module", 0)]
    rows = []
    for key, rate in med.items():
        first = float(np.nanmedian(firsts[key])) if not all(
            math.isnan(f) for f in firsts[key]) else float("nan")
        rows.append([key[0], key[1], rate, rate / decode, rate / seed,
                     "" if math.isnan(first) else f"{first:.3f}", notes[key]])
    table = common.markdown_table(
        ["loader", "workers", "rows/s", "x decode", "x original", "first batch (s)", "note"], rows)
    paired = results["paired"]
    ratios = {key: float(np.median([p[key] for p in paired])) for key in paired[0]}
    spread = {key: (min(p[key] for p in paired), max(p[key] for p in paired))
              for key in paired[0]}
    text = (
        f"{results['rows']:,} rows of 512 tokens, batch {results['batch']}, "
        f"memory={results['memory_mb']} MB; medians of repeats.\n\n{table}\n\n"
        f"Ratios paired within each repeat (median, range over {len(paired)} repeats), "
        f"workers=0: **{ratios['ours_vs_original']:.1f}x** undertale's original dataset "
        f"module's strategy "
        f"({spread['ours_vs_original'][0]:.1f}-{spread['ours_vs_original'][1]:.1f}); "
        f"**{ratios['ours_vs_decode']:.2f}x** raw pyarrow decode "
        f"({spread['ours_vs_decode'][0]:.2f}-{spread['ours_vs_decode'][1]:.2f}; decode "
        f"timed before and after our epochs; ours is the mean of the two sequential epochs); "
        f"shuffled epoch **{ratios['shuffled_vs_sequential']:.2f}x** the sequential ones "
        f"run just before and after it "
        f"({spread['shuffled_vs_sequential'][0]:.2f}-"
        f"{spread['shuffled_vs_sequential'][1]:.2f}).\n"
    )
    return text, ratios


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """Throughput against workers, and RSS over time; return the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(6, 4))
    per: dict[int, list[float]] = {}
    for e in results["entries"]:
        if e["name"] == "undertale_duck torch":
            per.setdefault(int(e["workers"]), []).append(e["rate"])
    ws = sorted(per)
    ax.plot(ws, [np.median(per[w]) for w in ws], "o-", label="undertale_duck (torch)")
    for name, style in (("pyarrow decode (limit)", "--"), ("original module", ":"),
                        ("HF datasets torch", "-.")):
        vals = [e["rate"] for e in results["entries"] if e["name"] == name]
        if vals:
            ax.axhline(float(np.median(vals)), linestyle=style, color="gray" if
                       "original" not in name else "red", label=name)
    ax.set_xlabel("DataLoader workers")
    ax.set_ylabel("rows/s to tensors")
    ax.set_xticks(ws)
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Epoch throughput, 512-token rows")
    fig.tight_layout()
    paths.append(out / "throughput_workers.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, samples in results["traces"].items():
        if samples:
            ax.plot([t for t, _ in samples], [r / 2**20 for _, r in samples], label=name)
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS incl. workers (MiB)")
    ax.set_title("RSS over an epoch")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "throughput_rss.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--rows", type=int, default=25_000, help="rows per shard")
    p.add_argument("--row-group", type=int, default=common.ROW_GROUP,
                   help="rows per row group (pyarrow's writer default is 1Mi: one per shard)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--memory", type=int, default=4096,
                   help="cache MB (ours and the original module's)")
    p.add_argument("--workers", type=lambda s: [int(w) for w in s.split(",")],
                   default=[0, 1, 2])
    p.add_argument("--seed-rows", type=int, default=25_000,
                   help="rows the original module's strategy is timed on (it is slow)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--no-hf", action="store_true", help="skip Hugging Face datasets")
    p.add_argument("--data", type=Path, default=common.DATA)
    p.add_argument("--out", type=Path, default=common.RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print and write the table and plots; return the results."""
    args = parse(argv)
    results = run(args)
    text, ratios = summarize(results)
    results["ratios"] = ratios
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/bench_throughput.py " + " ".join(argv or sys.argv[1:])
    (args.out / "throughput.md").write_text(f"`{command.strip()}`\n\n{text}")
    (args.out / "throughput.json").write_text(json.dumps(
        {k: v for k, v in results.items() if k != "traces"}, indent=1))
    results["plots"] = plot(results, args.out)
    print()
    print(text)
    return results


if __name__ == "__main__":
    main()
