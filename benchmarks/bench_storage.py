"""An epoch from a local S3 server (cold and warm shard cache) against the same shards on disk.

Starts moto's S3 server in a subprocess on 127.0.0.1, uploads a benchmark dataset, then
times, interleaved in one process (``workers`` DataLoader workers, ``format="torch"``,
``collate``, a sequential ``ChunkedSampler``):

- ``local``: the dataset on local disk;
- ``cold``: ``s3://`` with an empty shard cache (listing, footers and every download inside
  the epoch);
- ``warm``: ``s3://`` again with the cache the cold epoch filled (a new dataset each time).

Each repeat runs ``cold``, then ``local``, ``warm``, ``warm``, ``local`` (so drift in the
machine's load cancels). Ratios are rows/s against ``local`` of the same repeat (medians over
repeats), counting the
time to open the dataset (listing and footers by range reads) and without it (the epoch
alone, as every epoch after the first); the target is warm >= 0.9x.

    .venv/bin/python benchmarks/bench_storage.py                    # 8 shards x 10,000 rows
    .venv/bin/python benchmarks/bench_storage.py --shards 4 --rows 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from torch.utils.data import DataLoader

from undertale_duck import ParquetDataset
from undertale_duck.training.collate import collate
from undertale_duck.training.sampler import ChunkedSampler


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoProcess:
    """moto's standalone S3 server in a child process."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)

    def options(self) -> dict[str, Any]:
        """storage_options reaching this server."""
        return {
            "key": "bench",
            "secret": "bench",
            "client_kwargs": {
                "endpoint_url": f"http://127.0.0.1:{self.port}",
                "region_name": "us-east-1",
            },
        }

    def close(self) -> None:
        """Stop the server."""
        self.proc.terminate()
        self.proc.wait(30)


def upload(directory: Path, options: dict[str, Any]) -> str:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.call_s3("create_bucket", Bucket="bench")
    for path in common.shard_paths(directory):
        fs.put_file(str(path), f"bench/data/{path.name}")
    return "s3://bench/data/"


def epoch(source: Any, args: argparse.Namespace, **remote: Any) -> dict[str, Any]:
    start = time.perf_counter()
    ds = ParquetDataset(source, memory=args.memory, format="torch", **remote)
    opened = time.perf_counter() - start
    sampler = ChunkedSampler(ds, args.batch, args.workers, 1, 0)
    loader = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                        collate_fn=collate,
                        multiprocessing_context="fork" if args.workers else None)
    result = common.time_epoch(loader, common.batch_rows)
    out = {"rate": result.rows / (opened + result.seconds),
           "epoch_rate": result.rows / result.seconds, "open_s": opened,
           "epoch_s": result.seconds, "rows": result.rows}
    if ds.source.store is not None and args.workers == 0:
        stats = ds.source.store.cache.stats
        out["downloads"] = stats.downloads
        out["downloaded_mb"] = stats.downloaded_bytes / 1e6
    ds.close()
    return out


def _mean(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {k: (a[k] + b[k]) / 2 for k in a}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rows", type=int, default=10_000, help="rows per shard")
    parser.add_argument("--row-group", type=int, default=common.ROW_GROUP)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--memory", type=float, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=common.DATA)
    parser.add_argument("--out", type=Path, default=common.RESULTS)
    args = parser.parse_args(argv)

    directory = common.write_dataset(args.shards, args.rows, root=args.data,
                                     row_group=min(args.row_group, args.rows))
    server = MotoProcess()
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    runs: list[dict[str, Any]] = []
    try:
        url = upload(directory, server.options())
        options = server.options()
        epoch(directory, args)  # warm the page cache and imports once
        for k in range(args.repeat):
            cache = work / f"cache-{k}"
            cold = epoch(url, args, storage_options=options, cache_dir=cache)
            # local and warm in A B B A order, so drift in the machine's load cancels out
            pair = [epoch(directory, args),
                    epoch(url, args, storage_options=options, cache_dir=cache)]
            pair += [epoch(url, args, storage_options=options, cache_dir=cache),
                     epoch(directory, args)]
            run = {"local": _mean(pair[0], pair[3]), "cold": cold, "warm": _mean(pair[1], pair[2])}
            runs.append(run)
            print(json.dumps({m: [round(r["rate"]), round(r["epoch_rate"])]
                              for m, r in run.items()}), flush=True)
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)

    def median(mode: str, key: str) -> float:
        return statistics.median(r[mode][key] for r in runs)

    ratios = {
        mode: statistics.median(r[mode]["rate"] / r["local"]["rate"] for r in runs)
        for mode in ("cold", "warm")
    }
    epoch_ratios = {
        mode: statistics.median(r[mode]["epoch_rate"] / r["local"]["epoch_rate"] for r in runs)
        for mode in ("cold", "warm")
    }
    results: dict[str, Any] = {
        "dataset": {"shards": args.shards, "rows_per_shard": args.rows,
                    "bytes": common.dataset_bytes(directory)},
        "settings": {"batch": args.batch, "workers": args.workers, "memory": args.memory,
                     "repeat": args.repeat},
        "modes": {m: {"rows_per_s": median(m, "rate"), "open_s": median(m, "open_s"),
                      "epoch_s": median(m, "epoch_s")} for m in ("local", "cold", "warm")},
        "ratios": ratios,
        "epoch_ratios": epoch_ratios,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "storage.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = [[m, f"{results['modes'][m]['rows_per_s']:,.0f}",
             f"{results['modes'][m]['open_s']:.2f}", f"{results['modes'][m]['epoch_s']:.2f}",
             "1.00x" if m == "local" else f"{ratios[m]:.2f}x",
             "1.00x" if m == "local" else f"{epoch_ratios[m]:.2f}x"]
            for m in ("local", "cold", "warm")]
    table = common.markdown_table(
        ["mode", "rows/s (open + epoch)", "open s", "epoch s", "vs local", "epoch vs local"],
        rows,
    )
    size = results["dataset"]["bytes"] / 1e6
    (args.out / "storage.md").write_text(
        f"# bench_storage\n\n{args.shards} shards x {args.rows:,} rows ({size:,.0f} MB), batch "
        f"{args.batch}, workers {args.workers}, median of {args.repeat} repeats (cold, then "
        "local/warm in A B B A order); "
        "moto's S3 server on 127.0.0.1 in a child process.\n\n" + table
    )
    print(table)
    return results


if __name__ == "__main__":
    main()
