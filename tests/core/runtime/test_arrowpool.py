"""Small budgets make pyarrow hand freed memory back at once; a pool the user chose wins.

The pool is process-wide, so each case runs in a child process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CHILD = """
import json, sys
import pyarrow as pa
from undertale_duck import ParquetDataset
seen = [pa.default_memory_pool().backend_name]
for memory in sys.argv[2:]:
    ds = ParquetDataset(sys.argv[1], memory=float(memory))
    rows = ds.__getitems__(list(range(len(ds))))
    assert [r["i"] for r in rows] == list(range(len(ds))), "wrong rows"
    ds.close()
    seen.append(pa.default_memory_pool().backend_name)
print(json.dumps(seen))
"""


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pool")
    pq.write_table(pa.table({"i": pa.array(range(3000), pa.int64())}), root / "a.parquet",
                   row_group_size=500)
    return root


def _pools(data: Path, *memory: str, pool: str | None = None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool
    done = subprocess.run([sys.executable, "-c", CHILD, str(data), *memory], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def test_a_large_budget_leaves_the_pool_and_a_small_one_returns_memory(data: Path) -> None:
    start, large, small, after = _pools(data, "4096", "64", "4096")
    assert large == start  # 4096 MiB holds what the allocator keeps: nothing changes
    assert small == ("jemalloc" if _has_jemalloc() else start)
    assert after == small  # process-wide and kept: buffers stay with the pool that made them


def test_budget_zero_counts_as_small(data: Path) -> None:
    start, zero = _pools(data, "0")
    assert zero == ("jemalloc" if _has_jemalloc() else start)


def test_a_pool_chosen_in_the_environment_wins(data: Path) -> None:
    assert _pools(data, "64", pool="system") == ["system", "system"]
