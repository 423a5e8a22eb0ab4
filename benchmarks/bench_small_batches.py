"""Small batches on a warm cache: rows/s and CPU per row of batch 64 against batch 256.

The documented training path (``ParquetDataset(format="torch")``, ``ChunkedSampler``,
torch's ``DataLoader`` with ``collate``, ``workers=0``) over data the cache holds whole
(every epoch after the first reads only memory), so what differs between batch sizes is the
cost paid per batch: torch's DataLoader, the sampler, ``__getitems__`` and ``collate``.
pyarrow slices of an in-memory table turned into tensors give the floor of the same ratio.
Two more rows: ``ChunkedLoader`` (what ``load()`` and ``DataModule`` return: at
``workers=0`` its own iterator does what torch's does without torch's per-batch profiler
annotation) and ``DataLoader alone`` (the same sampler and torch DataLoader over a dataset
that hands out one prebuilt batch: what torch's step costs by itself). From the CPU per row
at two batch sizes each row is fitted as ``a + c * batch`` microseconds per batch, and the
per-batch cost ``a`` that a 0.8x ratio would allow is printed beside it.

Batch sizes take turns within each round (A/B/A/B) and each measurement is several epochs
back to back, so drift from other jobs on the machine hits them alike; medians of the
rounds are reported with the 1-minute load average before and after. Writes
``small_batches.json`` and ``small_batches.md`` to ``benchmarks/results``.

    .venv/bin/python benchmarks/bench_small_batches.py                 # 4 x 25,000 rows
    .venv/bin/python benchmarks/bench_small_batches.py --repeat 9 --profile 64
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

import undertale_duck
from undertale_duck import ChunkedSampler, ParquetDataset, collate
from undertale_duck.core.rows import row_access

Entry = dict[str, Any]


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def measure(make: Callable[[], Iterable[Any]], epochs: int, *, check: int = 0) -> Entry:
    """``epochs`` passes of ``make()`` back to back: rows/s and CPU microseconds per row.

    With ``check`` (the dataset's rows), every row of every epoch is checked in order
    (``common.Checker``: labels, mask lengths, shapes), as the issue's method checks them.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    rows = 0
    for _ in range(epochs):
        checker = common.Checker() if check else None
        for batch in make():
            if checker is not None:
                checker(batch)
            rows += common.batch_rows(batch)
        if checker is not None and checker.rows != check:
            raise AssertionError(f"an epoch handed out {checker.rows} rows of {check}")
    seconds = time.perf_counter() - wall
    used = time.process_time() - cpu
    return {"rows": rows, "rate": rows / seconds, "cpu_us_per_row": used / rows * 1e6}


def ours(ds: ParquetDataset, batch: int) -> Iterable[Any]:
    """The documented loader: ChunkedSampler, DataLoader(batch_size=...), collate."""
    sampler = ChunkedSampler(ds, batch, workers=0)
    return DataLoader(ds, batch_size=batch, sampler=sampler, collate_fn=collate)


class Prebuilt(torch.utils.data.Dataset[Any]):
    """A dataset whose batch costs nothing: ``__getitems__`` returns one batch built once.

    Through the same sampler and ``DataLoader`` as ours, what is left per batch is torch's
    own step (the batch sampler, the fetcher, the iterator), the floor of any map-style
    dataset at ``workers=0``.
    """

    def __init__(self, length: int, batch: Any) -> None:
        self.length = length
        self.batch = batch

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError("batched only")

    def __getitems__(self, indices: list[int]) -> Any:
        n = len(indices)
        if n == len(self.batch["id"]):
            return self.batch
        return {k: v[:n] for k, v in self.batch.items()}  # an epoch's last, shorter batch


def alone(ds: ParquetDataset, prebuilt: Prebuilt, batch: int) -> Iterable[Any]:
    """The torch DataLoader and our sampler over a dataset handing out a prebuilt batch."""
    sampler = ChunkedSampler(ds, batch, workers=0)
    return DataLoader(prebuilt, batch_size=batch, sampler=sampler, collate_fn=_same)


def _same(batch: Any) -> Any:
    return batch


class Timed(torch.utils.data.Dataset[Any]):
    """Our dataset behind a stopwatch: the time its ``__getitems__`` and ``collate`` take.

    For ``--parts``: the same sampler, ``DataLoader`` and ``collate`` as :func:`ours`, with the
    seconds spent fetching and collating added up, so the rest of a batch's time is torch's
    step, the loop and freeing the batch before.
    """

    def __init__(self, ds: ParquetDataset) -> None:
        self.ds = ds
        self.seconds = {"fetch": 0.0, "collate": 0.0}

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, index: int) -> Any:
        return self.ds[index]

    def __getitems__(self, indices: list[int]) -> Any:
        start = time.perf_counter()
        rows = self.ds.__getitems__(indices)
        self.seconds["fetch"] += time.perf_counter() - start
        return rows

    def collate(self, rows: Any) -> Any:
        """``collate``, timed."""
        start = time.perf_counter()
        batch = collate(rows)
        self.seconds["collate"] += time.perf_counter() - start
        return batch


