"""A view's indexing pass over remote shards fetches only the columns its filter and joins need."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen
from support.storage_server import S3Server

from undertale_duck import ParquetDataset
from undertale_duck.core.views.check import check

ROWS = [6000, 4000]
WIDE = 512  # bytes of the wide column per row


def _wide(i: int) -> bytes:
    """Row ``i``'s wide value: incompressible bytes, a function of the row index."""
    return b"".join(hashlib.sha256(f"{i}:{k}".encode()).digest() for k in range(WIDE // 32))


def _write(directory: Path) -> list[Path]:
    """Shards of datagen rows plus a wide ``payload`` column (row groups of 1000 rows)."""
    directory.mkdir(parents=True)
    paths, start = [], 0
    for k, size in enumerate(ROWS):
        table = datagen.table(start, start + size).select(["id", "label", "score"])
        payload = pa.array([_wide(i) for i in range(start, start + size)], pa.binary())
        path = directory / f"part-{k:05d}.parquet"
        pq.write_table(table.append_column("payload", payload), path, row_group_size=1000,
                       compression="none")
        paths.append(path)
        start += size
    return paths


def _column_bytes(paths: list[Path], name: str) -> int:
    total = 0
    for path in paths:
        meta = pq.read_metadata(path)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            total += sum(group.column(c).total_compressed_size
                         for c in range(group.num_columns)
                         if group.column(c).path_in_schema == name)
    return total


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    server.bucket("viewindex")
    yield server
    server.close()


def test_where_view_indexing_fetches_only_the_filter_columns(
    s3: S3Server, tmp_path: Path
) -> None:
    paths = _write(tmp_path / "src")
    url = s3.upload(tmp_path / "src", "s3://viewindex/where")
    wide = _column_bytes(paths, "payload")
    total = sum(p.stat().st_size for p in paths)
    assert wide > 0.9 * total  # the wide column is nearly all of the dataset
    ds = ParquetDataset(url, memory=256, storage_options=s3.options(),
                        cache_dir=tmp_path / "cache", where="label = 3", read_ahead=False)
    stats = ds.storage_stats
    assert stats is not None
    # footers at open, then the label column's chunks of each shard: no whole shard
    assert stats.downloads == 0 and stats.background_downloads == 0
    assert stats.bytes < wide / 10
    assert stats.range_windows == len(ROWS)  # one range read per shard indexed
    kept = [i for i in range(sum(ROWS)) if i % 7 == 3]
    assert len(ds) == len(kept)
    for n in (0, 1, len(kept) // 2, len(kept) - 1):
        row = ds[n]
        i = kept[n]
        assert row["id"] == datagen.row(i)["id"] and row["label"] == 3
        assert row["payload"] == _wide(i)


def test_join_view_indexing_reads_its_join_keys(s3: S3Server, tmp_path: Path) -> None:
    paths = _write(tmp_path / "src")
    url = s3.upload(tmp_path / "src", "s3://viewindex/join")
    side = pa.table({"id": [datagen.row(i)["id"] for i in range(0, sum(ROWS), 5)]})
    ds = ParquetDataset(url, memory=256, storage_options=s3.options(),
                        cache_dir=tmp_path / "cache", read_ahead=False,
                        query="SELECT id, score FROM dataset JOIN keep USING (id)",
                        tables={"keep": side})
    stats = ds.storage_stats
    assert stats is not None and stats.downloads == 0
    assert stats.bytes < _column_bytes(paths, "payload") / 10
    kept = list(range(0, sum(ROWS), 5))
    assert len(ds) == len(kept)
    assert [ds[n]["id"] for n in (0, 7, len(kept) - 1)] == [
        datagen.row(kept[n])["id"] for n in (0, 7, len(kept) - 1)
    ]


@pytest.mark.parametrize(
    ("query", "reads"),
    [
        ("SELECT payload FROM dataset WHERE label > 2", {"label"}),
        ("SELECT id FROM dataset", set()),
        ("SELECT d.payload FROM dataset AS d JOIN k ON d.id = k.id WHERE score > 1",
         {"id", "score"}),
        ("SELECT payload FROM dataset JOIN k USING (id)", {"id"}),
        ("SELECT payload FROM dataset WHERE COLUMNS(*) IS NOT NULL", None),
        ("SELECT id FROM dataset WHERE COLUMNS('lab.*') > 1", None),
        ("SELECT id FROM dataset WHERE \"SCORE\" > 1 AND dataset.label < 3",
         {"score", "label"}),
    ],
)
def test_index_reads_the_filter_and_join_columns(query: str, reads: set[str] | None) -> None:
    view = check(query, {"k": None})
    columns = ["id", "label", "score", "payload"]
    got = {c for c in columns if view.index_reads(c)}
    assert got == (set(columns) if reads is None else reads)
