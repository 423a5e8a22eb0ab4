"""First epoch on data shaped unlike the issue-29 table: ours against the pyarrow floor.

Run ``python benchmarks/bench_shapes.py`` (``--help`` for the options). The decode-floor
benchmark (``bench_decode_floor.py``) measures one shape: 8 shards of 25,000 rows of 512
int32 tokens in row groups of 10,000. This one writes shapes a user may bring instead, each
value a function of the global row index (``row``, int64, in every shape):

- ``tiny shards``: 200 shards of 1,000 rows, one row group each (512 int32 tokens, an int8
  mask, an ``id`` string, a label);
- ``small groups``: 8 shards of 25,000 rows in row groups of 1,000 (the same columns);
- ``large groups``: 4 shards of 100,000 rows in row groups of 50,000 (the same columns);
- ``long rows``: 4 shards of 12,500 rows of 2,048 int32 tokens, groups of 2,500;
- ``int64 tokens``: 8 shards of 25,000 rows of 256 int64 tokens, groups of 10,000;
- ``padded tokens``: 8 shards of 25,000 rows in groups of 10,000, each row's 512 int32
  tokens its first ``row % 512 + 1`` values then zeros (padding), as its mask says;
- ``scalars``: 4 shards of 250,000 rows of 16 float32 columns, an ``id`` string and a label,
  groups of 50,000;
- ``text``: 4 shards of 25,000 rows of one string of 0.8 to 3 KB and a label, groups of 5,000.

Loaders: ``pyarrow`` (the floor: ``read_table`` per shard, each batch of ``--batch`` rows
sliced and turned into fresh tensors, strings into a list), ``ours`` (``ParquetDataset(
format="torch")``, ``ChunkedSampler`` and a torch ``DataLoader`` with ``collate``) and
``ours-load`` (``load()``). Each measurement is a fresh process; imports are done before
the clock starts, the dataset is opened after; the shards' page cache is warm (read once
first) or dropped (``--cold``). Every batch is checked: its ``row`` values are the next rows
in order and one value column of each row is the function of its row. Rounds rotate the
loaders; ratios are taken within a round against ``pyarrow``, medians reported; peak RSS is
set against issue 29's bound, pyarrow's peak plus the Arrow bytes our cache holds at the end
of the epoch (what makes a second epoch fast), and the minor page faults of the epoch are
counted (each page the kernel hands the process). Writes ``shapes.json`` and ``shapes.md`` to
``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

LOADERS = ("pyarrow", "ours", "ours-load")


# --------------------------------------------------------------------------- data

def _lists(
    index: np.ndarray[Any, Any], tokens: int, dtype: type, padded: bool = False,
) -> pa.Table:
    """Rows ``index`` of list shapes: ``row``, ``id``, ``tokens``, ``mask`` and ``label``.

    ``tokens`` holds ``tokens`` values, a function of row and position (``padded``: zero
    where the mask is); ``mask`` (int8) the first ``row % tokens + 1`` ones.
    """
    values = (index[:, None] * 31 + np.arange(tokens)[None, :]) % 50_000
    offsets = pa.array(np.arange(len(index) + 1, dtype=np.int32) * tokens)
    mask = (np.arange(tokens)[None, :] < (index % tokens + 1)[:, None]).astype(np.int8)
    if padded:
        values = values * mask
    return pa.table({
        "row": pa.array(index),
        "id": pa.array([f"row-{i:09d}" for i in index.tolist()]),
        "tokens": pa.ListArray.from_arrays(offsets, pa.array(values.astype(dtype).ravel())),
        "mask": pa.ListArray.from_arrays(offsets, pa.array(mask.ravel())),
        "label": pa.array(index % 1000),
    })


def _scalars(index: np.ndarray[Any, Any]) -> pa.Table:
    columns: dict[str, pa.Array] = {"row": pa.array(index),
                                    "id": pa.array([f"r{i}" for i in index.tolist()])}
    for c in range(16):
        columns[f"f{c}"] = pa.array((index * (c + 3) % 10_007).astype(np.float32) / 8)
    columns["label"] = pa.array(index % 1000)
    return pa.table(columns)


def _text(index: np.ndarray[Any, Any]) -> pa.Table:
    words = [f"w{i % 997} " * (200 + i % 550) for i in index.tolist()]
    return pa.table({"row": pa.array(index), "text": pa.array(words),
                     "label": pa.array(index % 1000)})


#: name -> (shards, rows per shard, row group rows, table of global rows [a, b)).
SHAPES: dict[str, tuple[int, int, int, Callable[[np.ndarray[Any, Any]], pa.Table]]] = {
    "tiny shards": (200, 1_000, 1_000, lambda i: _lists(i, 512, np.int32)),
    "small groups": (8, 25_000, 1_000, lambda i: _lists(i, 512, np.int32)),
    "large groups": (4, 100_000, 50_000, lambda i: _lists(i, 512, np.int32)),
    "long rows": (4, 12_500, 2_500, lambda i: _lists(i, 2048, np.int32)),
    "int64 tokens": (8, 25_000, 10_000, lambda i: _lists(i, 256, np.int64)),
    "padded tokens": (8, 25_000, 10_000, lambda i: _lists(i, 512, np.int32, padded=True)),
    "scalars": (4, 250_000, 50_000, _scalars),
    "text": (4, 25_000, 5_000, _text),
}


def write_shape(root: Path, name: str, scale: float) -> Path:
    """Write (or reuse) shape ``name`` under ``root``, its shards' rows times ``scale``."""
    shards, per, group, make = SHAPES[name]
    per, group = max(1, int(per * scale)), max(1, int(group * scale))

    def write(directory: Path) -> None:
        for k in range(shards):
            index = np.arange(k * per, (k + 1) * per, dtype=np.int64)
            pq.write_table(make(index), directory / f"part-{k:05d}.parquet",
                           row_group_size=group, compression="snappy")

    return common.written(root / f"shape-{name.replace(' ', '-')}-{shards}x{per}-g{group}", write)


