"""The footer gate on footers of very many row groups: one walk, constant memory, same verdicts;
each footer walked and parsed once per file version in a process."""

from __future__ import annotations

import multiprocessing
import os
import struct
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import hostile_files as hf

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import footers
from undertale_duck.errors import EncryptedShardError

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


# --------------------------------------------------------------------------- walked once
def _column_key_lookalike(path: Path, rows: int = 40, start: int = 0) -> None:
    """A plain file whose footer statistics hold bytes that look like column-key crypto
    metadata (so the gate walks it at open), values a function of the row index."""
    table = pa.table({
        "a": pa.array(range(start, start + rows), pa.int64()),
        "tag": pa.array([b"\x1c\x2c\x00" + bytes([i % 7]) for i in range(start, start + rows)]),
    })
    pq.write_table(table, path, row_group_size=8)


def _count(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count calls of ``footers.<name>`` (the real function still runs)."""
    calls = [0]
    real = getattr(footers, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(footers, name, counted)
    return calls


def _rows(ds: ParquetDataset, start: int = 0) -> None:
    n = len(ds)
    assert [ds[i] for i in range(n)] == [
        {"a": start + i, "tag": b"\x1c\x2c\x00" + bytes([(start + i) % 7])} for i in range(n)
    ]


def _open_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, ParquetDataset, list[int], list[int]]:
    """A file whose footer open walks, opened while walks and parses are counted."""
    path = tmp_path / "a.parquet"
    _column_key_lookalike(path)
    walks, parses = _count(monkeypatch, "scan_footer"), _count(monkeypatch, "read_metadata")
    return path, ParquetDataset(path, memory=8, read_ahead=False), walks, parses


def test_a_footer_is_walked_and_parsed_once_from_open_to_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a footer of 100,000 row groups was walked (5 s) and parsed (198 MiB) at open and
    # again at the first read
    path, ds, walks, parses = _open_counted(tmp_path, monkeypatch)
    assert (walks[0], parses[0]) == (1, 1)  # the open walks this footer
    _rows(ds)
    assert ds.reader.direct is not None and ds.reader.direct.stats["direct"] > 0
    assert (walks[0], parses[0]) == (1, 1)
    again = ParquetDataset(path, memory=8, read_ahead=False)  # the same file version
    _rows(again)
    assert (walks[0], parses[0]) == (1, 1)


def test_a_replaced_file_is_walked_again_and_refused_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.parquet"
    _column_key_lookalike(path)
    walks = _count(monkeypatch, "scan_footer")
    _rows(ParquetDataset(path, read_ahead=False))
    assert walks[0] == 1
    other = tmp_path / "other.parquet"
    _column_key_lookalike(other, rows=24, start=100)
    other.replace(path)
    _rows(ParquetDataset(path, read_ahead=False), start=100)
    assert walks[0] == 2
    # replaced by a crafted footer: refused at open, with the error a first open gives
    src = tmp_path / "src.parquet"
    _column_key_lookalike(src)
    hf.column_key_crypto_metadata(src, tmp_path / "crafted.parquet")
    (tmp_path / "crafted.parquet").replace(path)
    with pytest.raises(EncryptedShardError, match=r"a\.parquet has encrypted columns"):
        ParquetDataset(path)


def test_a_file_rewritten_in_place_with_its_size_and_mtime_is_checked_again(
    tmp_path: Path,
) -> None:
    # the read path's footer was kept by (path, size, mtime) and served for a file
    # rewritten in place with both restored: a codec pyarrow's accessors abort on passed
    path = tmp_path / "a.parquet"
    _column_key_lookalike(path)
    ds = ParquetDataset(path, read_ahead=False)
    _rows(ds)
    shard = ds.source.shards[0]
    assert footers.checked_metadata(shard.path, shard.size, shard.mtime_ns).num_rows == 40
    hf.chunk_codec(path, tmp_path / "codec.parquet", 60)  # SNAPPY's one byte for 60's
    data = (tmp_path / "codec.parquet").read_bytes()
    assert len(data) == shard.size
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(ValueError, match="unknown here"):
        footers.checked_metadata(shard.path, shard.size, shard.mtime_ns)


def _forked_read(path: str, out: Any) -> None:
    try:
        ds = _FORKED[0]
        before = (_FORKED[1][0], _FORKED[2][0])
        _rows(ds)
        out.put((before, (_FORKED[1][0], _FORKED[2][0])))
    except BaseException as exc:  # report, never hang the parent
        out.put(f"{type(exc).__name__}: {exc}")


_FORKED: list[Any] = []


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_a_forked_worker_reuses_the_footer_checked_at_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a DataLoader worker forked after open: it neither walks nor parses the footer again,
    # and a check in progress in another thread of the parent at fork() does not block it
    path, ds, walks, parses = _open_counted(tmp_path, monkeypatch)
    assert (walks[0], parses[0]) == (1, 1)
    monkeypatch.setattr(sys.modules[__name__], "_FORKED", [ds, walks, parses])
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    with footers._checking:
        child = ctx.Process(target=_forked_read, args=(str(path), out))
        child.start()
    try:
        result = out.get(timeout=120)
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
    assert result == ((1, 1), (1, 1)), result


def test_footers_kept_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyarrow's parse of a footer is kept from open for the read path: by count and by
    # serialized bytes, never every shard's of a large dataset
    root = tmp_path / "d"
    root.mkdir()
    shards = footers.METAS_KEPT + 6
    for k in range(shards):
        pq.write_table(pa.table({"a": pa.array(range(3 * k, 3 * k + 3), pa.int64())}),
                       root / f"part-{k:03d}.parquet")
    # with no room for small parses past METAS_KEPT: at most METAS_KEPT in all
    monkeypatch.setattr(footers, "OPENED_BYTES_KEPT", 0)
    ds = ParquetDataset(root, read_ahead=False)
    assert ds[len(ds) - 1] == {"a": 3 * shards - 1}
    mine = [key for key in footers._metas if key[0].startswith(str(root))]
    assert mine and len(footers._metas) <= footers.METAS_KEPT
    one = pq.read_metadata(root / "part-000.parquet").serialized_size
    monkeypatch.setattr(footers, "META_BYTES_KEPT", 3 * one)
    ParquetDataset(root, read_ahead=False)
    assert 1 <= len(footers._metas) <= 3
    assert sum(size for _, size, _ in footers._metas.values()) <= 3 * one
    newest = next(reversed(footers._metas))
    assert newest[0] == str(root / f"part-{shards - 1:03d}.parquet")


def test_small_footers_of_more_shards_than_kept_are_parsed_once_from_open_to_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 200 shards of small footers were each parsed at open and again at their first read:
    # the open's parses of the oldest were dropped before the reads reached them
    root = tmp_path / "d"
    root.mkdir()
    shards = 2 * footers.METAS_KEPT + 5
    for k in range(shards):
        pq.write_table(pa.table({"a": pa.array(range(3 * k, 3 * k + 3), pa.int64())}),
                       root / f"part-{k:03d}.parquet")
    parses = _count(monkeypatch, "read_metadata")
    ds = ParquetDataset(root, memory=8, read_ahead=False)
    assert parses[0] == shards
    assert [ds[i]["a"] for i in range(len(ds))] == list(range(3 * shards))
    assert ds.reader.direct is not None and ds.reader.direct.stats["direct"] >= shards
    assert parses[0] == shards  # not parsed again by the reads
    # what is left: the read path's last METAS_KEPT
    mine = [key for key in footers._metas if key[0].startswith(str(root))]
    assert len(mine) == footers.METAS_KEPT
    assert all(footers._metas[key][2] for key in mine)
    assert sorted(mine)[-1][0] == str(root / f"part-{shards - 1:03d}.parquet")
    ds.close()
    # past OPENED_KEPT (or OPENED_BYTES_KEPT), the oldest parses from open are dropped
    monkeypatch.setattr(footers, "OPENED_KEPT", footers.METAS_KEPT + 10)
    for key in list(footers._metas):
        footers._drop_meta(key)
    ParquetDataset(root, memory=8, read_ahead=False).close()
    mine = [key for key in footers._metas if key[0].startswith(str(root))]
    assert len(mine) == footers.METAS_KEPT + 10
    assert min(mine)[0] == str(root / f"part-{shards - 74:03d}.parquet")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(st.tuples(st.integers(0, 11), st.booleans()), max_size=60),
    kept=st.integers(1, 4), opened=st.integers(0, 6), opened_bytes=st.integers(0, 6),
    total_bytes=st.integers(1, 12),
)
def test_kept_footers_stay_within_every_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ops: list[tuple[int, bool]],
    kept: int, opened: int, opened_bytes: int, total_bytes: int,
) -> None:
    """Any sequence of parses kept from open and by the read path: the bounds hold, the
    parse just kept stays, and every one of the last METAS_KEPT kept within the bytes stays
    (never fewer than keeping the last METAS_KEPT alone)."""
    metas = _twelve_footers(tmp_path)
    unit = max(m.serialized_size for m in metas)
    monkeypatch.setattr(footers, "METAS_KEPT", kept)
    monkeypatch.setattr(footers, "OPENED_KEPT", opened)
    monkeypatch.setattr(footers, "OPENED_BYTES_KEPT", opened_bytes * unit)
    monkeypatch.setattr(footers, "META_BYTES_KEPT", total_bytes * unit)
    for key in list(footers._metas):
        footers._drop_meta(key)
    recent: list[footers.FileKey] = []
    for index, checked in ops:
        key = (f"/f/{index}", index, 0, 0, 0, 0)
        footers._keep_meta(key, metas[index], checked=checked)
        recent = [k for k in recent if k != key] + [key]
        held = footers._metas
        assert key in held
        sizes = {k: v[1] for k, v in held.items()}
        checked_keys = [k for k, v in held.items() if v[2]]
        opened_keys = [k for k, v in held.items() if not v[2]]
        assert footers._totals == {
            "bytes": sum(sizes.values()),
            "opened_bytes": sum(sizes[k] for k in opened_keys),
        }
        assert list(footers._order[True]) == checked_keys
        assert list(footers._order[False]) == opened_keys
        assert len(checked_keys) <= kept or checked_keys == [key]
        assert sum(sizes.values()) <= total_bytes * unit or len(held) == 1
        small = len(opened_keys) <= opened and sum(sizes[k] for k in opened_keys) <= (
            opened_bytes * unit
        )
        assert len(held) <= kept or small
        # the last ``kept`` (as far as the bytes allow) are all still there
        last: list[footers.FileKey] = []
        for k in reversed(recent):
            if len(last) == kept or sum(metas[j[1]].serialized_size for j in [*last, k]) > (
                total_bytes * unit
            ):
                break
            last.append(k)
        assert all(k in held for k in last), (last, list(held))
    for key in list(footers._metas):
        footers._drop_meta(key)


def _twelve_footers(root: Path) -> list[pq.FileMetaData]:
    """Footers of 12 files of 1 to 12 row groups (different serialized sizes)."""
    out = []
    for n in range(1, 13):
        path = root / f"g{n}.parquet"
        if not path.exists():
            pq.write_table(pa.table({"a": pa.array(range(n), pa.int64())}), path,
                           row_group_size=1)
        out.append(pq.read_metadata(path))
    return out
