from __future__ import annotations

import tempfile
from pathlib import Path

import datagen
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck import CorruptShardError, ParquetDataset, SourceError
from undertale_duck.core import arrow_read


@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 90), min_size=1, max_size=3),
    group=st.integers(1, 40),
    window=st.integers(200, 6000),
    columns=st.sampled_from([None, ["tokens", "label"], ["category", "id", "point"]]),
)
def test_pyarrow_and_duckdb_reads_are_equal(
    sizes: list[int], group: int, window: int, columns: list[str] | None
) -> None:
    root = Path(tempfile.mkdtemp(prefix="arrow-read-"))
    datagen.write_shards(root, sizes, row_group_size=group)
    ds = ParquetDataset(root, window_bytes=window, columns=columns, read_ahead=False)
    reader = ds.reader
    for position, w in enumerate(ds.windows):
        shard = ds.source.shards[w.shard]
        direct = arrow_read.read(shard, w, ds.source.columns)
        assert direct is not None
        assert all(c.num_chunks == 1 for c in direct.columns)
        assert direct.get_total_buffer_size() <= 2 * direct.nbytes + 4096  # no whole groups
        reader.direct = True
        fast = reader.read(position)
        reader.direct = False
        slow = reader.read(position)
        assert fast.equals(slow, check_metadata=False), position
    expected = datagen.expected(sum(sizes))
    wanted = columns or list(expected[0]) if expected else []
    assert ds.__getitems__(list(range(len(ds)))) == [
        {k: r[k] for k in wanted} for r in expected
    ]


def test_unusual_names_and_missing_columns_go_through_duckdb(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a.b": [1, 2], "c": [3, 4]}), tmp_path / "x.parquet")
    ds = ParquetDataset(tmp_path)
    shard, window = ds.source.shards[0], ds.windows[0]
    assert arrow_read.read(shard, window, ["a.b", "c"]) is None
    assert ds.__getitems__([1, 0]) == [{"a.b": 2, "c": 4}, {"a.b": 1, "c": 3}]
    assert arrow_read.read(shard, window, ["nope"]) is None


def test_errors_are_the_duckdb_path_errors(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [50, 50], row_group_size=10)
    pq.write_table(datagen.table(50, 100).drop_columns(["label"]), tmp_path / "part-00001.parquet",
                   row_group_size=10)
    ds = ParquetDataset(tmp_path, window_bytes=500)
    with pytest.raises(SourceError, match="does not match the dataset's columns"):
        ds[60]
    path = tmp_path / "part-00000.parquet"
    data = bytearray(path.read_bytes())
    data[200:600] = bytes(400)  # zero the first data pages
    path.write_bytes(bytes(data))
    broken = ParquetDataset(path, window_bytes=500)
    with pytest.raises(CorruptShardError):
        broken.__getitems__(list(range(50)))
