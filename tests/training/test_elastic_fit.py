"""Lightning fits stopped mid-epoch and resumed on another topology (ranks, workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from support import datagen

from undertale_duck import ChunkedSampler, Mixture, ParquetDataset, Stream

# Writes the row ids of every training batch to <out>/train-<rank>-<epoch>.txt; checkpoints
# every cfg["every"] steps; resumes from cfg["ckpt"].
FIT = textwrap.dedent(
    """
    import json
    import sys

    import lightning
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    from undertale_duck import DataModule, Mixture, Stream

    SECOND = "SELECT 'row-1' || id[5:] AS id, label FROM dataset"  # ids from 100000000


    def collate(rows):
        return {"index": torch.tensor([int(r["id"][4:]) for r in rows]),
                "label": torch.tensor([float(r["label"]) for r in rows])}


    class Recorder(lightning.LightningModule):
        def __init__(self, out):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.out = out

        def training_step(self, batch, batch_idx):
            name = f"{self.out}/train-{self.global_rank}-{self.current_epoch}.txt"
            with open(name, "a") as f:
                f.write(" ".join(map(str, batch["index"].tolist())) + "\\n")
            x = batch["label"].unsqueeze(1)
            return ((self.layer(x) - x) ** 2).mean()

        def validation_step(self, batch, batch_idx):
            name = f"{self.out}/val-{self.global_rank}-{self.current_epoch}.txt"
            with open(name, "a") as f:
                f.write(" ".join(map(str, batch["index"].tolist())) + "\\n")

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)


    cfg = json.loads(sys.argv[1])
    if cfg["mixture"]:
        train = Mixture([Stream(cfg["train"], proportion=3),
                         Stream(cfg["other"], proportion=1, query=SECOND)], epoch_size=200)
    else:
        train = cfg["train"]
    val = None if cfg["mixture"] else cfg["other"]
    dm = DataModule(train, val, None, collate, cfg["batch"], cfg["workers"], memory=1,
                    seed=cfg["seed"], **cfg.get("options", {}))
    callbacks = []
    if cfg.get("every"):
        callbacks.append(ModelCheckpoint(dirpath=cfg["ckpt_dir"], filename="{step}",
                                         every_n_train_steps=cfg["every"], save_top_k=-1))
    trainer = lightning.Trainer(
        strategy="ddp" if cfg["devices"] > 1 else "auto", accelerator="cpu",
        devices=cfg["devices"], max_epochs=cfg["epochs"], max_steps=cfg.get("max_steps", -1),
        logger=False, enable_checkpointing=bool(callbacks), callbacks=callbacks,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )
    trainer.fit(Recorder(cfg["out"]), datamodule=dm, ckpt_path=cfg.get("ckpt"))
    """
)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("elastic_fit")
    datagen.write_shards(root / "train", [120, 77, 203], row_group_size=[25, 10, 40])
    datagen.write_shards(root / "other", [30, 31], row_group_size=8)
    return {"train": root / "train", "other": root / "other"}


def _fit(tmp_path: Path, cfg: dict[str, Any], ok: bool = True) -> str:
    (tmp_path / "fit.py").write_text(FIT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, str(tmp_path / "fit.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert (result.returncode == 0) == ok, result.stderr[-4000:]
    return result.stderr


def _rows(out: Path, epoch: int, split: str = "train") -> list[int]:
    return [int(i) for path in sorted(out.glob(f"{split}-*-{epoch}.txt"))
            for line in path.read_text().splitlines() for i in line.split()]


def _dataset(data: dict[str, Path], mixture: bool) -> Any:
    if not mixture:
        return ParquetDataset(data["train"], memory=1)
    second = "SELECT 'row-1' || id[5:] AS id, label FROM dataset"
    return Mixture([Stream(data["train"], proportion=3),
                    Stream(data["other"], proportion=1, query=second)], epoch_size=200, memory=1)


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("old", "new", "mixture"),
    [((2, 2), (1, 0), False), ((1, 0), (2, 2), False), ((2, 2), (2, 0), False),
     ((2, 0), (1, 2), True)],
)
def test_a_fit_resumes_on_another_topology(data: dict[str, Path], tmp_path: Path,
                                           old: tuple[int, int], new: tuple[int, int],
                                           mixture: bool) -> None:
    batch, seed, steps = 16, 6, 4
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    common = {"train": str(data["train"]), "other": str(data["other"]), "batch": batch,
              "seed": seed, "mixture": mixture, "ckpt_dir": str(tmp_path / "ckpt")}
    _fit(tmp_path, {**common, "devices": old[0], "workers": old[1], "epochs": 1,
                    "max_steps": steps, "every": steps, "out": str(first)})
    ckpt = tmp_path / "ckpt" / f"step={steps}.ckpt"
    state = torch.load(ckpt, weights_only=False)["DataModule"]["train"]
    assert state["consumed"] == steps * batch and state["ranks"] == old[0]
    _fit(tmp_path, {**common, "devices": new[0], "workers": new[1], "epochs": 2,
                    "ckpt": str(ckpt), "out": str(second)})

    dataset = _dataset(data, mixture)
    # what the resumed run's rule leaves out: its own tail, fewer than ranks x workers rows
    resumed = ChunkedSampler(dataset, batch, new[1], new[0], 0, shuffle=True, seed=seed)
    resumed.load_state_dict(state)
    before, after = _rows(first, 0), _rows(second, 0)
    assert len(before) == old[0] * steps * batch
    both = Counter(before + after)
    assert max(both.values()) == 1  # no row twice across the two parts
    epoch_rows = {int(dataset[int(i)]["id"][4:]) for i in resumed.sequence(0)}
    missing = epoch_rows - set(both)
    assert len(missing) == resumed.tail < new[0] * max(new[1], 1)
    assert set(both) <= epoch_rows
    # the next epoch is whole again, in the new topology's original order
    plain = [ChunkedSampler(dataset, batch, new[1], new[0], r, shuffle=True, seed=seed)
             for r in range(new[0])]
    expected = sorted(int(dataset[int(i)]["id"][4:]) for s in plain for i in s.order(1))
    assert sorted(_rows(second, 1)) == expected
    if not mixture:  # validation ran at the end of the resumed epoch and of the next, whole
        for epoch in (0, 1):
            assert sorted(_rows(second, epoch, "val")) == list(range(61))
    if mixture:  # proportions per epoch: 150 rows of the first source, 50 of the second
        for rows in (_rows(second, 1), before + after):
            firsts = sum(1 for i in rows if i < 100000000)
            assert 150 - new[0] * 2 <= firsts <= 150 and len(rows) - firsts <= 50


def _index_batch(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """A batch of row ids (from the generator's ``id``) and labels, for :func:`_recorder`."""
    return {"index": torch.tensor([int(r["id"][4:]) for r in rows]),
            "label": torch.tensor([[float(r["label"])] for r in rows])}


def _recorder(seen: list[tuple[int, list[int]]],
              indices: list[tuple[int, int]] | None = None) -> Any:
    """A tiny model recording each training batch's row ids (and batch index) by epoch."""
    import lightning

    class Recorder(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def training_step(self, batch: dict[str, torch.Tensor], index: int) -> torch.Tensor:
            seen.append((self.current_epoch, batch["index"].tolist()))
            if indices is not None:
                indices.append((self.current_epoch, index))
            return ((self.layer(batch["label"]) - batch["label"]) ** 2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Recorder()


def test_a_checkpoint_at_an_epochs_last_batch_resumes_with_more_batches_per_epoch(
        data: dict[str, Path], tmp_path: Path) -> None:
    # Lightning restored at the last batch of an epoch keeps its batch counter (10 here) for
    # the next epoch unless the new loader has no more batches than that: at batch 16 (25
    # batches an epoch) it began the next epoch at batch 10, and 160 of its 400 rows were lost
    import lightning
    from lightning.pytorch.callbacks import ModelCheckpoint

    from undertale_duck import DataModule

    seen: list[tuple[int, list[int]]] = []
    indices: list[tuple[int, int]] = []

    def fit(batch: int, ckpt: Path | None, **options: Any) -> dict[int, list[int]]:
        seen.clear()
        indices.clear()
        every = ModelCheckpoint(dirpath=tmp_path, filename="{step}", every_n_train_steps=5,
                                save_top_k=-1)
        lightning.Trainer(accelerator="cpu", devices=1, logger=False, callbacks=[every],
                          enable_progress_bar=False, enable_model_summary=False,
                          **options).fit(_recorder(seen, indices), datamodule=DataModule(
                              data["train"], None, None, _index_batch, batch, seed=2),
                                         ckpt_path=ckpt)
        epochs: dict[int, list[int]] = {}
        for epoch, rows in seen:
            epochs.setdefault(epoch, []).extend(rows)
        return epochs

    dataset = ParquetDataset(data["train"], memory=1)
    plain = ChunkedSampler(dataset, 16, 0, shuffle=True, seed=2)
    order = [[int(dataset[i]["id"][4:]) for i in plain.order(e).tolist()] for e in range(3)]
    fit(40, None, max_steps=10)  # 400 rows: 10 batches, step=10.ckpt at the epoch's last batch
    # the next epoch whole, and the one after it too (the loader of the plain length again)
    assert fit(16, tmp_path / "step=10.ckpt", max_epochs=3) == {1: order[1], 2: order[2]}
    # a checkpoint inside that epoch (5 batches into it) resumes exactly too
    assert fit(16, tmp_path / "step=15.ckpt", max_epochs=2) == {1: order[1][5 * 16:]}
    # on the same topology Lightning starts the next epoch at batch 0 by itself: the epoch
    # keeps its plain length and batch indices (nothing carried)
    assert fit(40, tmp_path / "step=10.ckpt", max_epochs=2) == {1: order[1]}
    assert indices == [(1, i) for i in range(10)]


def test_an_elastic_resume_that_leaves_only_a_tail_finishes_that_epoch(tmp_path: Path) -> None:
    # 49 rows, batch 8, one rank without workers: 6 batches and 1 row; a checkpoint at step 6
    # leaves that 1 row, fewer than the 2 workers of the resumed run. The sampler moved on
    # to the next epoch while Lightning, restored inside the saved one, was still finishing
    # it: the next epoch's 48 rows were trained twice (once as the saved epoch's rest)
    import lightning
    from lightning.pytorch.callbacks import ModelCheckpoint

    from undertale_duck import DataModule

    datagen.write_shards(tmp_path / "train", [30, 19], row_group_size=[7, 5])
    seen: list[tuple[int, list[int]]] = []

    def fit(workers: int, ckpt: Path | None, **options: Any) -> dict[int, list[int]]:
        seen.clear()
        every = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="{step}",
                                every_n_train_steps=6, save_top_k=-1)
        lightning.Trainer(accelerator="cpu", devices=1, logger=False, callbacks=[every],
                          enable_progress_bar=False, enable_model_summary=False,
                          **options).fit(_recorder(seen), datamodule=DataModule(
                              tmp_path / "train", None, None, _index_batch, 8, workers, memory=1,
                              seed=2), ckpt_path=ckpt)
        epochs: dict[int, list[int]] = {}
        for epoch, rows in seen:
            epochs.setdefault(epoch, []).extend(rows)
        return epochs

    before = fit(0, None, max_steps=6)[0]
    assert len(before) == 48
    after = fit(2, tmp_path / "ckpt" / "step=6.ckpt", max_epochs=2)
    # the saved epoch has nothing more for 2 workers (its 1 row is the resumed run's tail),
    # and the next epoch is whole, once: the new topology's plain order
    dataset = ParquetDataset(tmp_path / "train", memory=1)
    plain = ChunkedSampler(dataset, 8, 2, shuffle=True, seed=2)
    assert after == {1: [int(dataset[i]["id"][4:]) for i in plain.order(1).tolist()]}
    assert len(set(before)) == 48 and len(after[1]) == 48


@pytest.mark.heavy
def test_an_elastic_resume_without_drop_last_that_gives_ranks_unequal_steps_is_refused(
        tmp_path: Path) -> None:
    # 171 rows, drop_last=False: 86 and 85 per rank, 13 batches of 7 each, so the plain
    # epoch passes the check. Resumed at batch 7 after 8 rows per rank at batch 8, the 155
    # rows left are shared 78 and 77: 12 and 11 batches, and rank 0's twelfth step waited
    # for gradients rank 1 never sent (gloo "Connection closed by peer")
    datagen.write_shards(tmp_path / "train", [37, 83, 51], row_group_size=[5, 9, 13])
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    common = {"train": str(tmp_path / "train"), "other": None, "mixture": False, "seed": 3,
              "devices": 2, "workers": 0, "ckpt_dir": str(tmp_path / "ckpt"),
              "options": {"drop_last": False}}
    _fit(tmp_path, {**common, "batch": 8, "epochs": 1, "max_steps": 1, "every": 1,
                    "out": str(first)})
    assert len(_rows(first, 0)) == 16
    stderr = _fit(tmp_path, {**common, "batch": 7, "epochs": 1, "out": str(second),
                             "ckpt": str(tmp_path / "ckpt" / "step=1.ckpt")}, ok=False)
    assert ("ArgumentError: drop_last=False gives the 2 ranks 11 to 12 training batches for "
            "the rest of the resumed epoch") in stderr, stderr[-4000:]
    assert not _rows(second, 0)  # refused before any step
