"""First epoch over ragged token lists (each row its own length), padded per batch.

Run ``python benchmarks/bench_ragged.py`` (``--help`` for the options). The data is what
undertale's binary-code datasets look like: ``--shards`` shards of ``--shard-rows`` rows of
``id`` string, ``tokens`` list<int32> of 16 to 1,024 values (a function of the row index)
and ``label`` int64, row groups of 10,000. Each batch of ``--batch`` rows is padded to its
longest row with a boolean mask, as a training step takes it.

Loaders: ``pyarrow`` (the decode floor: each shard read by ``read_table``, each batch's
tokens padded from the column's offsets and values by one numpy masked assignment, no
per-row object), ``ours`` (``ParquetDataset(format="torch")``, ``ChunkedSampler`` and a torch
``DataLoader`` with ``collate``), ``ours-load`` (``load()``'s ``ChunkedLoader``), ``hf``
(Hugging Face ``datasets``: ``from_parquet`` into a fresh cache, its conversion counted,
``with_format("torch")`` and a ``DataLoader`` padding with torch's ``pad_sequence``) and
``litdata`` (LitData's ``optimize()`` into a fresh directory, one worker, its conversion and
the worker's CPU counted, then a ``StreamingDataset`` and a ``StreamingDataLoader`` padding
as ``hf`` does), each skipped when not installed. Each measurement is a fresh process, with
the shards' page cache dropped (``--cold``) or warm (a read of the files first); the clock
starts before the dataset is opened. Every row of every batch is checked: its ``id``,
``label``, length (the mask) and sum of tokens (padding is 0), and every token of each
batch's first row. Rounds rotate the loaders; ratios are taken within a round against
``pyarrow``, medians reported. Writes ``ragged.json`` and ``ragged.md`` to ``--out``.

With ``--shuffle`` the epoch is shuffled, each loader by its own shuffle: ``pyarrow`` reads
every shard into one table and takes each batch by a permutation (Arrow's ``take``), ours
shuffle (``ChunkedSampler(shuffle=True)``, ``load(shuffle=True)``), ``hf`` its
``shuffle(seed=0)``, ``litdata`` its ``StreamingDataset(shuffle=True, seed=0)``. Each
batch's rows are then found by their ids, checked as above, and the epoch must hand out
every row once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

LOADERS = ("pyarrow", "ours", "ours-load", "hf", "litdata")
ROW_GROUP = 10_000


def lengths_of(index: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Row ``i``'s token count: 16 to 1,024, scattered over the rows."""
    return (16 + (index.astype(np.int64) * 7919) % 1009).astype(np.int64)


