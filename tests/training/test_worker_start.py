"""A forked DataLoader worker that never starts is stopped and replaced; the epoch stays exact.

Two ways to get such a worker, both real processes and torch's own DataLoader: a fork hook
that parks chosen children before they run the worker loop (what a child deadlocked in
CPython's fork handling looks like from the parent: alive, silent), and, in the heavy case,
CPython's own bug (python/cpython#112275) triggered by native threads entering Python while
the loader forks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import (
    ChunkedLoader,
    ChunkedSampler,
    ParquetDataset,
    WorkerStartError,
    WorkerStartWarning,
    collate,
)
from undertale_duck.training.startwatch import fork_deadlock_prone

ROWS = 600
BATCH = 25
#: The watch's deadline in these cases (a parked worker is stopped this long after its fork).
START_S = 5.0

# a loader that stops waking up for a stuck worker would wait forever: fail the case instead
pytestmark = pytest.mark.timeout(240)

# The forks of this process, counted in the parent before each fork; a child whose number is
# in PARKED sleeps in its fork hook instead of running the worker loop. Inert unless a test
# fills PARKED (fork hooks cannot be removed, and every fork of the test process runs them).
FORKS = {"count": 0, "park_next": False}
PARKED: set[int] = set()


def _before_fork() -> None:
    FORKS["park_next"] = FORKS["count"] in PARKED
    FORKS["count"] += 1


def _in_child() -> None:
    if FORKS["park_next"]:
        time.sleep(600)  # until the watch stops it (or torch's shutdown does)


os.register_at_fork(before=_before_fork, after_in_child=_in_child)


@pytest.fixture
def park() -> Iterator[Callable[[int], None]]:
    """Park the n-th fork from now (0: the next one); nothing is parked after the test."""

    def choose(n: int) -> None:
        PARKED.add(FORKS["count"] + n)

    yield choose
    PARKED.clear()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two shards whose every value is a function of the global row index."""
    path = tmp_path_factory.mktemp("worker-start")
    for k, (start, stop) in enumerate([(0, 350), (350, ROWS)]):
        ids = list(range(start, stop))
        pq.write_table(pa.table({
            "id": ids,
            "tokens": pa.array([[i, i * 3] for i in ids], pa.list_(pa.int32())),
        }), path / f"part-{k}.parquet", row_group_size=70)
    return path


def _loader(root: Path, **options: Any) -> tuple[ChunkedLoader, ChunkedSampler]:
    shuffle = options.pop("shuffle", False)
    ds = ParquetDataset(root, memory=64, format="torch")
    sampler = ChunkedSampler(ds, BATCH, 2, shuffle=shuffle, seed=5)
    loader = ChunkedLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2,
                           collate_fn=collate, **options)
    # long enough that a healthy worker of a loaded machine is never taken for a stuck one
    # (the counts of warnings below must not depend on how fast a fork is scheduled)
    loader.worker_start_timeout = START_S
    return loader, sampler


def _epoch(loader: ChunkedLoader) -> tuple[list[int], list[str]]:
    """The epoch's ids (each row's values checked), and the WorkerStartWarnings it gave."""
    ids: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in loader:
            got = [int(i) for i in batch["id"].tolist()]
            assert batch["tokens"].tolist() == [[i, i * 3] for i in got]
            ids.extend(got)
    return ids, [str(w.message) for w in caught if issubclass(w.category, WorkerStartWarning)]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("parked", [0, 1])
def test_a_worker_that_never_starts_is_replaced_and_no_batch_is_lost_or_repeated(
    root: Path, park: Callable[[int], None], shuffle: bool, parked: int
) -> None:
    loader, sampler = _loader(root, shuffle=shuffle)
    park(parked)  # worker 0 (whose batch comes first) or worker 1 (the second batch)
    ids, warned = _epoch(loader)
    assert ids == sampler.order().tolist()
    assert len(warned) == 1
    assert f"worker {parked} (pid " in warned[0]
    # worker 1's batch is the second: one batch (of worker 0) was handed out before
    assert f"from sample {parked * BATCH} of this rank's {ROWS}" in warned[0]
    assert loader.state_dict()["consumed"] == ROWS
    # the next epoch's workers start as usual: no warning
    sampler.set_epoch(1)
    again, warned = _epoch(loader)
    assert again == sampler.order(1).tolist() and warned == []


def test_healthy_workers_are_not_touched(root: Path) -> None:
    loader, sampler = _loader(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WorkerStartWarning)
        ids, _ = _epoch(loader)
    assert ids == sampler.order().tolist()


