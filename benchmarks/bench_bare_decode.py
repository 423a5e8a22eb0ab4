"""The bare decode of the issue-29 shards by each decoder: no tensors, no checks, cold.

What a Parquet decoder alone costs per row, beside Lance's own format, on the data of
``bench_decode_floor.py --scenarios sharded`` (all four columns). One fresh process per
measurement, the files' page cache dropped before the clock (Lance's converted copy is
written before it, then dropped too); rounds rotate the decoders. Decoders that are not
installed (``arro3-io``, ``polars``, ``pylance``) are skipped: none is a dependency;
``duckdb`` (a dependency) is DuckDB's own Parquet reader with its Arrow export.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

#: Decoder name -> the module it needs (None: pyarrow, always there).
DECODERS: dict[str, str | None] = {
    "pyarrow-iter": None,  # ParquetFile.iter_batches, Arrow's decode threads
    "pyarrow-iter-1": None,  # the same with use_threads=False
    # iter_batches decoding into pyarrow's jemalloc pool, as our reads do (decision 0022)
    "pyarrow-iter-jemalloc": None,
    # how our reads decode a whole-shard window: a ParquetReader on jemalloc, batches of
    # 3,476 rows (what core/read/direct.py picks for these files), joined into one table
    "pyarrow-ours": None,
    "pyarrow-groups": None,  # ParquetFile.read_row_group, one group at a time
    # DuckDB's own Parquet reader, its Arrow export in batches (what views and ds.sql use)
    "duckdb": None,
    "arro3": "arro3.io",  # the Rust parquet crate (whole files: no group or column choice)
    "polars": "polars",
    "lance": "lance",  # Lance's own format, converted before the clock
}


def _drop(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_one(decoder: str, data: Path, scratch: Path) -> dict[str, Any]:
    """Decode every shard once in this (fresh) process; rows/s and CPU per row."""
    import pyarrow.parquet as pq

    files = common.shard_paths(data)
    dropped = files
    if decoder == "lance":
        import lance

        target = scratch / "data.lance"
        if not target.exists():
            lance.write_dataset(pq.ParquetDataset([str(p) for p in files]).read(), str(target))
        dropped = [p for p in target.rglob("*") if p.is_file()]
    elif decoder == "arro3":
        from arro3.io import read_parquet
    elif decoder == "polars":
        import polars
    elif decoder == "duckdb":
        import duckdb

        connection = duckdb.connect()  # DuckDB's default threads: one per core
    if decoder == "pyarrow-iter-jemalloc":
        import pyarrow as pa

        pa.set_memory_pool(pa.jemalloc_memory_pool())
        decoder = "pyarrow-iter"
    _drop(dropped)
    clock = common.Stopwatch()
    rows = 0
    if decoder in ("pyarrow-iter", "pyarrow-iter-1"):
        for path in files:
            reader = pq.ParquetFile(path)
            for part in reader.iter_batches(use_threads=decoder == "pyarrow-iter"):
                rows += part.num_rows
    elif decoder == "pyarrow-ours":
        import pyarrow as pa

        pool = pa.jemalloc_memory_pool()
        for path in files:
            meta = pq.read_metadata(path)
            opened = pq.ParquetReader(memory_pool=pool)
            opened.open(str(path), metadata=meta, buffer_size=1 << 16, pre_buffer=False,
                        page_checksum_verification=True)
            groups = list(range(meta.num_row_groups))
            leaves = list(range(meta.num_columns))
            parts = list(opened.iter_batches(3476, row_groups=groups, column_indices=leaves,
                                             use_threads=True))
            rows += pa.Table.from_batches(parts).combine_chunks(memory_pool=pool).num_rows
            opened.close()
    elif decoder == "pyarrow-groups":
        for path in files:
            reader = pq.ParquetFile(path)
            for group in range(reader.num_row_groups):
                rows += reader.read_row_group(group).num_rows
    elif decoder == "duckdb":
        for path in files:
            relation = connection.sql("SELECT * FROM read_parquet($path)",
                                      params={"path": str(path)})
            for part in relation.to_arrow_reader(3476):
                rows += part.num_rows
        connection.close()
    elif decoder == "arro3":
        for path in files:
            rows += sum(part.num_rows for part in read_parquet(str(path)))
    elif decoder == "polars":
        for path in files:
            rows += polars.read_parquet(path).height
    elif decoder == "lance":
        for part in lance.dataset(str(scratch / "data.lance")).to_batches():
            rows += part.num_rows
    return clock.figures(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-rows", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decoders", default=",".join(DECODERS))
    parser.add_argument("--root", default="", help="where the data is written (a new dir)")
    parser.add_argument("--out", default=str(common.RESULTS))
    parser.add_argument("--name", default="bare_decode")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    parser.add_argument("--data", default="", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        result = run_one(args.one, Path(args.data), Path(args.scratch))
        print(json.dumps(result))
        return result
    root = Path(args.root) if args.root else None
    data = common.write_dataset(args.shards, args.shard_rows, root=root)
    wanted = [d.strip() for d in args.decoders.split(",") if d.strip()]
    unknown = sorted(set(wanted) - set(DECODERS))
    if unknown:
        parser.error(f"unknown decoders {unknown}; known: {sorted(DECODERS)}")
    module = {d: DECODERS[d] for d in wanted}
    kept = [d for d in wanted
            if module[d] is None or importlib.util.find_spec(str(module[d]).split(".")[0])]
    runs: dict[str, list[dict[str, Any]]] = {d: [] for d in kept}
    with tempfile.TemporaryDirectory(prefix="bare-decode-", dir=data.parent) as scratch:
        for k in range(args.rounds):
            for decoder in kept[k % len(kept):] + kept[:k % len(kept)]:
                command = [sys.executable, __file__, "--one", decoder, "--data", str(data),
                           "--scratch", scratch]
                done = subprocess.run(command, check=True, capture_output=True, text=True)
                runs[decoder].append(json.loads(done.stdout.strip().splitlines()[-1]))
    total = args.shards * args.shard_rows
    for decoder, found in runs.items():
        if any(r["rows"] != total for r in found):
            raise AssertionError(f"{decoder} read {[r['rows'] for r in found]} of {total} rows")
    lines = ["| decoder | rows/s (median) | range | CPU us/row (median) | range | load |",
             "|---|---|---|---|---|---|"]
    for decoder, found in runs.items():
        rates = [r["rate"] for r in found]
        cpus = [r["cpu_us_per_row"] for r in found]
        loads = [r["load"] for r in found]
        lines.append(
            f"| {decoder} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f}"
            f" | {statistics.median(cpus):.2f} | {min(cpus):.2f}-{max(cpus):.2f}"
            f" | {min(loads):.1f}-{max(loads):.1f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"rows": total, "rounds": args.rounds, "runs": runs,
               "skipped": [d for d in wanted if d not in kept],
               "machine": f"{os.cpu_count()} cores, shared"}
    (out / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return results


if __name__ == "__main__":
    main()
