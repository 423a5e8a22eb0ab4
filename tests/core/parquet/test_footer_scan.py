"""The footer gate on footers of very many row groups: one walk, constant memory, same verdicts."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from support import hostile_files as hf

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import footers

GROUPS = 5_000


def _many_groups(path: Path, groups: int = GROUPS) -> None:
    """One-row row groups of two integer columns, values a function of the row index."""
    table = pa.table({
        "a": pa.array(range(groups), pa.int64()),
        "b": pa.array([3 * i + 1 for i in range(groups)], pa.int32()),
    })
    pq.write_table(table, path, row_group_size=1)


def _footer(path: Path) -> bytes:
    data = path.read_bytes()
    (length,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - length : -8]


def test_shard_of_many_one_row_groups_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "many.parquet"
    _many_groups(path)
    ds = ParquetDataset(path, memory=8)
    assert len(ds) == GROUPS
    for i in (0, 1, 2_777, GROUPS - 1):
        assert ds[i] == {"a": i, "b": 3 * i + 1}
    assert ds.__getitems__(list(range(0, GROUPS, 97))) == [
        {"a": i, "b": 3 * i + 1} for i in range(0, GROUPS, 97)
    ]


def test_footer_walk_builds_nothing_per_column_chunk(tmp_path: Path) -> None:
    # 10,000 column chunks once became about 40 dicts and lists each (hundreds of MiB at
    # 100,000 row groups); the walk now keeps a few values whatever the footer holds
    path = tmp_path / "many.parquet"
    _many_groups(path)
    footer = _footer(path)
    tracemalloc.start()
    try:
        known = footers.footer_chunks_known(footer)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert known
    assert peak < 256 << 10, f"walking a {len(footer)}-byte footer peaked at {peak} bytes"


def test_footer_walk_keeps_the_gate_verdicts(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(
        pa.table({"a": pa.array(range(40), pa.int64()), "s": [str(i) for i in range(40)]}),
        src,
        row_group_size=8,
    )
    assert footers.scan_footer(_footer(src)) == footers.FooterScan(False, True)
    codec = tmp_path / "codec.parquet"
    hf.chunk_codec(src, codec, 99)  # pyarrow's accessors abort on this codec
    assert footers.scan_footer(_footer(codec)) == footers.FooterScan(False, False)
    assert not footers.chunks_known(str(codec), codec.stat().st_size)
    keyed = tmp_path / "keyed.parquet"
    hf.column_key_crypto_metadata(src, keyed)
    assert footers.scan_footer(_footer(keyed)) == footers.FooterScan(True, True)
    assert footers.scan_footer(_footer(src)[:-3]) is None  # truncated: not parseable
