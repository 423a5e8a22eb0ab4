"""Shuffle quality and cost: no shuffle, window shuffle, and mixing k windows at a time.

Writes a dataset whose labels come in long sorted runs (as when shards are written grouped by
source or class: the worst case for a locality-aware shuffle), then, for each sampler mode,
measures along rank 0's order (2 ranks, 2 workers):

- ``lag1``: label autocorrelation between consecutive samples (0 for an ideal shuffle);
- ``lag_b``: the same between samples one batch apart;
- ``windows/batch``: distinct windows (row-group ranges) per batch (the read locality);
- ``labels/batch``: distinct labels per batch (``uniform`` is the ideal);
- ``rows/s`` and ``reads/1k``: one epoch through ``load()`` (``workers=0``) and the windows
  it read from disk per 1,000 rows (cache misses plus read-aheads), the cost of the shuffle.

``uniform`` is a plain ``torch.randperm`` order over the rank's rows, for reference (timed
over its first batches only: it reads about a window per row once the cache is smaller than
the rank's share).

    .venv/bin/python benchmarks/bench_shuffle.py                       # 200,000 rows
    .venv/bin/python benchmarks/bench_shuffle.py --rows 50000 --mix 1 4 16
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from undertale_duck import ChunkedSampler, ParquetDataset, load

RESULTS = Path(__file__).resolve().parent / "results"
CLASSES = 10
#: Batches timed for the uniform order (a whole epoch would read a window for every batch).
UNIFORM_BATCHES = 100


def label_of(index: np.ndarray, run: int) -> np.ndarray:
    """Label of each global row index: runs of ``run`` rows share a label."""
    return (index // run) % CLASSES


def write_dataset(root: Path, rows: int, shards: int, group: int, run: int) -> Path:
    """Write ``rows`` rows (id, label, 16 tokens) in ``shards`` shards of ``group``-row groups.

    Returns:
        The dataset directory.
    """
    root.mkdir(parents=True, exist_ok=True)
    bounds = [rows * k // shards for k in range(shards + 1)]
    for k in range(shards):
        index = np.arange(bounds[k], bounds[k + 1])
        tokens = (index[:, None] * 7 + np.arange(16)[None, :]) % 30000
        table = pa.table(
            {
                "id": pa.array([f"row-{i:09d}" for i in index]),
                "label": pa.array(label_of(index, run), pa.int64()),
                "tokens": pa.FixedSizeListArray.from_arrays(
                    pa.array(tokens.reshape(-1), pa.int32()), 16
                ).cast(pa.list_(pa.int32())),
            }
        )
        pq.write_table(table, root / f"part-{k:05d}.parquet", row_group_size=group)
    return root


def autocorrelation(x: np.ndarray, lag: int) -> float:
    """Pearson correlation of ``x`` with itself ``lag`` steps later (0 if undefined)."""
    if len(x) <= lag + 1:
        return 0.0
    a, b = x[:-lag].astype(float), x[lag:].astype(float)
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def quality(order: np.ndarray, window_of: np.ndarray, batch: int, run: int) -> dict[str, float]:
    """Shuffle-quality numbers of one order (see the module docstring)."""
    labels = label_of(order, run)
    batches = [order[i : i + batch] for i in range(0, len(order) - batch + 1, batch)]
    return {
        "lag1": autocorrelation(labels, 1),
        "lag_b": autocorrelation(labels, batch),
        "windows/batch": float(np.mean([len(np.unique(window_of[b])) for b in batches])),
        "labels/batch": float(np.mean([len(np.unique(label_of(b, run))) for b in batches])),
    }


def collate(rows: list[dict[str, Any]]) -> torch.Tensor:
    """Token ids of a batch as one tensor."""
    return torch.tensor([r["tokens"] for r in rows])


def epoch_cost(
    root: Path, batch: int, memory: int, window: int, **sampler: Any
) -> tuple[float, int]:
    """Rows/s and windows read of one epoch through ``load()`` with ``workers=0``."""
    loader = load(root, None, collate, batch, 0, memory, ranks=2, rank=0, window_bytes=window,
                  **sampler)
    start = time.perf_counter()
    rows = sum(len(b) for b in loader)
    elapsed = time.perf_counter() - start
    dataset = loader.dataset
    assert isinstance(dataset, ParquetDataset)
    return rows / elapsed, 1000 * _reads(dataset) / rows


def uniform_cost(
    root: Path, order: np.ndarray, batch: int, memory: int, window: int
) -> tuple[float, int]:
    """Rows/s and windows read per 1,000 rows of the first batches in a uniform order."""
    dataset = ParquetDataset(root, memory, window_bytes=window)
    start = time.perf_counter()
    rows = 0
    for i in range(0, min(len(order), UNIFORM_BATCHES * batch), batch):
        rows += len(collate(dataset.__getitems__(order[i : i + batch].tolist())))
    return rows / (time.perf_counter() - start), 1000 * _reads(dataset) / rows


def _reads(dataset: ParquetDataset) -> int:
    """Windows read from disk by this process: cache misses plus background read-aheads."""
    return dataset.cache_stats.misses + dataset.reader.read_ahead_stats["read"]


def main() -> None:
    """Run the sweep and print one line per mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--group", type=int, default=2_000, help="rows per row group")
    parser.add_argument("--window-kb", type=int, default=256, help="target window size")
    parser.add_argument("--run", type=int, default=5_000, help="rows per sorted label run")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--memory", type=int, default=16,
                        help="memory budget (MB): ~12 MiB is kept for a window read, the rest "
                        "caches windows")
    parser.add_argument("--mix", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--no-epoch", action="store_true", help="skip the timed epochs")
    parser.add_argument("--json", type=Path, default=RESULTS / "bench_shuffle.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = write_dataset(Path(tmp) / "data", args.rows, args.shards, args.group, args.run)
        window = args.window_kb << 10
        dataset = ParquetDataset(root, args.memory, window_bytes=window)
        window_of = np.zeros(len(dataset), dtype=np.int64)
        for k, w in enumerate(dataset.windows):
            window_of[w.offset : w.offset + w.rows] = k
        print(
            f"{len(dataset)} rows, {len(dataset.windows)} windows of about "
            f"{len(dataset) // len(dataset.windows)} rows, label runs of {args.run}, "
            f"batch {args.batch}, memory {args.memory} MB; rank 0 of 2, 2 workers"
        )
        modes: list[tuple[str, dict[str, Any]]] = [("off", {"shuffle": False})]
        modes += [
            ("window" if k == 1 else f"mix={k}", {"shuffle": True, "mix": k, "seed": 0})
            for k in args.mix
        ]
        results: list[dict[str, Any]] = []
        header = f"{'mode':>8} {'lag1':>7} {'lag_b':>7} {'windows/batch':>14} {'labels/batch':>13}"
        print(header + ("" if args.no_epoch else f" {'rows/s':>9} {'reads/1k':>9}"))
        rank_rows = ChunkedSampler(dataset, args.batch, 2, 2, 0).order()
        for name, options in modes:
            order = ChunkedSampler(dataset, args.batch, 2, 2, 0, **options).order()
            results.append({"mode": name, **quality(order, window_of, args.batch, args.run)})
            if not args.no_epoch:
                rate, reads = epoch_cost(root, args.batch, args.memory, window, **options)
                results[-1].update({"rows/s": rate, "reads": reads})
        generator = torch.Generator().manual_seed(0)
        uniform = rank_rows[torch.randperm(len(rank_rows), generator=generator).numpy()]
        results.append({"mode": "uniform", **quality(uniform, window_of, args.batch, args.run)})
        if not args.no_epoch:
            rate, reads = uniform_cost(root, uniform, args.batch, args.memory, window)
            results[-1].update({"rows/s": rate, "reads": reads})
        for r in results:
            line = (
                f"{r['mode']:>8} {r['lag1']:7.3f} {r['lag_b']:7.3f} {r['windows/batch']:14.2f} "
                f"{r['labels/batch']:13.2f}"
            )
            if "rows/s" in r:
                line += f" {r['rows/s']:9.0f} {r['reads']:9.2f}"
            print(line)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "results": results}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
