"""Views (training sets defined in SQL): serving, indexing and reopening, as ratios in one run.

On the benchmark dataset (``common.write_dataset``), with a view keeping about half the rows
on a non-trivial predicate (``label % 2 = 0 AND list_sum(mask) > 0``), measures:

- serving: an epoch of the view to tensors (``format="torch"``, ``ChunkedSampler``,
  ``collate``, workers=0) against the unfiltered dataset, in rows/s (target >= 0.8x);
- indexing: the first open (one indexing pass) against
  ``SELECT count(*) FROM dataset WHERE <same predicate>`` (target <= 2x), and the pass alone
  (the first open less a reopen, which opens the same way without the pass);
- reopening: a second open of the same view, reusing the index on disk, against the
  indexing time (target <= 0.1x).

    .venv/bin/python benchmarks/bench_views.py                # 4 x 25,000 rows
    .venv/bin/python benchmarks/bench_views.py --shards 8 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import common
import duckdb
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, ParquetDataset, collate

PREDICATE = "label % 2 = 0 AND list_sum(mask) > 0"


def epoch(ds: ParquetDataset, batch: int) -> float:
    loader = DataLoader(ds, batch_size=batch, sampler=ChunkedSampler(ds, batch, workers=0),
                        collate_fn=collate)
    result = common.time_epoch(loader, common.batch_rows)
    return result.rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rows", type=int, default=25_000, help="rows per shard")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    data = common.write_dataset(args.shards, args.rows)
    query = f"SELECT tokens, label FROM dataset WHERE {PREDICATE}"
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["UNDERTALE_DUCK_CACHE"] = cache
            con = duckdb.connect()
            files = [str(p) for p in common.shard_paths(data)]
            t0 = time.perf_counter()
            kept = con.execute(
                f"SELECT count(*) FROM read_parquet($f) WHERE {PREDICATE}", {"f": files}
            ).fetchone()
            count_s = time.perf_counter() - t0
            # warm-up: the first open in a process also imports and initialises the view
            # machinery, which is not the indexing pass
            ParquetDataset(data, memory=4096, where="label < 0", format="torch")
            t0 = time.perf_counter()
            view = ParquetDataset(data, memory=4096, query=query, format="torch")
            index_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            ParquetDataset(data, memory=4096, query=query, format="torch")
            reopen_s = time.perf_counter() - t0
            assert kept is not None and len(view) == kept[0]
            plain = ParquetDataset(data, memory=4096, columns=["tokens", "label"], format="torch")
            plain_rate = epoch(plain, args.batch)
            view_rate = epoch(view, args.batch)
            runs.append({
                "rows": plain.__len__(), "kept": len(view),
                "plain_rows_s": plain_rate, "view_rows_s": view_rate,
                "serve_ratio": view_rate / plain_rate,
                "count_s": count_s, "index_s": index_s, "reopen_s": reopen_s,
                "index_ratio": index_s / count_s, "reopen_ratio": reopen_s / index_s,
                # the pass alone: a reopen is the same open (footers, window plan, schema)
                # without the pass
                "pass_ratio": (index_s - reopen_s) / count_s,
            })
    summary = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(common.markdown_table(
        ["rows", "kept", "plain rows/s", "view rows/s", "x plain", "count(*) s", "index s",
         "x count", "pass x count", "reopen s", "x index"],
        [[summary["rows"], summary["kept"], summary["plain_rows_s"], summary["view_rows_s"],
          round(summary["serve_ratio"], 3), round(summary["count_s"], 3),
          round(summary["index_s"], 3), round(summary["index_ratio"], 2),
          round(summary["pass_ratio"], 2),
          round(summary["reopen_s"], 4), round(summary["reopen_ratio"], 3)]],
    ))
    common.RESULTS.mkdir(exist_ok=True)
    out = Path(common.RESULTS) / "views.json"
    out.write_text(json.dumps({"runs": runs, "median": summary}, indent=2))


if __name__ == "__main__":
    main()
