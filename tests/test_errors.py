from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen, footer

from undertale_duck import (
    CorruptShardError,
    NotParquetError,
    ParquetDataset,
    QueryError,
    ShardChangedError,
    SourceError,
    UndertaleDuckError,
)


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(SourceError, match="does not exist") as info:
        ParquetDataset(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(SourceError, match="does not exist"):
        ParquetDataset([missing])


def test_a_glob_through_a_directory_named_with_brackets_says_how_to_escape(
    tmp_path: Path,
) -> None:
    # "data[1]/*.parquet" looks in "data1": "no Parquet files match" alone left the user
    # staring at a directory that does exist
    data = tmp_path / "data[1]"
    datagen.write_shards(data, [4, 3])
    with pytest.raises(SourceError, match="no Parquet files match") as info:
        ParquetDataset(str(data / "*.parquet"))
    escaped = str(tmp_path / "data[[]1]" / "*.parquet")
    assert f"{data} exists, but [ and ] are glob characters" in str(info.value)
    assert repr(escaped) in str(info.value)
    assert len(ParquetDataset(escaped)) == 7  # the hint's pattern reads the directory
    with pytest.raises(SourceError, match="no Parquet files match") as info:
        ParquetDataset(str(tmp_path / "other[1]" / "*.parquet"))
    assert "glob characters" not in str(info.value)  # no such directory: no hint


def test_empty_directory_and_empty_glob(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="holds no Parquet files") as info:
        ParquetDataset(tmp_path)
    assert str(tmp_path) in str(info.value)
    (tmp_path / "_SUCCESS").write_text("")
    with pytest.raises(SourceError, match="holds no Parquet files"):
        ParquetDataset(tmp_path)
    with pytest.raises(SourceError, match="no Parquet files match"):
        ParquetDataset(str(tmp_path / "*.parquet"))
    with pytest.raises(SourceError, match="empty list"):
        ParquetDataset([])


def test_nested_directory_hint(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path / "year=2024", [5])
    with pytest.raises(SourceError, match=r"\*\*/\*\.parquet"):
        ParquetDataset(tmp_path)
    assert len(ParquetDataset(str(tmp_path / "**" / "*.parquet"))) == 5


def test_not_parquet(tmp_path: Path) -> None:
    bad = tmp_path / "data.parquet"
    bad.write_text("id,label\n1,2\n")
    for source in (bad, tmp_path, [bad]):
        with pytest.raises(NotParquetError) as info:
            ParquetDataset(source)
        assert str(bad) in str(info.value)
        assert isinstance(info.value, UndertaleDuckError)


def test_truncated_shard(tmp_path: Path) -> None:
    paths = datagen.write_shards(tmp_path, [50, 50, 50])
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptShardError) as info:
        ParquetDataset(tmp_path)
    assert str(paths[1]) in str(info.value)
    assert info.value.path == str(paths[1])


def test_path_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    good = tmp_path / "good"
    datagen.write_shards(good, [5])
    bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xff")
    os.mkdir(bad)
    os.link(good / "part-00000.parquet", os.path.join(bad, "part-00000.parquet"))
    for source in (bad, [os.path.join(bad, "part-00000.parquet")], bad + "/*.parquet"):
        with pytest.raises(SourceError, match="not valid UTF-8") as info:
            ParquetDataset(source)
        assert not isinstance(info.value, CorruptShardError)
        assert info.value.path == os.path.join(bad, "part-00000.parquet")


def test_other_readers_failing_on_a_good_shard_do_not_blame_it(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [20, 20])
    ds = ParquetDataset(tmp_path)
    # the shards are good Parquet: CSV and JSON readers failing on them is the query's doing
    for function in ("read_csv", "read_json"):
        with pytest.raises(QueryError) as info:
            ds.sql(f"SELECT count(*) FROM {function}('{tmp_path}/*.parquet')")
        assert not isinstance(info.value, CorruptShardError)
    # a shard whose pages are corrupt is still the one blamed
    shard = tmp_path / "part-00001.parquet"
    data = bytearray(shard.read_bytes())
    for k in range(4, len(data) // 2):
        data[k] = (data[k] * 7 + 13) % 256
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError) as corrupt:
        ParquetDataset(tmp_path).sql("SELECT * FROM dataset")
    assert corrupt.value.path == str(shard)


