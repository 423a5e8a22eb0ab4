"""Faults under a running dataset: files changing, corrupt data, threads and killed workers."""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import datagen
from torch.utils.data import DataLoader, Subset

from undertale_duck import CorruptShardError, ParquetDataset, ShardChangedError
from undertale_duck.core.runtime import lifecycle

Row = dict[str, Any]

SIZES = [40, 40, 40]
TOTAL = sum(SIZES)
WANT = datagen.expected(TOTAL)


def _write(root: Path, sizes: list[int] = SIZES, **kwargs: Any) -> list[Path]:
    return datagen.write_shards(root, sizes, row_group_size=10, **kwargs)


def _other_version(path: Path, start: int, rows: int) -> bytes:
    """Bytes of a Parquet file with the same rows and row groups but other values."""
    tmp = path.with_name(path.name + ".other")
    pq.write_table(datagen.table(start + 10_000, start + 10_000 + rows), tmp, row_group_size=10)
    data = tmp.read_bytes()
    tmp.unlink()
    return data


# ----------------------------------------------------------------------- mutations
def _replace_other_content(path: Path) -> None:
    tmp = path.with_name(".tmp-" + path.name)
    tmp.write_bytes(_other_version(path, 40, 40))
    os.replace(tmp, path)


def _replace_same_bytes_same_mtime(path: Path) -> None:
    # rsync -t / cp -p then rename: same size, same mtime, another file
    st = path.stat()
    tmp = path.with_name(".tmp-" + path.name)
    tmp.write_bytes(path.read_bytes())
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


def _rewrite_in_place(path: Path) -> None:
    st = path.stat()
    data = _other_version(path, 40, 40)
    with open(path, "r+b") as fh:  # same inode, new content
        fh.truncate(0)
        fh.write(data)
    if path.stat().st_mtime_ns == st.st_mtime_ns:  # coarse clock: same tick
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _extend(path: Path) -> None:
    with open(path, "ab") as fh:
        fh.write(b"\0" * 100)


def _delete(path: Path) -> None:
    path.unlink()


