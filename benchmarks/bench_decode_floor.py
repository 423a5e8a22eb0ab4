"""The decode floor: a first epoch of ours against pyarrow's, one fresh process per measurement.

Run ``python benchmarks/bench_decode_floor.py`` (``--help`` for the options). Each
measurement runs in a fresh Python process (``--one``), so no loader warms another, and
there is no untimed warm-up: what a user's first epoch pays is what is timed. Rounds rotate
the order of the loaders; ratios are taken within a round against the pyarrow run of the same
round, then the median over rounds is reported. The figures are ``common.Stopwatch``'s:
CPU time is ``resource.getrusage`` of the process (every thread) plus reaped children, with
its kernel part beside it; the main thread's own CPU time (``time.thread_time``: the loop
that hands out and checks the batches, which caps the rate where cores are plenty); the
minor page faults (pages the kernel hands the process: a cache that keeps the epoch faults
in every page it holds); peak RSS is the process's own ``VmHWM`` (``ru_maxrss`` keeps the
launching process's peak across ``exec``). Cold runs drop the
shards' page cache first (``os.posix_fadvise(..., POSIX_FADV_DONTNEED)``). Every row is
checked (its label and its mask's length are functions of the row index). The load average
is recorded beside every figure. Writes ``decode_floor.json`` and ``decode_floor.md`` to
``benchmarks/results``.

Loaders of the sharded scenario: ``pyarrow`` (``read_table`` per shard, sliced into fresh
tensors: the floor every ratio is taken against), ``pyarrow-views`` (the strictest floor:
``ParquetFile.read`` per shard, batches as tensor views of its buffers, no copy, no pandas),
``ours`` (torch's ``DataLoader`` over a ``ChunkedSampler``, what the issue's harness runs),
``ours-load`` (``load()``: the ``ChunkedLoader`` README's Example 1 builds), ``ours-disk``
(``load()`` with a disk tier, ``disk=``, in the run's scratch directory: in the
``converted`` mode its files are written by an earlier process before the clock, as a
peer's conversion is done, then dropped from the page cache; in the other modes the timed
epoch writes them), ``hf``, ``lance`` and ``litdata`` (skipped when not installed; in the
``converted`` mode another process converts the shards before the clock and the measured one
opens the converted copy, dropped from the page cache; in the other modes the conversion is
timed). ``litdata`` is LitData's ``optimize()`` (one worker, 64 MB chunks, rows as dicts of
numpy arrays) read by a ``StreamingDataset`` (``shuffle=True, seed=0`` for the shuffled
epoch) through a ``StreamingDataLoader``; its conversion's worker processes count in the
CPU (``RUSAGE_CHILDREN``). LitData is no part of the ``bench`` extra (``pyproject.toml``
says how to install it).

Scenarios:

- ``one group``: one shard written with pyarrow's defaults (``--rows`` rows, one row group),
  all four columns, batch 64, sequential, ``memory=256`` and the default ``memory=4096``;
  ours counts how many times a row group's decode was begun (``ds.reader.direct.stats`` and
  ``ds.reader.decoder.stream_stats``, ``"streams"``).
- ``batch``: a warm cache (the dataset read once, then timed), batch 64 against batch 256,
  through torch's ``DataLoader`` and through ``load()``'s ``ChunkedLoader``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable
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
    def write(directory: Path) -> None:
        tables = [common.make_table(a, min(20_000, rows - a)) for a in range(0, rows, 20_000)]
        # pyarrow's defaults: one group
        pq.write_table(pa.concat_tables(tables), directory / "part-00000.parquet")

    return common.written(common.DATA / f"onegroup-{rows}", write)


# --------------------------------------------------------------------------- one measurement


def pyarrow_batches(directory: Path, batch: int) -> Iterable[dict[str, Any]]:
    """The floor: ``read_table`` per shard, sliced into batches turned into tensors."""
    for path in common.shard_paths(directory):
        table = pq.read_table(path, columns=COLUMNS)
        for a in range(0, table.num_rows, batch):
            yield common.to_tensors(table.slice(a, batch))


def pyarrow_views_batches(directory: Path, batch: int) -> Iterable[dict[str, Any]]:
    """The strictest floor: each shard decoded whole, batches as tensor views of its buffers.

    pandas is never imported: the shard is read by ``ParquetFile.read`` (``read_table`` goes
    through ``pyarrow.dataset``, which imports pandas where it is installed, as
    ``to_numpy`` does), and each column becomes numpy once per shard straight from its
    buffers. There is no copy and no per-batch conversion call: a batch is a slice of those
    tensors; ``id`` strings go through ``to_pylist`` as everyone's do. The batches share the
    table's memory (they are not the fresh copies the other loaders hand out): this is what
    decoding alone costs.
    """
    import torch

    from undertale_duck.common.arrays import numpy_of  # buffers read without pandas

    def tensor(values: np.ndarray[Any, Any]) -> Any:
        with warnings.catch_warnings():  # read-only views on purpose: nothing writes them
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(values)

    for path in common.shard_paths(directory):
        table = pq.ParquetFile(path).read(columns=COLUMNS)
        n = table.num_rows
        views: dict[str, Any] = {}
        for name in COLUMNS:
            col = table.column(name).combine_chunks()
            if pa.types.is_list(col.type):
                offsets = numpy_of(col.offsets)
                values = numpy_of(col.values)[offsets[0]:offsets[-1]]
                views[name] = tensor(values.reshape(n, -1))
            elif pa.types.is_integer(col.type):
                views[name] = tensor(numpy_of(col))
            else:
                views[name] = col
        for a in range(0, n, batch):
            yield {name: (v.slice(a, batch).to_pylist() if isinstance(v, pa.Array)
                          else v[a:a + batch]) for name, v in views.items()}


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this (fresh) process; returns its figures."""
    import torch
    from torch.utils.data import DataLoader

    from undertale_duck import ParquetDataset, collate, load

    directory = Path(args.data)
    if args.cold:
        common.drop_cache(directory)
    ds = None
    if args.loader == "pyarrow":
        def batches() -> Iterable[dict[str, Any]]:
            return pyarrow_batches(directory, args.batch)
    else:
        ds = ParquetDataset(directory, memory=args.memory, format="torch", columns=COLUMNS)

        def batches() -> Iterable[dict[str, Any]]:
            if args.loader == "ours-load":  # load()'s ChunkedLoader (README's Example 1)
                return load(ds, None, collate, args.batch)
            return DataLoader(ds, batch_size=args.batch, collate_fn=collate)
        if args.warm_cache:  # the scenario is a cached epoch: fill the cache first
            for _ in batches():
                pass
    torch.set_num_threads(1)
    check = common.Checker()
    clock = common.Stopwatch()
    for batch in batches():
        check(batch)
    out = clock.figures(check.rows)
    if check.rows != args.rows:
        raise AssertionError(f"read {check.rows} rows of {args.rows}")
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


