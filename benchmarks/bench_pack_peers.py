"""Packed token blocks against their peers: LitData's ``TokensLoader``, Hugging Face packing.

On the documents of ``bench_pack.py`` (``--shards`` x ``--rows`` documents of 1..``--longest``
tokens, each followed by one end-of-document token in the stream), for each block length of
the sweep, one shuffled epoch of every block in batches of ``--batch`` blocks, by:

- ``packed``: ``ParquetDataset(pack=Pack(...))`` straight from the Parquet shards;
  preparation is the first open (the indexing pass over lengths, in an empty cache);
  blocks in ``ChunkedSampler(shuffle=True)`` order through ``__getitems__``;
- ``rows``: the unpacked dataset, one tensor per document (``__getitems__``, no padding),
  in ``ChunkedSampler(shuffle=True)`` order, batches of ``--batch * 4`` documents;
- ``litdata``: LitData's ``optimize()`` conversion to its chunk format (counted as
  preparation), then ``StreamingDataset(item_loader=TokensLoader(block_size=L),
  shuffle=True)`` through a ``StreamingDataLoader``. ``TokensLoader`` cuts blocks inside
  each chunk and drops each chunk's remainder, so to serve the same blocks as the others
  the conversion writes the stream in items of ``L`` tokens (a chunk holds whole blocks);
- ``hf``: Hugging Face ``datasets``: ``load_dataset("parquet")`` (its Arrow copy) and a
  ``map(batched=True)`` packing (written as a second Arrow copy), both counted as
  preparation; the map carries each batch's remainder into the next, so the blocks are
  the stream's (the usual ``group_texts`` drops every batch's remainder and would not
  be); then random batches of a shuffled permutation, ``ds[indices]``.

Every block each system serves is checked equal to the reference (the stream built with
pyarrow and cut by numpy): in order for ``packed`` and ``hf`` (their order is known), as a
multiset (every block exactly once) for ``litdata``; ``rows`` checks every document.
Throughput counts real tokens (no padding). Each measurement runs in a fresh process; the
rounds rotate the systems' order; figures are medians over rounds, with the machine's
1-minute load average around each measurement.

    .venv/bin/python benchmarks/bench_pack_peers.py                 # 4 x 4,000 documents
    .venv/bin/python benchmarks/bench_pack_peers.py --lengths 2048 --repeat 5

A missing peer (``pip install -c ci/constraints.txt litdata datasets``) is reported as
skipped, with the reason, in the table and the results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bench_pack
import common
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SYSTEMS = ("packed", "rows", "litdata", "hf")
EOD = bench_pack.EOD
Array = np.ndarray[Any, Any]


def stream(data: Path) -> Array:
    """The stream as one int32 array: every document's tokens followed by ``EOD``."""
    return with_eod(pq.read_table(common.shard_paths(data), columns=["tokens"])["tokens"])


def same_blocks(got: Array, expected: Array) -> bool:
    """Whether two ``[n, L]`` arrays hold the same rows, in any order."""
    if got.shape != expected.shape:
        return False
    row = np.dtype((np.void, got.shape[1] * got.itemsize))

    def rows(a: Array) -> Array:
        return np.sort(np.ascontiguousarray(a).view(row).ravel())

    return bool(np.array_equal(rows(got), rows(expected)))


# ---------------------------------------------------------------------------- systems
def run_packed(data: Path, length: int, batch: int, work: Path) -> dict[str, Any]:
    from undertale_duck import ChunkedSampler, Pack, ParquetDataset

    os.environ["UNDERTALE_DUCK_CACHE"] = str(work / "cache")
    t0 = time.perf_counter()
    ds = ParquetDataset(data, pack=Pack(column="tokens", length=length, eod=EOD),
                        format="numpy")
    prepare = time.perf_counter() - t0
    order = list(ChunkedSampler(ds, batch, workers=0, shuffle=True, seed=0, drop_last=False))
    parts = []
    t0 = time.perf_counter()
    for start in range(0, len(order), batch):
        parts.append(ds.__getitems__(order[start : start + batch]).batched("tokens"))
    epoch = time.perf_counter() - t0
    got = np.concatenate(parts)
    expected = stream(data)
    whole = len(expected) // length
    ok = bool(np.array_equal(got, expected[: whole * length].reshape(whole, length)[order]))
    return {"prepare_s": prepare, "epoch_s": epoch, "blocks": len(got),
            "tokens": int(got.size), "checked": ok}


