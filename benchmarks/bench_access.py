"""Random access, small batches, the first epoch and workers: ours vs pyarrow, HF and Lance.

Run ``python benchmarks/bench_access.py`` (``--help`` for the options). Every loader runs in
this process on the same files, so ratios are comparable on a noisy machine; CPU time per row
(``time.process_time``, every thread of the process) is reported beside wall-clock rows/s
because it is what load from other processes distorts least. Writes ``access.json``,
``access.md`` and ``access.png`` (and ``access_workers.png``) to ``benchmarks/results``.

Scenarios (torch ``DataLoader``, ``format="torch"`` + ``collate`` for ours):

- ``random``: ``shuffle=True`` (torch's ``RandomSampler``), batch 64, workers=0, data several
  times ``--memory``: ours without the disk tier (a few batches: it decodes a window per row),
  with it (first epoch writes the files, later epochs map them), pyarrow with the whole table
  in memory (``take``), Hugging Face ``datasets`` and Lance (conversions counted in their
  first epoch).
- ``small batches``: a cached sequential epoch at batch 32, 64 and 256.
- ``first epoch``: a fresh dataset, sequential, batch 64, columns tokens and label, against
  pyarrow ``read_table`` per shard plus tensor conversion; again on shards written as one
  row group each (``--large-groups``: pyarrow's default row group holds a million rows).
- ``workers``: rows/s for each ``--workers`` count: a first sequential epoch through
  ``ChunkedSampler``, a random epoch served by the disk tier, and torch's own cost of
  moving batches from workers (a dataset that hands out one prebuilt batch).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

from undertale_duck import (
    ChunkedSampler,
    MemoryBudgetWarning,
    ParquetDataset,
    RandomAccessWarning,
    collate,
)

Entry = dict[str, Any]
FIRST_COLUMNS = ["tokens", "label"]


# --------------------------------------------------------------------------- measuring

def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(batches: Iterable[Any], limit: int | None = None) -> Entry:
    """Iterate ``batches`` (at most ``limit``); wall and CPU time, time to first batch.

    CPU time counts every thread of this process and DataLoader workers (reaped children).
    """
    wall, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    first = float("nan")
    rows = 0
    iterator = iter(batches)
    for k, batch in enumerate(iterator):
        if k == 0:
            first = time.perf_counter() - wall
        rows += common.batch_rows(batch)
        if limit is not None and k + 1 >= limit:
            break
    seconds = time.perf_counter() - wall
    used = time.process_time() - cpu
    del iterator, batches  # a DataLoader's workers are joined (and reaped) here
    used += _children_cpu() - children
    return {"rows": rows, "seconds": seconds, "rate": rows / seconds,
            "cpu_us_per_row": used / max(rows, 1) * 1e6, "first_batch": first}


class TakeDataset(Dataset[dict[str, Any]]):
    """A map-style dataset whose batches are one ``take`` (a pyarrow table or a Lance dataset)."""

    def __init__(self, take: Callable[[list[int]], pa.Table], length: int) -> None:
        self.take = take
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        return common.to_tensors(self.take([index]))

    def __getitems__(self, indices: list[int]) -> dict[str, Any]:
        return common.to_tensors(self.take(indices))


class FixedBatch(Dataset[dict[str, Any]]):
    """A dataset whose every batch is one prebuilt batch: what torch alone costs per batch."""

    def __init__(self, batch: dict[str, Any], length: int) -> None:
        self.batch = batch
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.batch

    def __getitems__(self, indices: list[int]) -> dict[str, Any]:
        return self.batch


def identity(batch: Any) -> Any:
    """A collate function for batches that are already collated."""
    return batch


def random_loader(ds: Any, batch: int, seed: int, workers: int = 0,
                  collate_fn: Callable[..., Any] = collate) -> DataLoader[Any]:
    """``shuffle=True`` with a fixed seed: the same order for every loader."""
    return DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                      generator=torch.Generator().manual_seed(seed), collate_fn=collate_fn,
                      multiprocessing_context="fork" if workers else None)


# --------------------------------------------------------------------------- scenarios

def random_access(directory: Path, args: argparse.Namespace, add: Callable[..., None],
                  results: dict[str, Any]) -> None:
    ours = ParquetDataset(directory, memory=args.memory, format="torch")
    add("random", "undertale_duck, no disk tier", measure(
        random_loader(ours, args.batch, 0), args.random_batches),
        f"first {args.random_batches} batches")
    ours.close()
    cache = Path(tempfile.mkdtemp(prefix="bench-disk-"))
    try:
        common.reset_peak()
        disk = ParquetDataset(directory, memory=args.memory, format="torch",
                              disk=args.disk, disk_dir=cache)
        for epoch in (1, 2):
            add("random", f"undertale_duck, disk tier, epoch {epoch}",
                measure(random_loader(disk, args.batch, epoch)))
        split = common.rss_split()
        results["memory"] = {"memory_mb": args.memory, "disk_mb": args.disk,
                             "peak_rss_mb": common.peak_rss() / 2**20,
                             "anon_mb": split["anon"] / 2**20, "file_mb": split["file"] / 2**20,
                             "windows": len(disk.windows),
                             "decoded": disk.disk_stats.writes}
        disk.close()
        results["cache"] = str(cache)
        workers_random(directory, args, add, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    t0 = time.perf_counter()
    table = pa.concat_tables(pq.read_table(p) for p in common.shard_paths(directory))
    prepare = time.perf_counter() - t0
    in_memory = TakeDataset(table.take, table.num_rows)
    add("random", "pyarrow, whole table in memory (take)",
        measure(random_loader(in_memory, args.batch, 1, collate_fn=identity)),
        f"+{prepare:.1f}s read_table; holds {table.nbytes / 2**20:,.0f} MiB")
    del table, in_memory
    if not args.no_peers:
        hf_random(directory, args, add)
        lance_random(directory, args, add)


def hf_random(directory: Path, args: argparse.Namespace, add: Callable[..., None]) -> None:
    try:
        import datasets
    except ImportError:
        print("  (Hugging Face datasets not installed: skipped)")
        return
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="hf-cache-") as cache:
        t0 = time.perf_counter()
        hf = datasets.Dataset.from_parquet(
            [str(p) for p in common.shard_paths(directory)], cache_dir=cache
        ).with_format("torch")
        prepare = time.perf_counter() - t0
        for epoch in (1, 2):
            result = measure(random_loader(hf, args.batch, epoch, collate_fn=None))
            if epoch == 1:
                result = with_prepare(result, prepare)
            add("random", f"HF datasets, epoch {epoch}", result,
                f"conversion {prepare:.1f}s counted" if epoch == 1 else "")
        del hf


def lance_random(directory: Path, args: argparse.Namespace, add: Callable[..., None]) -> None:
    try:
        import lance
    except ImportError:
        print("  (Lance not installed: skipped)")
        return
    with tempfile.TemporaryDirectory(prefix="lance-") as tmp:
        t0 = time.perf_counter()
        reader = pq.ParquetDataset([str(p) for p in common.shard_paths(directory)])
        lance.write_dataset(reader.read(), str(Path(tmp) / "data.lance"))
        ds = lance.dataset(str(Path(tmp) / "data.lance"))
        prepare = time.perf_counter() - t0
        taken = TakeDataset(ds.take, ds.count_rows())
        for epoch in (1, 2):
            result = measure(random_loader(taken, args.batch, epoch, collate_fn=identity))
            if epoch == 1:
                result = with_prepare(result, prepare)
            add("random", f"Lance, epoch {epoch}", result,
                f"conversion {prepare:.1f}s counted" if epoch == 1 else "")


def with_prepare(result: Entry, prepare: float) -> Entry:
    """A first epoch that pays for a conversion step."""
    seconds = result["seconds"] + prepare
    return {**result, "seconds": seconds, "rate": result["rows"] / seconds,
            "first_batch": result["first_batch"] + prepare}


def epochs(make: Callable[[], Iterable[Any]], count: int) -> Iterable[Any]:
    """``count`` epochs of ``make()`` back to back: one measurement long enough to time."""
    return itertools.chain.from_iterable(make() for _ in range(count))


def small_batches(directory: Path, args: argparse.Namespace, add: Callable[..., None]) -> None:
    ds = ParquetDataset(directory, memory=4096, format="torch")
    measure(DataLoader(ds, batch_size=256, collate_fn=collate))  # fill the cache
    table = pa.concat_tables(pq.read_table(p) for p in common.shard_paths(directory))

    def slices(batch: int) -> Iterable[dict[str, Any]]:
        return (common.to_tensors(table.slice(a, batch)) for a in range(0, table.num_rows, batch))

    # A cached epoch takes tens of milliseconds: each measurement runs several back to back,
    # and the batch sizes take turns within each repeat, so drift hits them alike
    for _ in range(args.repeat):
        for batch in (256, 64, 32):
            add("small batches", f"undertale_duck cached, batch {batch}", measure(epochs(
                lambda b=batch: DataLoader(ds, batch_size=b, collate_fn=collate),
                args.small_epochs)))
        for batch in (256, 64):
            add("small batches", f"pyarrow in memory (slices), batch {batch}",
                measure(epochs(lambda b=batch: slices(b), args.small_epochs)))
    ds.close()


def first_epoch(directory: Path, args: argparse.Namespace, add: Callable[..., None],
                scenario: str = "first epoch") -> None:
    def pyarrow_epoch() -> Iterable[dict[str, Any]]:
        for path in common.shard_paths(directory):
            table = pq.read_table(path, columns=FIRST_COLUMNS)
            for a in range(0, table.num_rows, args.batch):
                yield common.to_tensors(table.slice(a, args.batch))

    def ours() -> Iterable[dict[str, Any]]:
        ds = ParquetDataset(directory, memory=args.first_memory, format="torch",
                            columns=FIRST_COLUMNS)
        yield from DataLoader(ds, batch_size=args.batch, collate_fn=collate)
        ds.close()

    # Untimed warm-up of both: pyarrow's first read_table in a process costs twice the
    # CPU of later ones (thread pool, allocator); ours then runs on a fresh dataset object.
    for _ in range(2):
        measure(pyarrow_epoch())
        measure(ours())
    for _ in range(args.repeat):  # pyarrow before and after ours: the machine drifts
        add(scenario, "pyarrow read_table + tensors",
            measure(epochs(pyarrow_epoch, args.first_epochs)))
        add(scenario, "undertale_duck, fresh dataset", measure(epochs(ours, args.first_epochs)),
            f"{args.first_epochs} fresh datasets, one epoch each")
        add(scenario, "pyarrow read_table + tensors",
            measure(epochs(pyarrow_epoch, args.first_epochs)))


def workers_first(directory: Path, args: argparse.Namespace, add: Callable[..., None]) -> None:
    for workers in args.workers:
        ds = ParquetDataset(directory, memory=args.first_memory, format="torch",
                            columns=FIRST_COLUMNS)
        sampler = ChunkedSampler(ds, args.batch, workers)
        loader = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=workers,
                            collate_fn=collate,
                            multiprocessing_context="fork" if workers else None)
        add("workers: first epoch, ChunkedSampler", f"workers={workers}", measure(loader),
            workers=workers)
        # torch's own cost of a batch from a worker: the same batches, built by no work
        made = collate(ds.__getitems__(list(range(min(args.batch, len(ds))))))
        ds.close()
        loader = DataLoader(FixedBatch(made, len(ds)), batch_size=args.batch, num_workers=workers,
                            collate_fn=identity,
                            multiprocessing_context="fork" if workers else None)
        add("workers: torch transfer only (no decode)", f"workers={workers}", measure(loader),
            workers=workers)


def workers_random(directory: Path, args: argparse.Namespace, add: Callable[..., None],
                   cache: Path) -> None:
    for workers in args.workers:
        ds = ParquetDataset(directory, memory=args.memory, format="torch", disk=args.disk,
                            disk_dir=cache)
        add("workers: random, disk tier (files written)", f"workers={workers}",
            measure(random_loader(ds, args.batch, 3 + workers, workers)), workers=workers)


# --------------------------------------------------------------------------- report

def rate_of(entries: Sequence[Entry], scenario: str, loader: str) -> float:
    """Median rows/s of one loader in one scenario (NaN if it did not run)."""
    rates = [e["rate"] for e in entries if e["scenario"] == scenario and e["loader"] == loader]
    return float(np.median(rates)) if rates else float("nan")


def cpu_of(entries: Sequence[Entry], scenario: str, loader: str) -> float:
    """Median CPU microseconds per row of one loader in one scenario."""
    cpus = [e["cpu_us_per_row"] for e in entries
            if e["scenario"] == scenario and e["loader"] == loader]
    return float(np.median(cpus)) if cpus else float("nan")


def ratios(entries: Sequence[Entry]) -> dict[str, float]:
    """The issue's targets as ratios measured in this run."""
    r = "random"
    first = "first epoch"
    large = "first epoch, one row group per shard"
    pa_first = "pyarrow read_table + tensors"
    return {
        "random_disk_epoch1_vs_hf_epoch1": rate_of(entries, r, "undertale_duck, disk tier, epoch 1")
        / rate_of(entries, r, "HF datasets, epoch 1"),
        "random_disk_epoch2_vs_hf_epoch2": rate_of(entries, r, "undertale_duck, disk tier, epoch 2")
        / rate_of(entries, r, "HF datasets, epoch 2"),
        "random_disk_epoch2_vs_no_disk": rate_of(entries, r, "undertale_duck, disk tier, epoch 2")
        / rate_of(entries, r, "undertale_duck, no disk tier"),
        "random_disk_epoch2_vs_lance_epoch2": rate_of(
            entries, r, "undertale_duck, disk tier, epoch 2") / rate_of(entries, r,
                                                                         "Lance, epoch 2"),
        "cached_batch64_vs_batch256": rate_of(entries, "small batches",
                                              "undertale_duck cached, batch 64")
        / rate_of(entries, "small batches", "undertale_duck cached, batch 256"),
        "cached_batch64_vs_batch256_cpu": cpu_of(entries, "small batches",
                                                 "undertale_duck cached, batch 256")
        / cpu_of(entries, "small batches", "undertale_duck cached, batch 64"),
        "first_epoch_rate_vs_pyarrow": rate_of(entries, first, "undertale_duck, fresh dataset")
        / rate_of(entries, first, pa_first),
        "first_epoch_cpu_vs_pyarrow": cpu_of(entries, first, "undertale_duck, fresh dataset")
        / cpu_of(entries, first, pa_first),
        "first_epoch_one_group_rate_vs_pyarrow": rate_of(entries, large,
                                                         "undertale_duck, fresh dataset")
        / rate_of(entries, large, pa_first),
        "first_epoch_one_group_cpu_vs_pyarrow": cpu_of(entries, large,
                                                       "undertale_duck, fresh dataset")
        / cpu_of(entries, large, pa_first),
    }


