"""A sequential pass of small batches fetches the coming batches with one run and cuts it apart."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, OutOfRangeError, ParquetDataset, collate
from undertale_duck.core.rows import GROUP_BYTES, GROUP_ROWS, RowBatch, group_rows

WIDTH = 5


def _tokens(i: int, shift: int = 0) -> list[int]:
    return [(i * 3 + k + shift) % 1000 for k in range(WIDTH)]


def _write(root: Path, sizes: list[int], shift: int = 0) -> int:
    start = 0
    for k, size in enumerate(sizes):
        ids = range(start, start + size)
        pq.write_table(pa.table({
            "i": pa.array([i + shift for i in ids], pa.int64()),
            "tokens": pa.array([_tokens(i, shift) for i in ids], pa.list_(pa.int32())),
            "s": pa.array([f"r{i + shift}" for i in ids], pa.string()),
        }), root / f"part-{k:02d}.parquet", row_group_size=500)
        start += size
    return start


def _check(rows: Any, wanted: list[int], shift: int = 0) -> None:
    """``rows`` (a batch of any format, or collate's dict) are the rows ``wanted``."""
    if isinstance(rows, dict):
        got = {name: rows[name] for name in ("i", "tokens", "s")}
    elif isinstance(rows, list):
        got = {name: [r[name] for r in rows] for name in ("i", "tokens", "s")}
    else:
        got = {name: rows.column(name) for name in ("i", "tokens", "s")}
    assert np.asarray(got["i"]).tolist() == [i + shift for i in wanted]
    assert np.asarray(got["tokens"]).tolist() == [_tokens(i, shift) for i in wanted]
    assert list(got["s"]) == [f"r{i + shift}" for i in wanted]


def _storage(tensor: torch.Tensor) -> int:
    return int(tensor.untyped_storage().data_ptr())


def test_group_rows_follows_the_bounds() -> None:
    small = RowBatch(["x"], 64, {"x": np.zeros((64, 4), dtype=np.int8)}, {})
    assert group_rows(small) == GROUP_ROWS  # 4 bytes a row: the row bound
    wide = RowBatch(["x"], 8, {"x": np.zeros((8, 4096), dtype=np.int64)}, {})
    assert group_rows(wide) == GROUP_BYTES // (4096 * 8)  # 32 KiB a row: the byte bound
    assert group_rows([{"x": 1}]) == 0  # python rows are never grouped
    assert group_rows(RowBatch(["x"], 0, {"x": np.zeros((0,))}, {})) == 0
    touched = RowBatch(["x"], 2, {"x": np.zeros((2,))}, {})
    touched.rows  # noqa: B018 - row dicts built: the batch may be changed, not cut
    assert group_rows(touched) == 0


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_dataloader_pass_serves_runs_of_one_fetch(tmp_path: Path, fmt: str) -> None:
    total = _write(tmp_path, [3000, 1700])
    ds = ParquetDataset(tmp_path, format=fmt)
    loader = DataLoader(ds, batch_size=16, sampler=ChunkedSampler(ds, 16, 0), collate_fn=collate)
    seen: list[int] = []
    shared = 0
    previous: Any = None
    for batch in loader:
        ids = batch["i"].tolist()
        assert ids == list(range(ids[0], ids[0] + len(ids)))
        _check(batch, ids)
        tokens = batch["tokens"]
        if previous is not None and previous.data_ptr() + previous.nbytes == tokens.data_ptr():
            shared += 1  # cut from the same fetch as the batch before: right after it
        previous = tokens
        seen.extend(ids)
    assert sorted(seen) == list(range(total))
    assert shared > len(seen) // 16 // 2, "the pass was not fetched several batches at a time"


def test_batches_of_one_fetch_are_writable_and_apart(tmp_path: Path) -> None:
    _write(tmp_path, [2000])
    ds = ParquetDataset(tmp_path, format="torch")
    batches = [collate(ds.__getitems__(list(range(a, a + 8)))) for a in range(0, 64, 8)]
    assert _storage(batches[1]["tokens"]) == _storage(batches[2]["tokens"])
    for batch in batches:
        batch["tokens"].fill_(-1)  # a training step writing into its batch
        batch["i"].add_(10_000)
    for k, batch in enumerate(batches):  # each batch its own rows: none wrote another's
        assert batch["tokens"].eq(-1).all()
        assert batch["i"].tolist() == [i + 10_000 for i in range(k * 8, k * 8 + 8)]
    _check(ds.__getitems__(list(range(0, 64))), list(range(64)))  # the cache untouched


@pytest.mark.parametrize("fmt", ["numpy", "torch", "python"])
def test_other_requests_between_runs_get_their_own_rows(tmp_path: Path, fmt: str) -> None:
    total = _write(tmp_path, [1200, 900])
    ds = ParquetDataset(tmp_path, format=fmt)
    asks = [
        range(0, 8), range(8, 16),  # a run continued: the next ones fetched with it
        range(16, 24), range(100, 108),  # a jump: what was kept is dropped
        range(24, 32), range(32, 40), range(40, 44),  # a shorter batch at the kept start
        range(44, 52), range(52, 60), [3, 1, 2], range(60, 68),  # an index list between
        range(68, 76), range(76, 84), range(1190, 1198), range(1198, 1206),  # across shards
        range(84, 92), range(92, 100), range(92, 100), range(100, 108),  # the same run twice
        range(total - 8, total),
    ]
    for ask in asks:
        wanted = list(ask)
        _check(ds.__getitems__(wanted), wanted)


def test_a_reopened_dataset_serves_its_new_rows(tmp_path: Path) -> None:
    _write(tmp_path, [1500])
    ds = ParquetDataset(tmp_path, format="torch")
    for a in range(0, 32, 8):  # the next runs fetched and kept
        _check(ds.__getitems__(list(range(a, a + 8))), list(range(a, a + 8)))
    _write(tmp_path, [1500], shift=7)  # the shard rewritten with other values
    ds.refresh()
    _check(ds.__getitems__(list(range(32, 40))), list(range(32, 40)), shift=7)
    _check(ds.__getitems__(list(range(40, 48))), list(range(40, 48)), shift=7)


def test_an_error_comes_from_the_batch_it_belongs_to(tmp_path: Path) -> None:
    ids = range(400)
    values = [2**63 if i == 37 else i for i in ids]  # no torch integer holds row 37's value
    pq.write_table(pa.table({
        "i": pa.array(list(ids), pa.int64()), "u": pa.array(values, pa.uint64()),
    }), tmp_path / "part.parquet")
    ds = ParquetDataset(tmp_path, format="torch")
    for a in (0, 8, 16, 24):  # from 8 on the run's fetch reaches row 37 and fails
        batch = collate(ds.__getitems__(list(range(a, a + 8))))
        assert batch["u"].tolist() == list(range(a, a + 8))
    with pytest.raises(OutOfRangeError, match="row 37"):
        ds.__getitems__(list(range(32, 40)))
    batch = collate(ds.__getitems__(list(range(40, 48))))
    assert batch["i"].tolist() == list(range(40, 48))


def test_threads_sharing_a_dataset_get_their_own_rows(tmp_path: Path) -> None:
    total = _write(tmp_path, [4000])
    ds = ParquetDataset(tmp_path, format="torch")
    failures: list[BaseException] = []

    def run(first: int) -> None:
        try:
            for a in range(first, total - 8, 16):  # interleaved runs from two threads
                _check(ds.__getitems__(list(range(a, a + 8))), list(range(a, a + 8)))
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(k * 8,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


def _storage_bytes(rows: Any) -> dict[str, Any]:
    batch = collate(rows)
    batch["bytes"] = batch["tokens"].untyped_storage().nbytes()
    return batch


def test_workers_fetch_their_batches_alone(tmp_path: Path) -> None:
    total = _write(tmp_path, [900, 700])
    ds = ParquetDataset(tmp_path, format="torch")
    loader = DataLoader(ds, batch_size=8, sampler=ChunkedSampler(ds, 8, 2), num_workers=2,
                        collate_fn=_storage_bytes, multiprocessing_context="spawn")
    seen: list[int] = []
    for batch in loader:
        ids = batch["i"].tolist()
        _check(batch, ids)
        # a worker's batch travels through shared memory: its own rows, no group's
        assert batch["bytes"] == len(ids) * WIDTH * 4
        seen.extend(ids)
    assert sorted(seen) == list(range(total))


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("runs")
    return root, _write(root, [1300, 800])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    asks=st.lists(
        st.tuples(st.booleans(), st.integers(0, 2099), st.integers(1, 40)), min_size=1,
        max_size=40,
    ),
    fmt=st.sampled_from(["numpy", "torch"]),
)
def test_any_sequence_of_requests_gets_exact_rows(
    shards: tuple[Path, int], asks: list[tuple[bool, int, int]], fmt: str
) -> None:
    root, total = shards
    ds = ParquetDataset(root, format=fmt)
    end = 0
    for go_on, start, length in asks:
        first = end if go_on and end < total else start  # mostly runs that continue
        wanted = list(range(first, min(first + length, total)))
        _check(ds.__getitems__(wanted), wanted)
        end = wanted[-1] + 1
