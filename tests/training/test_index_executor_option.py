"""load() and DataModule pass index_executor= to the datasets they open."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support import datagen

from undertale_duck import ArgumentError, ParquetDataset, load
from undertale_duck.common.progress import Progress
from undertale_duck.core.runtime import CACHE_ENV, run_here

T = TypeVar("T")
R = TypeVar("R")


class Counting:
    """A TaskMap running the tasks here, counting them."""

    def __init__(self) -> None:
        self.ran = 0

    def map(self, function: Callable[[T], R], tasks: Sequence[T],
            progress: Progress | None = None, *, memory_bytes: int = 0) -> list[R]:
        self.ran += len(tasks)
        return run_here(function, tasks, progress)


def _ids(rows: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"][4:]) for r in rows]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # every view indexed anew
    datagen.write_shards(tmp_path / "data", [30, 20, 25], row_group_size=10)
    return tmp_path / "data"


def test_load_indexes_the_view_through_the_executor(root: Path) -> None:
    executor = Counting()
    loader = load(root, None, _ids, 8, where="label < 3", index_executor=executor)
    assert executor.ran == 3  # one task per shard
    assert sorted(i for b in loader for i in b)[:5] == [i for i in range(75) if i % 7 < 3][:5]
    with pytest.raises(ArgumentError, match="index_executor"):
        load(ParquetDataset(root), None, _ids, 8, index_executor=executor)


def test_datamodule_passes_index_executor_to_each_split(root: Path) -> None:
    from undertale_duck import DataModule

    other = datagen.write_shards(root.parent / "val", [12, 9], row_group_size=10)[0].parent
    executor = Counting()
    dm = DataModule(root, other, None, _ids, 5, where="label = 1", index_executor=executor,
                    shuffle=False)
    train = [i for b in dm.train_dataloader() for i in b]
    assert train == [i for i in range(75) if i % 7 == 1][: len(train)]
    assert executor.ran == 3
    assert [i for b in dm.val_dataloader() for i in b] == [i for i in range(21) if i % 7 == 1]
    assert executor.ran == 5  # and one task per validation shard
    copy = pickle.loads(pickle.dumps(dm))  # the executor does not travel
    assert "index_executor" not in copy.options
