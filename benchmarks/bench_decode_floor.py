"""The decode floor: a first epoch of ours against pyarrow's, one fresh process per measurement.

Run ``python benchmarks/bench_decode_floor.py`` (``--help`` for the options). Each
measurement runs in a fresh Python process (``--one``), so no loader warms another, and
there is no untimed warm-up: what a user's first epoch pays is what is timed. Rounds rotate
the order of the loaders; ratios are taken within a round against the pyarrow run of the same
round, then the median over rounds is reported. CPU time is ``resource.getrusage`` of the
process (every thread) plus reaped children; peak RSS is ``ru_maxrss``. Cold runs drop the
shards' page cache first (``os.posix_fadvise(..., POSIX_FADV_DONTNEED)``). Every row is
checked (its label and its mask's length are functions of the row index). The load average
is recorded beside every figure. Writes ``decode_floor.json`` and ``decode_floor.md`` to
``benchmarks/results``.

Scenarios:

- ``one group``: one shard written with pyarrow's defaults (``--rows`` rows, one row group),
  all four columns, batch 64, sequential, ``memory=256`` and the default ``memory=4096``;
  ours counts how many times a row group's decode was begun (``ds.reader.direct.stats`` and
  ``ds.reader.decoder.stream_stats``, ``"streams"``).
- ``batch``: a warm cache (the dataset read once, then timed), batch 64 against batch 256.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

COLUMNS = ["id", "tokens", "mask", "label"]


# --------------------------------------------------------------------------- data

def one_group_shard(rows: int) -> Path:
    """One shard of ``rows`` rows written with pyarrow's defaults (one row group)."""
    directory = common.DATA / f"onegroup-{rows}"
    path = directory / "part-00000.parquet"
    if not (directory / "_SUCCESS").exists():
        directory.mkdir(parents=True, exist_ok=True)
        tables = [common.make_table(a, min(20_000, rows - a)) for a in range(0, rows, 20_000)]
        pq.write_table(pa.concat_tables(tables), path)  # pyarrow's defaults: one group
        (directory / "_SUCCESS").write_text("")
    return directory


