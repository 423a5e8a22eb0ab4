from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, Dataset, get_worker_info
from torch.utils.data.distributed import DistributedSampler

from undertale_duck import ArgumentError, ChunkedSampler, EmptyEpochWarning, ParquetDataset
from undertale_duck.training.order import interleave, shuffled_sequence


# ---------------------------------------------------------------------- independent reference
def reference(length: int, batch: int, workers: int, ranks: int, rank: int) -> list[int]:
    """Undertale's original ChunkedSampler order, written with plain loops from its rule.

    Rank share = length // ranks, cut down to a multiple of the workers; rank r takes rows
    [r * share, (r + 1) * share); worker w of the rank takes its contiguous worker share,
    split into batches; the batches are delivered round-robin over the workers.
    """
    nworkers = workers if workers > 0 else 1
    worker_len = (length // ranks) // nworkers
    rank_len = worker_len * nworkers
    rank_start = rank * rank_len
    batches: list[list[list[int]]] = []
    for w in range(nworkers):
        start = rank_start + w * worker_len
        stop = start + worker_len
        mine = []
        i = start
        while i < stop:
            mine.append(list(range(i, min(i + batch, stop))))
            i += batch
        batches.append(mine)
    out: list[int] = []
    for k in range(max(len(b) for b in batches)):
        for w in range(nworkers):
            if k < len(batches[w]):
                out.extend(batches[w][k])
    return out


class Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


# lengths include many smaller than ranks * workers * batch
LENGTHS = [0, 1, 2, 3, 5, 7, 11, 17, 23, 64, 100, 257]
BATCHES = [1, 2, 3, 8, 64]
WORKERS = [0, 1, 2, 3, 5]
RANKS = [1, 2, 3, 4, 8]


@pytest.mark.parametrize("length", LENGTHS)
def test_original_order_grid(length: int) -> None:
    for batch, workers, ranks in itertools.product(BATCHES, WORKERS, RANKS):
        for rank in range(ranks):
            sampler = ChunkedSampler(Sized(length), batch, workers, ranks, rank)
            got = list(sampler)
            want = reference(length, batch, workers, ranks, rank)
            assert got == want, (length, batch, workers, ranks, rank)
            assert len(sampler) == len(want)
            assert all(type(i) is int for i in got)


@settings(max_examples=300, deadline=None)
@given(
    length=st.integers(0, 2000),
    batch=st.integers(1, 40),
    workers=st.integers(0, 9),
    ranks=st.integers(1, 9),
    data=st.data(),
)
def test_original_order_any_configuration(length: int, batch: int, workers: int, ranks: int,
                                          data: st.DataObject) -> None:
    rank = data.draw(st.integers(0, ranks - 1))
    sampler = ChunkedSampler(Sized(length), batch, workers, ranks, rank)
    assert list(sampler) == reference(length, batch, workers, ranks, rank)


@settings(max_examples=100, deadline=None)
@given(length=st.integers(0, 500), batch=st.integers(1, 20), workers=st.integers(0, 5),
       ranks=st.integers(1, 6))
def test_only_the_last_rows_are_dropped(length: int, batch: int, workers: int,
                                        ranks: int) -> None:
    seen = sorted(i for r in range(ranks)
                  for i in ChunkedSampler(Sized(length), batch, workers, ranks, r))
    assert seen == list(range(len(seen)))  # every row up to the cut, each once
    assert length - len(seen) < ranks * max(workers, 1)


def test_original_order_examples() -> None:
    # issue 13: 23 rows, batch 2, 2 workers, 2 ranks (rows 20, 21, 22 dropped)
    assert list(ChunkedSampler(Sized(23), batch=2, workers=2, ranks=2, rank=0)) == [
        0, 1, 5, 6, 2, 3, 7, 8, 4, 9]
    s = ChunkedSampler(Sized(23), batch=2, workers=2, ranks=2, rank=1)
    assert list(s) == [10, 11, 15, 16, 12, 13, 17, 18, 14, 19]
    assert len(s) == 10
    # 7 rows, batch 1, 2 workers, 2 ranks: rank 1 gets rows 2 and 3
    assert list(ChunkedSampler(Sized(7), batch=1, workers=2, ranks=2, rank=1)) == [2, 3]


def test_original_order_delivered_by_a_dataloader() -> None:
    # the rows a real DataLoader with 2 workers delivers, in order, and who read them
    for rank, want in [(0, [0, 1, 5, 6, 2, 3, 7, 8, 4, 9]),
                       (1, [10, 11, 15, 16, 12, 13, 17, 18, 14, 19])]:
        sampler = ChunkedSampler(WhoLoads(23), 2, 2, 2, rank)
        loader = DataLoader(WhoLoads(23), batch_size=2, sampler=sampler, num_workers=2,
                            multiprocessing_context="fork")
        delivered = [(int(i), int(w)) for b in loader for i, w in zip(*b, strict=True)]
        assert [i for i, _ in delivered] == want
        first = 10 * rank
        assert [i for i, w in delivered if w == 0][:4] == list(range(first, first + 4))
        assert [i for i, w in delivered if w == 1][:4] == list(range(first + 5, first + 9))


def test_order_is_the_same_every_iteration_without_shuffle() -> None:
    s = ChunkedSampler(Sized(50), 4, 2, 1, 0)
    first = list(s)
    s.set_epoch(3)
    assert list(s) == first


def test_rank_and_ranks_default_outside_distributed() -> None:
    s = ChunkedSampler(Sized(10), 3, 0)
    assert (s.ranks, s.rank, s.num_replicas) == (1, 0, 1)
    assert list(s) == list(range(10))


def test_is_a_distributed_sampler_so_lightning_leaves_it_alone() -> None:
    assert isinstance(ChunkedSampler(Sized(10), 3, 0), DistributedSampler)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"batch": 0}, "batch"),
        ({"batch": 2.5}, "batch"),
        ({"workers": -1}, "workers"),
        ({"ranks": 0}, "ranks"),
        ({"ranks": 2, "rank": 2}, "rank"),
        ({"ranks": 2, "rank": -1}, "rank"),
        ({"seed": -3}, "seed"),
        ({"mix": 0}, "mix"),
        ({"chunk": 0}, "chunk"),
        ({"shuffle": "yes"}, "shuffle"),
        ({"batch": True}, "batch"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], words: str) -> None:
    args: dict[str, object] = {"batch": 4, "workers": 0, **kwargs}
    with pytest.raises(ArgumentError, match=words):
        ChunkedSampler(Sized(10), **args)  # type: ignore[arg-type]


