"""pyarrow decodes a window in batches of bounded bytes, and the window is still exact.

A window spanning several row groups used to be decoded as one batch of all its rows; pyarrow
grows a batch's buffers by doubling, which for windows of tens of MiB cost twice the CPU.
Batches now hold at most ``DECODE_BATCH_BYTES`` by the page headers' bound (a window whose
rows fit stays one batch, with no copy). The cap is lowered here so that small files cross
it; every value is a function of the global row index.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import pages as page_scan
from undertale_duck.core.read import direct, window_read
from undertale_duck.core.source import window_row_groups


def _row(i: int) -> dict[str, Any]:
    return {
        "i": i,
        "tokens": [(i * 31 + k) % 50_000 for k in range(i % 9 + 8)],
        "mask": [1] * (i % 5) + [0] * 3,
        "s": f"row-{i:07d}",
    }


def _write(root: Path, sizes: list[int], group: int) -> Path:
    start = 0
    for k, size in enumerate(sizes):
        rows = [_row(i) for i in range(start, start + size)]
        table = pa.table({
            "i": pa.array([r["i"] for r in rows], pa.int64()),
            "tokens": pa.array([r["tokens"] for r in rows], pa.list_(pa.int32())),
            "mask": pa.array([r["mask"] for r in rows], pa.list_(pa.int8())),
            "s": pa.array([r["s"] for r in rows], pa.string()),
        })
        pq.write_table(table, root / f"part-{k:03d}.parquet", row_group_size=group)
        start += size
    return root


def _weight(ds: ParquetDataset, position: int) -> tuple[float, bool]:
    """A window's row groups: their page-bound bytes per row, and whether the window starts
    a whole number of windows into them (the windows cut from them line up)."""
    reader = ds.reader.direct
    assert reader is not None
    window = ds.windows[position]
    shard = ds.reader.source.shards[window.shard]
    pages = reader._pages(shard)
    assert pages is not None
    groups, skip = window_row_groups(shard.row_groups, window)
    expected = sum(shard.row_groups[g][0] for g in groups)
    bound = sum(pages.bound(g) or 0 for g in groups)
    return bound / expected, skip % window.rows == 0


def _most_rows(per_row: float) -> int:
    """The most rows one decoded batch may hold: the cap's bytes, or one DuckDB vector."""
    return max(direct.VECTOR_ROWS, int(direct.DECODE_BATCH_BYTES // per_row))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 9000), min_size=1, max_size=3),
    group=st.integers(500, 6000),
    window=st.sampled_from([64 << 10, 256 << 10, 4 << 20]),
    cap=st.sampled_from([16 << 10, 200 << 10, 2 << 20, 64 << 20]),
)
def test_windows_decode_in_bounded_batches_and_stay_exact(
    sizes: list[int], group: int, window: int, cap: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct, "DECODE_BATCH_BYTES", cap)
    with tempfile.TemporaryDirectory(prefix="batches-") as scratch:
        _check_windows(_write(Path(scratch), sizes, group), window, sum(sizes))


def _check_windows(root: Path, window: int, total: int) -> None:
    ds = ParquetDataset(root, window_bytes=window, read_ahead=False)
    slow = ParquetDataset(root, window_bytes=window, read_ahead=False)
    slow.reader.direct = None  # DuckDB's read of the same windows
    reader = ds.reader.direct
    assert reader is not None
    for position, win in enumerate(ds.windows):
        per_row, aligned = _weight(ds, position)
        shard = ds.reader.source.shards[win.shard]
        batches = reader.batches(shard, win)
        assert batches is not None  # on the allow-list: pyarrow reads it
        got = [b.num_rows for b in batches]
        assert all(n <= _most_rows(per_row) for n in got), (per_row, got)
        assert sum(got) == win.rows
        if aligned and win.rows * per_row <= direct.DECODE_BATCH_BYTES:
            assert got == [win.rows]  # fits: one batch, handed out without a copy
    for position in range(len(ds.windows)):
        a, b = ds.reader.read(position), slow.reader.read(position)
        assert a.equals(b)
        # one buffer per column, or pyarrow's batches kept as decoded (a window read in
        # order, in at most MAX_KEPT_CHUNKS chunks, laid out alike in every column)
        chunks = {tuple(len(ch) for ch in c.chunks) for c in a.columns}
        assert len(chunks) == 1
        assert 1 <= len(next(iter(chunks))) <= window_read.MAX_KEPT_CHUNKS
        # exactly sized: no batch's spare capacity or other rows kept alive
        assert a.get_total_buffer_size() <= a.nbytes + (a.nbytes >> 3) + 4096
    assert ds.__getitems__(list(range(total))) == [_row(i) for i in range(total)]
    ds.close()
    slow.close()


def test_a_window_within_the_cap_is_one_batch(tmp_path: Path) -> None:
    root = _write(tmp_path, [6000], 3000)
    ds = ParquetDataset(root, window_bytes=1 << 30, read_ahead=False)
    assert len(ds.windows) == 1  # the shard's two groups are one window
    reader = ds.reader.direct
    assert reader is not None
    got = list(reader.batches(ds.reader.source.shards[0], ds.windows[0]) or [])
    assert [b.num_rows for b in got] == [6000]
    ds.close()


def test_a_window_past_the_cap_is_decoded_in_pieces_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _write(tmp_path, [20_000], 5000)
    ds = ParquetDataset(root, window_bytes=1 << 30, read_ahead=False)
    monkeypatch.setattr(direct, "DECODE_BATCH_BYTES", 64 << 10)
    per_row, _ = _weight(ds, 0)
    assert _most_rows(per_row) < 20_000  # the cap cuts the window
    reader = ds.reader.direct
    assert reader is not None
    got = [b.num_rows for b in reader.batches(ds.reader.source.shards[0], ds.windows[0]) or []]
    assert len(got) > 1 and sum(got) == 20_000
    assert all(n <= _most_rows(per_row) for n in got)
    assert reader.stats["streams"] == 1  # one decode of the groups, in pieces
    assert ds.__getitems__(list(range(0, 20_000, 997))) == [
        _row(i) for i in range(0, 20_000, 997)
    ]
    ds.close()


def test_dictionaries_are_weighed_only_when_the_looser_bound_decides_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window's string dictionaries are read to weigh their values only when counting
    each value as long as its whole dictionary page would change the read: its batches or
    whether pyarrow may read it. Either way the window's batches are the weighed bound's."""
    weighed = [0]
    real = page_scan._longest_value

    def counted(*args: Any) -> int | None:
        weighed[0] += 1
        return real(*args)

    monkeypatch.setattr(page_scan, "_longest_value", counted)
    root = _write(tmp_path, [3000], 3000)  # one group, one window, 3,000 distinct strings
    ds = ParquetDataset(root, window_bytes=1 << 30, read_ahead=False)
    reader = ds.reader.direct
    assert reader is not None
    shard, win = ds.reader.source.shards[0], ds.windows[0]
    first = reader._pages(shard)
    assert first is not None
    loose, tight = first.bound(0, weigh=False), first.bound(0)
    assert loose is not None and tight is not None and loose > 2 * tight
    ds.close()
    # batches of at most ``loose`` bytes hold the window however its strings are weighed;
    # of at most the midpoint, only once they are
    for cap, reads in ((loose, 0), ((loose + tight) // 2, 1)):
        monkeypatch.setattr(direct, "DECODE_BATCH_BYTES", cap)
        ds = ParquetDataset(root, window_bytes=1 << 30, read_ahead=False)
        reader = ds.reader.direct
        assert reader is not None
        weighed[0] = 0
        got = [b.num_rows for b in reader.batches(shard, win) or []]
        assert got == [3000], (cap, got)  # one batch, as the weighed bound says
        assert weighed[0] == reads, cap
        ds.close()
