from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support import datagen

from undertale_duck import ArgumentError, ChunkedSampler, ParquetDataset
from undertale_duck import schema as schemas

# A LightningModule that writes the row ids of every batch it gets to
# <out>/<stage>-<rank>-<epoch>.txt, one line per batch; shared by the in-process and DDP runs.
MODULE = textwrap.dedent(
    """
    from pathlib import Path

    import lightning
    import torch


    def collate(rows):
        return {
            "index": torch.tensor([int(r["id"][4:]) for r in rows]),
            "label": torch.tensor([float(r["label"]) for r in rows]),
        }


    class Recorder(lightning.LightningModule):
        def __init__(self, out):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.out = Path(out)

        def _record(self, stage, batch):
            name = f"{stage}-{self.global_rank}-{self.current_epoch}.txt"
            with open(self.out / name, "a") as f:
                f.write(" ".join(map(str, batch["index"].tolist())) + "\\n")

        def training_step(self, batch, batch_idx):
            self._record("train", batch)
            x = batch["label"].unsqueeze(1)
            return ((self.layer(x) - x) ** 2).mean()

        def validation_step(self, batch, batch_idx):
            self._record("val", batch)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)
    """
)

DDP_SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    import lightning

    from recorder import Recorder, collate
    from undertale_duck import DataModule

    cfg = json.loads(sys.argv[1])
    dm = DataModule(cfg["train"], cfg["val"], None, collate, cfg["batch"], cfg["workers"],
                    memory=1, seed=cfg["seed"], **cfg.get("view", {}))
    trainer = lightning.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, max_epochs=cfg["epochs"],
        use_distributed_sampler=cfg["uds"], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )
    trainer.fit(Recorder(cfg["out"]), datamodule=dm)
    """
)


# A DDP fit with a schema, optional checkpoints and resume; each rank writes what validation
# did in it to <out>/verdicts-<rank>.json (ParquetDataset.report still runs: it is counted).
DDP_FIT = textwrap.dedent(
    """
    import json
    import sys
    from collections import Counter

    import lightning
    from lightning.pytorch.callbacks import ModelCheckpoint

    from recorder import Recorder, collate
    from undertale_duck import DataModule, ParquetDataset, schema
    from undertale_duck.validation import verdicts

    scanned = Counter()
    original = ParquetDataset.report

    def counted(ds, model, **options):
        scanned[str(ds.source.spec)] += 1
        return original(ds, model, **options)

    ParquetDataset.report = counted


    class Rows(schema.Dataset):
        label: int


    cfg = json.loads(sys.argv[1])
    dm = DataModule(cfg["train"], cfg["val"], Rows, collate, cfg["batch"], cfg["workers"],
                    memory=1, seed=cfg["seed"])
    callbacks = []
    if cfg.get("every"):
        callbacks.append(ModelCheckpoint(dirpath=cfg["ckpt_dir"], filename="{step}",
                                         every_n_train_steps=cfg["every"], save_top_k=-1))
    trainer = lightning.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, max_epochs=cfg["epochs"],
        max_steps=cfg.get("max_steps", -1), logger=False,
        enable_checkpointing=bool(callbacks), callbacks=callbacks,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )
    trainer.fit(Recorder(cfg["out"]), datamodule=dm, ckpt_path=cfg.get("ckpt"))
    done = verdicts.stats()
    with open(f"{cfg['out']}/verdicts-{trainer.global_rank}.json", "w") as f:
        json.dump({"scanned": scanned, "scans": done.scans, "reused": done.reused,
                   "shared": done.shared, "together": done.together}, f)
    """
)


def _fit_ddp(tmp_path: Path, cfg: dict[str, Any], cache: Path) -> None:
    (tmp_path / "recorder.py").write_text(MODULE)
    (tmp_path / "fit_ddp.py").write_text(DDP_FIT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
           "UNDERTALE_DUCK_CACHE": str(cache)}
    result = subprocess.run([sys.executable, str(tmp_path / "fit_ddp.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]


class Rows(schemas.Dataset):
    """The generated rows: a unique id and an integer label."""

    label: int


def _ids(rows: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"][4:]) for r in rows]


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("splits")
    datagen.write_shards(root / "train", [120, 77, 203], row_group_size=[25, 10, 40])
    datagen.write_shards(root / "val", [30, 31], row_group_size=8)
    return {"train": root / "train", "val": root / "val"}


def _read(out: Path, name: str) -> list[list[int]]:
    path = out / name
    if not path.exists():
        return []
    return [[int(i) for i in line.split()] for line in path.read_text().splitlines()]


def _flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


def _module(tmp_path: Path) -> None:
    (tmp_path / "recorder.py").write_text(MODULE)
    sys.path.insert(0, str(tmp_path))


# ---------------------------------------------------------------------- without a Trainer
def test_import_does_not_import_lightning() -> None:
    code = "import sys, undertale_duck; print('lightning' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_loaders(splits: dict[str, Path]) -> None:
    from undertale_duck import DataModule

    dm = DataModule(splits["train"], splits["val"], Rows, _ids, 10, seed=2,
                    test=splits["val"], predict=splits["train"])
    train = dm.train_dataloader()
    assert isinstance(train.sampler, ChunkedSampler) and train.sampler.shuffle
    assert train.sampler.seed == 2
    seen = [i for b in train for i in b]
    assert sorted(seen) == list(range(400)) and seen != list(range(400))
    assert [i for b in dm.val_dataloader() for i in b] == list(range(61))
    assert [i for b in dm.test_dataloader() for i in b] == list(range(61))
    assert [i for b in dm.predict_dataloader() for i in b] == list(range(400))
    plain = DataModule(splits["train"], None, None, _ids, 10, shuffle=False)
    assert [i for b in plain.train_dataloader() for i in b] == list(range(400))
    from lightning.pytorch.utilities.model_helpers import is_overridden

    assert not is_overridden("val_dataloader", plain)  # Lightning skips validation
    assert not is_overridden("test_dataloader", plain)
    assert is_overridden("val_dataloader", dm) and is_overridden("predict_dataloader", dm)


def test_opening_options_apply_to_the_splits_given_as_paths(splits: dict[str, Path]) -> None:
    """An open training split keeps its own options; the validation path opens with them.

    load() now refuses opening options with an open dataset, so the DataModule must not pass
    them there; columns/format that the open split does not serve are refused, not ignored.
    """
    from undertale_duck import ArgumentError, DataModule, ParquetDataset

    train = ParquetDataset(splits["train"], format="torch")
    dm = DataModule(train, splits["val"], None, _ids, 10, shuffle=False, window_bytes=200,
                    retries=1, format="torch")
    assert [i for b in dm.train_dataloader() for i in b] == list(range(400))
    val = dm.val_dataloader()
    assert [i for b in val for i in b] == list(range(61))
    assert len(val.dataset.windows) > len(ParquetDataset(splits["val"]).windows)
    wrong = DataModule(train, splits["val"], None, _ids, 10, format="numpy")
    with pytest.raises(ArgumentError, match="format='numpy', but the open dataset"):
        wrong.train_dataloader()


def test_schema_is_checked(splits: dict[str, Path]) -> None:
    from undertale_duck import DataModule, SchemaError

    dm = DataModule(splits["train"], None, schemas.TokenizedDataset, _ids, 10)
    with pytest.raises(SchemaError):
        dm.train_dataloader()


def test_unknown_option(splits: dict[str, Path]) -> None:
    from undertale_duck import DataModule

    with pytest.raises(ArgumentError, match="suffle"):
        DataModule(splits["train"], None, None, _ids, 10, suffle=True)


def test_bool_batch_and_workers_are_refused_when_the_module_is_built(
    splits: dict[str, Path],
) -> None:
    from undertale_duck import DataModule

    # True counted as 1 until Lightning first asked for a loader, far from this call
    with pytest.raises(ArgumentError, match="batch must be an integer >= 1, got True"):
        DataModule(splits["train"], None, None, _ids, True)
    with pytest.raises(ArgumentError, match="workers must be an integer >= 0, got True"):
        DataModule(splits["train"], None, None, _ids, 10, True)
    with pytest.raises(ArgumentError, match=r"memory must be a number of MiB.*got True"):
        DataModule(splits["train"], None, None, _ids, 10, 0, True)
    dm = DataModule(splits["train"], None, None, _ids, np.int64(10), np.int64(0))
    assert (dm.batch, dm.workers) == (10, 0) and type(dm.batch) is int


def test_a_split_over_another_validation_source_is_refused(splits: dict[str, Path]) -> None:
    from undertale_duck import DataModule, Split

    # the split cut the validation source too: 61 validation rows silently became ~15
    split = Split(key="id", fraction=0.25)
    with pytest.raises(ArgumentError, match=r"validation .* is not the training source"):
        DataModule(splits["train"], splits["val"], None, _ids, 16, split=split)
    # one source, however spelled, serves both parts; without split= every validation row
    same = DataModule(splits["train"], f"{splits['train']}/", None, _ids, 16, split=split,
                      shuffle=False)
    train = [i for b in same.train_dataloader() for i in b]
    validation = [i for b in same.val_dataloader() for i in b]
    assert sorted(train + validation) == list(range(400))
    assert all(split.part_of(f"row-{i:08d}") == "validation" for i in validation)
    whole = DataModule(splits["train"], splits["val"], None, _ids, 16)
    assert sorted(i for b in whole.val_dataloader() for i in b) == list(range(61))


def test_state_dict_round_trip(splits: dict[str, Path]) -> None:
    from undertale_duck import DataModule

    dm = DataModule(splits["train"], None, None, _ids, 10, seed=5)
    assert dm.state_dict() == {}
    loader = dm.train_dataloader()
    it = iter(loader)
    consumed = [i for _ in range(4) for i in next(it)]
    state = dm.state_dict()
    assert state["train"]["consumed"] == 40 and state["train"]["epoch"] == 0

    fresh = DataModule(splits["train"], None, None, _ids, 10, seed=5)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state  # pending until the loader is built
    rest = [i for b in fresh.train_dataloader() for i in b]
    assert consumed + rest == [i for b in DataModule(
        splits["train"], None, None, _ids, 10, seed=5).train_dataloader() for i in b]


def test_a_loaders_state_given_as_the_modules_state_is_refused(splits: dict[str, Path]) -> None:
    # the module's state is {"train": <the loader's state>}: the loader's own, given as it
    # is, was ignored, and training restarted from the epoch's first batch without a word
    from undertale_duck import DataModule

    dm = DataModule(splits["train"], None, None, _ids, 10, seed=5)
    it = iter(dm.train_dataloader())
    next(it)
    loader_state = dm.state_dict()["train"]
    fresh = DataModule(splits["train"], None, None, _ids, 10, seed=5)
    with pytest.raises(ArgumentError, match=r"\{'train': "):
        fresh.load_state_dict(loader_state)
    fresh.load_state_dict({})  # before training: nothing to restore
    assert fresh.state_dict() == {}


def test_fit_without_validation(splits: dict[str, Path], tmp_path: Path) -> None:
    import lightning

    from undertale_duck import DataModule

    _module(tmp_path)
    from recorder import Recorder, collate  # type: ignore[import-not-found]

    dm = DataModule(splits["train"], None, None, collate, 50, seed=1)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=2, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False)
    trainer.fit(Recorder(tmp_path), datamodule=dm)
    for epoch in range(2):
        sampler = ChunkedSampler(ParquetDataset(splits["train"], memory=1), 50, 0, 1, 0,
                                 shuffle=True, seed=1)
        assert _flat(_read(tmp_path, f"train-0-{epoch}.txt")) == sampler.order(epoch).tolist()
    assert _read(tmp_path, "train-0-0.txt") != _read(tmp_path, "train-0-1.txt")
    assert not list(tmp_path.glob("val-*"))


def test_a_validation_mixture_evaluates_the_same_rows_every_epoch(splits: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    import lightning

    from undertale_duck import DataModule, Mixture, Stream

    _module(tmp_path)
    from recorder import Recorder, collate

    # 20 of the 61 validation rows: a contiguous run whose start Lightning's set_epoch moved
    validation = Mixture([Stream(ParquetDataset(splits["val"], memory=1), choose=20)])
    dm = DataModule(splits["train"], validation, None, collate, 50, seed=1)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=3, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Recorder(tmp_path), datamodule=dm)
    rows = [_flat(_read(tmp_path, f"val-0-{epoch}.txt")) for epoch in range(3)]
    expected = list(ChunkedSampler(validation, 50, 0, 1, 0, seed=1, drop_last=False))
    assert rows == [expected] * 3 and len(expected) == 20
    assert _read(tmp_path, "train-0-0.txt") != _read(tmp_path, "train-0-1.txt")


# ---------------------------------------------------------------------- DDP and resume
@pytest.mark.heavy
@pytest.mark.parametrize(("uds", "workers"), [(True, 2), (False, 0)])
def test_ddp_fit_each_rank_reads_its_own_share(splits: dict[str, Path], tmp_path: Path,
                                               uds: bool, workers: int) -> None:
    (tmp_path / "recorder.py").write_text(MODULE)
    (tmp_path / "fit.py").write_text(DDP_SCRIPT)
    batch, seed, epochs = 16, 7, 2
    cfg = {"train": str(splits["train"]), "val": str(splits["val"]), "batch": batch,
           "workers": workers, "seed": seed, "epochs": epochs, "uds": uds,
           "out": str(tmp_path)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run([sys.executable, str(tmp_path / "fit.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]

    train = ParquetDataset(splits["train"], memory=1)
    val = ParquetDataset(splits["val"], memory=1)
    orders: dict[int, list[list[int]]] = {0: [], 1: []}
    for epoch in range(epochs):
        for rank in range(2):
            sampler = ChunkedSampler(train, batch, workers, 2, rank, shuffle=True, seed=seed)
            sampler.set_epoch(epoch)
            got = _read(tmp_path, f"train-{rank}-{epoch}.txt")
            assert _flat(got) == sampler.order().tolist()  # exactly its share, in order, once
            assert all(len(b) == batch for b in got[:-1])
            orders[rank].append(_flat(got))
            evaluation = ChunkedSampler(val, batch, workers, 2, rank, drop_last=False)
            assert _flat(_read(tmp_path, f"val-{rank}-{epoch}.txt")) == list(evaluation)
        both = orders[0][epoch] + orders[1][epoch]
        assert len(set(both)) == len(both) == 400  # disjoint; 400 = 2 ranks x 2 workers x 100
        assert sorted(both) == list(range(400))
    assert orders[0][0] != orders[0][1]  # set_epoch was called each epoch


@pytest.mark.heavy
@pytest.mark.parametrize("view", [{"where": "len(tokens) > 0"},
                                  {"query": "SELECT id, label, tokens[1:2] AS head "
                                            "FROM dataset WHERE len(tokens) > 0"}])
def test_ddp_fit_over_a_view_reads_every_row_of_the_view_once_per_epoch(
    splits: dict[str, Path], tmp_path: Path, view: dict[str, str]
) -> None:
    (tmp_path / "recorder.py").write_text(MODULE)
    (tmp_path / "fit.py").write_text(DDP_SCRIPT)
    batch, seed, epochs, workers = 16, 11, 2, 2
    cfg = {"train": str(splits["train"]), "val": str(splits["val"]), "batch": batch,
           "workers": workers, "seed": seed, "epochs": epochs, "uds": True,
           "out": str(tmp_path), "view": view}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run([sys.executable, str(tmp_path / "fit.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]

    train = ParquetDataset(splits["train"], memory=1, **view)  # type: ignore[arg-type]
    val = ParquetDataset(splits["val"], memory=1, **view)  # type: ignore[arg-type]
    # the view keeps the rows with tokens: 320 of 400, which 2 ranks x 2 workers divide
    kept = [i for i in range(400) if len(datagen.row(i)["tokens"]) > 0]
    assert len(train) == len(kept) == 320 and _ids([train[i] for i in range(320)]) == kept
    orders = []
    for epoch in range(epochs):
        both: list[int] = []
        for rank in range(2):
            sampler = ChunkedSampler(train, batch, workers, 2, rank, shuffle=True, seed=seed)
            sampler.set_epoch(epoch)
            got = _flat(_read(tmp_path, f"train-{rank}-{epoch}.txt"))
            # view positions -> source ids: each rank read exactly its share, in order
            assert got == [kept[int(i)] for i in sampler.order()]
            both += got
            evaluation = ChunkedSampler(val, batch, workers, 2, rank, drop_last=False)
            assert _flat(_read(tmp_path, f"val-{rank}-{epoch}.txt")) == _ids(
                [val[int(i)] for i in evaluation])
        assert sorted(both) == kept  # every row of the view exactly once across the ranks
        orders.append(both)
    assert orders[0] != orders[1]  # shuffled differently each epoch


@pytest.mark.heavy
@pytest.mark.parametrize("workers", [0, 2])
def test_resume_mid_epoch_from_a_lightning_checkpoint(splits: dict[str, Path], tmp_path: Path,
                                                      workers: int) -> None:
    import lightning
    from lightning.pytorch.callbacks import ModelCheckpoint

    from undertale_duck import DataModule

    _module(tmp_path)
    from recorder import Recorder, collate

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    batch, seed = 16, 3

    def trainer(**kwargs: Any) -> lightning.Trainer:
        return lightning.Trainer(accelerator="cpu", devices=1, logger=False,
                                 enable_progress_bar=False, enable_model_summary=False,
                                 num_sanity_val_steps=0, **kwargs)

    def datamodule() -> DataModule:
        return DataModule(splits["train"], splits["val"], None, collate, batch, workers,
                          memory=1, seed=seed)

    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="{step}",
                                  every_n_train_steps=5, save_top_k=-1)
    trainer(max_steps=5, callbacks=[checkpoints]).fit(Recorder(first), datamodule=datamodule())
    ckpt = tmp_path / "ckpt" / "step=5.ckpt"
    assert ckpt.exists()
    saved = torch.load(ckpt, weights_only=False)
    assert saved["DataModule"]["train"]["consumed"] == 5 * batch

    trainer(max_epochs=2, enable_checkpointing=False).fit(
        Recorder(second), datamodule=datamodule(), ckpt_path=ckpt
    )
    sampler = ChunkedSampler(ParquetDataset(splits["train"]), batch, workers, 1, 0,
                             shuffle=True, seed=seed)
    before = _read(first, "train-0-0.txt")
    after = _read(second, "train-0-0.txt")
    assert len(before) == 5
    assert _flat(before) + _flat(after) == sampler.order(0).tolist()  # no repeats, no skips
    assert _flat(_read(second, "train-0-1.txt")) == sampler.order(1).tolist()
    evaluation = ChunkedSampler(ParquetDataset(splits["val"]), batch, workers, 1, 0,
                                 drop_last=False)
    assert _flat(_read(second, "val-0-0.txt")) == list(evaluation)


def test_pickling_keeps_missing_splits_and_position(splits: dict[str, Path]) -> None:
    import pickle

    from lightning.pytorch.utilities.model_helpers import is_overridden

    from undertale_duck import DataModule

    dm = DataModule(splits["train"], None, None, _ids, 10, seed=5, predict=splits["val"])
    it = iter(dm.train_dataloader())
    first = next(it) + next(it)
    copy = pickle.loads(pickle.dumps(dm))
    assert not is_overridden("val_dataloader", copy) and not is_overridden("test_dataloader", copy)
    assert is_overridden("predict_dataloader", copy)
    assert copy.state_dict() == dm.state_dict()
    rest = [i for b in copy.train_dataloader() for i in b]
    whole = DataModule(splits["train"], None, None, _ids, 10, seed=5).train_dataloader()
    assert first + rest == [i for b in whole for i in b]


# ---------------------------------------------------------------------- DDP: validation, resume
@pytest.mark.heavy
def test_ddp_fit_validates_each_dataset_once(splits: dict[str, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    train, val = str(splits["train"]), str(splits["val"])
    runs = []
    for run in ("first", "again"):
        out = tmp_path / run
        out.mkdir()
        cfg = {"train": train, "val": val, "batch": 16, "workers": 0, "seed": 1, "epochs": 1,
               "out": str(out)}
        _fit_ddp(tmp_path, cfg, cache)
        runs.append([json.loads((out / f"verdicts-{r}.json").read_text()) for r in (0, 1)])
        assert _flat(_read(out, "train-0-0.txt")) and _flat(_read(out, "val-1-0.txt"))
    (zero, one), (zero_again, one_again) = runs
    # the first fit: the ranks scan each dataset once together, each a share of its shards
    assert zero["scanned"] == {train: 1, val: 1} and zero["scans"] == 2
    assert one["scanned"] == {train: 1, val: 1} and one["scans"] == 2
    assert zero["together"] == one["together"] == 2
    # a new fit over the same files: the verdicts on disk are reused, nothing is scanned
    assert zero_again["scanned"] == {} and one_again["scanned"] == {}
    assert zero_again["reused"] == 2 and one_again["shared"] == 2
    assert len(list((cache / "verdicts").glob("*.json"))) == 2


@pytest.mark.heavy
@pytest.mark.parametrize("workers", [0, 2])
def test_ddp_resume_mid_epoch_yields_exactly_the_unseen_rows(splits: dict[str, Path],
                                                             tmp_path: Path,
                                                             workers: int) -> None:
    batch, seed, steps = 16, 4, 5
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    common = {"train": str(splits["train"]), "val": str(splits["val"]), "batch": batch,
              "workers": workers, "seed": seed, "ckpt_dir": str(tmp_path / "ckpt")}
    _fit_ddp(tmp_path, {**common, "epochs": 1, "max_steps": steps, "every": steps,
                        "out": str(first)}, tmp_path / "cache")
    ckpt = tmp_path / "ckpt" / f"step={steps}.ckpt"
    assert ckpt.exists()
    assert torch.load(ckpt, weights_only=False)["DataModule"]["train"]["consumed"] == steps * batch
    _fit_ddp(tmp_path, {**common, "epochs": 2, "ckpt": str(ckpt), "out": str(second)},
             tmp_path / "cache")

    dataset = ParquetDataset(splits["train"], memory=1)
    every = []
    for rank in (0, 1):
        sampler = ChunkedSampler(dataset, batch, workers, 2, rank, shuffle=True, seed=seed)
        before = _read(first, f"train-{rank}-0.txt")
        after = _read(second, f"train-{rank}-0.txt")
        assert len(before) == steps
        order = sampler.order(0).tolist()
        # exactly the rows this rank had not seen, in its order: no repeats, no skips
        assert _flat(before) + _flat(after) == order
        assert set(_flat(after)) == set(order) - set(_flat(before))
        assert _flat(_read(second, f"train-{rank}-1.txt")) == sampler.order(1).tolist()
        every += order
    assert sorted(every) == list(range(400))


# ---------------------------------------------------------------------- DDP: evaluation shares
# Ranks run different numbers of validation batches (61 rows, batch 10: 4 and 3); metrics
# logged with sync_dist=True at epoch end are reduced once per epoch, so no rank waits for
# a batch another rank never runs.
DDP_VALIDATION = textwrap.dedent(
    """
    import json
    import sys

    import lightning
    import torch

    from recorder import Recorder, collate
    from undertale_duck import DataModule


    class Metrics(Recorder):
        def validation_step(self, batch, batch_idx):
            super().validation_step(batch, batch_idx)
            self.log("val_rows", float(len(batch["index"])), reduce_fx="sum", sync_dist=True,
                     on_step=False, on_epoch=True, batch_size=len(batch["index"]))

        def on_validation_epoch_end(self):
            rows = self.trainer.callback_metrics.get("val_rows")
            name = f"metric-{self.global_rank}-{self.current_epoch}.json"
            with open(self.out / name, "w") as f:
                json.dump(None if rows is None else float(rows), f)


    cfg = json.loads(sys.argv[1])
    dm = DataModule(cfg["train"], cfg["val"], None, collate, cfg["batch"], cfg["workers"],
                    memory=1, seed=1)
    trainer = lightning.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, max_epochs=2, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(Metrics(cfg["out"]), datamodule=dm)
    """
)


@pytest.mark.heavy
@pytest.mark.parametrize("workers", [0, 2])
def test_ddp_validation_sees_every_row_once_and_epoch_end_sync_does_not_hang(
    splits: dict[str, Path], tmp_path: Path, workers: int
) -> None:
    (tmp_path / "recorder.py").write_text(MODULE)
    (tmp_path / "fit.py").write_text(DDP_VALIDATION)
    cfg = {"train": str(splits["train"]), "val": str(splits["val"]), "batch": 10,
           "workers": workers, "out": str(tmp_path)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run([sys.executable, str(tmp_path / "fit.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    for epoch in range(2):
        batches = [_read(tmp_path, f"val-{rank}-{epoch}.txt") for rank in (0, 1)]
        assert [len(b) for b in batches] == [4, 3]  # 31 and 30 rows: ranks differ by a batch
        rows = _flat(batches[0]) + _flat(batches[1])
        assert sorted(rows) == list(range(61))  # every validation row exactly once
        for rank in (0, 1):
            metric = json.loads((tmp_path / f"metric-{rank}-{epoch}.json").read_text())
            assert metric == 61.0  # summed over both ranks at epoch end


@pytest.mark.heavy
def test_ddp_training_with_drop_last_false_and_unequal_batches_is_refused(
        tmp_path: Path) -> None:
    # 17 rows over 2 ranks: 9 and 8, so 2 and 1 batches of 8; rank 0's second step waited
    # for gradients rank 1 never sent (a gloo "Connection closed by peer", or a hang)
    datagen.write_shards(tmp_path / "train", [17], row_group_size=8)
    (tmp_path / "recorder.py").write_text(MODULE)
    (tmp_path / "fit.py").write_text(DDP_SCRIPT)
    cfg = {"train": str(tmp_path / "train"), "val": None, "batch": 8, "workers": 0,
           "seed": 0, "epochs": 1, "uds": True, "out": str(tmp_path),
           "view": {"drop_last": False}}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run([sys.executable, str(tmp_path / "fit.py"), json.dumps(cfg)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "ArgumentError: drop_last=False gives the 2 ranks 1 to 2 training batches" in (
        result.stderr), result.stderr[-4000:]
    assert not _read(tmp_path, "train-0-0.txt")  # refused before any step


def test_a_disk_tier_applies_to_the_splits_given_as_paths(
    splits: dict[str, Path], tmp_path: Path
) -> None:
    from undertale_duck import DataModule, ParquetDataset

    tier = tmp_path / "tier"
    dm = DataModule(splits["train"], splits["val"], None, _ids, 10, shuffle=False,
                    disk=64, disk_dir=tier)
    train = dm.train_dataloader()
    assert [i for b in train for i in b] == list(range(400))
    assert train.dataset.disk_dir == str(tier) and train.dataset.disk_stats.writes > 0
    val = dm.val_dataloader()
    assert [i for b in val for i in b] == list(range(61))
    assert val.dataset.disk_dir == str(tier)
    opened = ParquetDataset(splits["train"])  # opened without one: kept without one
    dm = DataModule(opened, splits["val"], None, _ids, 10, shuffle=False, disk=64,
                    disk_dir=tier)
    assert dm.train_dataloader().dataset.disk_stats is None
    assert dm.val_dataloader().dataset.disk_dir == str(tier)