def test_dataset_without_length() -> None:
    with pytest.raises(ArgumentError, match="length"):
        ChunkedSampler(iter(range(3)), 2, 0)


# ---------------------------------------------------------------------- DataLoader assignment
class WhoLoads(Dataset[tuple[int, int]]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, int]:
        info = get_worker_info()
        return i, -1 if info is None else info.id


def _by_worker(loader: DataLoader[tuple[int, int]]) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = {}
    for batch in loader:
        for i, w in zip(*batch, strict=True):
            seen.setdefault(int(w), []).append(int(i))
    return seen


def test_each_worker_reads_its_own_contiguous_range() -> None:
    # 2 ranks x 2 workers, batch divides the worker share: every worker reads one range
    n, batch, workers = 100, 5, 2
    for rank in range(2):
        sampler = ChunkedSampler(WhoLoads(n), batch, workers, 2, rank)
        loader = DataLoader(WhoLoads(n), batch_size=batch, sampler=sampler, num_workers=workers,
                            multiprocessing_context="fork")
        seen = _by_worker(loader)
        start = rank * 50
        assert seen == {w: list(range(start + 25 * w, start + 25 * (w + 1)))
                        for w in range(workers)}


def test_short_last_blocks_lose_nothing() -> None:
    # worker share 10 with batch 4: blocks 4, 4, 2; the short blocks come together at the end
    sampler = ChunkedSampler(WhoLoads(20), 4, 2, 1, 0)
    loader = DataLoader(WhoLoads(20), batch_size=4, sampler=sampler, num_workers=2,
                        multiprocessing_context="fork")
    seen = _by_worker(loader)
    assert sorted(seen[0] + seen[1]) == list(range(20))
    assert seen[0][:8] == list(range(8)) and seen[1][:8] == list(range(10, 18))


