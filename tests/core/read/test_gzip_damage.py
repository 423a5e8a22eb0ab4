"""GZIP pages damaged on disk so that gzip's own check fails: pyarrow's codec refuses them,
DuckDB's inflate does not check gzip's CRC-32, so neither read path may serve their bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import pages
from undertale_duck.errors import CorruptShardError

ROWS, GROUP = 300, 100
DAMAGED = 142  # in row group 1 (local rows 100..199)


def _write(path: Path, *, level: int | None, nested: bool = False) -> pa.Table:
    columns: dict[str, pa.Array] = {
        "i": pa.array(np.arange(ROWS, dtype=np.int64)),
        "f": pa.array(np.arange(ROWS, dtype=np.float64) + 0.5),
    }
    if nested:  # a struct is not on pyarrow's allow-list: DuckDB reads every window
        columns["st"] = pa.array([{"a": k} for k in range(ROWS)])
    table = pa.table(columns)
    pq.write_table(table, path, compression="gzip", compression_level=level,
                   use_dictionary=False, write_statistics=False, row_group_size=GROUP)
    return table


def _overwrite_value(path: Path) -> None:
    # stored (level 0) deflate blocks hold the values as written: row 142's float changed in
    # place decompresses fine, and only gzip's CRC-32 says it is not what was written
    raw = bytearray(path.read_bytes())
    at = raw.index(struct.pack("<d", DAMAGED + 0.5))
    raw[at:at + 8] = struct.pack("<d", -1e300)
    path.write_bytes(bytes(raw))


def _flip_bit(path: Path) -> None:
    # one bit flipped in the compressed body of column "f"'s page in row group 1: the first
    # flip (in file order) after which pyarrow's gzip codec refuses the file
    meta = pq.read_metadata(path)
    chunk = meta.row_group(1).column(1)
    start, end = pages.chunk_range(chunk)
    with path.open("rb") as fh:
        page = next(pages.page_headers(fh, start, end))
    good = path.read_bytes()
    for at in range(page.body + 10, page.body + page.packed - 8):  # the deflate data
        raw = bytearray(good)
        raw[at] ^= 0x08
        path.write_bytes(bytes(raw))
        try:
            pq.read_table(path)
        except OSError as exc:
            if "GZipCodec failed" in str(exc):
                return
    raise AssertionError("no flip in the page made pyarrow's codec refuse it")


DAMAGES = {"stored-overwritten": (0, _overwrite_value), "deflate-bit-flip": (None, _flip_bit)}


@pytest.mark.parametrize("direct", [True, False], ids=["pyarrow", "duckdb"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_gzip_page_that_fails_its_check_is_never_served(
    tmp_path: Path, damage: str, direct: bool
) -> None:
    level, spoil = DAMAGES[damage]
    path = tmp_path / "part-0.parquet"
    want = _write(path, level=level).to_pylist()
    spoil(path)
    with pytest.raises(OSError, match="GZipCodec failed"):
        pq.read_table(path)  # the damage is what pyarrow's codec refuses
    for fmt in ("python", "numpy", "torch"):
        # windows within row groups: the damaged group's own windows fail, no other's
        ds = ParquetDataset(tmp_path, format=fmt, window_bytes=1, read_ahead=False)
        if not direct:
            ds.reader.direct = None
        assert ds.reader.direct is None or direct
        # pyarrow's read reports its codec's refusal itself (never handing the window to
        # DuckDB); DuckDB's read is refused by the gzip check before it
        why = "cannot be decompressed" if direct else "does not decompress"
        with pytest.raises(CorruptShardError, match=r"column 'f' in row group 1 \(local rows "
                           rf"100\.\.199\) {why}") as info:
            ds[DAMAGED]
        if ds.reader.direct is not None:
            assert ds.reader.direct.stats["fallback"] == 0
        assert info.value.path == str(path)
        assert info.value.rows is not None
        lo, hi = info.value.rows
        assert 100 <= lo <= DAMAGED < hi <= 200
        with pytest.raises(CorruptShardError, match="row group 1"):
            ds.__getitems__(list(range(90, 110)))
        for i in (0, 99, 200, 299):  # the other row groups read as written
            row = ds[i]
            assert [float(row["i"]), float(row["f"])] == [want[i]["i"], want[i]["f"]]
        got = ds.__getitems__(list(range(200, 300)))
        assert [float(r["f"]) for r in got] == [w["f"] for w in want[200:]]
        ds.close()


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_window_duckdb_reads_checks_gzip_pages(tmp_path: Path, damage: str) -> None:
    # a struct column keeps every window off pyarrow's path: DuckDB reads them, and a GZIP
    # page recording no CRC-32 is decompressed and checked before it does
    level, spoil = DAMAGES[damage]
    path = tmp_path / "part-0.parquet"
    want = _write(path, level=level, nested=True).to_pylist()
    spoil(path)
    ds = ParquetDataset(tmp_path, window_bytes=1, read_ahead=False)
    with pytest.raises(CorruptShardError, match=r"column 'f' in row group 1 \(local rows "
                       r"100\.\.199\) does not decompress"):
        ds[DAMAGED]
    assert ds.reader.direct is not None and ds.reader.direct.stats["streams"] == 0
    assert ds.__getitems__(list(range(200, 300))) == want[200:]
    if damage == "stored-overwritten":
        # ds.sql reads pages through DuckDB alone: a page whose deflate stream still decodes
        # is served with its changed value (as docs/reliability.md says)
        got = ds.sql(f"SELECT f FROM dataset WHERE i = {DAMAGED}").to_pylist()
        assert got == [{"f": -1e300}]
    ds.close()


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_undamaged_gzip_pages_of_every_shape_pass_the_check(tmp_path: Path, version: str) -> None:
    # dictionary and data pages, v2 pages (levels before the compressed values), all-null
    # and empty pages, several levels: none is refused
    rows = 257
    table = pa.table({
        "i": pa.array([None if k % 3 == 0 else k for k in range(rows)], pa.int64()),
        "n": pa.array([None] * rows, pa.int32()),
        "s": pa.array([f"x{k % 7}" * (k % 9) for k in range(rows)]),
        "l": pa.array([[k] * (k % 4) for k in range(rows)], pa.list_(pa.int32())),
    })
    for level in (0, 1, 9):
        for dictionary in (False, True):
            path = tmp_path / f"{level}-{dictionary}.parquet"
            pq.write_table(table, path, compression="gzip", compression_level=level,
                           data_page_version=version, use_dictionary=dictionary,
                           row_group_size=100, data_page_size=64)
            meta = pq.read_metadata(path)
            for group in range(meta.num_row_groups):
                bad, checked = pages.checksum_mismatch(path, meta, group, table.column_names)
                assert bad is None and checked, (level, dictionary, group)


def test_a_remote_shard_read_by_range_has_each_group_checked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # read by range, a remote shard is a new scratch file at each window: the check keyed by
    # that file decompressed the group's GZIP pages again at every window
    import os
    import time

    import fsspec

    (tmp_path / "src").mkdir()
    table = _write(tmp_path / "src" / "part-0.parquet", level=None, nested=True)
    fs = fsspec.filesystem("memory")
    root = f"memory://gzip-once-{os.getpid()}-{time.monotonic_ns()}"
    fs.pipe(f"{root}/part-0.parquet", (tmp_path / "src" / "part-0.parquet").read_bytes())
    checked: list[str] = []
    real = pages._gzip_fails

    def counted(fh: object, page: object) -> bool:
        checked.append(str(getattr(fh, "name", "")))
        return real(fh, page)  # type: ignore[arg-type]

    monkeypatch.setattr(pages, "_gzip_fails", counted)
    try:
        ds = ParquetDataset(root + "/", memory=1, window_bytes=256, read_ahead=False,
                            cache_dir=tmp_path / "cache", cache_limit=1)  # never cached whole
        first = None
        for i in (5, 40, 90, 10, 60):  # windows of row group 0, each read by range
            assert ds[i]["f"] == table["f"][i].as_py()
            if first is None:
                first = len(checked)
        assert first and len(checked) == first  # the group's pages checked at its first read
        assert ds[150]["f"] == 150.5
        assert len(checked) > first  # another group: checked in its turn
    finally:
        fs.rm(root, recursive=True)
