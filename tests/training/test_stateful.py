"""ChunkedSampler under torchdata's StatefulDataLoader, and the count its state reports."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck import ArgumentError, ChunkedSampler, ParquetDataset, load

torchdata = pytest.importorskip("torchdata.stateful_dataloader")
StatefulDataLoader = torchdata.StatefulDataLoader

ROWS = 203
BATCH = 8


def ids(rows: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"][4:]) for r in rows]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stateful")
    datagen.write_shards(root, [90, 13, 100], row_group_size=[20, 5, 30])
    return root


def _loader(data: Path, workers: int, shuffle: bool, every: int, persistent: bool = False) -> Any:
    dataset = ParquetDataset(data, memory=1)
    sampler = ChunkedSampler(dataset, BATCH, workers, 1, 0, shuffle=shuffle, seed=3)
    kwargs: dict[str, Any] = {"multiprocessing_context": "fork"} if workers else {}
    if persistent:
        kwargs["persistent_workers"] = True
    return StatefulDataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers,
                              collate_fn=ids, snapshot_every_n_steps=every, **kwargs)


def _epochs(loader: Any, epochs: range) -> list[list[int]]:
    out = []
    for epoch in epochs:
        loader.sampler.set_epoch(epoch)
        out.append([i for batch in loader for i in batch])
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("every", [1, 3])
def test_stateful_dataloader_resumes_exactly(data: Path, workers: int, shuffle: bool,
                                             every: int) -> None:
    whole = _epochs(_loader(data, workers, shuffle, every), range(2))
    steps = -(-len(whole[0]) // BATCH)
    for epoch, stop in ((0, 11), (1, 4), (0, steps - 1), (1, 0), (0, steps)):
        first = _loader(data, workers, shuffle, every)
        before = _epochs(first, range(epoch))
        first.sampler.set_epoch(epoch)
        it = iter(first)
        seen = [i for _ in range(stop) for i in next(it)]
        state = first.state_dict()
        del it
        second = _loader(data, workers, shuffle, every)
        second.load_state_dict(state)
        second.sampler.set_epoch(epoch)
        rest = [i for batch in second for i in batch]
        assert seen + rest == whole[epoch], (epoch, stop)
        after = _epochs(second, range(epoch + 1, 2))
        assert [*before, seen + rest, *after] == whole


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_state_at_the_end_of_an_epoch(data: Path, workers: int) -> None:
    first = _loader(data, workers, True, 1)
    whole = _epochs(_loader(data, workers, True, 1), range(2))
    first.sampler.set_epoch(0)
    assert [i for b in first for i in b] == whole[0]
    state = first.state_dict()
    second = _loader(data, workers, True, 1)
    second.load_state_dict(state)
    second.sampler.set_epoch(1)
    assert [i for b in second for i in b] == whole[1]


def test_stateful_dataloader_with_persistent_workers(data: Path) -> None:
    whole = _epochs(_loader(data, 2, True, 2, persistent=True), range(3))
    first = _loader(data, 2, True, 2, persistent=True)
    _epochs(first, range(1))
    first.sampler.set_epoch(1)
    it = iter(first)
    seen = [i for _ in range(7) for i in next(it)]
    state = first.state_dict()
    second = _loader(data, 2, True, 2, persistent=True)
    second.load_state_dict(state)
    second.sampler.set_epoch(1)
    assert seen + [i for b in second for i in b] == whole[1]
    assert _epochs(second, range(2, 3)) == whole[2:]


def test_a_sampler_iterated_by_hand_never_reports_zero() -> None:
    class Sized:
        def __len__(self) -> int:
            return 100

    s = ChunkedSampler(Sized(), 6, 0, 1, 0, shuffle=True, seed=1, chunk=10)
    it = iter(s)
    taken = [next(it) for _ in range(17)]
    assert s.state_dict()["consumed"] == 17
    assert s.state_dict(consumed=12)["consumed"] == 12  # the driver's word wins
    t = ChunkedSampler(Sized(), 6, 0, 1, 0, shuffle=True, seed=1, chunk=10)
    t.load_state_dict(s.state_dict())
    assert t.state_dict()["consumed"] == 17  # restored, not yet iterated
    assert taken + list(t) == list(s.order())


def test_the_librarys_loader_counts_what_it_handed_out(data: Path) -> None:
    loader = load(data, None, ids, BATCH, workers=2, shuffle=True, seed=2)
    it = iter(loader)
    seen = [i for _ in range(3) for i in next(it)]
    # the workers prefetched more than 3 batches; the state counts what the loop received
    assert loader.state_dict()["consumed"] == len(seen) == 3 * BATCH
    del it


@settings(max_examples=25, deadline=None)
@given(stop=st.integers(0, 30), shuffle=st.booleans(), epoch=st.integers(0, 2))
def test_sampler_iterator_state_round_trip(stop: int, shuffle: bool, epoch: int) -> None:
    class Sized:
        def __len__(self) -> int:
            return 157

    def fresh() -> ChunkedSampler:
        s = ChunkedSampler(Sized(), 5, 2, 1, 0, shuffle=shuffle, seed=4, chunk=9)
        s.set_epoch(epoch)
        return s

    s = fresh()
    it = iter(s)
    taken = [next(it) for _ in range(min(stop, len(s)))]
    state = it.state_dict()  # type: ignore[attr-defined]
    t = fresh()
    it2 = iter(t)
    it2.load_state_dict(state)  # type: ignore[attr-defined]
    assert taken + list(it2) == list(fresh())


def _rank_loader(data: Path, rank: int, workers: int) -> Any:
    dataset = ParquetDataset(data, memory=1)
    sampler = ChunkedSampler(dataset, BATCH, workers, 2, rank, shuffle=True, seed=3,
                             drop_last=False)
    kwargs: dict[str, Any] = {"multiprocessing_context": "fork"} if workers else {}
    return StatefulDataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers,
                              collate_fn=ids, **kwargs)


@pytest.mark.parametrize("workers", [0, 2])
def test_every_ranks_final_state_starts_the_next_epoch_without_drop_last(
    data: Path, workers: int
) -> None:
    # 203 rows over 2 ranks: shares of 102 and 101. Rank 1's final state counts 101, one
    # less than rank 0's share; restored without set_epoch it repeated epoch 0.
    served: list[int] = []
    for rank in range(2):
        first = _rank_loader(data, rank, workers)
        assert len([i for b in first for i in b]) == (102, 101)[rank]
        state = first.state_dict()
        second = _rank_loader(data, rank, workers)
        second.load_state_dict(state)  # applied when the next iteration starts
        rows = [i for b in second for i in b]
        assert second.sampler.epoch == 1
        assert rows == [int(i) for i in second.sampler.order(1)]
        served += rows
    assert sorted(served) == list(range(ROWS))  # epoch 1: every row once over the ranks


@pytest.mark.parametrize("workers", [0, 2])
def test_every_ranks_final_state_of_the_librarys_loader_starts_the_next_epoch(
    data: Path, workers: int
) -> None:
    def loader(rank: int) -> Any:
        return load(data, None, ids, BATCH, workers, 1, shuffle=True, seed=3, ranks=2,
                    rank=rank, drop_last=False)

    served: list[int] = []
    for rank in range(2):
        first = loader(rank)
        assert len([i for b in first for i in b]) == (102, 101)[rank]
        second = loader(rank)
        second.load_state_dict(first.state_dict())
        rows = [i for b in second for i in b]
        assert rows == [int(i) for i in second.sampler.order(1)]
        served += rows
    assert sorted(served) == list(range(ROWS))


def test_final_sampler_states_of_smaller_ranks_and_older_states(data: Path) -> None:
    def sampler(rank: int) -> ChunkedSampler:
        return ChunkedSampler(ParquetDataset(data, memory=1), BATCH, 0, 2, rank,
                              drop_last=False)

    for rank in range(2):
        done = sampler(rank)
        list(done)
        restored = sampler(rank)
        restored.load_state_dict(done.state_dict())
        assert (restored.epoch, restored.resume_at) == (1, 0)
    # a state saved before the rank was recorded is read as rank 0's, as then
    old = sampler(1)
    list(old)
    state = {k: v for k, v in old.state_dict().items() if k != "rank"}
    restored = sampler(1)
    restored.load_state_dict(state)
    assert (restored.epoch, restored.resume_at) == (0, 101)
    with pytest.raises(ArgumentError, match="saved by rank 2, but it records ranks=2"):
        sampler(0).load_state_dict({**old.state_dict(), "rank": 2})
    for bad in (-1, True, "1", 1.0):
        with pytest.raises(ArgumentError, match=r"cannot resume: .*rank"):
            sampler(0).load_state_dict({**old.state_dict(), "rank": bad})


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("served", [0, 2])
def test_a_run_restored_at_an_epochs_end_saves_the_next_epoch_as_its_own(
    data: Path, workers: int, served: int
) -> None:
    # restored from the state after epoch 0's last batch, a run that sets epoch 0 again
    # (nothing left), then epoch 1, saves at epoch 1's start or a few batches in; restored
    # there, the rest of epoch 1 comes, once. A state naming epoch 0's end for an iteration
    # of epoch 1 lost the whole epoch, or (with workers, whose loader steps past the
    # batches served) ended the restored iteration with StopIteration
    whole = _epochs(_loader(data, workers, True, 4), range(2))
    first = _loader(data, workers, True, 1)  # its last state is its epoch's very end
    first.sampler.set_epoch(0)
    for _ in first:
        end = first.state_dict()
    again = _loader(data, workers, True, 4)
    again.load_state_dict(end)
    assert _epochs(again, range(1)) == [[]]
    again.sampler.set_epoch(1)
    batches = iter(again)
    seen = [i for _ in range(served) for i in next(batches)]
    saved = again.state_dict()
    resumed = _loader(data, workers, True, 4)
    resumed.load_state_dict(saved)
    resumed.sampler.set_epoch(1)
    assert seen + [i for batch in resumed for i in batch] == whole[1]
    assert _epochs(resumed, range(2, 3)) == _epochs(_loader(data, workers, True, 4), range(2, 3))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("iterated", [False, True])
def test_an_end_state_saved_again_right_after_its_restore_is_the_same_end(
    data: Path, workers: int, iterated: bool
) -> None:
    # a state taken at epoch 0's last batch, restored, and saved again before anything is
    # served (a restart right after a restore): without workers the second save named epoch
    # 1's start, and a loop that then set epoch 0 again was served all of epoch 0 twice
    whole = _epochs(_loader(data, workers, True, 1), range(2))
    first = _loader(data, workers, True, 1)
    first.sampler.set_epoch(0)
    batches = iter(first)
    seen = [i for _ in range(len(first)) for i in next(batches)]
    assert seen == whole[0]
    state = first.state_dict()
    for _ in range(2):  # restored and saved again, twice
        restarted = _loader(data, workers, True, 1)
        restarted.load_state_dict(state)
        restarted.sampler.set_epoch(0)
        if iterated:
            iter(restarted)
        state = restarted.state_dict()
    resumed = _loader(data, workers, True, 1)
    resumed.load_state_dict(state)
    assert _epochs(resumed, range(2)) == [[], whole[1]]


@pytest.mark.parametrize(("workers", "batch", "warned"),
                         [(2, 4, True), (2, BATCH, False), (0, 4, False)])
def test_an_elastic_iterator_state_with_workers_warns_of_torchdatas_snapshots(
    workers: int, batch: int, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # StatefulDataLoader with workers restores its last snapshot and steps through the
    # batches since at the new batch size: exact only with snapshot_every_n_steps=1
    saved = ChunkedSampler(list(range(100)), BATCH, workers, shuffle=True, seed=3)
    passed = iter(saved)
    for _ in range(3 * BATCH):
        next(passed)
    state = passed.state_dict()  # type: ignore[attr-defined]
    restored = ChunkedSampler(list(range(100)), batch, workers, shuffle=True, seed=3)
    with caplog.at_level(logging.WARNING, logger="undertale_duck"):
        iter(restored).load_state_dict(state)  # type: ignore[attr-defined]
    assert ("snapshot_every_n_steps=1" in caplog.text) == warned


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("again", [True, False])
def test_a_state_saved_after_the_epochs_loop_ended_resumes_after_that_epoch(
    data: Path, workers: int, again: bool
) -> None:
    # saved once the loop over epoch 0 had finished (torchdata then builds a fresh iterator
    # on restore): a loop setting epoch 0 again before iterating, as documented, was served
    # the next epoch's rows under epoch 0, and then that epoch a second time
    whole = _epochs(_loader(data, workers, True, 1), range(2))
    first = _loader(data, workers, True, 1)
    first.sampler.set_epoch(0)
    assert [i for batch in first for i in batch] == whole[0]
    state = first.state_dict()
    resumed = _loader(data, workers, True, 1)
    resumed.load_state_dict(state)
    if again:
        assert _epochs(resumed, range(2)) == [[], whole[1]]
    else:
        assert _epochs(resumed, range(1, 2)) == [whole[1]]


@pytest.mark.parametrize("workers", [0, 2])
def test_passes_after_a_mid_epoch_restore_serve_the_epoch_again_as_they_would_have(
    data: Path, workers: int
) -> None:
    # a loop that sets its epoch once and iterates it again and again: after a restore in the
    # middle of it, the first pass serves the rest and every later one the whole epoch (a
    # reviewer caught a rule meant for torchdata's fresh iterators serving them nothing)
    whole = _epochs(_loader(data, workers, True, 1), range(1))[0]
    first = _loader(data, workers, True, 1)
    first.sampler.set_epoch(0)
    batches = iter(first)
    seen = [i for _ in range(3) for i in next(batches)]
    state = first.state_dict()
    resumed = _loader(data, workers, True, 1)
    resumed.load_state_dict(state)
    resumed.sampler.set_epoch(0)
    passes = [[i for batch in resumed for i in batch] for _ in range(3)]
    assert seen + passes[0] == whole
    assert passes[1:] == [whole, whole]