MUTATIONS: dict[str, Callable[[Path], None]] = {
    "replaced": _replace_other_content,
    "replaced-same-size-and-mtime": _replace_same_bytes_same_mtime,
    "rewritten-in-place": _rewrite_in_place,
    "truncated": _truncate,
    "extended": _extend,
    "deleted": _delete,
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_shard_changed_after_open(tmp_path: Path, mutation: str) -> None:
    paths = _write(tmp_path)
    ds = ParquetDataset(tmp_path, memory=0)  # nothing cached: every window from disk
    assert ds[0] == WANT[0]
    MUTATIONS[mutation](paths[1])
    for i in (40, 45, 79):
        with pytest.raises(ShardChangedError) as info:
            ds[i]
        assert str(paths[1]) in str(info.value)
        assert info.value.path == str(paths[1])
    with pytest.raises(ShardChangedError, match="part-00001"):
        ds.__getitems__([0, 50])
    with pytest.raises(ShardChangedError, match="part-00001"):
        ds.sql("SELECT count(*) FROM dataset")
    # the unchanged shards stay readable and right
    assert [ds[i] for i in range(40)] + [ds[i] for i in range(80, 120)] == WANT[:40] + WANT[80:]
    # refresh() reopens the dataset as it is now
    if mutation in ("truncated", "extended"):
        with pytest.raises(CorruptShardError, match="part-00001"):
            ds.refresh()
    elif mutation == "deleted":
        ds.refresh()
        assert len(ds) == 80
        assert [ds[i] for i in range(80)] == WANT[:40] + WANT[80:]
    else:
        ds.refresh()
        assert len(ds) == TOTAL
        now = pq.read_table(paths[1]).to_pylist()
        assert [ds[i] for i in range(40, 80)] == now
        assert [ds[i] for i in range(40)] == WANT[:40]


def test_cached_window_is_served_consistently_from_the_old_version(tmp_path: Path) -> None:
    paths = _write(tmp_path)
    ds = ParquetDataset(tmp_path, memory=64)
    old = [ds[i] for i in range(40, 80)]  # shard 1 is now cached whole
    assert old == WANT[40:80]
    _replace_other_content(paths[1])
    # served from memory: rows of the version read at open, never a mix
    assert [ds[i] for i in range(40, 80)] == old
    ds.close()  # drop the cache: the next read goes to disk and notices
    with pytest.raises(ShardChangedError, match="part-00001"):
        ds[40]


def test_shard_changed_with_read_ahead(tmp_path: Path) -> None:
    paths = _write(tmp_path)
    ds = ParquetDataset(tmp_path, memory=64, window_bytes=2048, read_ahead=True)
    assert len(ds.windows) > 6
    assert [ds[i] for i in range(40)] == WANT[:40]  # sequential: the next windows read ahead
    _replace_other_content(paths[1])
    served, refused = 0, 0
    for i in range(40, 80):
        try:
            row = ds[i]
        except ShardChangedError as exc:
            assert str(paths[1]) in str(exc)
            refused += 1
        else:
            assert row == WANT[i]  # read before the change, as a whole: never the new rows
            served += 1
    assert refused > 0
    assert [ds[i] for i in range(80, 120)] == WANT[80:]


@pytest.mark.parametrize("in_place", [False, True], ids=["rename", "in-place"])
def test_concurrent_rewrites_never_give_mixed_rows(tmp_path: Path, in_place: bool) -> None:
    paths = _write(tmp_path, [40, 40])
    versions = [paths[1].read_bytes(), _other_version(paths[1], 40, 40)]
    ds = ParquetDataset(tmp_path, memory=0, window_bytes=1)
    stop = threading.Event()

    def writer() -> None:
        k = 0
        while not stop.is_set():
            k += 1
            data = versions[k % 2]
            if in_place:
                with open(paths[1], "r+b") as fh:
                    fh.truncate(0)
                    fh.write(data)
            else:
                tmp = paths[1].with_name(f".tmp-{k}")
                tmp.write_bytes(data)
                os.replace(tmp, paths[1])

    assert [ds[i] for i in range(40, 80)] == WANT[40:80]
    thread = threading.Thread(target=writer)
    thread.start()
    outcomes = {"rows": 0, "changed": 0}
    try:
        rng = random.Random(7)
        for _ in range(150):
            i = rng.randrange(40, 80)
            try:
                got = ds[i]
            except ShardChangedError as exc:
                assert str(paths[1]) in str(exc)
                outcomes["changed"] += 1
            else:
                assert got == WANT[i]  # only ever the version the footer was read from
                outcomes["rows"] += 1
    finally:
        stop.set()
        thread.join()
    assert outcomes["changed"] > 0
    assert [ds[i] for i in range(40)] == WANT[:40]


def _ids(batch: list[Row]) -> list[Row]:
    return batch


def test_shard_replaced_while_dataloader_runs(tmp_path: Path) -> None:
    paths = _write(tmp_path, [64, 64, 64, 64])
    want = datagen.expected(256)
    ds = ParquetDataset(tmp_path, memory=0)
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=_ids, timeout=60)
    seen: list[Row] = []
    with pytest.raises(ShardChangedError) as info:
        for k, batch in enumerate(loader):
            if k == 0:
                _replace_other_content(paths[3])
            seen.extend(batch)
    assert "part-00003" in str(info.value)
    assert 8 <= len(seen) <= 192
    assert seen == want[: len(seen)]  # every row delivered before the error is right
    # the unchanged part stays readable in the parent, the changed one reopens on request
    assert ds[100] == want[100]
    ds.refresh()
    rerun = DataLoader(ds, batch_size=64, num_workers=2, collate_fn=_ids, timeout=60)
    assert [r for b in rerun for r in b] == want[:192] + pq.read_table(paths[3]).to_pylist()


# ----------------------------------------------------------------------- corrupt data
def _corrupt_row_group(path: Path, group: int) -> None:
    """Scribble over every column chunk of one row group, keeping size, footer and mtime."""
    meta = pq.read_metadata(path)
    rg = meta.row_group(group)
    lo = min(
        (c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset)
        for c in (rg.column(j) for j in range(rg.num_columns))
    )
    hi = max(
        (c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset)
        + c.total_compressed_size
        for c in (rg.column(j) for j in range(rg.num_columns))
    )
    st = path.stat()
    data = bytearray(path.read_bytes())
    rng = random.Random(group)
    for k in range(lo + 8, hi):
        data[k] = rng.randrange(256)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture
