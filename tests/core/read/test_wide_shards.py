"""Shards of thousands of columns: the pyarrow read's footer gate (core/parquet/pages.py)
works per column once, not per column over every column (minutes at 5,000 columns)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import pages

COLUMNS = 4000
ROWS = 3


def _wide(path: Path, columns: int = COLUMNS) -> pa.Table:
    """A one-group shard of int64 columns; column j of row i holds ``i * columns + j``."""
    table = pa.table(
        {f"c{j}": pa.array([i * columns + j for i in range(ROWS)], pa.int64())
         for j in range(columns)}
    )
    pq.write_table(table, path)
    return table


def test_wide_shard_gate_admits_every_column(tmp_path: Path) -> None:
    # no timing is asserted (a loaded machine must not fail it): before the fix this gate
    # took 58 s at 4,000 columns, about 0.1 s after; benchmarks are where speed is measured
    table = _wide(tmp_path / "s.parquet")
    meta = pq.ParquetFile(tmp_path / "s.parquet").metadata
    gate = pages.ShardPages(str(tmp_path / "s.parquet"), meta, table.column_names, table.schema)
    # Every column is a plain int64 leaf: the gate admits them all, leaf j for column j
    assert gate.leaves == [(j, 8) for j in range(COLUMNS)]


def test_wide_shard_rows_are_served(tmp_path: Path) -> None:
    n = 1000  # fewer: the read itself (DuckDB's bind, pyarrow's decode) is linear but slow
    table = _wide(tmp_path / "s.parquet", n)
    ds = ParquetDataset(tmp_path, memory=64)
    try:
        for i in range(ROWS):
            row = ds[i]
            assert [row[f"c{j}"] for j in (0, 1, n - 1)] == [i * n, i * n + 1, i * n + n - 1]
        assert ds.reader.window(0).num_columns == table.num_columns
    finally:
        ds.close()
