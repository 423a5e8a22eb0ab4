"""Packed token blocks: random access and epochs against an in-memory pyarrow pack and rows.

On documents of varying length (``--shards`` x ``--rows`` rows, every token a hash of its row
and position), for each block length of the sweep, measures in one run:

- reference: a pyarrow pack held in memory (read the token column, flatten it with one
  end-of-document token per document, then block ``k`` is a numpy slice): its preparation
  time and its random-access blocks/s (batches of ``--batch`` uniform random blocks);
- packed: ``ParquetDataset(pack=...)``: the first open (the indexing pass over lengths), a
  reopen (the index read back), random-access blocks/s through ``__getitems__`` (the same
  batches), and a shuffled ``ChunkedSampler`` epoch to tensors, in tokens/s;
- rows: the unpacked dataset's shuffled epoch to tensors (``collate`` pads), in real
  tokens/s (padding not counted), the throughput packing is held to (target >= 0.8x);
  and the same epoch fetched with ``__getitems__`` alone (one tensor per row, no
  ``collate``) against the packed blocks fetched the same way, the stricter comparison.

    .venv/bin/python benchmarks/bench_pack.py                     # 4 x 4,000 documents
    .venv/bin/python benchmarks/bench_pack.py --lengths 512,2048,8192 --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import common
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, Pack, ParquetDataset, collate

EOD = 50_000


def write_documents(root: Path, shards: int, rows: int, longest: int) -> Path:
    """Write (or reuse) shards of documents of 1..``longest`` tokens (a hash of the row)."""
    def write(directory: Path) -> None:
        for k in range(shards):
            index = np.arange(k * rows, (k + 1) * rows, dtype=np.uint64)
            lengths = (index * np.uint64(0x9E3779B97F4A7C15) >> np.uint64(40)) % np.uint64(
                longest) + np.uint64(1)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            position = np.arange(int(offsets[-1]), dtype=np.uint64)
            owner = np.repeat(index, lengths.astype(np.int64))
            tokens = ((owner * np.uint64(31) + position * np.uint64(0xBF58476D1CE4E5B9))
                      % np.uint64(EOD)).astype(np.int32)
            table = pa.table({
                "id": pa.array(index.astype(np.int64)),
                "tokens": pa.LargeListArray.from_arrays(
                    pa.array(offsets), pa.array(tokens)).cast(pa.list_(pa.int32())),
            })
            pq.write_table(table, directory / f"part-{k:05d}.parquet", row_group_size=1000)

    return common.written(root / f"docs-s{shards}x{rows}-l{longest}", write)


def reference_pack(data: Path, length: int) -> tuple[np.ndarray[Any, Any], float]:
    """The stream in memory (pyarrow), and the seconds it took to build."""
    t0 = time.perf_counter()
    table = pq.read_table(common.shard_paths(data), columns=["tokens"])
    column = table["tokens"].combine_chunks()
    lengths = pc.list_value_length(column).to_numpy().astype(np.int64)
    values = pc.list_flatten(column).to_numpy()
    stream = np.empty(len(values) + len(lengths), dtype=np.int32)
    ends = np.cumsum(lengths + 1) - 1
    stream[ends] = EOD
    keep = np.ones(len(stream), dtype=bool)
    keep[ends] = False
    stream[keep] = values
    return stream[: len(stream) // length * length].reshape(-1, length), time.perf_counter() - t0


def random_batches(blocks: int, batch: int, count: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, blocks, batch).tolist() for _ in range(count)]


def epoch_tokens(ds: ParquetDataset, batch: int, real: str | None) -> float:
    """Tokens/s of one shuffled epoch to tensors (``real``: count only this mask's True)."""
    sampler = ChunkedSampler(ds, batch, workers=0, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, collate_fn=collate)
    tokens = 0
    t0 = time.perf_counter()
    for b in loader:
        tokens += int(b[real].sum()) if real else b["tokens"].numel()
    return tokens / (time.perf_counter() - t0)


def fetch_tokens(ds: ParquetDataset, batch: int, packed: int | None) -> float:
    """Tokens/s of one shuffled epoch fetched with ``__getitems__`` alone (no collate)."""
    order = list(ChunkedSampler(ds, batch, workers=0, shuffle=True, seed=0))
    tokens = 0
    t0 = time.perf_counter()
    for start in range(0, len(order), batch):
        rows = ds.__getitems__(order[start : start + batch])
        tokens += len(rows) * packed if packed else sum(len(r["tokens"]) for r in rows)
    return tokens / (time.perf_counter() - t0)


@contextlib.contextmanager
def fresh_cache(directory: str) -> Iterator[None]:
    """``$UNDERTALE_DUCK_CACHE`` set to ``directory`` inside, as it was after.

    Each packed run indexes anew; a caller running ``main`` in its own process (the tests)
    keeps its own cache setting.
    """
    before = os.environ.get("UNDERTALE_DUCK_CACHE")
    os.environ["UNDERTALE_DUCK_CACHE"] = directory
    try:
        yield
    finally:
        if before is None:
            del os.environ["UNDERTALE_DUCK_CACHE"]
        else:
            os.environ["UNDERTALE_DUCK_CACHE"] = before


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4000, help="documents per shard")
    parser.add_argument("--longest", type=int, default=1024, help="longest document")
    parser.add_argument("--lengths", default="512,2048", help="block lengths to sweep")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--batches", type=int, default=200, help="random batches timed")
    parser.add_argument("--memory", type=float, default=4096)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--data", type=Path, default=common.DATA)
    parser.add_argument("--out", type=Path, default=common.RESULTS)
    args = parser.parse_args(argv)
    data = write_documents(args.data, args.shards, args.rows, args.longest)
    rows_rate = []
    rows_fetch = []
    for _ in range(args.repeat):  # the unpacked dataset: real tokens/s of a shuffled epoch
        plain = ParquetDataset(data, args.memory, columns=["tokens"], format="torch")
        rows_rate.append(epoch_tokens(plain, args.batch * 4, "tokens_mask"))
        rows_fetch.append(fetch_tokens(plain, args.batch * 4, None))
    entries = []
    for length in [int(x) for x in args.lengths.split(",")]:
        runs = []
        for r in range(args.repeat):
            with tempfile.TemporaryDirectory() as cache, fresh_cache(cache):
                reference, prepare_s = reference_pack(data, length)
                spec = Pack(column="tokens", length=length, eod=EOD)
                t0 = time.perf_counter()
                ds = ParquetDataset(data, args.memory, pack=spec, format="torch")
                open_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                ParquetDataset(data, args.memory, pack=spec, format="torch")
                reopen_s = time.perf_counter() - t0
                assert len(ds) == len(reference), (len(ds), len(reference))
                batches = random_batches(len(ds), args.batch, args.batches, r)
                t0 = time.perf_counter()
                for b in batches:
                    torch.from_numpy(reference[b])
                reference_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                for b in batches:
                    got = ds.__getitems__(b)
                packed_s = time.perf_counter() - t0
                assert np.array_equal(collate(got)["tokens"].numpy(), reference[batches[-1]])
                epoch = epoch_tokens(ds, args.batch, None)
                fetch = fetch_tokens(ds, max(1, args.batch * 4 * args.longest // 2 // length),
                                     length)
                blocks = args.batch * args.batches
                runs.append({
                    "length": length, "blocks": len(ds),
                    "reference_prepare_s": prepare_s, "open_s": open_s, "reopen_s": reopen_s,
                    "reference_blocks_s": blocks / reference_s,
                    "packed_blocks_s": blocks / packed_s,
                    "random_ratio": reference_s / packed_s,
                    "packed_epoch_tokens_s": epoch,
                    "rows_epoch_tokens_s": statistics.median(rows_rate),
                    "epoch_ratio": epoch / statistics.median(rows_rate),
                    "packed_fetch_tokens_s": fetch,
                    "rows_fetch_tokens_s": statistics.median(rows_fetch),
                    "fetch_ratio": fetch / statistics.median(rows_fetch),
                })
        entries.append({k: statistics.median(run[k] for run in runs) for k in runs[0]})
    print(common.markdown_table(
        ["block", "blocks", "pyarrow prep s", "open s", "reopen s", "pyarrow blocks/s",
         "packed blocks/s", "x pyarrow", "packed epoch tok/s", "rows epoch tok/s", "x rows",
         "packed fetch tok/s", "rows fetch tok/s", "x rows (fetch)"],
        [[e["length"], e["blocks"], round(e["reference_prepare_s"], 3), round(e["open_s"], 3),
          round(e["reopen_s"], 3), e["reference_blocks_s"], e["packed_blocks_s"],
          round(e["random_ratio"], 3), e["packed_epoch_tokens_s"], e["rows_epoch_tokens_s"],
          round(e["epoch_ratio"], 2), e["packed_fetch_tokens_s"], e["rows_fetch_tokens_s"],
          round(e["fetch_ratio"], 2)] for e in entries],
    ))
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"entries": entries, "settings": vars(args) | {"data": str(data),
                                                             "out": str(args.out)}}
    (args.out / "pack.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
