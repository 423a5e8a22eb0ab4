"""Memory soak: RSS over time for shuffled and uniformly random epochs with a small cache.

Writes a dataset several times larger than the cache (``--rows`` rows of about ``--row-kb``
KiB each, well compressed on disk), then runs the soak in a fresh child process that imports
everything, measures its fixed footprint (RSS after the same reads over a tiny dataset of
the same kind, closed; the measured dataset opened, nothing of it read), and reads
``--epochs`` epochs in each access pattern through a DataLoader (``workers=0``) while a
thread samples RSS. Every row served is checked against the value it must have. The parent
prints a summary, writes it as JSON (``--json``) and plots RSS over time (``--plot``, PNG).

    .venv/bin/python benchmarks/bench_memory.py                # default: 384 x 1 MiB, memory=64
    .venv/bin/python benchmarks/bench_memory.py --rows 96 --row-kb 1024 --memory 16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

RESULTS = Path(__file__).resolve().parent / "results"
MIB = 1 << 20


# --------------------------------------------------------------------------- data
def row_payload(i: int, size: int) -> bytes:
    """The payload of row ``i``: its index in 8 bytes, then a byte pattern (compressible)."""
    return i.to_bytes(8, "little") + bytes([i % 251]) * (size - 8)


def write_dataset(root: Path, rows: int, row_bytes: int, shards: int, group_rows: int) -> Path:
    """Write ``rows`` rows of about ``row_bytes`` bytes each, split over ``shards`` shards.

    Args:
        root: Directory to write into (created).
        rows: Total rows.
        row_bytes: Payload bytes per row (at least 8).
        shards: Number of shards.
        group_rows: Rows per row group.

    Returns:
        The dataset directory.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    bounds = [rows * k // shards for k in range(shards + 1)]
    for k in range(shards):
        with pq.ParquetWriter(
            root / f"part-{k:05d}.parquet",
            pa.schema([("id", pa.string()), ("label", pa.int64()), ("payload", pa.binary())]),
            compression="zstd",
        ) as writer:
            for start in range(bounds[k], bounds[k + 1], group_rows):
                stop = min(start + group_rows, bounds[k + 1])
                idx = range(start, stop)
                writer.write_table(
                    pa.table(
                        {
                            "id": [f"row-{i:08d}" for i in idx],
                            "label": [i % 7 for i in idx],
                            "payload": pa.array([row_payload(i, row_bytes) for i in idx]),
                        }
                    )
                )
    return root


# --------------------------------------------------------------------------- soak (child)
class RSSSampler:
    """Sample this process's RSS in a background thread, tagging samples with a phase."""

    def __init__(self, every: float = 0.005) -> None:
        import psutil

        self._proc = psutil.Process()
        self.every = every
        self.phase = "open"
        self.samples: list[tuple[float, int, str]] = []
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        """Current RSS in bytes (also recorded as a sample)."""
        value = int(self._proc.memory_info().rss)
        self.samples.append((time.perf_counter() - self._t0, value, self.phase))
        return value

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.rss()

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join()


def soak(
    data: Path, memory: int, epochs: int, row_bytes: int, window_bytes: int | None, batch: int
) -> dict[str, Any]:
    """Run the soak in this process and return its measurements (see the module docstring).

    Args:
        data: The dataset directory (from :func:`write_dataset`).
        memory: The dataset's cache limit in megabytes.
        epochs: Epochs per access pattern.
        row_bytes: Payload bytes per row, to check rows.
        window_bytes: The dataset's window size, or None for the default.
        batch: Batch size of the DataLoader.

    Returns:
        Footprint, peak RSS, per-phase peaks, samples, cache stats and the rows checked.
    """
    import contextlib
    import gc

    import numpy as np
    from torch.utils.data import DataLoader

    from undertale_duck import ParquetDataset

    with contextlib.suppress(ImportError):
        import pandas  # noqa: F401  (pyarrow imports it on its first conversion)
    gc.collect()
    sampler = RSSSampler()
    imports = sampler.rss()
    # The fixed footprint: the same reads over a tiny dataset of the same kind, then closed
    # (library code paged in, lazy imports, DuckDB's and torch's threads), so nothing of the
    # measured dataset is read before the footprint is taken.
    with tempfile.TemporaryDirectory(prefix="bench-memory-warm-") as tmp:
        tiny = write_dataset(Path(tmp) / "tiny", 2 * batch, row_bytes, 1, 2)
        warm_ds = ParquetDataset(tiny, memory=memory, window_bytes=window_bytes)
        for rows in DataLoader(warm_ds, batch_size=batch, shuffle=True, collate_fn=list):
            del rows
        warm_ds.close()
        del warm_ds
    ds = ParquetDataset(data, memory=memory, window_bytes=window_bytes)
    n = len(ds)
    gc.collect()
    footprint = sampler.rss()
    hwm_ok = common.reset_peak()
    sampler.start()
    rng = np.random.default_rng(0)
    checked = 0
    bad = 0
    phase_peak: dict[str, int] = {}
    stats = None
    for mode in ("shuffled", "random"):
        for epoch in range(epochs):
            sampler.phase = f"{mode}-{epoch}"
            if mode == "shuffled":  # windows in random order, rows shuffled inside each
                order = [
                    int(i)
                    for w in rng.permutation(len(ds.windows))
                    for i in ds.windows[int(w)].offset + rng.permutation(ds.windows[int(w)].rows)
                ]
            else:  # uniformly random with replacement
                order = [int(i) for i in rng.integers(0, n, size=n)]
            loader = DataLoader(ds, batch_size=batch, sampler=order, collate_fn=list)
            position = 0
            for rows in loader:
                for row in rows:
                    i = order[position]
                    position += 1
                    payload = row["payload"]
                    if (
                        row["id"] != f"row-{i:08d}"
                        or len(payload) != row_bytes
                        or payload[:8] != i.to_bytes(8, "little")
                        or payload[-1] != i % 251
                    ):
                        bad += 1
                    checked += 1
                del rows
                sampler.rss()
            stats = ds.cache_stats
            phase_peak[sampler.phase] = max(
                s[1] for s in sampler.samples if s[2] == sampler.phase
            )
    sampler.stop()
    ds.close()  # stop the read-ahead thread before the interpreter exits
    hwm = (common.peak_rss() or None) if hwm_ok else None
    peak = max(max(s[1] for s in sampler.samples), hwm or 0)
    return {
        "rows": n,
        "row_bytes": row_bytes,
        "memory_mb": memory,
        "window_bytes": ds.window_bytes,
        "windows": len(ds.windows),
        "footprint": footprint,
        "imports": imports,
        "peak": peak,
        "peak_sampled": max(s[1] for s in sampler.samples),
        "peak_hwm": hwm,
        "phase_peak": phase_peak,
        "checked": checked,
        "bad": bad,
        "cache": None if stats is None else {
            "hits": stats.hits,
            "misses": stats.misses,
            "evictions": stats.evictions,
            "oversized": stats.oversized,
            "bytes": stats.bytes,
            "limit": stats.limit,
        },
        "samples": sampler.samples,
    }


# --------------------------------------------------------------------------- parent
def plot(result: dict[str, Any], path: Path) -> None:
    """Plot RSS over time (MiB) with the footprint and the bound, one colour per phase.

    Args:
        result: What :func:`soak` returned.
        path: The PNG to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    phases: dict[str, list[tuple[float, int]]] = {}
    for t, rss, phase in result["samples"]:
        phases.setdefault(phase, []).append((t, rss))
    for phase, points in phases.items():
        ax.plot([p[0] for p in points], [p[1] / MIB for p in points], ".", ms=2, label=phase)
    footprint = result["footprint"] / MIB
    ax.axhline(footprint, color="grey", ls="--", lw=1, label="footprint (opened, nothing read)")
    ax.axhline(
        footprint + result["memory_mb"], color="red", ls="--", lw=1, label="footprint + memory"
    )
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title(
        f"{result['rows']} rows x {result['row_bytes'] // 1024} KiB "
        f"({result['rows'] * result['row_bytes'] / MIB:.0f} MiB), memory={result['memory_mb']} MB"
    )
    ax.legend(fontsize=7, markerscale=4, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_child(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """Run the soak in a fresh interpreter so the footprint holds nothing from writing the data.

    Args:
        args: The parsed command line.
        data: The dataset directory.

    Returns:
        What :func:`soak` returned in the child.
    """
    command = [
        sys.executable, __file__, "--child", str(data), "--memory", str(args.memory),
        "--epochs", str(args.epochs), "--row-kb", str(args.row_kb), "--batch", str(args.batch),
    ]
    if args.window_kb:
        command += ["--window-kb", str(args.window_kb)]
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"soak child failed ({out.returncode}):\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The options.
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=384, help="rows in the dataset")
    p.add_argument("--row-kb", type=int, default=1024, help="payload KiB per row")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--group-rows", type=int, default=2, help="rows per row group")
    p.add_argument("--memory", type=int, default=64, help="cache limit in MB")
    p.add_argument("--window-kb", type=int, default=0, help="window size (0: the default)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per access pattern")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--data", type=Path, help="write the dataset here (default: a temp dir)")
    p.add_argument("--json", type=Path, help="write the summary (with samples) here")
    p.add_argument("--plot", default=str(RESULTS / "memory_rss.png"),
                   help="PNG of RSS over time ('' to skip)")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Write the dataset, run the soak in a child process, print, save and plot the result.

    Args:
        argv: Command-line arguments (default: ``sys.argv[1:]``).

    Returns:
        The soak's measurements.
    """
    args = parse(argv)
    row_bytes = args.row_kb * 1024
    if args.child:
        window = args.window_kb * 1024 or None
        result = soak(args.child, args.memory, args.epochs, row_bytes, window, args.batch)
        print(json.dumps(result))
        return result
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        data = args.data or Path(tmp) / "data"
        if not (data / "part-00000.parquet").exists():
            write_dataset(data, args.rows, row_bytes, args.shards, args.group_rows)
        result = run_child(args, data)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result))
    if args.plot:  # '' skips the plot
        plot(result, Path(args.plot))
    over = (result["peak"] - result["footprint"]) / MIB
    print(
        f"{result['rows']} rows x {args.row_kb} KiB = {result['rows'] * row_bytes / MIB:.0f} MiB, "
        f"memory={args.memory} MB, window={result['window_bytes'] / MIB:.1f} MiB: "
        f"fixed footprint {result['footprint'] / MIB:.0f} MiB (imports alone "
        f"{result['imports'] / MIB:.0f} MiB), peak {result['peak'] / MIB:.0f} MiB "
        f"(+{over:.0f} MiB, {'within' if over <= args.memory else 'over'} M), "
        f"rows checked {result['checked']} (bad {result['bad']}), "
        f"cache {result['cache']}"
    )
    for phase, peak in result["phase_peak"].items():
        print(f"  {phase:<12} peak {peak / MIB:7.1f} MiB")
    return result


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
