"""Benchmark helpers: data generation, the seed's strategy, the decode limit, RSS sampling."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import Dataset, Sampler

TOKENS = 512
ROW_GROUP = 10_000
RESULTS = Path(__file__).resolve().parent / "results"
DATA = Path(os.environ.get("UNDERTALE_DUCK_BENCH_DATA", Path(__file__).resolve().parent.parent
                           / "build" / "bench-data"))


# --------------------------------------------------------------------------- data

def schema() -> pa.Schema:
    """Benchmark rows: ``id`` string, ``tokens`` list<int32>, ``mask`` list<int8>, ``label``."""
    return pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.int32())),
                      ("mask", pa.list_(pa.int8())), ("label", pa.int64())])


def make_table(start: int, rows: int, tokens: int = TOKENS) -> pa.Table:
    """Rows ``start..start+rows-1``; every value is a function of the global row index."""
    index = np.arange(start, start + rows, dtype=np.int64)
    mixed = (index[:, None].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             + np.arange(tokens, dtype=np.uint64)[None, :] * np.uint64(0xBF58476D1CE4E5B9))
    mixed ^= mixed >> np.uint64(29)
    mixed *= np.uint64(0x94D049BB133111EB)
    mixed ^= mixed >> np.uint64(32)
    toks = (mixed % np.uint64(50_000)).astype(np.int32)  # token ids: a hash of (row, position)
    lengths = (index % tokens) + 1
    mask = (np.arange(tokens)[None, :] < lengths[:, None]).astype(np.int8)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * tokens)
    return pa.Table.from_arrays(
        [pa.array([f"row-{i:09d}" for i in index.tolist()], pa.string()),
         pa.ListArray.from_arrays(offsets, pa.array(toks.ravel())),
         pa.ListArray.from_arrays(offsets, pa.array(mask.ravel())),
         pa.array(index % 1000)],
        schema=schema(),
    )


def written(directory: Path, write: Callable[[Path], None]) -> Path:
    """``directory`` once ``write`` has filled it; reused as it is when a run finished it.

    A ``_SUCCESS`` marker, written after ``write`` returns, tells a finished directory from
    one a run was stopped in the middle of (which is written again).
    """
    done = directory / "_SUCCESS"
    if not done.exists():
        directory.mkdir(parents=True, exist_ok=True)
        write(directory)
        done.write_text("")
    return directory


def write_dataset(shards: int, rows_per_shard: int, *, root: Path | None = None,
                  row_group: int = ROW_GROUP, tokens: int = TOKENS) -> Path:
    """Write (or reuse) ``shards`` Parquet shards of ``rows_per_shard`` rows each.

    Returns:
        The dataset directory.
    """
    root = root or DATA

    def write(directory: Path) -> None:
        for k in range(shards):
            path = directory / f"part-{k:05d}.parquet"
            with pq.ParquetWriter(path, schema(), compression="snappy") as writer:
                for start in range(0, rows_per_shard, row_group):
                    n = min(row_group, rows_per_shard - start)
                    writer.write_table(make_table(k * rows_per_shard + start, n, tokens),
                                       row_group_size=row_group)

    return written(root / f"s{shards}x{rows_per_shard}-rg{row_group}-t{tokens}", write)


def shard_paths(directory: Path) -> list[Path]:
    """The dataset's shards in order."""
    return sorted(directory.glob("*.parquet"))