def _scribble_page_body(path: Path, group: int, column: str) -> None:
    """Overwrite the body of ``column``'s first page in row group ``group``, keeping its header."""
    file = pq.ParquetFile(path)
    chunk = file.metadata.row_group(group).column(file.schema_arrow.get_field_index(column))
    data = bytearray(path.read_bytes())
    at = chunk.data_page_offset
    reader = footer._Reader(bytes(data[at : at + chunk.total_compressed_size]))
    header = reader.struct()
    body = at + reader.pos
    data[body : body + footer.get(header, 3)] = bytes(
        (k * 7 + 13) % 256 for k in range(footer.get(header, 3))
    )
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression", ["zstd", "snappy"])
def test_sql_blames_a_shard_whose_later_row_group_fails_to_decompress(
    tmp_path: Path, compression: str
) -> None:
    # DuckDB names the file ("Failed to read file ...: ZSTD Decompression failure") while the
    # shard's footer and first rows read fine: it was a QueryError, as for a query whose
    # read_csv fails on a good shard, because the message does not say "parquet"
    rows = list(range(96))
    for k, part in enumerate((rows[:32], rows[32:])):
        table = pa.table({"idx": part, "text": [f"value-{i:06d}-" + "x" * (i % 7) for i in part]})
        pq.write_table(
            table, tmp_path / f"part-{k}.parquet", row_group_size=32,
            compression=compression, use_dictionary=False,
        )
    bad = tmp_path / "part-1.parquet"
    _scribble_page_body(bad, 1, "text")  # rows 64..95; rows 32..63 are intact
    ds = ParquetDataset(tmp_path, memory=64)
    for query in ("SELECT * FROM dataset", "SELECT sum(length(text)) FROM dataset"):
        with pytest.raises(CorruptShardError) as info:
            ds.sql(query)
        assert info.value.path == str(bad)
    assert ds.sql("SELECT sum(idx) AS s FROM dataset").column("s").to_pylist() == [sum(rows)]
    # other readers failing on the good shard are still the query's error
    good = tmp_path / "part-0.parquet"
    with pytest.raises(QueryError) as other:
        ds.sql(f"SELECT count(*) FROM read_csv('{good}')")
    assert not isinstance(other.value, CorruptShardError)


def test_sql_failing_on_a_page_without_naming_a_file_says_how_to_find_the_shard(
    tmp_path: Path,
) -> None:
    # a garbled page header in a later row group: DuckDB says only "TProtocolException:
    # Invalid data" (no file), and the shard's footer and first rows read fine
    rows = list(range(64))
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.table({"idx": rows}), path, row_group_size=32, use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(1).column(0)
    data = bytearray(path.read_bytes())
    for k in range(chunk.data_page_offset, chunk.data_page_offset + 6):
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(QueryError) as info:
        ParquetDataset(tmp_path).sql("SELECT sum(idx) FROM dataset")
    assert "describe" in str(info.value) and "--scan" in str(info.value)
    # an error in the SQL itself gets no such advice
    with pytest.raises(QueryError) as sql_error:
        ParquetDataset(tmp_path).sql("SELECT nosuchcolumn FROM dataset")
    assert "--scan" not in str(sql_error.value)


def test_corrupt_data_page_names_shard_and_rows(tmp_path: Path) -> None:
    paths = datagen.write_shards(tmp_path, [64, 64], row_group_size=32, compression="zstd")
    data = bytearray(paths[1].read_bytes())
    # scribble over the middle of the file (data pages), keep the footer intact
    for k in range(200, 1200):
        data[k] = (data[k] * 7 + 13) % 256
    paths[1].write_bytes(bytes(data))
    os.utime(paths[1], ns=(0, 0))
    ds = ParquetDataset(tmp_path, window_bytes=1)
    assert ds[0]["id"] == "row-00000000"  # the intact shard still reads
    with pytest.raises(CorruptShardError) as info:
        [ds[i] for i in range(64, 128)]
    message = str(info.value)
    assert str(paths[1]) in message
    assert info.value.rows is not None and 64 <= info.value.rows[0] < 128
    assert ds[63]["id"] == "row-00000063"


def test_shard_replaced_after_open(tmp_path: Path) -> None:
    paths = datagen.write_shards(tmp_path, [30, 30])
    # no read-ahead: shard 1's window must be read from disk after the rewrite (a window
    # read ahead before it would be served from the cache, consistently the old version)
    ds = ParquetDataset(tmp_path, read_ahead=False)
    assert ds[0]["id"] == "row-00000000"
    datagen.write_shards(tmp_path, [30, 31])  # shard 1 is rewritten with another row count
    with pytest.raises(ShardChangedError, match="part-00001"):
        ds[45]
    paths[0].unlink()
    ds2 = ParquetDataset(tmp_path)
    assert len(ds2) == 31
    ds.refresh()
    assert len(ds) == 31


def test_no_raw_traceback_from_cli_like_use(tmp_path: Path) -> None:
    # the error type a user sees is ours, even from a fresh interpreter
    code = (
        "import undertale_duck as u\n"
        "try:\n    u.ParquetDataset('/definitely/missing')\n"
        "except u.UndertaleDuckError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("SourceError dataset source /definitely/missing does not exist")