# ---------------------------------------------------------------------- shuffle invariants
def _all_ranks(n: int, batch: int, workers: int, ranks: int, **kw: object) -> list[list[int]]:
    out = []
    for rank in range(ranks):
        s = ChunkedSampler(Sized(n), batch, workers, ranks, rank, **kw)  # type: ignore[arg-type]
        out.append(list(s))
    return out


def _streams(order: Sequence[int], batch: int, workers: int) -> list[list[int]]:
    """Undo the round-robin: each worker's own sequence."""
    nw = max(workers, 1)
    share = len(order) // nw
    full = share // batch
    streams: list[list[int]] = [[] for _ in range(nw)]
    pos = 0
    for _ in range(full):
        for w in range(nw):
            streams[w].extend(order[pos : pos + batch])
            pos += batch
    tail = share - full * batch
    for w in range(nw):
        streams[w].extend(order[pos : pos + tail])
        pos += tail
    assert pos == len(order)
    return streams


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 300),
    batch=st.integers(1, 20),
    workers=st.integers(0, 3),
    ranks=st.integers(1, 4),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 5),
    mix=st.integers(1, 3),
    chunk=st.integers(1, 40),
)
def test_partition_invariants(n: int, batch: int, workers: int, ranks: int, shuffle: bool,
                              seed: int, epoch: int, mix: int, chunk: int) -> None:
    orders = []
    for rank in range(ranks):
        s = ChunkedSampler(Sized(n), batch, workers, ranks, rank, shuffle=shuffle, seed=seed,
                           mix=mix, chunk=chunk)
        s.set_epoch(epoch)
        orders.append(list(s))
        assert len(orders[-1]) == len(s)
        # deterministic per (seed, epoch): a fresh sampler gives the same order
        again = ChunkedSampler(Sized(n), batch, workers, ranks, rank, shuffle=shuffle,
                               seed=seed, mix=mix, chunk=chunk)
        again.set_epoch(epoch)
        assert list(again) == orders[-1]
    nw = max(workers, 1)
    per_rank = (n // ranks) // nw * nw
    assert all(len(o) == per_rank for o in orders)  # equal-sized
    everything = [i for o in orders for i in o]
    assert len(set(everything)) == len(everything)  # disjoint, no repeats
    assert all(0 <= i < n for i in everything)
    if not shuffle:
        # covers everything but the dropped tail, contiguous per worker
        for rank, order in enumerate(orders):
            for w, stream in enumerate(_streams(order, batch, workers)):
                start = rank * per_rank + w * (per_rank // nw)
                assert stream == list(range(start, start + len(stream)))
    else:
        # every unit (chunk) is read by a worker in one visit (mix=1)
        if mix == 1:
            for order in orders:
                for stream in _streams(order, batch, workers):
                    units = [i // chunk for i in stream]
                    runs = [u for u, _ in itertools.groupby(units)]
                    assert len(runs) == len(set(runs))


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 400),
    batch=st.integers(1, 12),
    workers=st.integers(0, 4),
    ranks=st.integers(1, 5),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 3),
    mix=st.integers(1, 3),
    chunk=st.integers(1, 50),
)
def test_shuffled_order_is_the_original_rule_on_the_epochs_sequence(
        n: int, batch: int, workers: int, ranks: int, seed: int, epoch: int, mix: int,
        chunk: int) -> None:
    # the epoch's whole sequence, built independently of the sampler's rank slicing
    units = [(a, min(a + chunk, n)) for a in range(0, n, chunk)]
    sequence = shuffled_sequence(units, seed, epoch, mix).tolist()
    assert sorted(sequence) == list(range(n))
    kept = 0
    for rank in range(ranks):
        s = ChunkedSampler(Sized(n), batch, workers, ranks, rank, shuffle=True, seed=seed,
                           mix=mix, chunk=chunk)
        s.set_epoch(epoch)
        positions = reference(n, batch, workers, ranks, rank)
        assert list(s) == [sequence[p] for p in positions]
        kept += len(positions)
    # the rows dropped this epoch are the last positions of its sequence
    dropped = set(range(n)) - {i for r in range(ranks) for i in ChunkedSampler(
        Sized(n), batch, workers, ranks, r, shuffle=True, seed=seed, mix=mix, chunk=chunk
    ).order(epoch).tolist()}
    assert dropped == set(sequence[kept:])