# --------------------------------------------------------------------------- the sharded table

SHARDED_LOADERS = ("pyarrow", "pyarrow-views", "ours", "ours-load", "ours-disk", "hf", "lance",
                   "litdata")
#: Bound of ``ours-disk``'s disk tier, MiB (a bound: the files take the data's decoded size).
DISK_MIB = 8192
SHARDED_MODES = {
    "first epoch, page cache of the shards dropped": ("first", True),
    "first epoch of a fresh object, page cache warm": ("first", False),
    "second epoch (same object, timed after the first)": ("second", False),
    "shuffled epoch, each system's own shuffle": ("shuffle", False),
    # the cold target for Lance: its read rate without its conversion (HF alike)
    "first epoch, page cache dropped, peers' conversion done untimed": ("converted", True),
}


class IdChecker:
    """Checks every row by its ``id`` (any order): label, mask length, shapes, each row once."""

    def __init__(self, rows: int) -> None:
        self.seen = np.zeros(rows, dtype=bool)
        self.rows = 0

    def __call__(self, batch: dict[str, Any]) -> None:
        """Check one batch."""
        import torch

        index = torch.tensor([int(s[4:]) for s in batch["id"]], dtype=torch.int64)
        n = len(index)
        if not torch.equal(batch["label"], index % 1000):
            raise AssertionError(f"wrong labels near row {int(index[0])}")
        if not torch.equal(batch["mask"].sum(dim=1, dtype=torch.int64), index % 512 + 1):
            raise AssertionError(f"wrong masks near row {int(index[0])}")
        if batch["tokens"].shape != (n, common.TOKENS):
            raise AssertionError(f"wrong token shape near row {int(index[0])}")
        numbers = index.numpy()
        if self.seen[numbers].any():
            raise AssertionError(f"a row served twice near row {int(index[0])}")
        self.seen[numbers] = True
        self.rows += n