def drop_cache(directory: Path) -> None:
    """Drop the shards' pages from the page cache (a cold read)."""
    for path in common.shard_paths(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- one measurement

class Checker:
    """Checks every row of the batches: label = index % 1000, mask length = index % 512 + 1."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, batch: dict[str, Any]) -> None:
        """Check one batch (the next rows in order)."""
        import torch

        n = len(batch["label"])
        index = torch.arange(self.rows, self.rows + n)
        label = batch["label"]
        if not torch.equal(label, index % 1000):
            raise AssertionError(f"wrong labels in rows {self.rows}..{self.rows + n - 1}")
        if not torch.equal(batch["mask"].sum(dim=1, dtype=torch.int64), index % 512 + 1):
            raise AssertionError(f"wrong masks in rows {self.rows}..{self.rows + n - 1}")
        if batch["tokens"].shape != (n, common.TOKENS) or len(batch["id"]) != n:
            raise AssertionError(f"wrong shapes in rows {self.rows}..{self.rows + n - 1}")
        self.rows += n


def pyarrow_batches(directory: Path, batch: int) -> Iterable[dict[str, Any]]:
    """The floor: ``read_table`` per shard, sliced into batches turned into tensors."""
    import torch

    for path in common.shard_paths(directory):
        table = pq.read_table(path, columns=COLUMNS)
        for a in range(0, table.num_rows, batch):
            part = table.slice(a, batch)
            out: dict[str, Any] = {}
            for name in COLUMNS:
                col = part.column(name).combine_chunks()
                if pa.types.is_list(col.type):
                    offsets = col.offsets.to_numpy()
                    values = col.values.to_numpy()[offsets[0]:offsets[-1]]
                    out[name] = torch.from_numpy(values.reshape(len(col), -1).copy())
                elif pa.types.is_integer(col.type):
                    out[name] = torch.from_numpy(col.to_numpy().copy())
                else:
                    out[name] = col.to_pylist()
            yield out


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this (fresh) process; returns its figures."""
    import torch
    from torch.utils.data import DataLoader

    from undertale_duck import ParquetDataset, collate

    directory = Path(args.data)
    if args.cold:
        drop_cache(directory)
    ds = None
    if args.loader == "pyarrow":
        def batches() -> Iterable[dict[str, Any]]:
            return pyarrow_batches(directory, args.batch)
    else:
        ds = ParquetDataset(directory, memory=args.memory, format="torch", columns=COLUMNS)

        def batches() -> Iterable[dict[str, Any]]:
            return DataLoader(ds, batch_size=args.batch, collate_fn=collate)
        if args.warm_cache:  # the scenario is a cached epoch: fill the cache first
            for _ in batches():
                pass
    torch.set_num_threads(1)
    check = Checker()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter()
    for batch in batches():
        check(batch)
    seconds = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    if check.rows != args.rows:
        raise AssertionError(f"read {check.rows} rows of {args.rows}")
    out: dict[str, Any] = {
        "rows": check.rows, "seconds": seconds, "rate": check.rows / seconds,
        "cpu_us_per_row": cpu / check.rows * 1e6, "peak_rss_mib": after.ru_maxrss / 1024,
        "load": os.getloadavg()[0],
    }
    if ds is not None:  # row-group decodes begun, by pyarrow and by DuckDB
        direct = ds.reader.direct
        out["decodes"] = {
            "streams": ds.reader.decoder.stream_stats["streams"]
            + (0 if direct is None else direct.stats["streams"]),
            "duckdb": dict(ds.reader.decoder.stream_stats),
            "pyarrow": None if direct is None else dict(direct.stats),
        }
        ds.close()
    return out


# --------------------------------------------------------------------------- driver

def measure(data: Path, loader: str, rows: int, *, memory: int = 4096, batch: int = 64,
            cold: bool = False, warm_cache: bool = False) -> dict[str, Any]:
    """Run one measurement in a fresh process."""
    command = [sys.executable, __file__, "--one", "--loader", loader, "--data", str(data),
               "--rows", str(rows), "--memory", str(memory), "--batch", str(batch)]
    command += ["--cold"] * cold + ["--warm-cache"] * warm_cache
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def median_ratio(runs: list[dict[str, Any]], key: str, name: str, base: str) -> float:
    """The median over rounds of ``name``'s ``key`` over ``base``'s in the same round."""
    return statistics.median(r[name][key] / r[base][key] for r in runs)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="one group,batch")
    parser.add_argument("--out", default=str(common.RESULTS))
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loader", default="ours")
    parser.add_argument("--data", default="")
    parser.add_argument("--memory", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--warm-cache", action="store_true")
    args = parser.parse_args(argv)
    if args.one:
        result = run_one(args)
        print(json.dumps(result))
        return result
    data = one_group_shard(args.rows)
    scenarios = [s.strip() for s in args.scenarios.split(",")]
    results: dict[str, Any] = {"rows": args.rows, "rounds": args.rounds, "runs": {},
                               "machine": f"{os.cpu_count()} cores, shared"}
    cases: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for cold in (False, True):
        tag = "cold" if cold else "warm"
        if "one group" in scenarios:
            cases[f"one group, {tag} page cache"] = [
                ("pyarrow", {"cold": cold}),
                ("ours memory=256", {"memory": 256, "cold": cold}),
                ("ours memory=4096", {"memory": 4096, "cold": cold}),
            ]
    if "batch" in scenarios:
        cases["warm cache, batch 64 vs 256"] = [
            ("ours batch 256", {"batch": 256, "warm_cache": True}),
            ("ours batch 64", {"batch": 64, "warm_cache": True}),
        ]
    for case, loaders in cases.items():
        runs = []
        for k in range(args.rounds):
            shift = k % len(loaders)
            rotated = loaders[shift:] + loaders[:shift]
            runs.append({name: measure(data, "pyarrow" if name == "pyarrow" else "ours",
                                       args.rows, **kw) for name, kw in rotated})
            print(case, k, json.dumps(runs[-1]), flush=True)
        results["runs"][case] = runs
    lines = ["| scenario | loader | rows/s | CPU us/row | peak RSS MiB | decodes | "
             "x rows/s | x CPU | x peak RSS | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    for case, runs in results["runs"].items():
        names = list(runs[0])
        base = names[0]
        for name in names:
            def med(key: str, name: str = name, runs: list[dict[str, Any]] = runs) -> float:
                return float(statistics.median(r[name][key] for r in runs))
            decodes = runs[-1][name].get("decodes") or {}
            lines.append(
                f"| {case} | {name} | {med('rate'):,.0f} | {med('cpu_us_per_row'):.2f} | "
                f"{med('peak_rss_mib'):,.0f} | {decodes.get('streams', '')} | "
                f"{median_ratio(runs, 'rate', name, base):.2f} | "
                f"{median_ratio(runs, 'cpu_us_per_row', name, base):.2f} | "
                f"{median_ratio(runs, 'peak_rss_mib', name, base):.2f} | "
                f"{min(r[name]['load'] for r in runs):.1f}-"
                f"{max(r[name]['load'] for r in runs):.1f} |"
            )
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_floor.json").write_text(json.dumps(results, indent=1))
    (out / "decode_floor.md").write_text(
        f"`benchmarks/bench_decode_floor.py --rows {args.rows} --rounds {args.rounds}`, "
        f"{results['machine']}; medians of rotated rounds, ratios against the first loader "
        "of each scenario in the same round; load = 1-minute load average.\n\n" + table + "\n")
    return results


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
