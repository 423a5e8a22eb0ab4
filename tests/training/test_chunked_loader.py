"""``ChunkedLoader`` built by a user, as a ``DataLoader``: same batches, exact resume, checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

import undertale_duck
from undertale_duck import (
    ArgumentError,
    ChunkedLoader,
    ChunkedSampler,
    ParquetDataset,
    collate,
)

ROWS = 523  # 3 shards of uneven sizes and row groups: windows of several lengths


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards whose every value is a function of the global row index."""
    path = tmp_path_factory.mktemp("chunked-loader")
    start = 0
    for k, (rows, group) in enumerate([(200, 64), (123, 50), (200, 31)]):
        ids = list(range(start, start + rows))
        pq.write_table(pa.table({
            "id": ids,
            "name": [f"row-{i}" for i in ids],
            "tokens": pa.array([[i, i * 2, i * 3] for i in ids], pa.list_(pa.int32())),
            "score": [i / 8 for i in ids],
        }), path / f"part-{k}.parquet", row_group_size=group)
        start += rows
    assert start == ROWS
    return path


def check_rows(batch: dict[str, Any]) -> list[int]:
    """The batch's ids, after checking each row's values against its id."""
    ids = batch["id"].tolist()
    assert batch["name"] == [f"row-{i}" for i in ids]
    assert batch["tokens"].tolist() == [[i, i * 2, i * 3] for i in ids]
    assert batch["score"].tolist() == [i / 8 for i in ids]
    return [int(i) for i in ids]


def ids_of(rows: list[dict[str, Any]]) -> list[int]:
    """A picklable collator for worker processes: the rows' ids."""
    return [int(row["id"]) for row in rows]


