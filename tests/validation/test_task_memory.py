"""Each validation task stays within the memory budget plus a fixed footprint, wherever it runs.

The dataset is sixteen times the budget (``memory=``). Each task measures its own process's
peak resident memory (``resource.getrusage``) and returns it with its result; the executor
keeps them in ``task_peaks``. The fixed footprint is what the process holds before it reads
a row: the interpreter, Ray's worker (or torch in a rank), DuckDB, pyarrow and pydantic
(214 MiB measured for a fresh Ray worker on the development machine). A rank of a
``torch.distributed`` job measures its own footprint after a warm-up run instead: a fixed
whole-process figure varied by about 80 MiB between runs on one machine.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Annotated

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field

from undertale_duck import schema
from undertale_duck.validation import runner

MIB = 1 << 20
#: The memory budget of one task, in MiB.
BUDGET = 16
#: What a task's process holds before it reads a row (see the module's docstring).
RAY_FOOTPRINT = 320 * MIB
#: What a rank's task may hold beyond the budget, in MiB, above the rank's own footprint
#: measured after a warm-up run (24-38 MiB measured: row groups being decoded, the exchanged
#: keys); half of the 128 MiB a rank's task reads, so a task holding its data fails.
TASK_OVERHEAD = 48
#: Shards and rows: 1 KiB of incompressible text per row, 16 MiB per shard, 256 MiB in all.
SHARDS, ROWS, ROW_BYTES = 16, 16384, 1024


class Big(BaseModel):
    """A schema with a uniqueness check (its keys are exchanged by hash partition)."""

    id: Annotated[int, schema.Unique]
    text: str = Field(min_length=10)


def _text(index: np.ndarray) -> pa.Array:
    """Each row's text: hex of a 64-bit mix of (row index, position), a function of the row."""
    i = index.astype(np.uint64)[:, None]
    j = np.arange(ROW_BYTES // 16, dtype=np.uint64)[None, :]
    x = i * np.uint64(0x9E3779B97F4A7C15) + j * np.uint64(0xBF58476D1CE4E5B9) + np.uint64(1)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(29)
    hexed = x.view(np.uint8).tobytes().hex()
    width = ROW_BYTES
    return pa.array([hexed[k * width:(k + 1) * width] for k in range(len(index))], pa.string())


def _write(root: Path, shards: int, rows: int, row_group: int) -> Path:
    """``shards`` shards of ``rows`` rows each (row ``i``: id ``i``, its text), uncompressed."""
    for k in range(shards):
        index = np.arange(k * rows, (k + 1) * rows)
        table = pa.table({"id": pa.array(index, pa.int64()), "text": _text(index)})
        pq.write_table(table, root / f"part-{k:05d}.parquet", row_group_size=row_group,
                       compression="none")
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _write(tmp_path_factory.mktemp("big"), SHARDS, ROWS, 1024)
    assert sum(p.stat().st_size for p in root.iterdir()) > 15 * BUDGET * MIB
    return root


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two shards of the same schema, 1/64 of ``big``'s rows each."""
    return _write(tmp_path_factory.mktemp("small"), 2, ROWS // 64, 128)


@pytest.fixture(scope="module", autouse=True)
def own_home(ray_home: Path) -> Path:
    """Ray started by this module's tests keeps its token in the tests' one Ray home."""
    return ray_home


@pytest.mark.heavy
def test_ray_tasks_stay_within_the_budget_plus_the_footprint(big: Path) -> None:
    pytest.importorskip("ray")
    from undertale_duck.validation.ray_executor import RayExecutor

    executor = RayExecutor(init_options={"num_cpus": 2, "object_store_memory": 200 * MIB})
    report = runner.report_for(big, Big, memory=BUDGET, executor=executor)
    assert report.passed and report.rows == SHARDS * ROWS
    assert len(executor.task_peaks) == SHARDS  # one task per shard, each measured
    assert 0 < max(executor.task_peaks) <= BUDGET * MIB + RAY_FOOTPRINT, executor.task_peaks


def _rank(rank: int, port: int, source: str, small: str, out: str) -> None:
    import torch.distributed as dist

    from undertale_duck.core.runtime import peak_rss
    from undertale_duck.validation.executors import TorchDistributedExecutor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        # A run over a small dataset first: what a task holds beyond the budget whatever the
        # data (modules imported on first use, DuckDB's and gloo's first allocations) is then
        # part of this rank's measured footprint, as torch's import is.
        runner.report_for(small, Big, memory=BUDGET, executor=TorchDistributedExecutor())
        footprint = peak_rss()
        executor = TorchDistributedExecutor()
        report = runner.report_for(source, Big, memory=BUDGET, executor=executor)
        Path(out, f"rank-{rank}.json").write_text(json.dumps({
            "passed": report.passed, "peaks": list(executor.task_peaks),
            "footprint": footprint}))
    finally:
        dist.destroy_process_group()


@pytest.mark.heavy
def test_rank_processes_stay_within_the_budget_plus_the_footprint(
    big: Path, small: Path, tmp_path: Path
) -> None:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    mp.spawn(_rank, args=(port, str(big), str(small), str(tmp_path)), nprocs=2, join=True)
    zero, one = (json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1))
    assert zero["peaks"] == one["peaks"] and zero["passed"] and one["passed"]
    assert len(zero["peaks"]) == 2  # one task per rank (task r on rank r), each measured
    for rank, state in enumerate((zero, one)):  # the task's peak above its rank's footprint
        assert 0 < zero["peaks"][rank] - state["footprint"] <= (BUDGET + TASK_OVERHEAD) * MIB, (
            rank, zero["peaks"][rank], state["footprint"])
