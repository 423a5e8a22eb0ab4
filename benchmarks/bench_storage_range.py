"""Time to the first batch of a fresh remote dataset: range reads against whole-shard downloads.

Starts moto's S3 server in a subprocess on 127.0.0.1 (as ``bench_storage.py``), uploads one
shard per size (rows of 512 tokens, row groups of ``--row-group`` rows), then for each size
opens a fresh dataset on an empty shard cache and reads its first batch (``--batch`` rows,
``ds[i]``, read-ahead off), two ways:

- ``range``: the default: the footer was read at open, the first window's row groups are
  fetched by range requests;
- ``whole``: ``store.range_reads = False``: the shard is downloaded whole first (the
  behaviour before range reads).

Time counts opening the dataset (listing, footer) and the first batch; bytes are every byte
fetched from the store until then (``ds.storage_stats``). Each repeat runs both modes in
alternating order; medians over repeats. Background downloads are off, so nothing but the
first batch is fetched.

    .venv/bin/python benchmarks/bench_storage_range.py                       # 10, 50, 200 MB
    .venv/bin/python benchmarks/bench_storage_range.py --sizes 10 --repeat 1
    .venv/bin/python benchmarks/bench_storage_range.py --epoch --sizes 50 200  # + cold epochs

``--epoch`` also times a cold first epoch (every row, in order, batches of ``--batch``,
read-ahead on) of each shard on an empty cache, two ways: ``range`` (range reads, then the
whole shard in the background, the default) and ``whole`` (downloaded whole first), and
writes ``storage_range_epoch.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from bench_storage import MotoProcess

from undertale_duck import ParquetDataset

#: What the figures mean (written with them).
NOTE = (
    "The first window is 64 MiB decoded (`memory=1024`), about 31 MB of the file: the 10 MB "
    "shard is one window, so both paths download it whole. moto serves each range request "
    "by reading the whole object and slicing it, so the range path's time here grows with "
    "the shard's size, which a real object store's does not."
)
#: Bytes of one benchmark row in a shard (512 tokens), measured: rows per MB of shard.
ROW_BYTES = 1260


def upload(paths: dict[int, Path], options: dict[str, Any]) -> dict[int, str]:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.call_s3("create_bucket", Bucket="bench")
    urls = {}
    for size, path in paths.items():
        fs.put_file(str(path), f"bench/range-{size}mb/{path.name}")
        urls[size] = f"s3://bench/range-{size}mb/{path.name}"
    return urls


def first_batch(url: str, mode: str, cache: Path, args: argparse.Namespace,
                options: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    ds = ParquetDataset(url, memory=args.memory, storage_options=options, cache_dir=cache,
                        read_ahead=False)
    store = ds.source.store
    store.range_reads = mode == "range"
    store.background = False
    rows = [ds[i] for i in range(args.batch)]
    seconds = time.perf_counter() - start
    assert rows[0]["id"] == "row-000000000"
    stats = ds.storage_stats
    ds.close()
    return {"seconds": seconds, "bytes": stats.bytes, "range_bytes": stats.range_bytes,
            "download_bytes": stats.download_bytes, "requests": stats.requests}


def first_epoch(url: str, mode: str, cache: Path, args: argparse.Namespace,
                options: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    ds = ParquetDataset(url, memory=args.memory, storage_options=options, cache_dir=cache)
    store = ds.source.store
    store.range_reads = mode == "range"
    first = None
    rows = 0
    for at in range(0, len(ds), args.batch):
        batch = ds.__getitems__(list(range(at, min(at + args.batch, len(ds)))))
        assert batch[0]["id"] == f"row-{at:09d}"
        rows += len(batch)
        if first is None:
            first = time.perf_counter() - start
    seconds = time.perf_counter() - start
    stats = ds.storage_stats
    ds.close()
    return {"seconds": seconds, "first_batch": first, "rows": rows, "bytes": stats.bytes,
            "range_bytes": stats.range_bytes, "download_bytes": stats.download_bytes,
            "background_bytes": stats.background_bytes}


def epochs(urls: dict[int, str], paths: dict[int, Path], work: Path,
           args: argparse.Namespace, options: dict[str, Any]) -> None:
    """Cold first epochs, range reads with background downloads against whole shards."""
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {s: {"range": [], "whole": []}
                                                        for s in args.sizes}
    for k in range(args.repeat):
        for size in args.sizes:
            for mode in (("range", "whole") if k % 2 == 0 else ("whole", "range")):
                cache = work / f"epoch-{size}-{mode}-{k}"
                result = first_epoch(urls[size], mode, cache, args, options)
                runs[size][mode].append(result)
                shutil.rmtree(cache, ignore_errors=True)
                print(json.dumps({"epoch": True, "size_mb": size, "mode": mode, **result}),
                      flush=True)
    table_rows = []
    for size in args.sizes:
        med = {m: {key: statistics.median(r[key] for r in runs[size][m])
                   for key in ("seconds", "first_batch", "bytes", "rows")}
               for m in ("range", "whole")}
        table_rows.append([
            f"{paths[size].stat().st_size / 1e6:,.1f}", f"{med['range']['rows']:,.0f}",
            f"{med['range']['first_batch']:.2f}", f"{med['whole']['first_batch']:.2f}",
            f"{med['range']['seconds']:.2f}", f"{med['whole']['seconds']:.2f}",
            f"{med['whole']['seconds'] / med['range']['seconds']:.2f}x",
            f"{med['range']['bytes'] / 1e6:,.1f}", f"{med['whole']['bytes'] / 1e6:,.1f}",
        ])
    table = common.markdown_table(
        ["shard MB", "rows", "range: first batch s", "whole: first batch s",
         "range: epoch s", "whole: epoch s", "speed-up", "range: MB fetched",
         "whole: MB fetched"],
        table_rows,
    )
    load = os.getloadavg()
    (args.out / "storage_range_epoch.json").write_text(json.dumps(
        {"settings": {"sizes_mb": args.sizes, "batch": args.batch, "memory": args.memory,
                      "repeat": args.repeat, "load": load}, "runs": runs}, indent=2) + "\n")
    (args.out / "storage_range_epoch.md").write_text(
        "# bench_storage_range --epoch\n\nA cold first epoch of one shard on an empty cache "
        f"(every row in order, batches of {args.batch}, read-ahead on, `memory={args.memory:g}`): "
        "`range` reads the first windows by range and downloads the shard whole in the "
        "background, `whole` downloads it first. Median of "
        f"{args.repeat} repeats in alternating order; moto's S3 server on 127.0.0.1; load "
        f"average at the end {load[0]:.1f} (2 shared cores). " + NOTE + "\n\n" + table + "\n")
    print(table)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200],
                        help="shard sizes in MB")
    parser.add_argument("--row-group", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--memory", type=float, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=common.DATA)
    parser.add_argument("--out", type=Path, default=common.RESULTS)
    parser.add_argument("--epoch", action="store_true",
                        help="also time cold first epochs (storage_range_epoch.*)")
    args = parser.parse_args(argv)

    paths = {}
    for size in args.sizes:
        rows = size * 1_000_000 // ROW_BYTES
        directory = common.write_dataset(1, rows, root=args.data,
                                         row_group=min(args.row_group, rows))
        paths[size] = common.shard_paths(directory)[0]
    server = MotoProcess()
    work = Path(tempfile.mkdtemp(prefix="bench-range-"))
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {s: {"range": [], "whole": []}
                                                        for s in args.sizes}
    try:
        options = server.options()
        urls = upload(paths, options)
        first_batch(urls[args.sizes[0]], "range", work / "warmup", args, options)  # imports
        for k in range(args.repeat):
            for size in args.sizes:
                order = ("range", "whole") if k % 2 == 0 else ("whole", "range")
                for mode in order:
                    cache = work / f"cache-{size}-{mode}-{k}"
                    result = first_batch(urls[size], mode, cache, args, options)
                    runs[size][mode].append(result)
                    shutil.rmtree(cache, ignore_errors=True)
                    print(json.dumps({"size_mb": size, "mode": mode, "repeat": k,
                                      **result}), flush=True)
        if args.epoch:
            args.out.mkdir(parents=True, exist_ok=True)
            epochs(urls, paths, work, args, options)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)

    def median(size: int, mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[size][mode])

    table_rows = []
    summary = {}
    for size in args.sizes:
        shard = paths[size].stat().st_size
        entry = {mode: {key: median(size, mode, key) for key in ("seconds", "bytes", "requests")}
                 for mode in ("range", "whole")}
        entry["shard_bytes"] = shard
        summary[size] = entry
        table_rows.append([
            f"{shard / 1e6:,.1f}",
            f"{entry['range']['seconds']:.2f}", f"{entry['whole']['seconds']:.2f}",
            f"{entry['whole']['seconds'] / entry['range']['seconds']:.1f}x",
            f"{entry['range']['bytes'] / 1e6:,.2f}", f"{entry['whole']['bytes'] / 1e6:,.1f}",
        ])
    table = common.markdown_table(
        ["shard MB", "range: s to first batch", "whole: s", "speed-up",
         "range: MB fetched", "whole: MB fetched"],
        table_rows,
    )
    results: dict[str, Any] = {
        "settings": {"sizes_mb": args.sizes, "row_group": args.row_group, "batch": args.batch,
                     "memory": args.memory, "repeat": args.repeat,
                     "load": os.getloadavg()},
        "sizes": summary,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "storage_range.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "storage_range.md").write_text(
        f"# bench_storage_range\n\nOne shard per size (rows of 512 tokens, row groups of "
        f"{args.row_group:,} rows), first batch of {args.batch} rows of a fresh dataset on an "
        f"empty cache (open + first batch), median of {args.repeat} repeats in alternating "
        "order; moto's S3 server on 127.0.0.1 in a child process; load average at the end "
        f"{results['settings']['load'][0]:.1f} (2 shared cores). " + NOTE + "\n\n" + table
        + "\n"
    )
    print(table)
    return results


if __name__ == "__main__":
    main()
