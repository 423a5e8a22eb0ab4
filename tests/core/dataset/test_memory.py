"""Memory under load: the cache stays in its budget, RSS stays bounded, huge rows are served."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from undertale_duck import ParquetDataset

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_memory.py"
MIB = 1 << 20

#: Rows the soak's consumer holds at once (its DataLoader batch) and bytes per row: what the
#: test itself holds, outside the dataset's budget (Python ``bytes`` of each row, and the
#: batch list being checked while the next is built).
BATCH = 8
ROW = MIB


def test_row_larger_than_the_whole_budget_is_served(tmp_path: Path) -> None:
    big = 3 * MIB  # the budget is 1 MiB
    rows = [bytes([k]) * (big if k == 1 else 10) for k in range(4)]
    pq.write_table(pa.table({"k": list(range(4)), "blob": rows}), tmp_path / "a.parquet",
                   row_group_size=1)
    ds = ParquetDataset(tmp_path, memory=1)
    for _ in range(2):
        for k in (0, 1, 2, 3, 1):
            assert ds[k] == {"k": k, "blob": rows[k]}
    assert ds.__getitems__([1, 0, 1]) == [{"k": k, "blob": rows[k]} for k in (1, 0, 1)]
    stats = ds.cache_stats
    assert stats.oversized >= 1  # served, never kept
    assert stats.bytes <= stats.limit == MIB


def test_cache_never_exceeds_its_limit_under_random_access(tmp_path: Path) -> None:
    blob = 64 * 1024
    n = 200
    pq.write_table(
        pa.table({"i": list(range(n)), "blob": [bytes([i % 256]) * blob for i in range(n)]}),
        tmp_path / "a.parquet",
        row_group_size=4,
    )
    ds = ParquetDataset(tmp_path, memory=1)  # a 1 MiB cache over about 12.5 MiB
    rng = random.Random(3)
    for _ in range(300):
        i = rng.randrange(n)
        assert ds[i] == {"i": i, "blob": bytes([i % 256]) * blob}
        stats = ds.cache_stats
        assert stats.bytes <= stats.limit
    assert ds.cache_stats.evictions > 0


def _soak(data: Path, memory: int, epochs: int, out: Path) -> dict[str, Any]:
    command = [
        sys.executable, str(BENCH), "--rows", "336", "--row-kb", "1024", "--shards", "4",
        "--group-rows", "2", "--window-kb", "4096", "--memory", str(memory),
        "--epochs", str(epochs), "--batch", str(BATCH), "--data", str(data), "--json", str(out),
        "--plot", "",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.mark.heavy
def test_soak_peak_rss_is_bounded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    memory = 64
    loaded = _soak(data, memory, 3, tmp_path / "m64.json")
    size = loaded["rows"] * loaded["row_bytes"]
    assert size >= 5 * memory * MIB  # the dataset is at least 5x the budget
    assert loaded["checked"] == 2 * 3 * loaded["rows"] and loaded["bad"] == 0
    assert loaded["cache"]["evictions"] > 0 and loaded["cache"]["bytes"] <= memory * MIB
    over = loaded["peak"] - loaded["footprint"]  # footprint: warmed up on a tiny dataset
    bound = memory * MIB + 2 * BATCH * ROW
    print(f"footprint {loaded['footprint'] / MIB:.0f} MiB (imports {loaded['imports'] / MIB:.0f}"
          f" MiB), peak +{over / MIB:.0f} MiB")
    assert over <= bound, f"peak is {over / MIB:.0f} MiB over the footprint (bound {bound / MIB})"
    # bounded, not growing: each pattern's last epoch peaks no higher than its first
    peaks = loaded["phase_peak"]
    for mode in ("shuffled", "random"):
        assert peaks[f"{mode}-2"] <= peaks[f"{mode}-0"] + 32 * MIB, peaks
    # the cache adds at most its budget: compare with the same soak and no cache at all
    bare = _soak(data, 0, 1, tmp_path / "m0.json")
    assert bare["bad"] == 0 and bare["cache"]["bytes"] == 0
    cache_cost = loaded["peak"] - bare["peak"]
    print(f"memory=0 peak +{(bare['peak'] - bare['footprint']) / MIB:.0f} MiB")
    assert cache_cost <= memory * MIB, (
        f"the 64 MB cache cost {cache_cost / MIB:.0f} MiB of RSS"
    )