def corrupt_middle(tmp_path: Path) -> tuple[ParquetDataset, Path]:
    paths = _write(tmp_path, [40, 40, 40], compression="zstd")
    _corrupt_row_group(paths[1], 2)  # local rows 20..29 of shard 1 = global 60..69
    window = max(pq.read_metadata(paths[0]).row_group(k).total_byte_size for k in range(4))
    return ParquetDataset(tmp_path, memory=0, window_bytes=window), paths[1]


def test_corrupt_row_group_names_shard_and_global_rows(
    corrupt_middle: tuple[ParquetDataset, Path],
) -> None:
    ds, bad = corrupt_middle
    assert [w.rows for w in ds.windows] == [10] * 12
    with pytest.raises(CorruptShardError) as info:
        ds[65]
    assert str(bad) in str(info.value)
    assert info.value.path == str(bad)
    assert info.value.rows == (60, 70)
    assert "60..69" in str(info.value)
    # the rest of the same shard and the other shards read fine
    good = [i for i in range(TOTAL) if not 60 <= i < 70]
    assert ds.__getitems__(good) == [WANT[i] for i in good]


def test_corrupt_data_reaches_main_process_from_workers(
    corrupt_middle: tuple[ParquetDataset, Path],
) -> None:
    ds, bad = corrupt_middle
    loader = DataLoader(ds, batch_size=10, num_workers=2, collate_fn=_ids, timeout=60)
    seen: list[Row] = []
    with pytest.raises(CorruptShardError) as info:
        for batch in loader:
            seen.extend(batch)
    assert str(bad) in str(info.value)
    assert "rows 60..69" in str(info.value)
    assert seen == WANT[: len(seen)] and len(seen) <= 60
    # the other shards stay readable afterwards, in the parent and in a new loader
    assert ds[0] == WANT[0] and ds[119] == WANT[119]
    rest = DataLoader(
        Subset(ds, range(80, 120)), batch_size=10, num_workers=2, timeout=60, collate_fn=_ids
    )
    assert [row for batch in rest for row in batch] == WANT[80:]


# ----------------------------------------------------------------------- threads
def test_eight_threads_read_rows_and_sql(tmp_path: Path) -> None:
    sizes = [150, 1, 0, 97, 300, 2, 200]
    total = sum(sizes)
    want = datagen.expected(total)
    datagen.write_shards(tmp_path, sizes, row_group_size=[40, 1, 1, 13, 128, 1, 50])
    # a 30 KB cache: many windows, evictions (fractional megabytes work at run time)
    ds = ParquetDataset(tmp_path, memory=0.03, window_bytes=4096)  # type: ignore[arg-type]
    labels = [sum(1 for r in want if r["label"] == k) for k in range(7)]

    def work(seed: int) -> int:
        rng = random.Random(seed)
        checks = 0
        for _ in range(20):
            i = rng.randrange(total)
            assert ds[i] == want[i]
            batch = [rng.randrange(total) for _ in range(rng.randrange(1, 20))]
            assert ds.__getitems__(batch) == [want[j] for j in batch]
            k = rng.randrange(7)
            got = ds.sql("SELECT count(*) AS n FROM dataset WHERE label = $k", {"k": k})
            assert got.to_pylist() == [{"n": labels[k]}]
            got = ds.sql("SELECT id FROM dataset WHERE id = ?", [want[i]["id"]])
            assert got.to_pylist() == [{"id": want[i]["id"]}]
            checks += 4
        return checks

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(work, range(8))) == 8 * 20 * 4
    stats = ds.cache_stats
    assert stats.bytes <= stats.limit
    assert stats.evictions > 0 and stats.hits > 0


# ----------------------------------------------------------------------- killed workers
def _record_pid(directory: str) -> Callable[[int], None]:
    def init(worker_id: int) -> None:
        Path(directory, f"worker-{worker_id}.pid").write_text(str(os.getpid()))

    return init