# --------------------------------------------------------------------------- one measurement


class Check:
    """Checks each batch: the next rows in order, and one value column a function of ``row``."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, batch: dict[str, Any]) -> None:
        """Check one batch."""
        import torch

        rows = batch["row"]
        n = len(rows)
        index = torch.arange(self.rows, self.rows + n)
        where = f"rows {self.rows}..{self.rows + n - 1}"
        if not torch.equal(rows, index):
            raise AssertionError(f"wrong rows in {where}")
        if "tokens" in batch:
            first = batch["tokens"][:, 0].to(torch.int64)
            if not torch.equal(first, index * 31 % 50_000):
                raise AssertionError(f"wrong tokens in {where}")
            if not torch.equal(batch["mask"].sum(dim=1, dtype=torch.int64),
                               index % batch["mask"].shape[1] + 1):
                raise AssertionError(f"wrong masks in {where}")
        elif "f3" in batch:
            if not torch.equal(batch["f3"], (index * 6 % 10_007).to(torch.float32) / 8):
                raise AssertionError(f"wrong floats in {where}")
        elif [len(t) for t in batch["text"]] != [
                (200 + i % 550) * len(f"w{i % 997} ") for i in index.tolist()]:
            raise AssertionError(f"wrong text in {where}")
        self.rows += n


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One first epoch in this (fresh) process; returns its figures."""
    import torch
    from torch.utils.data import DataLoader

    from undertale_duck import ChunkedSampler, ParquetDataset, collate, load

    directory = Path(args.data)
    paths = common.shard_paths(directory)
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in paths)
    if args.cold:
        common.drop_cache(directory)
    else:
        for path in paths:
            path.read_bytes()
    torch.set_num_threads(1)
    # read_table goes through pyarrow.dataset, which imports pandas where it is installed:
    # imported before the clock, so the floor is not charged for it
    import pyarrow.dataset  # noqa: F401
    with contextlib.suppress(ImportError):
        import pandas  # noqa: F401

    held: list[float] = []  # the Arrow bytes our cache holds at the end of the epoch

    def batches() -> Iterable[dict[str, Any]]:
        if args.loader == "pyarrow":
            for path in paths:
                table = pq.read_table(path)
                for a in range(0, table.num_rows, args.batch):
                    yield common.to_tensors(table.slice(a, args.batch))
            return
        ds = ParquetDataset(directory, format="torch")
        if args.loader == "ours-load":
            yield from load(ds, None, collate, args.batch, drop_last=False)
        else:
            sampler = ChunkedSampler(ds, args.batch, 0, drop_last=False)
            yield from DataLoader(ds, batch_size=args.batch, sampler=sampler,
                                  collate_fn=collate)
        held.append(ds.reader.cache.held / 2**20)
        ds.close()

    check = Check()
    clock = common.Stopwatch()
    for batch in batches():
        check(batch)
    out = clock.figures(total)
    if check.rows != total:
        raise AssertionError(f"read {check.rows} rows of {total}")
    return out | {"cache_held_mib": held[0] if held else 0.0}