def tokens_of(index: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    """Token ``k`` of row ``i`` for every row and ``k < width`` (past a row's length too)."""
    return ((index.astype(np.int64)[:, None] * 31 + np.arange(width)[None, :] * 17)
            % 50_000).astype(np.int32)


def write_data(shards: int, rows: int, root: Path) -> Path:
    """The shards (written once per size; kept under ``root``)."""
    directory = root / f"ragged-s{shards}x{rows}"
    if directory.is_dir() and len(list(directory.glob("*.parquet"))) == shards:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        index = np.arange(s * rows, (s + 1) * rows)
        lengths = lengths_of(index)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        width = int(lengths.max())
        flat = tokens_of(index, width)[np.arange(width)[None, :] < lengths[:, None]]
        table = pa.table({
            "id": pa.array([f"row-{i:09d}" for i in index.tolist()]),
            "tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat)),
            "label": pa.array(index % 1000, pa.int64()),
        })
        pq.write_table(table, directory / f"part-{s:05d}.parquet", row_group_size=ROW_GROUP)
    return directory


def token_sums(rows: int) -> np.ndarray[Any, Any]:
    """Each row's sum of tokens (computed before the clock, a few thousand rows at a time)."""
    sums = np.empty(rows, np.int64)
    for a in range(0, rows, 2048):
        index = np.arange(a, min(a + 2048, rows))
        mask = np.arange(1024)[None, :] < lengths_of(index)[:, None]
        sums[index] = np.where(mask, tokens_of(index, 1024), 0).sum(axis=1)
    return sums


def check(batch: dict[str, Any], index: np.ndarray[Any, Any], sums: np.ndarray[Any, Any]) -> None:
    """Check that ``batch`` holds rows ``index`` in order, padded with 0 and masked.

    Every row's id, label, length (the mask) and sum of tokens; every token of its first row.
    """
    if list(batch["id"]) != [f"row-{i:09d}" for i in index.tolist()]:
        raise AssertionError(f"wrong ids at row {index[0]}")
    if not np.array_equal(batch["label"].numpy(), index % 1000):
        raise AssertionError(f"wrong labels at row {index[0]}")
    lengths = lengths_of(index)
    mask = batch["tokens_mask"].numpy()
    if not np.array_equal(mask.sum(axis=1), lengths) or mask.shape[1] != lengths.max():
        raise AssertionError(f"wrong lengths at row {index[0]}")
    tokens = batch["tokens"].numpy()
    if not np.array_equal(tokens.sum(axis=1, dtype=np.int64), sums[index]):
        raise AssertionError(f"wrong tokens (or padding) at row {index[0]}")
    if not np.array_equal(tokens[0, :lengths[0]], tokens_of(index[:1], int(lengths[0]))[0]):
        raise AssertionError(f"wrong tokens at row {index[0]}")


def ids_of(batch: dict[str, Any]) -> np.ndarray[Any, Any]:
    """The global rows of a batch, read from its ids (checked by :func:`check` after)."""
    return np.array([int(i[4:]) for i in batch["id"]], dtype=np.int64)


def pyarrow_batches(directory: Path, batch: int) -> Iterator[dict[str, Any]]:
    """The floor: each shard decoded whole, each batch padded from offsets and values."""
    for path in common.shard_paths(directory):
        table = pq.read_table(path)
        for a in range(0, len(table), batch):
            yield padded_batch(table.slice(a, batch))


def pyarrow_shuffled(directory: Path, batch: int) -> Iterator[dict[str, Any]]:
    """The floor shuffled: every shard read into one table, batches taken by a permutation."""
    table = pa.concat_tables(pq.read_table(p) for p in common.shard_paths(directory))
    table = table.combine_chunks()  # a take from many chunks joins them all on every call
    order = np.random.default_rng(0).permutation(table.num_rows)
    for a in range(0, len(order), batch):
        yield padded_batch(table.take(order[a:a + batch]))


def padded_batch(part: pa.Table) -> dict[str, Any]:
    """A batch of rows as tensors, its tokens padded by one numpy masked assignment."""
    import torch

    tokens = part.column("tokens").combine_chunks()
    offsets = tokens.offsets.to_numpy()
    values = tokens.values.to_numpy()
    lengths = np.diff(offsets)
    width = int(lengths.max())
    mask = np.arange(width)[None, :] < lengths[:, None]
    padded = np.zeros((len(part), width), np.int32)
    padded[mask] = values[offsets[0]:offsets[-1]]
    return {"id": part.column("id").to_pylist(), "tokens": torch.from_numpy(padded),
            "tokens_mask": torch.from_numpy(mask),
            "label": torch.from_numpy(part.column("label").to_numpy())}


def hf_batches(directory: Path, batch: int, cache: Path,
               shuffle: bool) -> Iterable[dict[str, Any]]:
    """Hugging Face ``datasets`` (its conversion counted), padded by ``pad_sequence``."""
    import datasets
    import torch

    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_parquet([str(p) for p in common.shard_paths(directory)],
                                       cache_dir=str(cache)).with_format("torch")
    if shuffle:
        ds = ds.shuffle(seed=0)

    return torch.utils.data.DataLoader(ds, batch_size=batch, collate_fn=pad_rows)


def pad_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A peer's rows as a batch: tokens padded by torch's ``pad_sequence``, with a mask."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    tokens = [torch.as_tensor(r["tokens"]) for r in rows]
    lengths = torch.tensor([len(t) for t in tokens])
    return {"id": [r["id"] for r in rows],
            "tokens": pad_sequence(tokens, batch_first=True),
            "tokens_mask": torch.arange(int(lengths.max()))[None, :] < lengths[:, None],
            "label": torch.as_tensor([int(r["label"]) for r in rows])}


class LitRows:
    """LitData's ``optimize`` function: a shard's rows as dicts (tokens as int32 arrays).

    A class at module level: LitData pickles it to its worker process.
    """

    def __call__(self, path: str) -> Iterator[dict[str, Any]]:
        """Yield the rows of the shard at ``path``, in order."""
        table = pq.read_table(path)
        tokens = table.column("tokens").combine_chunks()
        offsets = tokens.offsets.to_numpy()
        values = tokens.values.to_numpy()
        ids = table.column("id").to_pylist()
        labels = table.column("label").to_pylist()
        for k in range(len(ids)):
            yield {"id": ids[k], "tokens": values[offsets[k]:offsets[k + 1]].copy(),
                   "label": labels[k]}


def litdata_batches(directory: Path, batch: int, work: Path,
                    shuffle: bool) -> Iterable[dict[str, Any]]:
    """LitData: ``optimize()`` (timed), a ``StreamingDataset``, padded as ``hf`` is."""
    from litdata import StreamingDataLoader, StreamingDataset, optimize

    out = work / "litdata"
    optimize(fn=LitRows(), inputs=[str(p) for p in common.shard_paths(directory)],
             output_dir=str(out), chunk_bytes="64MB", num_workers=1, mode="overwrite",
             verbose=False, reorder_files=False)
    ds = StreamingDataset(str(out), shuffle=shuffle, seed=0)
    return StreamingDataLoader(ds, batch_size=batch, num_workers=0, collate_fn=pad_rows)


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One first epoch in this (fresh) process; returns its figures."""
    import torch

    directory = Path(args.data)
    if args.cold:
        common.drop_cache(directory)
    else:
        for path in common.shard_paths(directory):
            path.read_bytes()
    torch.set_num_threads(1)
    sums = token_sums(sum(pq.ParquetFile(p).metadata.num_rows
                          for p in common.shard_paths(directory)))
    clock = common.Stopwatch()  # with a peer's conversion workers (LitData's)
    with tempfile.TemporaryDirectory(prefix="bench-ragged-") as work:
        batches: Iterable[dict[str, Any]]
        shuffle = args.shuffle
        if args.loader == "pyarrow":
            batches = (pyarrow_shuffled if shuffle else pyarrow_batches)(directory, args.batch)
        elif args.loader == "hf":
            batches = hf_batches(directory, args.batch, Path(work), shuffle)
        elif args.loader == "litdata":
            batches = litdata_batches(directory, args.batch, Path(work), shuffle)
        else:
            from undertale_duck import ChunkedSampler, ParquetDataset, collate, load

            ds = ParquetDataset(directory, format="torch")
            if args.loader == "ours-load":
                batches = load(ds, None, collate, args.batch, shuffle=shuffle)
            else:
                batches = torch.utils.data.DataLoader(
                    ds, batch_size=args.batch,
                    sampler=ChunkedSampler(ds, args.batch, 0, shuffle=shuffle),
                    collate_fn=collate)
        rows = 0
        seen = np.zeros(len(sums), dtype=bool)
        for batch in batches:
            n = len(batch["id"])
            index = ids_of(batch) if shuffle else np.arange(rows, rows + n)
            check(batch, index, sums)
            seen[index] = True
            rows += n
        out = clock.figures(rows)
        if rows != len(sums) or not seen.all():
            raise AssertionError(f"{args.loader}: {rows:,} rows handed out, "
                                 f"{int(seen.sum()):,} of {len(sums):,} distinct")
    return out


def measure(args: argparse.Namespace, data: Path, loader: str) -> dict[str, Any]:
    """Run one measurement in a fresh process."""
    command = [sys.executable, __file__, "--one", "--loader", loader, "--data", str(data),
               "--batch", str(args.batch)] + (["--cold"] if args.cold else []) + (
                   ["--shuffle"] if args.shuffle else [])
    return common.run_child(command, loader)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-rows", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cold", action="store_true", help="drop the shards' page cache")
    parser.add_argument("--shuffle", action="store_true",
                        help="a shuffled epoch, each loader by its own shuffle")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--name", default="ragged")
    common.add_child_options(parser)
    args = parser.parse_args(argv)
    if args.one:
        return common.report_one(run_one(args))
    data = write_data(args.shards, args.shard_rows, Path(args.root))
    loaders = [name for name in args.loaders.split(",") if name]
    if "pyarrow" not in loaders:
        loaders.insert(0, "pyarrow")  # the base of every ratio
    loaders = common.installed(loaders)
    runs = common.rotated_rounds(args.rounds, loaders, lambda name: measure(args, data, name))
    lines = ["| loader | rows/s | CPU us/row | peak RSS MiB | x rows/s | x CPU | load |",
             "|---|---|---|---|---|---|---|"]
    for name in loaders:
        def med(key: str, name: str = name) -> float:
            return float(statistics.median(r[name][key] for r in runs))

        def ratio(key: str, name: str = name) -> float:
            return float(statistics.median(r[name][key] / r["pyarrow"][key] for r in runs))

        lines.append(
            f"| {name} | {med('rate'):,.0f} | {med('cpu_us_per_row'):.2f} | "
            f"{med('peak_rss_mib'):,.0f} | {ratio('rate'):.2f} | {ratio('cpu_us_per_row'):.2f} | "
            f"{common.load_range(runs, name)} |"
        )
    return common.write_results(
        args.out, args.name, args, runs, "\n".join(lines),
        f"`benchmarks/bench_ragged.py --rounds {args.rounds}{' --cold' if args.cold else ''}"
        f"{' --shuffle' if args.shuffle else ''}`, "
        f"{{machine}}; {args.shards} x {args.shard_rows:,} rows of ragged tokens (16-1,024), "
        f"batch {args.batch}, {'shuffled, ' if args.shuffle else ''}"
        f"page cache {'dropped' if args.cold else 'warm'}; medians of "
        "rotated rounds, one fresh process each, every row checked; load = 1-minute load "
        "average.")


if __name__ == "__main__":
    main()
