"""Windows kept in pyarrow's decoded batches serve the same rows as windows in one buffer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ChunkedSampler, Pack, ParquetDataset
from undertale_duck.core.read import direct, window_read
from undertale_duck.core.read.cache import table_bytes
from undertale_duck.core.rows.gather import ListedParts, Parts

WIDTH = 6


def _tokens(i: int) -> list[int]:
    return [(i * 7 + k) % 1000 for k in range(WIDTH)]


def _write(root: Path, sizes: list[int], group: int) -> int:
    start = 0
    for k, size in enumerate(sizes):
        ids = range(start, start + size)
        pq.write_table(pa.table({
            "i": pa.array(ids, pa.int64()),
            "tokens": pa.array([_tokens(i) for i in ids], pa.list_(pa.int32())),
            "x": pa.array([i * 0.5 for i in ids], pa.float64()),
            "s": pa.array([f"r{i}" for i in ids], pa.string()),
        }), root / f"part-{k:02d}.parquet", row_group_size=group)
        start += size
    return start


def _check(rows: Any, wanted: list[int]) -> None:
    """``rows`` (a batch of any format) are the rows ``wanted``, in that order."""
    if isinstance(rows, list):  # format="python"
        assert [r["i"] for r in rows] == wanted
        assert [r["tokens"] for r in rows] == [_tokens(i) for i in wanted]
        assert [r["s"] for r in rows] == [f"r{i}" for i in wanted]
        return
    got = {name: rows.column(name) for name in ("i", "tokens", "x", "s")}
    assert np.asarray(got["i"]).tolist() == wanted
    assert np.asarray(got["tokens"]).tolist() == [_tokens(i) for i in wanted]
    assert np.asarray(got["x"]).tolist() == [i * 0.5 for i in wanted]
    assert list(got["s"]) == [f"r{i}" for i in wanted]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # a few KiB per decoded batch: every window is decoded in several batches
    monkeypatch.setattr(direct, "DECODE_BATCH_BYTES", 6 << 10)


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize("fmt", ["numpy", "torch", "python"])
def test_sequential_pass_keeps_batches_and_out_of_order_rows_join_them(
    tmp_path: Path, fmt: str
) -> None:
    total = _write(tmp_path, [7000, 4500], 3000)
    ds = ParquetDataset(tmp_path, format=fmt, window_bytes=256 << 10)
    assert len(ds.windows) > 1
    for a in range(0, total, 64):  # in order: windows kept as decoded
        wanted = list(range(a, min(a + 64, total)))
        _check(ds.__getitems__(wanted), wanted)
    kept = [ds.reader.cache.get(p) for p in range(len(ds.windows))]
    chunked = [t for t in kept if t is not None and t.column(0).num_chunks > 1]
    assert chunked, "no window was kept in its decoded batches"
    assert all(t.column(0).num_chunks <= window_read.MAX_KEPT_CHUNKS for t in chunked)
    fresh = ds.reader.read(0)  # a read the cache does not hold: taken from, never copied
    assert fresh.column(0).num_chunks > 1 and not ds.reader.cache.holds(0, fresh)
    assert ds.reader.joined(0, fresh) is fresh
    rng = np.random.default_rng(7)
    order = rng.permutation(total).tolist()
    for a in range(0, total, 500):  # uniform random rows, then reversed runs
        _check(ds.__getitems__(order[a:a + 500]), order[a:a + 500])
    for a in range(total, 0, -400):
        wanted = list(range(max(0, a - 400), a))[::-1]
        _check(ds.__getitems__(wanted), wanted)
    if fmt != "python":  # taken out of order: the cache now holds one buffer per column
        for p in range(len(ds.windows)):
            table = ds.reader.cache.get(p)
            assert table is None or all(c.num_chunks == 1 for c in table.columns)
    held = ds.reader.cache.held
    assert held == sum(
        table_bytes(t) for t in map(ds.reader.cache.get, range(len(ds.windows)))
        if t is not None
    )
    ds.close()


@pytest.mark.usefixtures("small_batches")
def test_a_shuffled_epoch_reads_windows_into_one_buffer(tmp_path: Path) -> None:
    total = _write(tmp_path, [6000, 6000], 2000)
    ds = ParquetDataset(tmp_path, format="numpy", window_bytes=256 << 10)
    sampler = ChunkedSampler(ds, 256, 0, shuffle=True, seed=3)
    order = list(sampler)
    assert sorted(order) == list(range(total))
    starts = [w.offset for w in ds.windows]
    hint = []
    for i in order:
        p = int(np.searchsorted(starts, i, side="right")) - 1
        if not hint or hint[-1] != p:
            hint.append(p)
    ds.prefetch(hint)
    for a in range(0, total, 256):
        _check(ds.__getitems__(order[a:a + 256]), order[a:a + 256])
    for p in range(len(ds.windows)):
        table = ds.reader.cache.get(p)
        assert table is None or all(c.num_chunks == 1 for c in table.columns)
    ds.close()


def test_without_kept_batches_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct, "DECODE_BATCH_BYTES", 6 << 10)
    total = _write(tmp_path, [5000], 2500)
    kept = ParquetDataset(tmp_path, format="torch", window_bytes=256 << 10)
    monkeypatch.setattr(window_read, "MAX_KEPT_CHUNKS", 1)
    joined = ParquetDataset(tmp_path, format="torch", window_bytes=256 << 10)
    monkeypatch.setattr(window_read, "MAX_KEPT_CHUNKS", 16)
    rng = np.random.default_rng(1)
    for wanted in ([*range(total)], rng.permutation(total).tolist(), [3, 3, 4999, 0, 2500]):
        a, b = kept.__getitems__(wanted), joined.__getitems__(wanted)
        for name in ("i", "tokens", "x"):
            assert np.array_equal(np.asarray(a.column(name)), np.asarray(b.column(name)))
        assert list(a.column("s")) == list(b.column("s"))
    kept.close()
    joined.close()


def _parts(sizes: list[int], width: int) -> tuple[Parts, np.ndarray[Any, Any]]:
    base = np.arange(sum(sizes) * max(width, 1), dtype=np.int32)
    whole = base.reshape(sum(sizes), width) if width else base[: sum(sizes)]
    pieces, at = [], 0
    for size in sizes:
        pieces.append(whole[at:at + size])
        at += size
    return Parts(pieces), whole


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    width=st.integers(0, 3),
    bounds=st.tuples(
        st.one_of(st.none(), st.integers(-60, 60)), st.one_of(st.none(), st.integers(-60, 60)),
        st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0)),
    ),
    picks=st.lists(st.integers(0, 10_000), max_size=40),
)
def test_parts_read_as_the_joined_array(
    sizes: list[int], width: int, bounds: tuple[int | None, int | None, int | None],
    picks: list[int],
) -> None:
    parts, whole = _parts(sizes, width)
    assert len(parts) == len(whole) and parts.shape == whole.shape and parts.dtype == whole.dtype
    sel = slice(*bounds)
    assert np.array_equal(parts[sel], whole[sel])
    listed = ListedParts([pa.array([str(v) for v in np.asarray(p).reshape(len(p), -1)[:, 0]])
                          for p in parts.parts])
    firsts = [str(v) for v in whole.reshape(len(whole), -1)[:, 0]]
    for a in range(len(whole) + 1):  # every in-order run, as a pass slices them
        for b in range(a, len(whole) + 1):
            assert np.array_equal(parts[a:b], whole[a:b])
            rows = parts.rows(a, b)
            assert np.array_equal(rows, whole[a:b])
            if rows.size:  # a new array: writing to it leaves the parts alone
                rows[...] = -7
                assert not any(np.shares_memory(rows, part) for part in parts.parts)
            assert listed.slice(a, b - a).to_pylist() == firsts[a:b]
    index = np.asarray([p % len(whole) for p in picks], dtype=np.int64)
    got = parts.take(index)
    assert np.array_equal(got, whole.take(index, axis=0))
    assert np.array_equal(parts[index], whole[index])
    if got.size:
        got[...] = -1  # a new array: the parts are untouched
        assert np.array_equal(np.concatenate(parts.parts), whole)
    with pytest.raises(IndexError):
        parts.take(np.asarray([len(whole)], dtype=np.int64))
    with pytest.raises(IndexError):
        parts.take(np.asarray([-1], dtype=np.int64))


@pytest.mark.usefixtures("small_batches")
def test_packed_blocks_over_kept_windows(tmp_path: Path) -> None:
    total = _write(tmp_path, [6000, 3000], 3000)
    ds = ParquetDataset(tmp_path, format="numpy", window_bytes=256 << 10,
                        pack=Pack(column="tokens", length=16, eod=-1))
    stream: list[int] = []
    for i in range(total):
        stream += [*_tokens(i), -1]
    blocks = len(stream) // 16
    assert len(ds) == blocks
    rng = np.random.default_rng(5)
    # in order first: the documents' windows are read sequentially (kept as decoded)
    for index in (list(range(blocks)), rng.permutation(blocks).tolist()):
        got = ds.__getitems__(index)
        tokens = np.asarray(got.column("tokens") if not isinstance(got, list) else
                            [r["tokens"] for r in got])
        assert tokens.tolist() == [stream[b * 16:(b + 1) * 16] for b in index]
    for p in range(len(ds.documents.windows)):  # blocks read one buffer per column
        table = ds.documents.reader.cache.get(p)
        assert table is None or all(c.num_chunks == 1 for c in table.columns)
    ds.close()
