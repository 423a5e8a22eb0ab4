"""Validation cost: full-schema validation time against a plain scan of the same columns.

Writes a tokenized dataset (``id``, ``tokens``, ``mask``, ``label``) of ``--rows`` rows in
``--shards`` shards, then times, in one process and one run:

- ``scan``: ``SELECT count(*), count(id), count(tokens), count(mask), count(label)`` over every
  shard (the plain scan the issue compares against);
- ``decode``: a scan that must decode every value of the same columns (``max(hash(...))``);
- ``validate builtin``: ``ParquetDataset.report(TokenizedClassificationDataset)``;
- ``validate constrained``: the same plus a pattern on ``id``, a range on ``label`` and a length
  on ``tokens`` (all still one aggregate scan, plus the uniqueness query on ``id``).

The output is each time (best of ``--repeat``) and its ratio to ``scan`` and ``decode``.

    .venv/bin/python benchmarks/bench_validation.py                 # 2,000,000 rows
    .venv/bin/python benchmarks/bench_validation.py --rows 8000000 --shards 16
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from undertale_duck import ParquetDataset
from undertale_duck.schema import TokenizedClassificationDataset, Unique

TOKENS = 16
RESULTS = Path(__file__).resolve().parent / "results"


class Constrained(TokenizedClassificationDataset):
    """The built-in schema with one constraint of each common kind."""

    id: Annotated[str, Unique, Field(pattern=r"^fn-\d{8}$")]
    tokens: list[int] = Field(min_length=1, max_length=TOKENS)
    label: int = Field(ge=0, lt=100)


def write_dataset(root: Path, rows: int, shards: int) -> list[str]:
    """Write ``rows`` tokenized rows (vectorized, no per-row Python) in ``shards`` files.

    Args:
        root: Directory to write into (created).
        rows: Total rows.
        shards: Number of shards.

    Returns:
        The shard paths.
    """
    root.mkdir(parents=True, exist_ok=True)
    bounds = [rows * k // shards for k in range(shards + 1)]
    paths = []
    for k in range(shards):
        start, stop = bounds[k], bounds[k + 1]
        n = stop - start
        index = np.arange(start, stop, dtype=np.int64)
        ids = pa.array([f"fn-{i:08d}" for i in range(start, stop)], pa.string())
        offsets = pa.array(np.arange(0, (n + 1) * TOKENS, TOKENS, dtype=np.int32))
        values = ((index[:, None] * 7 + np.arange(TOKENS)) % 30000).astype(np.int32).ravel()
        tokens = pa.ListArray.from_arrays(offsets, pa.array(values))
        mask = pa.ListArray.from_arrays(offsets, pa.array(np.ones(n * TOKENS, dtype=np.int8)))
        table = pa.table({"id": ids, "tokens": tokens, "mask": mask, "label": index % 100})
        path = root / f"part-{k:05d}.parquet"
        pq.write_table(table, path, row_group_size=100_000)
        paths.append(str(path))
    return paths


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Return the best wall time of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and print (and save) the times and ratios.

    Args:
        argv: Command-line arguments (``sys.argv[1:]`` when None).

    Returns:
        The results.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dir", type=Path, help="where to write the data (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS / "validation.json")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_validation_") as tmp:
        root = args.dir or Path(tmp) / "data"
        start = time.perf_counter()
        files = write_dataset(root, args.rows, args.shards)
        took = time.perf_counter() - start
        print(f"wrote {args.rows:,} rows in {args.shards} shards ({took:.1f} s)")

        config = {"threads": args.threads}
        con = duckdb.connect(config={**config, "preserve_insertion_order": True})
        scan_sql = (
            "SELECT count(*), count(id), count(tokens), count(mask), count(label) "
            "FROM read_parquet($files)"
        )
        decode_sql = (
            "SELECT count(*), max(hash(id)), max(hash(tokens)), max(hash(mask)), "
            "max(hash(label)) FROM read_parquet($files)"
        )
        ds = ParquetDataset(root, duckdb_config=config)
        reports = {}

        def validate(schema: type) -> Callable[[], None]:
            def run() -> None:
                reports[schema.__name__] = ds.report(schema)

            return run

        timings = {
            "scan": best(lambda: con.execute(scan_sql, {"files": files}).fetchall(), args.repeat),
            "decode": best(
                lambda: con.execute(decode_sql, {"files": files}).fetchall(), args.repeat
            ),
            "validate builtin": best(validate(TokenizedClassificationDataset), args.repeat),
            "validate constrained": best(validate(Constrained), args.repeat),
        }
        con.close()
        ds.close()
    for report in reports.values():
        assert report.passed, report.summary()
    results: dict[str, Any] = {"rows": args.rows, "shards": args.shards, "seconds": timings}
    results["ratio_to_scan"] = {k: v / timings["scan"] for k, v in timings.items()}
    results["ratio_to_decode"] = {k: v / timings["decode"] for k, v in timings.items()}
    print(f"{'':22}{'seconds':>9}{'x scan':>9}{'x decode':>10}")
    for name, seconds in timings.items():
        print(
            f"{name:22}{seconds:9.3f}{results['ratio_to_scan'][name]:9.2f}"
            f"{results['ratio_to_decode'][name]:10.2f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