def _drop(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_cache(directory: Path) -> None:
    """Drop the shards' pages from the page cache (a cold read)."""
    for path in shard_paths(directory):
        _drop(path)


def drop_tree(root: Path) -> None:
    """Drop every file under ``root`` from the page cache (a peer's converted copy)."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        _drop(path)


def dataset_bytes(directory: Path) -> int:
    """Uncompressed bytes of the dataset according to the footers."""
    total = 0
    for path in shard_paths(directory):
        meta = pq.read_metadata(path)
        total += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return total


# --------------------------------------------------------------------------- seed baseline

class SeedDataset(Dataset[dict[str, Any]]):
    """The seed's strategy: whole shards in an LRU of ``memory`` MB; per row slice + as_py()."""

    def __init__(self, directory: Path, memory: int = 4096) -> None:
        self.paths = shard_paths(directory)
        self.rows = [pq.read_metadata(p).num_rows for p in self.paths]
        self.starts = np.cumsum([0, *self.rows])
        self.limit = memory << 20
        self.cache: OrderedDict[int, pa.Table] = OrderedDict()

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _shard(self, k: int) -> pa.Table:
        table = self.cache.get(k)
        if table is None:
            table = pq.read_table(self.paths[k])
            self.cache[k] = table
            while sum(t.nbytes for t in self.cache.values()) > self.limit and len(self.cache) > 1:
                self.cache.popitem(last=False)
        self.cache.move_to_end(k)
        return table

    def __getitem__(self, index: int) -> dict[str, Any]:
        k = int(np.searchsorted(self.starts, index, side="right")) - 1
        row = self._shard(k).slice(index - int(self.starts[k]), 1)
        return {name: row.column(name)[0].as_py() for name in row.column_names}


# --------------------------------------------------------------------------- decode limit

def decode_limit(directory: Path, columns: Sequence[str] = ("id", "tokens", "mask", "label"),
                 batch: int = 256) -> tuple[int, float]:
    """Raw pyarrow sequential decode of ``columns`` of every shard, to tensors per batch.

    Returns:
        ``(rows, seconds)``.
    """
    rows = 0
    t0 = time.perf_counter()
    for path in shard_paths(directory):
        table = pq.read_table(path, columns=list(columns))
        for start in range(0, table.num_rows, batch):
            part = table.slice(start, batch)
            out: dict[str, Any] = {}
            for name in part.column_names:
                col = part.column(name).combine_chunks()
                if pa.types.is_list(col.type):
                    values = col.values.to_numpy()
                    off = col.offsets.to_numpy()
                    width = (off[-1] - off[0]) // max(len(col), 1)
                    out[name] = torch.from_numpy(values[off[0]:off[-1]].reshape(-1, width).copy())
                elif pa.types.is_integer(col.type):
                    out[name] = torch.from_numpy(col.to_numpy().copy())
                else:
                    out[name] = col.to_pylist()
            rows += part.num_rows
    return rows, time.perf_counter() - t0


# --------------------------------------------------------------------------- orders

class WindowShuffleSampler(Sampler[int]):
    """Locality-aware shuffle: windows in random order, rows shuffled within each window.

    The same order ChunkedSampler(shuffle=True) produces for one rank and no workers; used
    when that sampler is not available.
    """

    def __init__(self, bounds: Sequence[tuple[int, int]], seed: int = 0) -> None:
        self.bounds = list(bounds)
        self.seed = seed

    def window_order(self) -> list[int]:
        """The order in which windows are visited."""
        rng = np.random.default_rng(self.seed)
        return [int(k) for k in rng.permutation(len(self.bounds))]

    def __iter__(self) -> Iterator[int]:
        rng = np.random.default_rng(self.seed + 1)
        for k in self.window_order():
            a, b = self.bounds[k]
            yield from (a + rng.permutation(b - a)).tolist()

    def __len__(self) -> int:
        return sum(b - a for a, b in self.bounds)


def contiguous_batches(n: int, batch: int, workers: int) -> list[list[int]]:
    """Batches such that DataLoader's round-robin gives each worker one contiguous range."""
    if workers <= 1:
        return [list(range(a, min(a + batch, n))) for a in range(0, n, batch)]
    per = -(-n // workers)
    ranges = [[list(range(a, min(a + batch, min(w * per + per, n))))
               for a in range(w * per, min(w * per + per, n), batch)] for w in range(workers)]
    out: list[list[int]] = []
    for k in range(max(len(r) for r in ranges)):
        for r in ranges:
            if k < len(r):
                out.append(r[k])
    return out


# --------------------------------------------------------------------------- measuring

@dataclass
class RSSTrace:
    """RSS of this process (and its children) sampled in a background thread."""

    interval: float = 0.02
    samples: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RSSTrace:
        proc = psutil.Process()
        t0 = time.perf_counter()

        def run() -> None:
            while not self._stop.is_set():
                rss = proc.memory_info().rss
                for child in proc.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        rss += child.memory_info().rss
                self.samples.append((time.perf_counter() - t0, rss))
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def peak(self) -> int:
        """Highest RSS seen, bytes."""
        return max((r for _, r in self.samples), default=psutil.Process().memory_info().rss)


def _status_kib(*keys: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` in bytes (empty where unsupported)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in keys:
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def reset_peak() -> bool:
    """Reset the kernel's RSS high-water mark (Linux ``clear_refs``); False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """The RSS high-water mark since the last :func:`reset_peak` (``VmHWM``), 0 if unknown."""
    return _status_kib("VmHWM").get("VmHWM", 0)


def own_peak_rss(usage: Any) -> int:
    """This process's own peak RSS in bytes: ``VmHWM``, else ``usage.ru_maxrss`` (KiB).

    ``ru_maxrss`` of a process started by another keeps the launcher's peak across ``exec``
    (Linux records the old address space's high-water mark), so a benchmark child launched
    by a driver holding 1.1 GiB reported 1,124 MiB for every loader.
    """
    return peak_rss() or int(usage.ru_maxrss) * 1024


def rss_split() -> dict[str, int]:
    """Resident bytes by kind: ``anon`` (heap, data) and ``file`` (library code, mapped files)."""
    found = _status_kib("RssAnon", "RssFile")
    return {"anon": found.get("RssAnon", 0), "file": found.get("RssFile", 0)}


@dataclass
class EpochResult:
    """One timed pass over a loader."""

    rows: int
    seconds: float
    first_batch: float

    @property
    def rate(self) -> float:
        """Rows per second."""
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def time_epoch(batches: Iterable[Any], count: Callable[[Any], int]) -> EpochResult:
    """Iterate ``batches`` once; time the whole pass and the first batch."""
    gc.collect()
    t0 = time.perf_counter()
    first = float("nan")
    rows = 0
    for b in batches:
        if rows == 0:
            first = time.perf_counter() - t0
        rows += count(b)
    return EpochResult(rows, time.perf_counter() - t0, first)


class Checker:
    """Checks every row of the batches: label = index % 1000, mask length = index % TOKENS + 1."""

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
        if not torch.equal(batch["mask"].sum(dim=1, dtype=torch.int64), index % TOKENS + 1):
            raise AssertionError(f"wrong masks in rows {self.rows}..{self.rows + n - 1}")
        if batch["tokens"].shape != (n, TOKENS) or len(batch["id"]) != n:
            raise AssertionError(f"wrong shapes in rows {self.rows}..{self.rows + n - 1}")
        self.rows += n


def to_tensors(part: pa.Table | pa.RecordBatch) -> dict[str, Any]:
    """A batch of Arrow rows as ``collate`` makes it, in fresh copies (the floors' conversion).

    Lists of equal length stacked 2-d, integers and floats as 1-d tensors, anything else
    (strings) as a Python list.
    """
    out: dict[str, Any] = {}
    for name in part.column_names:
        col = part.column(name)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_list(col.type):
            offsets = col.offsets.to_numpy()
            width = int(offsets[1] - offsets[0]) if len(col) else 0
            values = col.values.to_numpy()[offsets[0]:offsets[-1]]
            out[name] = torch.from_numpy(values.reshape(-1, width).copy())
        elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
            out[name] = torch.from_numpy(col.to_numpy().copy())
        else:
            out[name] = col.to_pylist()
    return out


def batch_rows(batch: Any) -> int:
    """Rows in a collated batch (a dict of tensors / lists) or a list of rows."""
    if isinstance(batch, dict):
        value = next(iter(batch.values()))
        return len(value)
    return len(batch)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Render a GitHub-flavoured markdown table."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
        return str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _thread_usage() -> tuple[int, float]:
    """The calling thread's minor page faults and kernel CPU seconds (zeros where unknown)."""
    import resource

    who = getattr(resource, "RUSAGE_THREAD", None)  # Linux only
    if who is None:
        return 0, 0.0
    usage = resource.getrusage(who)
    return usage.ru_minflt, usage.ru_stime


class Stopwatch:
    """Times one pass of a measurement, begun at construction: see :meth:`figures`.

    What every first-epoch benchmark reports the same way: wall time, CPU of every thread
    (and of reaped children: a peer's conversion workers), the part of it in the kernel,
    the main thread's CPU (the loop that hands out and checks batches caps the rate), and
    the minor page faults (each page the kernel hands the process: a cache that keeps the
    epoch faults in every page it holds, a loader that frees each table reuses its pages).
    """

    def __init__(self) -> None:
        import resource

        self._usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                           resource.RUSAGE_CHILDREN)]
        self._main = time.thread_time()
        self._thread = _thread_usage()
        self._wall = time.perf_counter()

    def elapsed(self) -> float:
        """Wall seconds since construction."""
        return time.perf_counter() - self._wall

    def figures(self, rows: int) -> dict[str, Any]:
        """The figures since construction, per row of ``rows`` where that is how they read.

        Returns:
            ``rows``, ``seconds``, ``rate`` (rows/s), ``cpu_us_per_row`` (every thread),
            ``sys_us_per_row`` (its kernel part), ``main_cpu_us_per_row``, ``minor_faults``,
            ``peak_rss_mib`` (this process's own) and ``load`` (1-minute load average).
        """
        import resource

        seconds = self.elapsed()
        main = time.thread_time() - self._main
        thread = _thread_usage()
        # the kernel part comes from getrusage, the whole from the thread's CPU clock (exact
        # for short passes, where the thread's rusage may not have moved): read one after
        # the other, the part exceeded the whole by a microsecond when the pass was nearly
        # all kernel time (faulting pages in); it is at most the whole
        main_sys = min(thread[1] - self._thread[1], main)
        after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN)]
        user = sum(a.ru_utime - b.ru_utime for a, b in zip(after, self._usage, strict=True))
        system = sum(a.ru_stime - b.ru_stime for a, b in zip(after, self._usage, strict=True))
        per_row = 1e6 / max(rows, 1)
        return {"rows": rows, "seconds": seconds, "rate": rows / seconds,
                "cpu_us_per_row": (user + system) * per_row,
                "sys_us_per_row": system * per_row,
                "main_cpu_us_per_row": main * per_row,
                "minor_faults": after[0].ru_minflt - self._usage[0].ru_minflt,
                "main_sys_us_per_row": main_sys * per_row,
                "main_minor_faults": thread[0] - self._thread[0],
                "peak_rss_mib": own_peak_rss(after[0]) / 2**20,
                "load": os.getloadavg()[0]}


#: The package each peer loader needs, and its name in messages.
PEERS = {"hf": ("datasets", "Hugging Face datasets"), "litdata": ("litdata", "LitData")}


def installed(loaders: list[str]) -> list[str]:
    """``loaders`` less the peers whose package is not installed (each said once)."""
    import importlib.util

    kept = []
    for name in loaders:
        peer = PEERS.get(name)
        if peer is not None and importlib.util.find_spec(peer[0]) is None:
            print(f"  ({peer[1]} not installed: skipped)")
            continue
        kept.append(name)
    return kept


def run_child(command: list[str], loader: str) -> dict[str, Any]:
    """Run one measurement's fresh process; the last line it prints is its JSON result."""
    import json
    import subprocess

    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{loader} failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def rotated_rounds(
    rounds: int, loaders: Sequence[str], one: Callable[[str], dict[str, Any]]
) -> list[dict[str, dict[str, Any]]]:
    """``rounds`` rounds of ``one(loader)`` per loader, their order rotated each round."""
    import json

    runs: list[dict[str, dict[str, Any]]] = []
    for k in range(rounds):
        shift = k % len(loaders)
        rotated = [*loaders[shift:], *loaders[:shift]]
        runs.append({name: one(name) for name in rotated})
        print(k, json.dumps(runs[-1]), flush=True)
    return runs


def add_child_options(parser: Any) -> None:
    """The options of a benchmark that measures in fresh processes of itself.

    ``--out`` and ``--root`` (where results and data go), and the child's own: ``--one``
    (measure once here), ``--loader`` and ``--data``.
    """
    import argparse

    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--root", default=str(DATA), help="where the data is written")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loader", default="ours")
    parser.add_argument("--data", default="")


def report_one(result: dict[str, Any]) -> dict[str, Any]:
    """Print a child's result as the JSON line :func:`run_child` reads; return it."""
    import json

    print(json.dumps(result))
    return result


def load_range(runs: Sequence[dict[str, dict[str, Any]]], loader: str) -> str:
    """The 1-minute load averages a loader's measurements saw, as ``low-high``."""
    loads = [r[loader]["load"] for r in runs]
    return f"{min(loads):.1f}-{max(loads):.1f}"


def write_results(out: str | Path, name: str, args: Any, runs: Any, table: str,
                  caption: str) -> dict[str, Any]:
    """Print ``table``; write ``name``.json (the arguments and raw rounds) and ``name``.md.

    ``caption`` opens the markdown (the command and conditions); the machine is added.
    """
    import json

    print(table)
    machine = f"{os.cpu_count()} cores, shared"
    results = {"args": vars(args), "runs": runs, "machine": machine}
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(results, indent=1))
    (directory / f"{name}.md").write_text(caption.replace("{machine}", machine)
                                          + "\n\n" + table + "\n")
    return results
