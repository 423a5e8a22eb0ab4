"""Issue 27's attacks that had no test of their own: each on real files, data hashed around it.

- a string weight kept in ``vectors/`` must not outlive the content it weighed: a shard
  rewritten in place as a dictionary bomb (same inode and size, mtime restored) is weighed
  anew and refused, in this process and in a new one;
- a FIFO given to the command line as a side table (``--table``) never hangs it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from undertale_duck import MemoryBudgetError, ParquetDataset

ROOT = Path(__file__).resolve().parents[1]
ROWS = 4096


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def parquet_bytes(values: list[str]) -> bytes:
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "s": values})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=len(values),
                   store_schema=False, write_statistics=False)
    return sink.getvalue().to_pybytes()


def padded(raw: bytes, size: int) -> bytes:
    """The same Parquet file grown to ``size`` bytes (padding before its footer)."""
    assert len(raw) <= size
    footer = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    return raw[:footer] + b"\0" * (size - len(raw)) + raw[footer:]


def test_a_kept_weight_never_passes_a_shard_rewritten_in_place_as_a_bomb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    shard = data / "part.parquet"
    # one long value among short ones: the page headers' bound passes the budget, the
    # exact weight (kept in vectors/) does not, so the query runs
    original = parquet_bytes(["L" * 600_000] + [f"v{i:05d}" for i in range(1, ROWS)])
    shard.write_bytes(original)
    first = ParquetDataset(data, memory=64)
    assert first.sql("SELECT * FROM dataset").num_rows == ROWS
    kept = list((tmp_path / "cache" / "vectors").glob("*.json"))
    assert kept  # the exact weight was kept for the next run
    # rewritten in place: every row a 16 KiB string (2048 x 3 x 16 KiB = 96 MiB > 64 MiB),
    # same inode and size, mtime restored
    st = shard.stat()
    bomb = padded(parquet_bytes(["x" * (16 << 10)] * ROWS), st.st_size)
    with open(shard, "r+b") as fh:
        fh.write(bomb)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = shard.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    before = digest(data)
    with pytest.raises(MemoryBudgetError, match=r"column 's' of shard .*part\.parquet"):
        ParquetDataset(data, memory=64).sql("SELECT * FROM dataset")
    code = (
        "from undertale_duck import ParquetDataset, MemoryBudgetError\n"
        "try:\n"
        f"    ParquetDataset({str(data)!r}, memory=64).sql('SELECT * FROM dataset')\n"
        "    print('RAN')\n"
        "except MemoryBudgetError:\n"
        "    print('REFUSED')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip().splitlines()[-1] == "REFUSED"
    assert digest(data) == before


def test_a_fifo_side_table_never_hangs_the_command_line(tmp_path: Path) -> None:
    from support import datagen

    data = tmp_path / "data"
    datagen.write_shards(data, [20, 10], row_group_size=10)
    before = digest(data)
    fifo = tmp_path / "keep.parquet"
    os.mkfifo(fifo)
    query = "SELECT dataset.id FROM dataset JOIN keep k ON dataset.label = k.label"
    # in a child with a timeout: a FIFO that blocked would hang the suite otherwise
    out = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "sql", str(data), "SELECT count(*) FROM "
         "dataset_view", "--query", query, "--table", f"keep={fifo}"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--table keep" in lines[0] and "not a regular file" in lines[0]
    assert "Traceback" not in out.stderr
    assert digest(data) == before