def test_killed_worker_raises_and_leaves_nothing_behind(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _write(data, [200, 200, 200])
    want = datagen.expected(600)
    spill = tmp_path / "spill"
    pids = tmp_path / "pids"
    pids.mkdir()
    before = sorted(p.name for p in data.iterdir())
    ds = ParquetDataset(data, memory=0, duckdb_config={"temp_directory": str(spill)})
    assert ds.duckdb_config["temp_directory"] == str(spill)
    loader = DataLoader(
        ds, batch_size=5, num_workers=2, collate_fn=_ids, timeout=60,
        worker_init_fn=_record_pid(str(pids)),
    )
    seen: list[Row] = []
    with pytest.raises(RuntimeError, match=r"(?i)killed|exited unexpectedly"):
        for k, batch in enumerate(loader):
            seen.extend(batch)
            if k == 2:
                victim = int((pids / "worker-1.pid").read_text())
                os.kill(victim, signal.SIGKILL)
    assert seen == want[: len(seen)]
    # nothing left behind: no spill files, no lock or temporary files next to the data
    assert not spill.exists() or not any(spill.iterdir())
    assert sorted(p.name for p in data.iterdir()) == before
    # temp_directory was given: the workers made no private spill directory
    owners = {int(p.read_text()) for p in pids.iterdir()}
    spills = Path(lifecycle.spill_root()).glob(lifecycle.SPILL_PREFIX + "*")
    assert not [p for p in spills if int(p.name.split("-")[2]) in owners]
    # the next run works, also in the parent
    again = DataLoader(ds, batch_size=50, num_workers=2, collate_fn=_ids, timeout=60)
    assert [row for batch in again for row in batch] == want
    assert ds[599] == want[599]
    shutil.rmtree(pids)


EXIT_SCRIPT = """
import random, sys
from undertale_duck import ParquetDataset
ds = ParquetDataset(sys.argv[1], memory=4)
rng = random.Random(int(sys.argv[2]))
for _ in range(30):
    ds.__getitems__(sorted(rng.randrange(len(ds)) for _ in range(4)))
for i in range(20):
    ds[i]  # sequential: the read-ahead thread is busy when the interpreter exits
"""


@pytest.mark.heavy
def test_process_exits_cleanly_while_reading_ahead(tmp_path: Path) -> None:
    import subprocess
    import sys

    import pyarrow as pa

    pq.write_table(
        pa.table({"i": list(range(64)), "blob": [bytes([i]) * (256 << 10) for i in range(64)]}),
        tmp_path / "a.parquet", row_group_size=2,
    )
    for seed in range(6):
        done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(tmp_path), str(seed)],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("memory", [1, 64])
def test_a_shard_rewritten_in_place_with_its_mtime_put_back_is_a_change_and_a_chmod_is_not(
        tmp_path: Path, memory: int) -> None:
    # rsync --inplace --times (or cp --preserve=timestamps onto the file): same inode, size
    # and mtime; only the status-change time tells, and a chmod moves it too
    import numpy as np
    import pyarrow as pa

    data = tmp_path / "data"
    data.mkdir()
    shard = data / "part-0.parquet"

    def write(path: Path, base: int) -> None:
        pq.write_table(pa.table({"id": np.arange(1000, dtype=np.int64) + base}), path,
                       row_group_size=100, compression="none", use_dictionary=False)

    write(shard, 0)
    write(tmp_path / "other.parquet", 1_000_000)
    assert shard.stat().st_size == (tmp_path / "other.parquet").stat().st_size
    ds = ParquetDataset(data, memory=memory, window_bytes=800, read_ahead=False)
    assert ds[0]["id"] == 0
    st = shard.stat()
    shard.chmod(0o640)  # the status changes, the rows do not
    assert shard.stat().st_ctime_ns != st.st_ctime_ns
    assert [ds[i]["id"] for i in (0, 500, 999)] == [0, 500, 999]
    with open(shard, "r+b") as fh:
        fh.write((tmp_path / "other.parquet").read_bytes())
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (shard.stat().st_size, shard.stat().st_mtime_ns, shard.stat().st_ino) == (
        st.st_size, st.st_mtime_ns, st.st_ino)
    with pytest.raises(ShardChangedError, match="rewritten in place"):
        [ds[i] for i in range(1000)]
    with pytest.raises(ShardChangedError, match="rewritten in place"):
        ds.sql("SELECT max(id) FROM dataset")
    ds.refresh()
    assert [ds[i]["id"] for i in (0, 999)] == [1_000_000, 1_000_999]