def summarize(results: dict[str, Any]) -> str:
    """The table, the ratios and the memory line as markdown."""
    rows = [[e["scenario"], e["loader"], e["rate"], e["cpu_us_per_row"],
             "" if e["first_batch"] != e["first_batch"] else f"{e['first_batch']:.3f}",
             e["rows"], e["note"]] for e in results["entries"]]
    table = common.markdown_table(
        ["scenario", "loader", "rows/s", "CPU us/row", "first batch (s)", "rows", "note"], rows)
    ratio_lines = "\n".join(f"- `{k}`: **{v:.2f}x**" for k, v in results["ratios"].items())
    memory = results.get("memory", {})
    mem = (f"Random epochs with the disk tier (workers=0): peak RSS {memory['peak_rss_mb']:.0f} "
           f"MiB for memory={memory['memory_mb']} MB; after them {memory['anon_mb']:.0f} MiB "
           f"anonymous and {memory['file_mb']:.0f} MiB file-backed (libraries and mapped "
           f"window files, reclaimable); {memory['decoded']} window reads for "
           f"{memory['windows']} windows over two epochs." if memory else "")
    return (f"{results['rows']:,} rows of 512 tokens ({results['data_mb']:.0f} MB in the "
            f"footers), {results['shards']} shards, row groups of {results['row_group']}, batch "
            f"{results['batch']}, memory={results['memory_mb']} MB, disk={results['disk_mb']} MB."
            f" One run on a shared, noisy machine: read ratios, not absolute numbers.\n\n"
            f"{table}\n\nRatios (same run):\n\n{ratio_lines}\n\n{mem}\n")


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """A bar chart of rows/s per scenario and a workers line chart; return the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str], list[float]] = {}
    for e in results["entries"]:
        if not e["scenario"].startswith("workers"):
            groups.setdefault((e["scenario"], e["loader"]), []).append(e["rate"])
    # one bar per loader and scenario: the median of its repeats
    entries = [{"scenario": sc, "loader": lo, "rate": float(np.median(rates))}
               for (sc, lo), rates in groups.items()]
    labels = [f"{e['scenario']}: {e['loader']}" for e in entries]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(entries) + 1.5))
    colors = ["tab:blue" if "undertale" in e["loader"] else "tab:gray" for e in entries]
    ax.barh(range(len(entries)), [e["rate"] for e in entries], color=colors)
    ax.set_yticks(range(len(entries)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("rows/s (log)")
    ax.set_title("Access patterns, 512-token rows (ours in blue)")
    fig.tight_layout()
    paths = [out / "access.png"]
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for scenario in sorted({e["scenario"] for e in results["entries"]
                            if e["scenario"].startswith("workers")}):
        points = sorted((e["workers"], e["rate"]) for e in results["entries"]
                        if e["scenario"] == scenario)
        ax.plot([w for w, _ in points], [r for _, r in points], "o-", label=scenario)
    ax.set_xlabel("DataLoader workers")
    ax.set_ylabel("rows/s")
    ax.legend(fontsize=8)
    ax.set_title(f"Workers ({results['cpus']} cores)")
    fig.tight_layout()
    paths.append(out / "access_workers.png")
    fig.savefig(paths[1], dpi=100)
    plt.close(fig)
    return paths


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--rows", type=int, default=5000, help="rows per shard")
    p.add_argument("--row-group", type=int, default=1000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--memory", type=float, default=16,
                   help="MB for the random-access runs (data should be several times this)")
    p.add_argument("--first-memory", type=float, default=256, help="MB for the first epoch")
    p.add_argument("--disk", type=float, default=4096, help="MB of disk tier")
    p.add_argument("--random-batches", type=int, default=2,
                   help="batches timed for random access without the disk tier (slow)")
    p.add_argument("--workers", type=lambda s: [int(w) for w in s.split(",")],
                   default=[0, 1, 2, 4])
    p.add_argument("--repeat", type=int, default=5,
                   help="repeats of the first-epoch and small-batch measurements")
    p.add_argument("--first-epochs", type=int, default=3,
                   help="fresh datasets read one after another in one first-epoch measurement")
    p.add_argument("--small-epochs", type=int, default=5,
                   help="cached epochs in one small-batch measurement")
    p.add_argument("--large-groups", type=int, default=20000,
                   help="rows per shard of a second first-epoch dataset written with one "
                        "row group per shard (pyarrow's default for files this size); 0: skip")
    p.add_argument("--no-peers", action="store_true", help="skip HF datasets and Lance")
    p.add_argument("--data", type=Path, default=common.DATA)
    p.add_argument("--out", type=Path, default=common.RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every scenario, print and write the table, JSON and plots; return the results."""
    args = parse(argv)
    directory = common.write_dataset(args.shards, args.rows, root=args.data,
                                     row_group=args.row_group)
    results: dict[str, Any] = {
        "rows": args.shards * args.rows, "shards": args.shards, "row_group": args.row_group,
        "batch": args.batch, "memory_mb": args.memory, "disk_mb": args.disk,
        "data_mb": common.dataset_bytes(directory) / 2**20, "cpus": os.cpu_count(),
        "entries": [],
    }

    def add(scenario: str, loader: str, result: Entry, note: str = "", **extra: Any) -> None:
        entry = {"scenario": scenario, "loader": loader, "note": note, **result, **extra}
        results["entries"].append(entry)
        print(f"  {scenario:<28} {loader:<44} {result['rate']:>10,.0f} rows/s  "
              f"{result['cpu_us_per_row']:>8.1f} us CPU/row", flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemoryBudgetWarning)
        warnings.simplefilter("ignore", RandomAccessWarning)  # measured on purpose
        first_epoch(directory, args, add)
        if args.large_groups:
            large = common.write_dataset(args.shards, args.large_groups, root=args.data,
                                         row_group=args.large_groups)
            first_epoch(large, args, add, "first epoch, one row group per shard")
        small_batches(directory, args, add)
        workers_first(directory, args, add)
        random_access(directory, args, add, results)  # last: Lance is not fork-safe
    results["ratios"] = ratios(results["entries"])
    text = summarize(results)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/bench_access.py " + " ".join(argv or sys.argv[1:])
    (args.out / "access.md").write_text(f"`{command.strip()}`\n\n{text}")
    (args.out / "access.json").write_text(json.dumps(results, indent=1, default=str))
    results["plots"] = plot(results, args.out)
    print()
    print(text)
    return results


if __name__ == "__main__":
    main()