def test_persistent_workers_are_replaced_once_and_kept(
    root: Path, park: Callable[[int], None]
) -> None:
    loader, sampler = _loader(root, persistent_workers=True)
    park(0)
    first, warned = _epoch(loader)
    assert first == sampler.order().tolist() and len(warned) == 1
    pids = [w.pid for w in loader._iterator._workers]  # type: ignore[union-attr]
    sampler.set_epoch(1)
    second, warned = _epoch(loader)
    assert second == sampler.order(1).tolist() and warned == []
    # the workers started for the rest of epoch 0 served epoch 1 too
    assert [w.pid for w in loader._iterator._workers] == pids  # type: ignore[union-attr]


def test_a_worker_start_timeout_of_none_watches_nothing(root: Path) -> None:
    loader, sampler = _loader(root)
    loader.worker_start_timeout = None
    ids, _ = _epoch(loader)
    assert ids == sampler.order().tolist()
    assert loader.worker_init_fn is None  # nothing wrapped the (absent) worker_init_fn


def test_the_user_worker_init_fn_still_runs_in_replaced_workers(
    root: Path, park: Callable[[int], None], tmp_path: Path
) -> None:
    loader, sampler = _loader(root, worker_init_fn=NoteStart(tmp_path))
    park(0)
    ids, warned = _epoch(loader)
    assert ids == sampler.order().tolist() and len(warned) == 1
    started = sorted(p.name for p in tmp_path.iterdir())
    # worker 0 parked: worker 1 of the first pass, then both workers of the second
    assert [name.split("-")[0] for name in started] == ["0", "1", "1"]


