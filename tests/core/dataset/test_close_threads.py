"""Issue 27: close() or refresh() from another thread never makes a stream end short.

Deterministic (no race asserted): a stream is read one batch, the dataset is closed by
another thread (joined), then the stream is read on: it raises our error, never a short
result; rows read after the close are complete.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import datagen

from undertale_duck import ParquetDataset
from undertale_duck.errors import QueryError

SIZES = [400, 300, 300]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def ds(tmp_path: Path) -> Iterator[ParquetDataset]:
    data = tmp_path / "data"
    datagen.write_shards(data, SIZES, row_group_size=50)
    before = digest(data)
    yield ParquetDataset(data, memory=64)
    assert digest(data) == before  # whatever the test did, the dataset is untouched


def in_thread(work: object) -> None:
    thread = threading.Thread(target=work)  # type: ignore[arg-type]
    thread.start()
    thread.join()


@pytest.mark.parametrize("how", ["close", "refresh"])
def test_a_stream_closed_from_another_thread_fails_instead_of_ending_short(
    ds: ParquetDataset, how: str
) -> None:
    total = 8 * sum(SIZES)
    reader = ds.sql_batches("SELECT id FROM dataset, range(8) r", batch_rows=100)
    batches = iter(reader)
    seen = next(batches).num_rows
    in_thread(getattr(ds, how))
    with pytest.raises(QueryError, match="closed before it was read to the end"):
        for batch in batches:
            seen += batch.num_rows
    assert seen < total
    # the dataset works on, in full
    again = ds.sql_batches("SELECT id FROM dataset, range(8) r", batch_rows=100)
    assert sum(b.num_rows for b in again) == total
    assert [ds[i] for i in range(0, len(ds), 97)] == datagen.expected(len(ds))[::97]


def test_a_finished_stream_is_unaffected_by_close(ds: ParquetDataset) -> None:
    reader = ds.sql_batches("SELECT id FROM dataset", batch_rows=100)
    rows = sum(b.num_rows for b in reader)
    in_thread(ds.close)
    assert rows == sum(SIZES)


def test_reads_after_a_close_from_another_thread_are_whole(ds: ParquetDataset) -> None:
    assert ds[0] == datagen.row(0)
    in_thread(ds.close)
    in_thread(ds.close)  # twice: nothing left to close is no error
    assert [ds[i] for i in range(len(ds))] == datagen.expected(len(ds))
