"""The decode bound of a row group from its page headers: never below what pyarrow decodes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck.core.parquet import ShardPages


def write(path: Path, table: pa.Table, **kw: object) -> ShardPages:
    pq.write_table(table, path, **kw)  # type: ignore[arg-type]
    meta = pq.read_metadata(path)
    return ShardPages(str(path), meta, table.column_names, table.schema)


def decoded(path: Path, group: int) -> int:
    return int(pq.ParquetFile(path).read_row_group(group).get_total_buffer_size())


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 3000),
    width=st.integers(0, 40),
    distinct=st.integers(1, 50),
    tokens=st.integers(0, 64),
    compression=st.sampled_from(["snappy", "zstd", "none"]),
)
def test_bound_covers_the_decode(
    rows: int, width: int, distinct: int, tokens: int, compression: str
) -> None:
    index = np.arange(rows)
    table = pa.table({
        "id": pa.array([f"{i % distinct:0{width}d}" for i in index.tolist()], pa.string()),
        "tokens": pa.array([[i % 100] * tokens for i in index.tolist()], pa.list_(pa.int32())),
        "label": pa.array(index, pa.int64()),
    })
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part.parquet"
        pages = write(path, table, compression=compression, row_group_size=1000)
        for group in range(pq.read_metadata(path).num_row_groups):
            bound = pages.bound(group)
            assert bound is not None
            assert bound >= decoded(path, group)


def test_distinct_strings_are_weighed_by_their_longest_value(tmp_path: Path) -> None:
    rows = 10_000
    table = pa.table({"id": pa.array([f"row-{i:09d}" for i in range(rows)], pa.string())})
    path = tmp_path / "ids.parquet"
    pages = write(path, table, row_group_size=rows)
    meta = pq.read_metadata(path)
    assert "RLE_DICTIONARY" in meta.row_group(0).column(0).encodings
    bound = pages.bound(0)
    assert bound is not None and bound >= decoded(path, 0)
    # each value as long as the longest (13 bytes) plus its offsets, not the whole dictionary
    # page (about 170 KB) per value
    assert bound < 100 * rows
