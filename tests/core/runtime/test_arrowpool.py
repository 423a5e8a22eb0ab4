"""Arrow's pools: small budgets hand freed memory back at once, our reads live in jemalloc.

A pool the user chose wins. Pools are process-wide, so each case runs in a child process
of its own.
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


HELD = """
import gc, json, sys
import pyarrow as pa
from undertale_duck import ParquetDataset
from undertale_duck.core.read import direct
options = json.loads(sys.argv[2])
# decode batches smaller than a window: the window is joined from them (one copy), as
# windows over 32 MiB are at the default sizes
direct.DECODE_BATCH_BYTES = options.pop("batch_bytes", direct.DECODE_BATCH_BYTES)
je = pa.jemalloc_memory_pool() if sys.argv[3] == "1" else None
start = je.bytes_allocated() if je else 0
ds = ParquetDataset(sys.argv[1], memory=4096, **options)
rows = ds.__getitems__(list(range(len(ds))))
assert [r["i"] for r in rows] == list(range(len(ds))), "wrong rows"
assert [r["t"] for r in rows] == [[i % 7] * (i % 5) for i in range(len(ds))], "wrong lists"
del rows
held = ds.reader.cache.held
grown = (je.bytes_allocated() - start) if je else 0
ds.close()
del ds
gc.collect()
left = (je.bytes_allocated() - start) if je else 0
print(json.dumps({"held": held, "grown": grown, "left": left,
                  "default": pa.default_memory_pool().backend_name}))
"""


@pytest.fixture(scope="module")
def many_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two shards of row groups smaller than a window: each window is joined from batches."""
    root = tmp_path_factory.mktemp("held")
    for k in range(2):
        index = range(k * 4000, (k + 1) * 4000)
        pq.write_table(
            pa.table({"i": pa.array(index, pa.int64()),
                      "t": pa.array([[i % 7] * (i % 5) for i in index], pa.list_(pa.int32()))}),
            root / f"part-{k}.parquet", row_group_size=300,
        )
    return root


def _held(data: Path, options: dict[str, object], *, jemalloc: bool,
          pool: str | None = None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool
    done = subprocess.run(
        [sys.executable, "-c", HELD, str(data), json.dumps(options), "1" if jemalloc else "0"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "options",
    [
        {"batch_bytes": 8192},
        {"where": "i % 3 <> 5"},
        {"where": "i % 3 <> 5", "window_bytes": 40_000},
    ],
    ids=["pyarrow-joined", "duckdb-view", "duckdb-small-windows"],
)
def test_joined_windows_are_held_in_jemalloc_and_leave_with_the_dataset(
    many_groups: Path, options: dict[str, object]
) -> None:
    if not _has_jemalloc():
        pytest.skip("this pyarrow has no jemalloc: held windows stay in the default pool")
    got = _held(many_groups, options, jemalloc=True)
    held = got["held"]
    assert isinstance(held, int) and held > 0
    # every held byte was allocated by jemalloc (padding makes the pool's count larger)
    assert isinstance(got["grown"], int) and got["grown"] >= held, got
    assert got["left"] == 0, got  # closing the dataset frees them
    assert got["default"] != "jemalloc"  # the process's default pool is left alone


def test_a_window_decoded_in_one_batch_is_decoded_into_jemalloc(many_groups: Path) -> None:
    # pyarrow's batch is exactly the window's rows and is held as decoded: pyarrow decoded
    # it into jemalloc (decision 0022), not into the default mimalloc pool
    if not _has_jemalloc():
        pytest.skip("this pyarrow has no jemalloc")
    got = _held(many_groups, {}, jemalloc=True)
    held = got["held"]
    assert isinstance(held, int) and held > 0
    assert isinstance(got["grown"], int) and got["grown"] >= held, got
    assert got["left"] == 0, got
    assert got["default"] != "jemalloc"


def test_a_pool_chosen_in_the_environment_also_holds_the_windows(many_groups: Path) -> None:
    if not _has_jemalloc():
        pytest.skip("this pyarrow has no jemalloc")
    got = _held(many_groups, {"batch_bytes": 8192}, jemalloc=True, pool="system")
    assert got["held"] and got["grown"] == 0, got  # joined, but nothing went to jemalloc
    assert got["default"] == "system"