class NoteStart:
    """A ``worker_init_fn`` that leaves a file named after the worker and its pid."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def __call__(self, worker_id: int) -> None:
        (self.out / f"{worker_id}-{os.getpid()}").write_text("")


def test_workers_that_keep_failing_to_start_raise_after_the_restarts(
    root: Path, park: Callable[[int], None]
) -> None:
    loader, sampler = _loader(root)
    loader.worker_restarts = 1
    park(0)
    park(2)  # worker 0 again in the second pass (forks 2 and 3)
    seen: list[int] = []
    error = r"worker 0 \(pid \d+\) did not start"
    with pytest.raises(WorkerStartError, match=error) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkerStartWarning)
        for batch in loader:
            seen.extend(int(i) for i in batch["id"].tolist())
    assert "state_dict() resumes there" in str(info.value)
    assert seen == []  # worker 0's batch comes first: nothing was handed out
    state = loader.state_dict()
    assert state["consumed"] == 0
    # a new loader resumed from that state serves the whole epoch, exactly
    again, resumed = _loader(root)
    again.load_state_dict(state)
    ids, warned = _epoch(again)
    assert ids == resumed.order().tolist() and warned == []


@pytest.mark.parametrize("context, forks", [
    (None, True), ("fork", True), ("spawn", False), ("forkserver", False),
])
def test_only_forked_workers_are_watched(root: Path, context: str | None, forks: bool) -> None:
    loader, _ = _loader(root, multiprocessing_context=context)
    assert loader._forks() is forks


@given(
    length=st.integers(1, 300), batch=st.integers(1, 40), workers=st.integers(0, 4),
    shuffle=st.booleans(), seed=st.integers(0, 3), data=st.data(),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_rewind_serves_exactly_the_rest_of_the_pass(
    length: int, batch: int, workers: int, shuffle: bool, seed: int, data: st.DataObject
) -> None:
    sampler = ChunkedSampler(range(length), batch, workers, shuffle=shuffle, seed=seed,
                             chunk=16, drop_last=False)
    whole = list(sampler)
    at = data.draw(st.integers(0, len(whole) + 3))
    sampler.rewind(at)
    assert list(sampler) == whole[at:]
    assert list(sampler) == whole  # a rewind applies to the next pass only


@pytest.mark.parametrize("version, prone", [
    ((3, 11, 7), True), ((3, 11, 9), True), ((3, 11, 10), False), ((3, 12, 0), False),
    ((3, 13, 1), False),
])
def test_which_pythons_have_the_fork_deadlock(version: tuple[int, int, int], prone: bool) -> None:
    assert fork_deadlock_prone(version) is prone


# The real bug: native threads enter Python (ctypes creates a thread state for each, taking
# the interpreter's thread-list lock without the GIL) while the loader forks its workers each
# epoch; on CPython < 3.11.10 about one fork in a few hundred deadlocks in the child.
STRESS = textwrap.dedent(
    """
    import ctypes, sys, threading, warnings
    from undertale_duck import (ChunkedLoader, ChunkedSampler, ParquetDataset,
                                WorkerStartWarning, collate)

    libc = ctypes.CDLL(None)
    entered = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda arg: None)

    def enter_python_from_native_threads():
        tid = ctypes.c_ulong()
        while True:
            libc.pthread_create(ctypes.byref(tid), None, entered, None)
            libc.pthread_join(tid, None)

    for _ in range(4):
        threading.Thread(target=enter_python_from_native_threads, daemon=True).start()
    ds = ParquetDataset(sys.argv[1], memory=64, format="torch")
    sampler = ChunkedSampler(ds, 25, 2, shuffle=True, seed=3)
    loader = ChunkedLoader(ds, batch_size=25, sampler=sampler, num_workers=2,
                           collate_fn=collate)
    loader.worker_start_timeout = 2.0
    replaced = 0
    for epoch in range(int(sys.argv[2])):
        sampler.set_epoch(epoch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ids = [int(i) for batch in loader for i in batch["id"].tolist()]
        replaced += sum(issubclass(w.category, WorkerStartWarning) for w in caught)
        assert ids == sampler.order(epoch).tolist(), epoch
    print("replaced", replaced)
    """
)


@pytest.mark.heavy
@pytest.mark.skipif(not fork_deadlock_prone(), reason="this Python's fork() has no such deadlock")
def test_cpythons_own_fork_deadlock_is_survived(root: Path, tmp_path: Path) -> None:
    script = tmp_path / "stress.py"
    script.write_text(STRESS)
    # without the watch, the first deadlocked child stops the loop for good (timeout)
    done = subprocess.run([sys.executable, str(script), str(root), "150"], capture_output=True,
                          text=True, timeout=480)
    assert done.returncode == 0, done.stderr[-3000:]
    replaced = int(done.stdout.split()[-1])
    print(f"150 epochs exact under native threads entering Python; {replaced} workers replaced")


def test_a_lightning_fit_trains_on_every_row_once_despite_a_parked_worker(
    root: Path, park: Callable[[int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lightning
    import torch

    from undertale_duck import DataModule

    class Recorder(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.seen: list[list[int]] = []

        def training_step(self, batch: dict[str, Any], index: int) -> torch.Tensor:
            self.seen.append([int(i) for i in batch["id"].tolist()])
            x = batch["id"].float().unsqueeze(1) / ROWS
            return ((self.layer(x) - x) ** 2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    monkeypatch.setattr(ChunkedLoader, "worker_start_timeout", START_S)
    dm = DataModule(root, None, None, collate, BATCH, workers=2, memory=64, seed=2)
    model = Recorder()
    trainer = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=2, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False)
    park(0)  # the first worker of the first epoch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model, datamodule=dm)
    assert sum(issubclass(w.category, WorkerStartWarning) for w in caught) == 1
    order = ChunkedSampler(ParquetDataset(root, memory=64), BATCH, 2, shuffle=True, seed=2)
    steps = ROWS // BATCH
    for epoch in range(2):
        trained = [i for batch in model.seen[epoch * steps:(epoch + 1) * steps] for i in batch]
        assert trained == order.order(epoch).tolist()
    assert len(model.seen) == 2 * steps


# Under DDP: rank 1's first DataLoader worker is parked; rank 0 waits in its gradient
# all-reduce meanwhile. Each rank records the ids of every batch it trains on.
DDP = textwrap.dedent(
    """
    import json, os, sys, time

    import lightning
    import torch

    from undertale_duck import ChunkedLoader, DataModule, collate

    forks = {"count": 0, "park": False}

    def before():
        forks["park"] = os.environ.get("LOCAL_RANK") == "1" and forks["count"] == 0
        forks["count"] += 1

    def child():
        if forks["park"]:
            time.sleep(600)

    os.register_at_fork(before=before, after_in_child=child)
    ChunkedLoader.worker_start_timeout = 5.0


    class Recorder(lightning.LightningModule):
        def __init__(self, out):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.out = out

        def training_step(self, batch, index):
            name = f"{self.out}/train-{self.global_rank}-{self.current_epoch}.txt"
            with open(name, "a") as f:
                f.write(" ".join(str(int(i)) for i in batch["id"].tolist()) + "\\n")
            x = batch["id"].float().unsqueeze(1)
            return ((self.layer(x) - x) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-6)


    root, out = sys.argv[1], sys.argv[2]
    dm = DataModule(root, None, None, collate, 25, workers=2, memory=64, seed=4)
    trainer = lightning.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, max_epochs=2, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Recorder(out), datamodule=dm)
    """
)


@pytest.mark.heavy
def test_under_ddp_a_rank_replaces_its_parked_worker_and_both_ranks_train_exactly(
    root: Path, tmp_path: Path
) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    done = subprocess.run([sys.executable, str(script), str(root), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr.count("did not start within 5 s") == 1, done.stderr[-4000:]
    ds = ParquetDataset(root, memory=64)
    trained: list[int] = []
    for epoch in range(2):
        for rank in range(2):
            sampler = ChunkedSampler(ds, BATCH, 2, 2, rank, shuffle=True, seed=4)
            sampler.set_epoch(epoch)
            lines = (tmp_path / f"train-{rank}-{epoch}.txt").read_text().split("\n")
            ids = [int(i) for line in lines if line for i in line.split()]
            assert ids == sampler.order().tolist()  # its share, in order, each row once
            trained += ids
    assert sorted(trained) == sorted(list(range(ROWS)) * 2)