def test_shuffle_drops_different_rows_each_epoch() -> None:
    dropped = []
    for epoch in range(6):
        kept = {i for r in range(2)
                for i in ChunkedSampler(Sized(103), 4, 2, 2, r, shuffle=True, seed=1,
                                        chunk=5).order(epoch).tolist()}
        dropped.append(frozenset(range(103)) - kept)
    assert all(len(d) == 3 for d in dropped)
    assert len(set(dropped)) > 1


def test_shuffle_differs_across_epochs_and_seeds() -> None:
    def order(seed: int, epoch: int) -> list[int]:
        s = ChunkedSampler(Sized(500), 8, 2, 2, 1, shuffle=True, seed=seed, chunk=16)
        s.set_epoch(epoch)
        return list(s)

    assert order(1, 0) == order(1, 0)
    assert order(1, 0) != order(1, 1)
    assert order(1, 0) != order(2, 0)
    assert sorted(order(1, 0)) != list(range(250, 500))  # a shuffled share, not the plain one


def test_shuffle_covers_every_row_when_nothing_is_dropped() -> None:
    ranks = _all_ranks(480, 8, 2, 2, shuffle=True, seed=5, chunk=16)
    assert sorted(ranks[0] + ranks[1]) == list(range(480))
    assert ranks[0] != list(range(240))