class LitRows:
    """LitData's ``optimize`` function: a shard's rows as dicts (tokens and mask as arrays).

    A class at module level: LitData pickles it to its worker process.
    """

    def __call__(self, path: str) -> Iterable[dict[str, Any]]:
        """Yield the rows of the shard at ``path``, in order."""
        table = pq.read_table(path, columns=COLUMNS)
        for part in table.to_batches(max_chunksize=common.ROW_GROUP):
            n = part.num_rows
            ids = part.column(0).to_pylist()
            tokens, mask = (part.column(name).flatten().to_numpy().reshape(n, -1)
                            for name in ("tokens", "mask"))
            labels = part.column(3).to_numpy()
            for k in range(n):
                yield {"id": ids[k], "tokens": tokens[k].copy(), "mask": mask[k].copy(),
                       "label": int(labels[k])}


def sharded_epochs(loader: str, directory: Path, batch: int, memory: int | None,
                   scratch: Path, state: dict[str, Any]) -> Callable[[bool], Iterable[Any]]:
    """The epochs of one object of ``loader``: ``epoch(shuffle)`` iterates its batches.

    The object (kept in ``state``) is built when the first epoch begins, so its construction
    (and a peer's conversion) is timed with the first epoch.
    """

    def pyarrow_epoch(shuffle: bool) -> Iterable[dict[str, Any]]:
        if not shuffle:
            yield from pyarrow_batches(directory, batch)
            return
        # pyarrow's shuffle: the whole table read, batches taken by a permutation
        table = pa.concat_tables(pq.read_table(p, columns=COLUMNS)
                                 for p in common.shard_paths(directory)).combine_chunks()
        # one chunk: a take from many chunks concatenates them all again on every call
        order = np.random.default_rng(0).permutation(table.num_rows)
        for a in range(0, len(order), batch):
            yield common.to_tensors(table.take(order[a:a + batch]))

    def ours_epoch(shuffle: bool) -> Iterable[dict[str, Any]]:
        from torch.utils.data import DataLoader

        from undertale_duck import ChunkedSampler, ParquetDataset, collate, load

        if "ds" not in state:
            kw: dict[str, Any] = {} if memory is None else {"memory": memory}
            if loader == "ours-disk":
                kw.update(disk=DISK_MIB, disk_dir=str(scratch / "tier"))
            state["ds"] = ParquetDataset(directory, format="torch", **kw)
        ds = state["ds"]
        if loader == "ours":
            sampler = ChunkedSampler(ds, batch, 0, shuffle=shuffle, drop_last=False)
            yield from DataLoader(ds, batch_size=batch, sampler=sampler, collate_fn=collate)
            return
        yield from load(ds, None, collate, batch, shuffle=shuffle, drop_last=False)

    def hf_epoch(shuffle: bool) -> Iterable[dict[str, Any]]:
        import datasets

        if "hf" not in state:
            files = [str(p) for p in common.shard_paths(directory)]
            state["hf"] = datasets.Dataset.from_parquet(
                files, cache_dir=str(scratch / "hf"), keep_in_memory=False,
            ).with_format("torch")
        hf = state["hf"]
        if shuffle:
            hf = hf.shuffle(seed=0)
        for a in range(0, len(hf), batch):
            yield hf[a:a + batch]

    def lance_epoch(shuffle: bool) -> Iterable[dict[str, Any]]:
        import lance

        if "lance" not in state:
            path = scratch / "data.lance"
            if path.exists():  # converted by an earlier process (the converted mode)
                state["lance"] = lance.dataset(str(path))
            else:
                reader = pq.ParquetDataset([str(p) for p in common.shard_paths(directory)])
                state["lance"] = lance.write_dataset(reader.read(columns=COLUMNS), str(path))
        data = state["lance"]
        if not shuffle:
            for part in data.to_batches(columns=COLUMNS, batch_size=batch):
                yield common.to_tensors(part)
            return
        order = np.random.default_rng(0).permutation(data.count_rows())
        for a in range(0, len(order), batch):
            yield common.to_tensors(data.take(order[a:a + batch], columns=COLUMNS))

    def litdata_epoch(shuffle: bool) -> Iterable[dict[str, Any]]:
        from litdata import StreamingDataLoader, StreamingDataset, optimize

        path = scratch / "litdata"
        if not (path / "index.json").exists():  # else converted by an earlier process
            optimize(fn=LitRows(), inputs=[str(p) for p in common.shard_paths(directory)],
                     output_dir=str(path), chunk_bytes="64MB", num_workers=1,
                     mode="overwrite", verbose=False, reorder_files=False)
        key = f"litdata-{shuffle}"  # LitData shuffles by a constructor argument
        if key not in state:
            state[key] = StreamingDataset(str(path), shuffle=shuffle, seed=0)
        yield from StreamingDataLoader(state[key], batch_size=batch, num_workers=0)

    def views_epoch(shuffle: bool) -> Iterable[dict[str, Any]]:
        if shuffle:  # a shuffled batch is a gather: there is no view of it to hand out
            yield from pyarrow_epoch(shuffle)
            return
        yield from pyarrow_views_batches(directory, batch)

    epochs: dict[str, Callable[[bool], Iterable[Any]]] = {
        "pyarrow": pyarrow_epoch, "pyarrow-views": views_epoch, "ours": ours_epoch,
        "ours-load": ours_epoch, "ours-disk": ours_epoch, "hf": hf_epoch, "lance": lance_epoch,
        "litdata": litdata_epoch}
    return epochs[loader]