def record_hint(directory: Path, worker_id: int) -> None:
    """A user's worker_init_fn: writes the read-ahead order its worker was given."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    assert info is not None
    order = info.dataset.reader_settings().order
    (directory / f"worker-{worker_id}.json").write_text(json.dumps(list(order or [])))


def test_it_is_public_and_what_load_returns(root: Path) -> None:
    assert "ChunkedLoader" in undertale_duck.__all__
    from undertale_duck.training.loader import ChunkedLoader as inner

    assert ChunkedLoader is inner
    assert isinstance(undertale_duck.load(root, None, collate, 16), ChunkedLoader)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(["numpy", "torch"]),
    batch=st.integers(1, 70),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_a_user_built_loader_serves_what_a_dataloader_serves(
    root: Path, fmt: str, batch: int, shuffle: bool, seed: int
) -> None:
    ds = ParquetDataset(root, memory=1, format=fmt)

    def epochs(cls: type[DataLoader[Any]]) -> list[list[list[int]]]:
        sampler = ChunkedSampler(ds, batch, 0, shuffle=shuffle, seed=seed)
        loader = cls(ds, batch_size=batch, sampler=sampler, collate_fn=collate)
        out = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            out.append([check_rows(b) for b in loader])
        return out

    ours, torchs = epochs(ChunkedLoader), epochs(DataLoader)
    assert ours == torchs
    order = ChunkedSampler(ds, batch, 0, shuffle=shuffle, seed=seed).order(1).tolist()
    assert [i for b in ours[1] for i in b] == order  # every row, the last batch short


@pytest.mark.parametrize("workers", [0, 2])
def test_its_state_resumes_at_the_next_batch_in_a_new_process_state(
    root: Path, workers: int
) -> None:
    def loader() -> ChunkedLoader:
        ds = ParquetDataset(root, memory=1)
        sampler = ChunkedSampler(ds, 10, workers, shuffle=True, seed=4)
        sampler.set_epoch(1)
        return ChunkedLoader(ds, batch_size=10, sampler=sampler, num_workers=workers,
                             collate_fn=ids_of)

    first = loader()
    seen: list[int] = []
    for step, batch in enumerate(first):
        seen += batch
        if step == 6:
            break
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint stores it
    assert state["consumed"] == 70
    second = loader()
    second.load_state_dict(state)
    rest = [i for batch in second for i in batch]
    assert seen + rest == first.chunked_sampler.order(1).tolist()  # type: ignore[union-attr]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sampler_batch=st.integers(1, 9),
    loader_batch=st.integers(1, 9),
    sampler_workers=st.integers(0, 3),
    loader_workers=st.integers(0, 3),
)
def test_a_sampler_built_for_other_batches_or_workers_is_refused_when_iterated(
    root: Path, sampler_batch: int, loader_batch: int, sampler_workers: int,
    loader_workers: int,
) -> None:
    ds = ParquetDataset(root)
    sampler = ChunkedSampler(ds, sampler_batch, sampler_workers)
    loader = ChunkedLoader(ds, batch_size=loader_batch, sampler=sampler,
                           num_workers=loader_workers, collate_fn=ids_of)
    batch_differs = sampler_batch != loader_batch
    workers_differ = max(1, sampler_workers) != max(1, loader_workers)  # 0 behaves as 1
    if batch_differs or workers_differ:
        with pytest.raises(ArgumentError) as caught:
            iter(loader)
        text = str(caught.value)
        if batch_differs:
            assert f"batch {sampler_batch} but batch_size is {loader_batch}" in text
        else:
            assert f"{sampler_workers} workers but num_workers is {loader_workers}" in text
        assert sampler.consumed == 0  # nothing started, nothing counted
    elif loader_workers == 0:
        assert next(iter(loader)) == list(range(loader_batch))
    else:  # the same check, without starting worker processes
        loader._check(sampler, loader_batch)


def test_workers_of_a_shuffled_epoch_are_told_their_windows_and_run_the_users_init(
    root: Path, tmp_path: Path
) -> None:
    import functools

    ds = ParquetDataset(root, memory=1)
    sampler = ChunkedSampler(ds, 10, 2, shuffle=True, seed=6)
    user_init = functools.partial(record_hint, tmp_path)
    loader = ChunkedLoader(ds, batch_size=10, sampler=sampler, num_workers=2,
                           collate_fn=ids_of, worker_init_fn=user_init)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(loader)
        assert [i for b in batches for i in b] == sampler.order(epoch).tolist()
        for worker in range(2):  # batch k went to worker k % 2; its windows in first-use order
            windows: list[int] = []
            for batch in batches[worker::2]:
                for i in batch:
                    if ds.window_of(i) not in windows:
                        windows.append(ds.window_of(i))
            told = json.loads((tmp_path / f"worker-{worker}.json").read_text())
            assert told == windows, (epoch, worker)
        for path in tmp_path.glob("worker-*.json"):
            path.unlink()


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_out_of_order_are_refused_where_workers_would_reorder_them(
    root: Path, workers: int
) -> None:
    ds = ParquetDataset(root)
    loader = ChunkedLoader(ds, batch_size=10, sampler=ChunkedSampler(ds, 10, workers),
                           num_workers=workers, collate_fn=ids_of, in_order=False)
    if workers:
        with pytest.raises(ArgumentError, match="in_order=False"):
            iter(loader)
    else:  # one process hands batches out in order whatever in_order says
        assert [i for b in loader for i in b] == list(range(ROWS))


def test_without_a_chunked_sampler_it_is_a_plain_dataloader(root: Path) -> None:
    ds = ParquetDataset(root)
    loader = ChunkedLoader(ds, batch_size=50, collate_fn=ids_of)
    assert loader.chunked_sampler is None
    assert [i for b in loader for i in b] == list(range(ROWS))
    assert loader.state_dict() == {}


def test_a_lightning_fit_resumes_a_user_built_loader_mid_epoch(root: Path, tmp_path: Path) -> None:
    import lightning
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Recorder(lightning.LightningModule):
        def __init__(self, out: Path) -> None:
            super().__init__()
            self.weight = torch.nn.Linear(1, 1)
            self.out = out

        def train_dataloader(self) -> ChunkedLoader:
            ds = ParquetDataset(root, memory=1, format="torch")
            sampler = ChunkedSampler(ds, 16, 0, shuffle=True, seed=2)
            return ChunkedLoader(ds, batch_size=16, sampler=sampler, collate_fn=collate)

        def training_step(self, batch: dict[str, Any], index: int) -> torch.Tensor:
            with self.out.open("a") as f:
                f.write(json.dumps(check_rows(batch)) + "\n")
            return self.weight(batch["score"].float()[:, None]).sum()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.0)

    def trainer(**kwargs: Any) -> lightning.Trainer:
        return lightning.Trainer(accelerator="cpu", devices=1, logger=False,
                                 enable_progress_bar=False, enable_model_summary=False,
                                 **kwargs)

    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    saves = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="{step}",
                            every_n_train_steps=7, save_top_k=-1)
    trainer(max_steps=7, callbacks=[saves]).fit(Recorder(first))
    trainer(max_epochs=1, enable_checkpointing=False).fit(
        Recorder(second), ckpt_path=tmp_path / "ckpt" / "step=7.ckpt"
    )
    before = [i for line in first.read_text().splitlines() for i in json.loads(line)]
    after = [i for line in second.read_text().splitlines() for i in json.loads(line)]
    order = ChunkedSampler(ParquetDataset(root), 16, 0, shuffle=True, seed=2).order(0).tolist()
    assert len(before) == 7 * 16
    assert before + after == order  # no batch trained twice, none skipped


def ids_tensor(rows: list[dict[str, Any]]) -> torch.Tensor:
    return torch.tensor([int(row["id"]) for row in rows])


@pytest.mark.parametrize("workers", [0, 2])
def test_lightning_predicts_every_row_once_in_the_samplers_order(
    root: Path, workers: int
) -> None:
    import lightning

    from undertale_duck import DataModule

    class Echo(lightning.LightningModule):
        def predict_step(self, batch: torch.Tensor, index: int) -> torch.Tensor:
            return batch

    dm = DataModule(root, None, None, ids_tensor, 10, workers, predict=root)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, logger=False,
                                enable_progress_bar=False, enable_model_summary=False)
    out = trainer.predict(Echo(), datamodule=dm)
    assert out is not None
    got = [int(i) for batch in out for i in batch]  # type: ignore[union-attr]
    order = list(ChunkedSampler(ParquetDataset(root), 10, workers, drop_last=False))
    assert got == order and sorted(got) == list(range(ROWS))
    if workers == 0:
        assert got == list(range(ROWS))  # one process: the dataset's order
    else:  # each worker's contiguous part, a batch at a time in turn: not the dataset's
        assert got != list(range(ROWS))