def test_mix_mixes_rows_of_several_chunks() -> None:
    one = ChunkedSampler(Sized(640), 32, 0, shuffle=True, seed=0, chunk=64, mix=1)
    four = ChunkedSampler(Sized(640), 32, 0, shuffle=True, seed=0, chunk=64, mix=4)
    distinct_one = [len({i // 64 for i in b}) for b in np.array_split(list(one), 20)]
    distinct_four = [len({i // 64 for i in b}) for b in np.array_split(list(four), 20)]
    assert max(distinct_one) <= 2
    assert np.mean(distinct_four) > 2.5
    assert sorted(four) == list(range(640))


def test_windows_of_a_parquet_dataset_are_the_shuffle_units(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root, memory=1, window_bytes=4000)
    assert len(ds.windows) > 5
    window_of = {}
    for k, w in enumerate(ds.windows):
        for i in range(w.offset, w.offset + w.rows):
            window_of[i] = k
    batch, workers, ranks = 5, 2, 2
    orders = []
    for rank in range(ranks):
        s = ChunkedSampler(ds, batch, workers, ranks, rank, shuffle=True, seed=11)
        s.set_epoch(2)
        orders.append(list(s))
        for stream in _streams(orders[-1], batch, workers):
            runs = [k for k, _ in itertools.groupby(window_of[i] for i in stream)]
            assert len(runs) == len(set(runs))  # one visit per window
        # the order is not the plain window order
        assert orders[-1] != sorted(orders[-1])
    seen = orders[0] + orders[1]
    assert len(set(seen)) == len(seen) == len(orders[0]) * 2
    # whole windows: a window is split between workers only at a share's edges
    owners: dict[int, set[tuple[int, int]]] = {}
    for rank, order in enumerate(orders):
        for w, stream in enumerate(_streams(order, batch, workers)):
            for i in stream:
                owners.setdefault(window_of[i], set()).add((rank, w))
    assert sum(len(o) - 1 for o in owners.values()) <= ranks * workers - 1
    rows = ds.__getitems__(orders[0][:3])
    assert [r["id"] for r in rows] == [f"row-{i:08d}" for i in orders[0][:3]]


# ---------------------------------------------------------------------- resume (sampler level)
def test_state_dict_resume_yields_exactly_the_rest() -> None:
    s = ChunkedSampler(Sized(203), 6, 2, 2, 1, shuffle=True, seed=9, chunk=10)
    s.set_epoch(4)
    full = list(s)
    state = s.state_dict(consumed=24)
    assert state["epoch"] == 4 and state["consumed"] == 24
    t = ChunkedSampler(Sized(203), 6, 2, 2, 1, shuffle=True, seed=9, chunk=10)
    t.load_state_dict(torch.load(_roundtrip(state), weights_only=True))
    t.set_epoch(4)  # Lightning sets the same epoch again: the position is kept
    assert t.resume_at == 24
    assert list(t) == full[24:]
    assert list(t) == full  # the next iteration is a whole epoch again
    t.set_epoch(5)
    assert list(t) != full


def _roundtrip(state: dict[str, object]) -> object:
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


def test_state_at_epoch_end_resumes_at_next_epoch() -> None:
    s = ChunkedSampler(Sized(100), 6, 0, shuffle=True, seed=1, chunk=10)
    s.set_epoch(2)
    state = s.state_dict(consumed=len(s))
    t = ChunkedSampler(Sized(100), 6, 0, shuffle=True, seed=1, chunk=10)
    t.load_state_dict(state)
    assert t.epoch == 3
    assert list(t) == list(t.order(3))


def test_set_epoch_to_another_epoch_drops_the_resume_position() -> None:
    s = ChunkedSampler(Sized(100), 6, 0)
    s.load_state_dict({**s.state_dict(), "consumed": 12})
    s.set_epoch(1)
    assert list(s) == list(range(100))


@pytest.mark.parametrize(
    ("change", "word"),
    [({"mix": 2}, "mix"), ({"chunk": 7}, "chunk"), ({"seed": 4}, "seed"),
     ({"shuffle": False}, "shuffle")],
)
def test_resume_with_other_settings_is_refused(change: dict[str, object], word: str) -> None:
    base: dict[str, object] = {"batch": 6, "workers": 2, "ranks": 2, "rank": 0, "shuffle": True,
                               "seed": 1}
    state = ChunkedSampler(Sized(100), **base).state_dict(consumed=12)  # type: ignore[arg-type]
    other = ChunkedSampler(Sized(100), **{**base, **change})  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match=word):
        other.load_state_dict(state)
    with pytest.raises(ArgumentError, match="state"):
        other.load_state_dict({"nonsense": 1})


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 30), max_size=12),
    mix=st.integers(1, 4),
    seed=st.integers(0, 1000),
    cut=st.tuples(st.integers(0, 400), st.integers(0, 400)),
)
def test_shuffled_sequence_parts_match_the_whole(sizes: list[int], mix: int, seed: int,
                                                 cut: tuple[int, int]) -> None:
    bounds = np.cumsum([0, *sizes]).tolist()
    units = list(itertools.pairwise(bounds))
    whole = shuffled_sequence(units, seed, 3, mix)
    assert sorted(whole.tolist()) == list(range(bounds[-1]))
    start, stop = sorted(cut)
    part = shuffled_sequence(units, seed, 3, mix, start, stop)
    assert part.tolist() == whole[start:stop].tolist()
    if mix == 1:  # each unit's rows stay adjacent
        unit_of = np.searchsorted(np.array(bounds[1:]), whole, side="right")
        runs = [u for u, _ in itertools.groupby(unit_of.tolist())]
        assert len(runs) == len(set(runs))


def test_interleave_is_the_reference_on_any_sequence() -> None:
    sequence = np.arange(1000, 1037)
    got = interleave(sequence, 4, 3, 2, 1).tolist()
    assert got == [1000 + i for i in reference(37, 4, 3, 2, 1)]


@pytest.mark.heavy
def test_bench_shuffle_smoke(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_shuffle.py"
    out = tmp_path / "shuffle.json"
    subprocess.run([sys.executable, str(script), "--rows", "20000", "--group", "500",
                    "--window-kb", "64", "--run", "1000", "--mix", "1", "8", "--json", str(out)],
                   check=True, capture_output=True, timeout=300)
    results = {r["mode"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"off", "window", "mix=8", "uniform"}
    assert results["off"]["lag1"] > 0.9 and results["mix=8"]["lag1"] < 0.3
    assert results["mix=8"]["windows/batch"] > 6 > results["window"]["windows/batch"]
    assert results["uniform"]["windows/batch"] > results["mix=8"]["windows/batch"]
    assert results["window"]["reads"] <= 1.05 * results["off"]["reads"]  # each window once


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40_000)), min_size=1, max_size=8),
       st.integers(0, 139_999))
