from __future__ import annotations

from pathlib import Path

import pytest
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import ParquetDataset


def _ids(batch: list[dict[str, object]]) -> list[object]:
    return [row["id"] for row in batch]


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("parent_used_first", [True, False])
def test_dataloader_workers(uneven: tuple[Path, int], method: str,
                            parent_used_first: bool) -> None:
    root, total = uneven
    ds = ParquetDataset(root, memory=1)
    if parent_used_first:
        assert ds[7]["id"] == "row-00000007"
        assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": total}]
    loader = DataLoader(ds, batch_size=16, num_workers=2, multiprocessing_context=method,
                        collate_fn=_ids)
    seen = [i for batch in loader for i in batch]
    assert seen == [f"row-{i:08d}" for i in range(total)]
    # the parent still works after its workers are gone
    assert ds[-1] == datagen.expected(total)[-1]
    assert ds.sql("SELECT max(label) AS m FROM dataset").to_pylist() == [{"m": 6}]


def test_shuffled_loader_sees_every_row(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    loader = DataLoader(ds, batch_size=7, shuffle=True, num_workers=2, collate_fn=_ids)
    seen = sorted(i for batch in loader for i in batch)
    assert seen == [f"row-{i:08d}" for i in range(total)]