def parts(ds: ParquetDataset, batch: int, check: int) -> dict[str, float]:
    """One cached epoch of :func:`ours` at ``batch``: microseconds per batch in each part."""
    timed = Timed(ds)
    loader = DataLoader(timed, batch_size=batch, sampler=ChunkedSampler(ds, batch, workers=0),
                        collate_fn=timed.collate)
    checker = common.Checker() if check else None
    checking = 0.0
    count = 0
    wall = time.perf_counter()
    for out in loader:
        if checker is not None:
            start = time.perf_counter()
            checker(out)
            checking += time.perf_counter() - start
        count += 1
    total = time.perf_counter() - wall
    fetch, collating = timed.seconds["fetch"], timed.seconds["collate"]
    spent = {"fetch": fetch, "collate": collating, "check": checking,
             "torch step, loop, freeing": total - fetch - collating - checking, "total": total}
    return {k: v / count * 1e6 for k, v in spent.items()}


def chunked(ds: ParquetDataset, batch: int) -> Iterable[Any]:
    """``load()``'s loader (a ``ChunkedLoader``): the same sampler, ``collate``."""
    return undertale_duck.load(ds, None, collate, batch)


def fit(small: float, large: float, b_small: int, b_large: int) -> dict[str, float]:
    """Fit CPU microseconds per row at two batch sizes as ``a + c * batch`` per batch.

    Returns ``a`` (per batch), ``c`` (per row) and ``a_for_0.8``: the per-batch cost at
    which batch ``b_small`` would run at 0.8x the rows/s of ``b_large`` with this ``c``
    (solving ``(c + a / b_large) / (c + a / b_small) = 0.8``).
    """
    per_row = (large * b_large - small * b_small) / (b_large - b_small)
    per_batch = small * b_small - per_row * b_small
    allowed = per_row * 0.2 / (0.8 / b_small - 1 / b_large)
    return {"a_us_per_batch": per_batch, "c_us_per_row": per_row, "a_for_0.8": allowed}