def run_rows(data: Path, length: int, batch: int, work: Path) -> dict[str, Any]:
    from undertale_duck import ChunkedSampler, ParquetDataset

    del length
    os.environ["UNDERTALE_DUCK_CACHE"] = str(work / "cache")
    t0 = time.perf_counter()
    ds = ParquetDataset(data, columns=["tokens"], format="numpy")
    prepare = time.perf_counter() - t0
    rows = batch * 4
    order = list(ChunkedSampler(ds, rows, workers=0, shuffle=True, seed=0, drop_last=False))
    got = []
    tokens = 0
    t0 = time.perf_counter()
    for start in range(0, len(order), rows):
        part = ds.__getitems__(order[start : start + rows])
        for r in part:
            tokens += len(r["tokens"])
        got.append(part)
    epoch = time.perf_counter() - t0
    column = pq.read_table(common.shard_paths(data), columns=["tokens"])["tokens"]
    offsets = np.asarray(column.combine_chunks().offsets)
    values = pc.list_flatten(column).to_numpy()
    served = [r["tokens"] for part in got for r in part]
    ok = len(served) == len(order) and all(
        np.array_equal(t, values[offsets[i] : offsets[i + 1]])
        for t, i in zip(served, order, strict=True)
    )
    return {"prepare_s": prepare, "epoch_s": epoch, "blocks": len(served), "tokens": tokens,
            "checked": bool(ok)}


class LitBlocks:
    """LitData's ``optimize`` function: the stream in items of ``length`` tokens.

    The remainder is dropped at the end, as the others drop it. A class at module level:
    LitData pickles it to its worker processes.
    """

    def __init__(self, paths: list[str], length: int) -> None:
        self.paths = paths
        self.length = length

    def __call__(self, _: int) -> Iterator[Any]:
        """Yield the blocks as tensors (the input is unused: one input, in order)."""
        import torch

        length = self.length
        rest = np.empty(0, dtype=np.int32)
        for path in self.paths:
            for group in pq.ParquetFile(path).iter_batches(columns=["tokens"]):
                rest = np.concatenate([rest, with_eod(group.column(0))])
                whole = len(rest) // length
                for k in range(whole):
                    yield torch.from_numpy(rest[k * length : (k + 1) * length].copy())
                rest = rest[whole * length :]