# --------------------------------------------------------------------------- the table

def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the shapes' rounds (or, with ``--one``, one measurement) and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help=f"comma-separated, of: {', '.join(SHAPES)}")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="rows per shard and per row group times this (smoke runs)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cold", action="store_true", help="drop the shards' page cache")
    parser.add_argument("--name", default="shapes", help="results' file name")
    common.add_child_options(parser)
    args = parser.parse_args(argv)
    if args.one:
        return common.report_one(run_one(args))
    names = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in names if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; known: {list(SHAPES)}")
    runs: dict[str, list[dict[str, dict[str, Any]]]] = {}
    for name in names:
        data = write_shape(Path(args.root), name, args.scale)

        def one(loader: str, data: Path = data) -> dict[str, Any]:
            command = [sys.executable, __file__, "--one", "--loader", loader, "--data",
                       str(data), "--batch", str(args.batch)] + (["--cold"] if args.cold else [])
            return common.run_child(command, loader)

        print(name, flush=True)
        runs[name] = common.rotated_rounds(args.rounds, LOADERS, one)
    lines = ["| shape | loader | rows/s | CPU us/row | kernel us/row | peak RSS MiB | cache MiB | "
             "page faults | x rows/s | x CPU | RSS / (pyarrow's + cache) | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rounds in runs.items():
        for loader in LOADERS:
            def med(key: str, loader: str = loader, rounds: Any = rounds) -> float:
                return float(statistics.median(r[loader][key] for r in rounds))

            def ratio(key: str, loader: str = loader, rounds: Any = rounds) -> float:
                return float(statistics.median(r[loader][key] / r["pyarrow"][key]
                                               for r in rounds))

            # issue 29's memory target: at most pyarrow's peak plus what the cache keeps
            target = statistics.median(
                r[loader]["peak_rss_mib"]
                / (r["pyarrow"]["peak_rss_mib"] + r[loader]["cache_held_mib"]) for r in rounds)
            lines.append(
                f"| {name} | {loader} | {med('rate'):,.0f} | {med('cpu_us_per_row'):.2f} | "
                f"{med('sys_us_per_row'):.2f} | {med('peak_rss_mib'):,.0f} | "
                f"{med('cache_held_mib'):,.0f} | "
                f"{med('minor_faults'):,.0f} | {ratio('rate'):.2f} | "
                f"{ratio('cpu_us_per_row'):.2f} | {target:.2f} | "
                f"{common.load_range(rounds, loader)} |")
    caption = (f"First epoch by shape, page cache {'dropped' if args.cold else 'warm'}, batch "
               f"{args.batch}, {args.rounds} rotated rounds, one fresh process each "
               "(`python benchmarks/bench_shapes.py"
               + (" --cold" if args.cold else "") + "`), {machine}. Ratios against pyarrow "
               "within each round, medians.")
    return common.write_results(args.out, args.name, args, runs, "\n".join(lines), caption)


if __name__ == "__main__":
    main()
