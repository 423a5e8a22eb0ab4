"""Validation executors: one process against 2 torch.distributed ranks and a local Ray (2 workers).

Writes ``--rows`` rows in ``--shards`` shards with planted problems (ids duplicated across
shards, nulls, out-of-range labels, names that miss their pattern), validates them

- ``one process``: ``report_for(...)`` (the default, in-process executor);
- ``2 ranks``: two processes joined by a ``gloo`` process group, each calling ``report_for``
  with ``TorchDistributedExecutor()`` (the time is rank 0's, from a barrier to its report);
- ``ray (2 workers)``: ``RayExecutor()`` on a local Ray started with 2 CPUs and a capped object
  store (Ray's start-up is timed apart and not counted),

checks that the three reports are the same (all but ``seconds``) and prints each time and its
ratio to one process; the results go to ``benchmarks/results/validation_executors.{json,md}``.
On a machine with few cores the distributed runs only show their overhead.

    .venv/bin/python benchmarks/bench_validation_executors.py
    .venv/bin/python benchmarks/bench_validation_executors.py --rows 4000000 --shards 32
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from undertale_duck.schema import Unique
from undertale_duck.validation import runner
from undertale_duck.validation.executors import TorchDistributedExecutor

RESULTS = Path(__file__).resolve().parent / "results"


class Rows(BaseModel):
    """The benchmark's schema: a unique id, a pattern, a range, a nullable range."""

    id: Annotated[int, Unique]
    name: str = Field(pattern=r"^fn-\d{8}$")
    label: int = Field(ge=0, lt=100)
    score: float | None = Field(default=None, ge=0)


def write_dataset(root: Path, rows: int, shards: int) -> list[Path]:
    """Write ``rows`` rows in ``shards`` files; every value a function of the global index."""
    root.mkdir(parents=True, exist_ok=True)
    per = -(-rows // shards)
    paths = []
    for k in range(shards):
        index = np.arange(k * per, min(rows, (k + 1) * per), dtype=np.int64)
        ids = np.where((index % 1000 == 7) & (index >= per), index - per, index)  # duplicates
        names = np.char.add("fn-", np.char.zfill(index.astype(str), 8))
        names = np.where(index % 5000 == 3, "bad", names)
        label = (index % 101).astype(np.int64)
        score = (index % 97).astype(np.float64)
        table = pa.table({
            "id": ids,
            "name": pa.array(names.tolist(), pa.string()),
            "label": label,
            "score": pa.array(score, mask=index % 13 == 0),
        })
        path = root / f"part-{k:05d}.parquet"
        pq.write_table(table, path, row_group_size=50_000)
        paths.append(path)
    return paths


def differences(one: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What differs between two dumped reports (empty when they are the same)."""
    out = [f"{k}: {one[k]!r} != {other.get(k)!r}" for k in one
           if k != "checks" and one[k] != other.get(k)]
    for a, b in zip(one["checks"], other["checks"], strict=False):
        out += [f"{a['check']}({a['column']}).{k}: {a[k]!r} != {b.get(k)!r}"[:2000]
                for k in a if a[k] != b.get(k)]
    if len(one["checks"]) != len(other["checks"]):
        out.append(f"{len(one['checks'])} checks != {len(other['checks'])}")
    return out


def _schema() -> type[BaseModel]:
    """:class:`Rows` under one module name in every process (``__main__`` differs by process)."""
    import bench_validation_executors

    schema: type[BaseModel] = bench_validation_executors.Rows
    return schema


def _dump(report: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(report.model_dump_json(exclude={"seconds"}))
    return data


def _rank(rank: int, port: int, source: str, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        dist.barrier()
        start = time.perf_counter()
        report = runner.report_for(source, _schema(), executor=TorchDistributedExecutor())
        seconds = time.perf_counter() - start
        if rank == 0:
            Path(out, "ranks.json").write_text(json.dumps({"seconds": seconds,
                                                           "report": _dump(report)}))
    finally:
        dist.destroy_process_group()


def time_ranks(source: Path, work: Path) -> tuple[float, dict[str, Any]]:
    """Validate on 2 gloo ranks; return rank 0's time and report."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    mp.spawn(_rank, args=(port, str(source), str(work)), nprocs=2, join=True)
    data = json.loads((work / "ranks.json").read_text())
    return float(data["seconds"]), data["report"]


def time_ray(source: Path, store_mib: int) -> tuple[float, float, dict[str, Any]]:
    """Validate on a local Ray of 2 CPUs; return its start-up time, the time and the report."""
    import ray

    from undertale_duck.validation.ray_executor import LOCAL_DEFAULTS, RayExecutor

    start = time.perf_counter()
    ray.init(num_cpus=2, object_store_memory=store_mib << 20, **LOCAL_DEFAULTS)
    startup = time.perf_counter() - start
    try:
        start = time.perf_counter()
        report = runner.report_for(source, _schema(), executor=RayExecutor())
        seconds = time.perf_counter() - start
    finally:
        ray.shutdown()
    return startup, seconds, _dump(report)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; return (and write) its results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--store-mib", type=int, default=200, help="Ray object store (MiB)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-executors-") as tmp:
        work = Path(tmp)
        source = work / "data"
        write_dataset(source, args.rows, args.shards)
        start = time.perf_counter()
        one = _dump(runner.report_for(source, _schema()))
        one_seconds = time.perf_counter() - start
        ranks_seconds, ranks = time_ranks(source, work)
        startup, ray_seconds, on_ray = time_ray(source, args.store_mib)
    same = {"2 ranks": ranks == one, "ray (2 workers)": on_ray == one}
    result = {
        "rows": args.rows,
        "shards": args.shards,
        "cores": os.cpu_count(),
        "passed": one["passed"],
        "failed_checks": sorted(f"{c['check']}({c['column']})" for c in one["checks"]
                                if not c["passed"]),
        "seconds": {"one process": one_seconds, "2 ranks": ranks_seconds,
                    "ray (2 workers)": ray_seconds, "ray start-up (not counted)": startup},
        "ratio_to_one_process": {"2 ranks": ranks_seconds / one_seconds,
                                 "ray (2 workers)": ray_seconds / one_seconds},
        "reports_equal_one_process": same,
        "differences": {"2 ranks": differences(one, ranks),
                        "ray (2 workers)": differences(one, on_ray)},
    }
    lines = [
        f"# Validation executors: {args.rows:,} rows, {args.shards} shards, "
        f"{os.cpu_count()} cores",
        "",
        "| executor | seconds | ratio to one process | report equals one process |",
        "|---|---:|---:|---|",
        f"| one process | {one_seconds:.2f} | 1.00 | - |",
        f"| 2 ranks (gloo) | {ranks_seconds:.2f} | {ranks_seconds / one_seconds:.2f} | "
        f"{same['2 ranks']} |",
        f"| Ray, 2 workers | {ray_seconds:.2f} | {ray_seconds / one_seconds:.2f} | "
        f"{same['ray (2 workers)']} |",
        "",
        f"Ray's start-up ({startup:.2f} s) is not counted. Failed checks (planted): "
        + ", ".join(result["failed_checks"]),
        "",
    ]
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "validation_executors.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "validation_executors.md").write_text("\n".join(lines))
    if not all(same.values()):
        raise SystemExit("a distributed report differs from the one-process report")
    return result


if __name__ == "__main__":
    main()