def with_eod(column: pa.Array | pa.ChunkedArray) -> Array:
    """A list column's values with ``EOD`` after each list, as one int32 array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    lengths = pc.list_value_length(column).to_numpy().astype(np.int64)
    values = pc.list_flatten(column).to_numpy()
    out = np.empty(len(values) + len(lengths), dtype=np.int32)
    ends = np.cumsum(lengths + 1) - 1
    out[ends] = EOD
    keep = np.ones(len(out), dtype=bool)
    keep[ends] = False
    out[keep] = values
    return out


def run_litdata(data: Path, length: int, batch: int, work: Path) -> dict[str, Any]:
    from litdata import StreamingDataLoader, StreamingDataset, TokensLoader, optimize

    out = work / "litdata"
    blocks = LitBlocks([str(p) for p in common.shard_paths(data)], length)

    t0 = time.perf_counter()
    optimize(fn=blocks, inputs=[0], output_dir=str(out), chunk_size=length * 1024,
             num_workers=1, item_loader=TokensLoader(), mode="overwrite", verbose=False,
             reorder_files=False)
    prepare = time.perf_counter() - t0
    ds = StreamingDataset(str(out), item_loader=TokensLoader(block_size=length),
                          shuffle=True, seed=0)
    loader = StreamingDataLoader(ds, batch_size=batch, num_workers=0)
    parts = []
    t0 = time.perf_counter()
    for b in loader:
        parts.append(b.numpy())
    epoch = time.perf_counter() - t0
    got = np.concatenate(parts)
    expected = stream(data)
    whole = len(expected) // length
    ok = same_blocks(got, expected[: whole * length].reshape(whole, length))
    return {"prepare_s": prepare, "epoch_s": epoch, "blocks": len(got),
            "tokens": int(got.size), "checked": ok}


def run_hf(data: Path, length: int, batch: int, work: Path) -> dict[str, Any]:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    datasets.disable_progress_bars()
    carry = [np.empty(0, dtype=np.int32)]

    def pack(table: pa.Table) -> pa.Table:
        """The batch's documents, after the last batch's remainder, cut into blocks."""
        part = with_eod(table.column("tokens"))
        rest = np.concatenate([carry[0], part])
        whole = len(rest) // length
        carry[0] = rest[whole * length :]
        offsets = pa.array(np.arange(whole + 1, dtype=np.int32) * length)
        return pa.table({"tokens": pa.ListArray.from_arrays(offsets,
                                                            pa.array(rest[: whole * length]))})

    t0 = time.perf_counter()
    raw = datasets.load_dataset("parquet", data_files=[str(p) for p in common.shard_paths(data)],
                                split="train", cache_dir=str(work / "hf"))
    packed = raw.with_format("arrow").map(
        pack, batched=True, batch_size=1000, remove_columns=raw.column_names,
        new_fingerprint=f"pack-{length}",
    )
    prepare = time.perf_counter() - t0
    ds = packed.with_format("numpy")
    order = np.random.default_rng(0).permutation(len(ds))
    parts = []
    t0 = time.perf_counter()
    for start in range(0, len(order), batch):
        parts.append(np.stack(ds[order[start : start + batch]]["tokens"]))
    epoch = time.perf_counter() - t0
    got = np.concatenate(parts)
    expected = stream(data)
    whole = len(expected) // length
    ok = bool(np.array_equal(got, expected[: whole * length].reshape(whole, length)[order]))
    return {"prepare_s": prepare, "epoch_s": epoch, "blocks": len(got),
            "tokens": int(got.size), "checked": ok}


RUNNERS: dict[str, Callable[[Path, int, int, Path], dict[str, Any]]] = {
    "packed": run_packed, "rows": run_rows, "litdata": run_litdata, "hf": run_hf,
}


def missing(system: str) -> str | None:
    """Why a peer cannot run here, or None."""
    module = {"litdata": "litdata", "hf": "datasets"}.get(system)
    if module is None:
        return None
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True, check=False)
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def measure(system: str, data: Path, length: int, batch: int, timeout: float) -> dict[str, Any]:
    """One measurement in a fresh process (its own empty work directory)."""
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as work:
        load = os.getloadavg()[0]
        command = [sys.executable, __file__, "--one", system, "--length", str(length),
                   "--batch", str(batch), "--data", str(data), "--work", work]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False)
        after = os.getloadavg()[0]
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-2000:], "load": (load + after) / 2}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result | {"load": (load + after) / 2}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if "error" not in r]
    if not good:
        return {"error": runs[0]["error"] if runs else "not run"}
    out = {k: statistics.median(r[k] for r in good)
           for k in ("prepare_s", "epoch_s", "load")}
    out["tokens"] = good[0]["tokens"]
    out["blocks"] = good[0]["blocks"]
    out["checked"] = all(r["checked"] for r in good)
    out["rounds"] = len(good)
    out["tokens_s"] = statistics.median(r["tokens"] / r["epoch_s"] for r in good)
    out["tokens_s_with_prepare"] = statistics.median(
        r["tokens"] / (r["epoch_s"] + r["prepare_s"]) for r in good)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4000, help="documents per shard")
    parser.add_argument("--longest", type=int, default=1024, help="longest document")
    parser.add_argument("--lengths", default="512,2048", help="block lengths to sweep")
    parser.add_argument("--batch", type=int, default=16, help="blocks per batch")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (rotated order)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per measurement")
    parser.add_argument("--data", type=Path, default=common.DATA)
    parser.add_argument("--out", type=Path, default=common.RESULTS)
    parser.add_argument("--one", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # the child: one measurement, one JSON line
        result = RUNNERS[args.one](args.data, args.length, args.batch, args.work)
        print(json.dumps(result))
        return result
    data = bench_pack.write_documents(args.data, args.shards, args.rows, args.longest)
    systems = args.systems.split(",")
    skipped = {s: why for s in systems if (why := missing(s)) is not None}
    active = [s for s in systems if s not in skipped]
    entries = []
    for length in [int(x) for x in args.lengths.split(",")]:
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in active}
        for r in range(args.repeat):
            for s in active[r % len(active):] + active[: r % len(active)]:
                runs[s].append(measure(s, data, length, args.batch, args.timeout))
        entry: dict[str, Any] = {"length": length}
        for s in active:
            entry[s] = summary(runs[s]) | {"runs": runs[s]}
        for s, why in skipped.items():
            entry[s] = {"skipped": why}
        entries.append(entry)
    rows = []
    for e in entries:
        base = e.get("packed", {}).get("tokens_s")
        for s in systems:
            m = e[s]
            if "tokens_s" not in m:
                rows.append([e["length"], s, "-", "-", "-", "-", "-",
                             m.get("skipped") or m.get("error", "")[:80]])
                continue
            rows.append([e["length"], s, round(m["prepare_s"], 2), round(m["tokens_s"]),
                         round(m["tokens_s_with_prepare"]),
                         round(base / m["tokens_s"], 2) if base else "-",
                         round(m["load"], 1), "yes" if m["checked"] else "NO"])
    print(common.markdown_table(
        ["block", "system", "prepare s", "epoch tokens/s", "tokens/s with prepare",
         "packed is x faster", "load avg", "blocks checked"], rows))
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"entries": entries, "settings": {k: str(v) for k, v in vars(args).items()
                                                 if k not in ("one", "length", "work")}
               | {"data": str(data), "cpus": os.cpu_count()}}
    (args.out / "pack_peers.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