def test_a_pass_taken_by_islice_and_by_next_shares_one_position(
    takes: list[tuple[bool, int]], start: int
) -> None:
    # longer than two of the pass's buffers of 65,536 indices, so takes cross their ends
    length = 140_000
    s = ChunkedSampler(Sized(length), 64, 0, shuffle=True, seed=3, chunk=1000)  # type: ignore[arg-type]
    full = list(s)
    s.load_state_dict(s.state_dict(consumed=start))
    live = iter(s)
    got: list[int] = []
    for by_islice, count in takes:
        if by_islice:  # what torch's BatchSampler does: islice(iter(pass), batch)
            got += itertools.islice(live, count)
        else:
            got += [next(live) for _ in range(min(count, length - start - len(got)))]
        assert got == full[start:start + len(got)]
        state = live.state_dict()  # type: ignore[attr-defined]
        assert state["consumed"] == start + len(got)
        if start + len(got) < length:  # (a state at the epoch's end resumes the next one)
            resumed = ChunkedSampler(Sized(length), 64, 0, shuffle=True, seed=3, chunk=1000)  # type: ignore[arg-type]
            resumed.load_state_dict(state)
            assert list(itertools.islice(resumed, 50)) == full[start + len(got):][:50]
    assert got + list(live) == full[start:]
    assert live.state_dict()["consumed"] == length  # type: ignore[attr-defined]


def test_an_epoch_the_tail_rule_leaves_empty_is_said() -> None:
    # 5 rows, 8 workers: undertale's rule drops the 5, and an epoch passed with no batch
    with pytest.warns(EmptyEpochWarning, match=r"5 rows are fewer than ranks x workers \(1 x 8\)"):
        sampler = ChunkedSampler(Sized(5), 2, 8)
    assert list(sampler) == []
    with pytest.warns(EmptyEpochWarning, match=r"\(4 x 1\)"):
        ChunkedSampler(Sized(3), 2, 0, 4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(ChunkedSampler(Sized(5), 2, 8, drop_last=False))) == 5
        assert len(list(ChunkedSampler(Sized(0), 2, 8))) == 0  # nothing to drop
        assert len(list(ChunkedSampler(Sized(8), 2, 8))) == 8


def test_order_and_sequence_check_the_epoch_they_are_given(tmp_path: Path) -> None:
    from support import datagen

    from undertale_duck import Mixture, batch_rows

    datagen.write_shards(tmp_path / "d", [48], row_group_size=8)
    ds = ParquetDataset(tmp_path / "d", window_bytes=1)
    for dataset in (ds, Mixture([ds, ds])):
        for shuffle in (True, False):
            s = ChunkedSampler(dataset, 4, 0, shuffle=shuffle, seed=3)
            # numpy's seeding refused these in its words; unshuffled, 1.5 was epoch 1
            for bad, said in ((1.5, "epoch must be an integer >= 0, got 1.5"),
                              (-1, "epoch must be >= 0, got -1"),
                              ("1", "epoch must be an integer >= 0, got '1'")):
                with pytest.raises(ArgumentError, match=said):
                    s.order(bad)  # type: ignore[arg-type]
                with pytest.raises(ArgumentError, match=said):
                    s.sequence(bad)  # type: ignore[arg-type]
                with pytest.raises(ArgumentError, match=said):
                    batch_rows(s, 0, epoch=bad)  # type: ignore[arg-type]
            assert s.order(np.int64(2)).tolist() == s.order(2).tolist()
    mix = Mixture([ds, ds])
    with pytest.raises(ArgumentError, match="seed must be >= 0, got -1"):
        mix.epoch_units(-1, 0)
    with pytest.raises(ArgumentError, match="epoch must be an integer >= 0, got None"):
        mix.epoch_units(0, None)  # type: ignore[arg-type]
    assert mix.epoch_units(np.int64(3), np.uint8(1)) == mix.epoch_units(3, 1)
