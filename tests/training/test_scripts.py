"""The call patterns of undertale's own training scripts (its pipelines/models/ scripts)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from support import datagen
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from undertale_duck import ArgumentError, DataModule, ParquetDataset, SchemaError
from undertale_duck import schema as schemas
from undertale_duck.validation import verdicts


class Rows(schemas.Dataset):
    """The generated rows: a unique id and an integer label."""

    label: int


def collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return {"index": torch.tensor([int(r["id"][4:]) for r in rows]),
            "labels": torch.tensor([int(r["label"]) for r in rows])}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("scripts")
    datagen.write_shards(root / "train", [120, 77, 203], row_group_size=[25, 10, 40])
    datagen.write_shards(root / "val", [30, 31], row_group_size=8)
    return {"train": root / "train", "val": root / "val"}


# ---------------------------------------------------------------------- ParquetDataset(schema=)
def test_a_dataset_opened_with_a_schema_is_validated_once(data: dict[str, Path],
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(tmp_path / "cache"))
    verdicts.forget()
    start = verdicts.stats()
    dataset = ParquetDataset(data["train"], schema=Rows)
    assert verdicts.stats().scans == start.scans + 1
    again = ParquetDataset(data["train"], 64, schema=Rows)  # the earlier verdict is reused
    assert verdicts.stats().scans == start.scans + 1
    assert verdicts.stats().reused == start.reused + 1
    assert len(again) == len(dataset) == 400
    # what DataLoader workers receive: the open dataset, never validated again
    before = verdicts.stats()
    copy = pickle.loads(pickle.dumps(dataset))
    assert verdicts.stats() == before and copy[3]["id"] == "row-00000003"
    with pytest.raises(SchemaError):
        ParquetDataset(data["train"], schema=schemas.TokenizedDataset)
    with pytest.raises(ArgumentError):
        ParquetDataset(data["train"], schema=dict)  # type: ignore[arg-type]


def test_plain_dataloader_over_a_parquet_dataset(data: dict[str, Path]) -> None:
    dataset = ParquetDataset(data["val"], schema=Rows)
    loader = DataLoader(dataset, batch_size=8, collate_fn=collate, num_workers=2,
                        multiprocessing_context="fork")
    seen = [i for batch in loader for i in batch["index"].tolist()]
    assert seen == list(range(61))


# ---------------------------------------------------------------------- iterating a DataModule
def test_iterating_a_datamodule_yields_its_collated_training_batches(
    data: dict[str, Path]
) -> None:
    dm = DataModule(data["train"], data["val"], Rows, collate, 32, seed=4)
    counts = torch.zeros(7)
    rows = []
    for batch in dm:  # as the fine-tuning script's --label-balance computes class weights
        counts += torch.bincount(batch["labels"], minlength=7)
        rows += batch["index"].tolist()
    assert sorted(rows) == list(range(400))
    assert counts.tolist() == [sum(1 for i in range(400) if i % 7 == k) for k in range(7)]
    assert dm.state_dict() == {}  # the training position is untouched
    assert [i for b in dm.train_dataloader() for i in b["index"].tolist()] == rows


# ---------------------------------------------------------------------- under Lightning DDP
SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    import lightning
    import torch
    from torch.utils.data import DataLoader

    from undertale_duck import DataModule, ParquetDataset
    from undertale_duck import schema as schemas


    class Rows(schemas.Dataset):
        label: int


    def collate(rows):
        return {"index": torch.tensor([int(r["id"][4:]) for r in rows]),
                "labels": torch.tensor([float(r["label"]) for r in rows])}


    class Model(lightning.LightningModule):
        def __init__(self, out):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.out = out

        def _record(self, stage, batch):
            with open(f"{self.out}/{stage}-{self.global_rank}-{self.current_epoch}.txt",
                      "a") as f:
                f.write(" ".join(map(str, batch["index"].tolist())) + "\\n")

        def training_step(self, batch, batch_idx):
            self._record("train", batch)
            x = batch["labels"].unsqueeze(1)
            return ((self.layer(x) - x) ** 2).mean()

        def validation_step(self, batch, batch_idx):
            self._record("val", batch)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)


    cfg = json.loads(sys.argv[1])
    trainer = lightning.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, num_nodes=1, max_epochs=1,
        use_distributed_sampler=cfg["uds"], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )
    model = Model(cfg["out"])
    if cfg["plain"]:
        # the pretraining script: datasets validated as they open, plain DataLoaders
        train = ParquetDataset(cfg["train"], schema=Rows)
        val = ParquetDataset(cfg["val"], schema=Rows)
        trainer.fit(model,
                    train_dataloaders=DataLoader(train, batch_size=16, collate_fn=collate,
                                                 num_workers=2),
                    val_dataloaders=DataLoader(val, batch_size=16, collate_fn=collate,
                                               num_workers=2))
    else:
        dm = DataModule(cfg["train"], cfg["val"], Rows, collate, 16, 2, seed=5)
        trainer.fit(model, datamodule=dm)
    """
)


def _run(tmp_path: Path, cfg: dict[str, Any]) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, str(tmp_path / "script.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]


def _rows(out: Path, name: str) -> list[int]:
    path = out / name
    return [int(i) for line in path.read_text().splitlines() for i in line.split()]


@pytest.mark.heavy
def test_plain_dataloaders_under_lightnings_distributed_sampler(data: dict[str, Path],
                                                                tmp_path: Path) -> None:
    _run(tmp_path, {"train": str(data["train"]), "val": str(data["val"]), "uds": True,
                    "plain": True, "out": str(tmp_path)})
    for split, rows in (("train", 400), ("val", 61)):
        for rank in (0, 1):
            # Lightning swaps in a DistributedSampler: shuffled for training, strided for
            # validation, padded to equal shares (61 rows: row 0 twice), as it always does
            expected = list(DistributedSampler(range(rows), 2, rank, shuffle=split == "train"))
            assert _rows(tmp_path, f"{split}-{rank}-0.txt") == expected


@pytest.mark.heavy
@pytest.mark.parametrize("uds", [True, False])
def test_datamodule_gives_each_rank_its_share_once_either_way(data: dict[str, Path],
                                                              tmp_path: Path, uds: bool) -> None:
    _run(tmp_path, {"train": str(data["train"]), "val": str(data["val"]), "uds": uds,
                    "plain": False, "out": str(tmp_path)})
    train = [_rows(tmp_path, f"train-{rank}-0.txt") for rank in (0, 1)]
    assert sorted(train[0] + train[1]) == list(range(400)) and len(train[0]) == 200
    val = [_rows(tmp_path, f"val-{rank}-0.txt") for rank in (0, 1)]
    assert val[0] == list(range(31)) and val[1] == list(range(31, 61))  # contiguous, once