def run_sharded(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement of the sharded table in this (fresh) process."""
    import shutil
    import tempfile

    import torch

    directory = Path(args.data)
    rows = args.rows
    # imported before the clock starts, as a user's are (ours: its lazily imported names too)
    peers = {"hf": ("datasets",), "lance": ("lance",), "litdata": ("litdata",)}
    for module in peers.get(args.loader, ()):
        importlib.import_module(module)
    if args.loader.startswith("ours"):
        from undertale_duck import ChunkedSampler, ParquetDataset, collate, load  # noqa: F401
    scratch = Path(tempfile.mkdtemp(prefix="decode-floor-", dir=directory.parent))
    try:
        torch.set_num_threads(1)
        state: dict[str, Any] = {}
        epoch = sharded_epochs(args.loader, directory, args.batch,
                               None if args.memory == 4096 else args.memory, scratch, state)
        if args.mode == "converted" and args.loader in ("hf", "lance", "litdata", "ours-disk"):
            # the conversion (ours-disk: the tier's files), before the clock and in another
            # process, as a user converts once and trains later: this process opens the
            # converted copy, its heap not grown by the conversion (done here, Lance's
            # decode reused the pages its conversion had touched: 1.6 GiB peak against 0.6
            # in the table)
            convert_in_child(args.loader, directory, scratch)
            common.drop_tree(scratch)
        if args.cold:
            common.drop_cache(directory)
        if args.mode == "second":  # the first epoch, untimed: this row times the second
            for _ in epoch(False):
                pass
        check = IdChecker(rows)
        profile = None
        if args.profile:  # where the CPU goes (the figures are then not comparable)
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        clock = common.Stopwatch()
        for batch in epoch(args.mode == "shuffle"):
            check(batch)
        out = clock.figures(check.rows)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        if check.rows != rows or not check.seen.all():
            raise AssertionError(f"read {check.rows} rows of {rows}")
        if args.loader.startswith("ours"):
            ds = state["ds"]
            out["cache_held_mib"] = ds.reader.cache.held / 2**20
            if ds.disk_stats is not None:  # windows decoded and written in this process
                out["disk_writes"] = ds.disk_stats.writes  # converted: none
            ds.close()
        return out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def convert_in_child(loader: str, directory: Path, scratch: Path) -> None:
    """Leave ``loader``'s converted copy in ``scratch``, made by another process.

    Its CPU and memory are not the measured process's. ``hf``, ``lance`` and ``litdata``:
    their conversion; ``ours-disk``: the disk tier's window files (decision 0027).
    """
    # the batch size does not change what is written; 256 fills the tier soonest
    command = [sys.executable, __file__, "--convert", "--loader", loader, "--batch", "256",
               "--data", str(directory), "--scratch", str(scratch)]
    subprocess.run(command, check=True)


def run_convert(args: argparse.Namespace) -> None:
    """The ``--convert`` child of :func:`convert_in_child`.

    A peer converts when its object is built (its first batch is read); ``ours-disk`` writes
    a window's file as it decodes it, so a whole epoch is read.
    """
    state: dict[str, Any] = {}
    epoch = sharded_epochs(args.loader, Path(args.data), args.batch, None, Path(args.scratch),
                           state)
    for _ in epoch(False):
        if args.loader != "ours-disk":
            break
    if "ds" in state:
        state["ds"].close()


def peer_available(loader: str) -> bool:
    """Whether a peer's package imports here (peers not installed are skipped)."""
    module = {"hf": "datasets", "lance": "lance", "litdata": "litdata"}.get(loader)
    return module is None or importlib.util.find_spec(module) is not None


# --------------------------------------------------------------------------- driver

def measure(data: Path, loader: str, rows: int, *, memory: int = 4096, batch: int = 64,
            cold: bool = False, warm_cache: bool = False, mode: str = "") -> dict[str, Any]:
    """Run one measurement in a fresh process."""
    command = [sys.executable, __file__, "--one", "--loader", loader, "--data", str(data),
               "--rows", str(rows), "--memory", str(memory), "--batch", str(batch)]
    command += ["--cold"] * cold + ["--warm-cache"] * warm_cache + ["--mode", mode] * bool(mode)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def median_ratio(runs: list[dict[str, Any]], key: str, name: str, base: str) -> float:
    """The median over rounds of ``name``'s ``key`` over ``base``'s in the same round."""
    return statistics.median(r[name][key] / r[base][key] for r in runs)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="sharded,one group,batch")
    parser.add_argument("--shards", type=int, default=8, help="sharded: shards")
    parser.add_argument("--shard-rows", type=int, default=25_000, help="sharded: rows each")
    parser.add_argument("--loaders", default=",".join(SHARDED_LOADERS),
                        help="sharded: loaders (peers not installed are skipped)")
    parser.add_argument("--modes", default="cold,warm,second,shuffle,converted",
                        help="sharded: which rows of the table")
    parser.add_argument("--mode", default="", help=argparse.SUPPRESS)
    parser.add_argument("--profile", default="", help="with --one --mode: cProfile output file")
    parser.add_argument("--out", default=str(common.RESULTS))
    parser.add_argument("--name", default="decode_floor", help="results' file name")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loader", default="ours")
    parser.add_argument("--data", default="")
    parser.add_argument("--memory", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--warm-cache", action="store_true")
    parser.add_argument("--convert", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.convert:
        run_convert(args)
        return {}
    if args.one:
        result = run_sharded(args) if args.mode else run_one(args)
        print(json.dumps(result))
        return result
    scenarios = [s.strip() for s in args.scenarios.split(",")]
    results: dict[str, Any] = {"rows": args.rows, "rounds": args.rounds, "runs": {},
                               "machine": f"{os.cpu_count()} cores, shared",
                               "argv": sys.argv[1:] if argv is None else argv}
    cases: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    if "sharded" in scenarios:
        sharded = common.write_dataset(args.shards, args.shard_rows)
        total = args.shards * args.shard_rows
        results["sharded"] = {"shards": args.shards, "shard_rows": args.shard_rows,
                              "skipped": [], "cases": []}
        names = [n.strip() for n in args.loaders.split(",") if n.strip()]
        if "pyarrow" not in names:
            names.insert(0, "pyarrow")  # every ratio is taken against pyarrow's run
        for name in names:
            if not peer_available(name):
                results["sharded"]["skipped"].append(name)
        kept = [n for n in names if n not in results["sharded"]["skipped"]]
        wanted = [m.strip() for m in args.modes.split(",")]
        for case, (mode, cold) in SHARDED_MODES.items():
            key = mode if mode != "first" else "cold" if cold else "warm"
            if key not in wanted:
                continue
            results["sharded"]["cases"].append(case)
            cases[case] = [(name, {"loader": name, "data": sharded, "rows": total,
                                   "mode": mode, "cold": cold}) for name in kept]
    data = one_group_shard(args.rows) if {"one group", "batch"} & set(scenarios) else None
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
        cases["warm cache, batch 64 vs 256, load()"] = [
            ("ours-load batch 256", {"loader": "ours-load", "batch": 256, "warm_cache": True}),
            ("ours-load batch 64", {"loader": "ours-load", "batch": 64, "warm_cache": True}),
        ]
    for case, loaders in cases.items():
        runs = []
        for k in range(args.rounds):
            shift = k % len(loaders)
            rotated = loaders[shift:] + loaders[:shift]
            round_: dict[str, Any] = {}
            for name, kw in rotated:
                kw = dict(kw)
                where = Path(kw.pop("data", data))
                loader = kw.pop("loader", "pyarrow" if name == "pyarrow" else "ours")
                round_[name] = measure(where, loader, kw.pop("rows", args.rows), **kw)
            runs.append({name: round_[name] for name, _ in loaders})  # base first
            print(case, k, json.dumps(runs[-1]), flush=True)
        results["runs"][case] = runs
    lines = ["| scenario | loader | rows/s | CPU us/row | kernel us/row | main thread us/row | "
             "page faults | peak RSS MiB | decodes / cache MiB | x rows/s | x CPU | x peak RSS "
             "| load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for case, runs in results["runs"].items():
        names = list(runs[0])
        base = names[0]
        for name in names:
            def med(key: str, name: str = name, runs: list[dict[str, Any]] = runs) -> float:
                return float(statistics.median(r[name][key] for r in runs))
            decodes = runs[-1][name].get("decodes") or {}
            extra = decodes.get("streams", "")
            if "cache_held_mib" in runs[-1][name]:  # the Arrow bytes the cache holds at the end
                extra = f"{med('cache_held_mib'):,.0f}"
            lines.append(
                f"| {case} | {name} | {med('rate'):,.0f} | {med('cpu_us_per_row'):.2f} | "
                f"{med('sys_us_per_row'):.2f} | {med('main_cpu_us_per_row'):.2f} | "
                f"{med('minor_faults'):,.0f} | {med('peak_rss_mib'):,.0f} | {extra} | "
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
    (out / f"{args.name}.json").write_text(json.dumps(results, indent=1, default=str))
    (out / f"{args.name}.md").write_text(
        f"`benchmarks/bench_decode_floor.py {' '.join(results['argv'])}`, "
        f"{results['machine']}; medians of rotated rounds, ratios against the first loader "
        "of each scenario in the same round; load = 1-minute load average.\n\n" + table + "\n")
    return results


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