def profile(ds: ParquetDataset, batch: int, epochs: int) -> str:
    """Profile ``epochs`` cached epochs at ``batch``: the top functions by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    measure(lambda: ours(ds, batch), epochs)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    return text.getvalue()


def parts_table(timed: Sequence[dict[str, float]], batches: Sequence[int]) -> str:
    """Medians of ``--parts``: microseconds per batch in each part, and per-batch cost fits."""
    keys = [k for k in timed[0] if k != "batch"]
    medians = {b: {k: statistics.median(t[k] for t in timed if t["batch"] == b) for k in keys}
               for b in batches}
    rows: list[list[Any]] = [
        [f"batch {b}", *(medians[b][k] for k in keys), medians[b]["total"] / b]
        for b in batches
    ]
    small, large = batches[-1], batches[0]
    fitted = {k: fit(medians[small][k] / small, medians[large][k] / large, small, large)
              for k in keys}
    rows.append([f"a: per batch, from {small} and {large}",
                 *(fitted[k]["a_us_per_batch"] for k in keys), ""])
    rows.append(["c: per row", *(fitted[k]["c_us_per_row"] for k in keys), ""])
    return ("Where a cached `DataLoader` batch's time goes (one more epoch per round and batch "
            "size, medians, microseconds per batch; the rest is torch's step, the loop and "
            "freeing the batch before):\n\n"
            + common.markdown_table(["", *keys, "total us/row"], rows) + "\n")


def median_of(entries: Sequence[Entry], loader: str, key: str) -> float:
    """The median of ``key`` over the rounds of one loader."""
    return statistics.median(e[key] for e in entries if e["loader"] == loader)


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--rows", type=int, default=25_000, help="rows per shard")
    p.add_argument("--row-group", type=int, default=common.ROW_GROUP)
    p.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")],
                   default=[256, 64], help="batch sizes; the first is the reference")
    p.add_argument("--repeat", type=int, default=7, help="rounds (medians are reported)")
    p.add_argument("--epochs", type=int, default=2, help="cached epochs per measurement")
    p.add_argument("--no-pyarrow", action="store_true", help="skip the pyarrow slices")
    p.add_argument("--no-floor", action="store_true", help="skip the DataLoader-alone rows")
    p.add_argument("--check", action="store_true",
                   help="check every row (labels, mask lengths, shapes), as the issue's method "
                   "does; the DataLoader-alone floor (one batch again and again) is not checked")
    p.add_argument("--profile", type=int, default=0,
                   help="also print a cProfile of cached epochs at this batch size")
    p.add_argument("--parts", action="store_true",
                   help="also time each part of a DataLoader batch (fetch, collate, check, the "
                   "rest) in one more epoch per round and batch size")
    p.add_argument("--ahead-ab", action="store_true",
                   help="also measure the DataLoader with every run sliced alone (the dataset "
                   "not slicing the runs that follow ahead, decision 0038), in turns with it")
    p.add_argument("--label", default="", help="a name for this run in the output")
    p.add_argument("--data", type=Path, default=common.DATA)
    p.add_argument("--out", type=Path, default=common.RESULTS)
    return p.parse_args(argv)


def _rounds(args: argparse.Namespace, ds: ParquetDataset, prebuilt: dict[int, Prebuilt],
            slices: Callable[[int], Iterable[dict[str, Any]]], check: int,
            results: dict[str, Any]) -> None:
    """The measurements of every round, batch sizes taking turns, into ``results``."""
    table = not args.no_pyarrow
    for turn in range(args.repeat):
        for batch in args.batches:
            # with --ahead-ab, the dataset slicing runs ahead or not, in turns (A/B, B/A)
            ahead = [True, False][:: 1 if turn % 2 == 0 else -1] if args.ahead_ab else [True]
            for on in ahead:
                row_access.SLICE_AHEAD = on
                try:
                    entry = measure(lambda b=batch: ours(ds, b), args.epochs, check=check)
                finally:
                    row_access.SLICE_AHEAD = True
                name = "undertale_duck cached" if on else "undertale_duck cached, runs alone"
                results["entries"].append({"loader": f"{name}, batch {batch}",
                                           "batch": batch, **entry})
            if table:
                entry = measure(lambda b=batch: slices(b), args.epochs, check=check)
                results["entries"].append({"loader": f"pyarrow slices, batch {batch}",
                                           "batch": batch, **entry})
            entry = measure(lambda b=batch: chunked(ds, b), args.epochs, check=check)
            results["entries"].append({"loader": f"undertale_duck ChunkedLoader, batch {batch}",
                                       "batch": batch, **entry})
            if not args.no_floor:
                entry = measure(lambda b=batch: alone(ds, prebuilt[b], b), args.epochs)
                results["entries"].append({"loader": f"DataLoader alone, batch {batch}",
                                           "batch": batch, **entry})
            if args.parts:
                results.setdefault("parts", []).append(
                    {"batch": batch, **parts(ds, batch, check)})


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the rounds, print and write the table and JSON; return the results."""
    args = parse(argv)
    directory = common.write_dataset(args.shards, args.rows, root=args.data,
                                     row_group=args.row_group)
    ds = ParquetDataset(directory, memory=4096, format="torch")
    measure(lambda: ours(ds, args.batches[0]), 1)  # the first epoch fills the cache
    # one real batch of each size, collated, handed out again and again by the floor
    prebuilt = {b: Prebuilt(len(ds), collate(ds.__getitems__(list(range(b)))))
                for b in args.batches}
    table = None if args.no_pyarrow else pa.concat_tables(
        pq.read_table(p) for p in common.shard_paths(directory))

    def slices(batch: int) -> Iterable[dict[str, Any]]:
        assert table is not None
        return (common.to_tensors(table.slice(a, batch)) for a in range(0, table.num_rows, batch))

    results: dict[str, Any] = {
        "label": args.label, "rows": len(ds), "shards": args.shards,
        "row_group": args.row_group, "batches": args.batches, "epochs": args.epochs,
        "repeat": args.repeat, "cpus": os.cpu_count(), "load_before": load(), "entries": [],
        "checked": args.check,
    }
    check = len(ds) if args.check else 0
    threads = torch.get_num_threads()
    if check:
        torch.set_num_threads(1)  # the checks' small tensor ops, as bench_decode_floor.py
    try:
        _rounds(args, ds, prebuilt, slices, check, results)
    finally:
        torch.set_num_threads(threads)  # main() may run inside another program (the tests)
    results["load_after"] = load()
    entries = results["entries"]
    loaders = list(dict.fromkeys(e["loader"] for e in entries))
    rows = [[name, median_of(entries, name, "rate"), median_of(entries, name, "cpu_us_per_row")]
            for name in loaders]
    ratios: dict[str, float] = {}
    reference = args.batches[0]
    kinds = ("undertale_duck cached", "undertale_duck cached, runs alone",
             "undertale_duck ChunkedLoader", "pyarrow slices", "DataLoader alone")
    fits: dict[str, dict[str, float]] = {}
    for kind in kinds:
        for batch in args.batches[1:]:
            small, large = f"{kind}, batch {batch}", f"{kind}, batch {reference}"
            if small in loaders:
                ratios[f"{kind}: batch {batch} / {reference} rows/s"] = (
                    median_of(entries, small, "rate") / median_of(entries, large, "rate"))
                # CPU per row moves less with other jobs' load than wall-clock rows/s
                ratios[f"{kind}: batch {reference} / {batch} CPU per row"] = (
                    median_of(entries, large, "cpu_us_per_row")
                    / median_of(entries, small, "cpu_us_per_row"))
                # paired per round too: the spread says how much the load moved things
                pairs = [s["rate"] / b["rate"] for s, b in zip(
                    (e for e in entries if e["loader"] == small),
                    (e for e in entries if e["loader"] == large), strict=True)]
                key = f"{kind}: batch {batch} / {reference} rows/s"
                results.setdefault("paired", {})[key] = pairs
                fits[f"{kind}, batches {batch} and {reference}"] = fit(
                    median_of(entries, small, "cpu_us_per_row"),
                    median_of(entries, large, "cpu_us_per_row"), batch, reference)
    for batch in args.batches if args.ahead_ab else []:
        on = f"undertale_duck cached, batch {batch}"
        off = f"undertale_duck cached, runs alone, batch {batch}"
        key = f"runs sliced ahead / alone, batch {batch} rows/s"
        ratios[key] = median_of(entries, on, "rate") / median_of(entries, off, "rate")
        results.setdefault("paired", {})[key] = [a["rate"] / b["rate"] for a, b in zip(
            (e for e in entries if e["loader"] == on),
            (e for e in entries if e["loader"] == off), strict=True)]
    results["ratios"] = ratios
    results["fits"] = fits
    text = (f"{len(ds):,} rows of 512 tokens (`id`, `tokens`, `mask`, `label`), "
            f"{args.shards} shards, row groups of {args.row_group}, warm cache, workers=0; "
            f"medians of {args.repeat} rounds of {args.epochs} epochs, batch sizes taking "
            f"turns; {'every row checked' if check else 'rows not checked'}; "
            f"1-minute load average {results['load_before']:.2f} before, "
            f"{results['load_after']:.2f} after ({os.cpu_count()} cores).\n\n"
            + common.markdown_table(["loader", "rows/s", "CPU us/row"], rows) + "\n\n"
            + "\n".join(f"- {k}: **{v:.2f}x**" + (
                f" (paired per round {min(results['paired'][k]):.2f}-"
                f"{max(results['paired'][k]):.2f})" if k in results["paired"] else "")
                for k, v in ratios.items()) + "\n\n"
            + "CPU per batch fitted as `a + c * batch` from the two batch sizes' medians, "
            "and the per-batch cost that 0.8x would allow at that `c`:\n\n"
            + common.markdown_table(
                ["loader", "a: us per batch", "c: us per row", "a for 0.8x"],
                [[k, v["a_us_per_batch"], v["c_us_per_row"], v["a_for_0.8"]]
                 for k, v in fits.items()]) + "\n")
    if args.parts:
        text += "\n" + parts_table(results["parts"], args.batches)
    if args.profile:
        results["profile"] = profile(ds, args.profile, args.epochs)
        print(results["profile"])
    ds.close()
    args.out.mkdir(parents=True, exist_ok=True)
    name = "small_batches" + (f"_{args.label}" if args.label else "")
    command = "python benchmarks/bench_small_batches.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    (args.out / f"{name}.md").write_text(f"`{command.strip()}`\n\n{text}")
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return results


if __name__ == "__main__":
    main()
