"""Elastic resume and evaluation shares: set invariants of ChunkedSampler across topologies."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck import ArgumentError, ChunkedSampler


class Sized:
    """A dataset that only has a length (the sampler needs nothing else)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


Topology = tuple[int, int, int]  # ranks, workers, batch
topologies = st.tuples(st.integers(1, 4), st.integers(0, 3), st.integers(1, 9))


def _samplers(n: int, top: Topology, epoch: int, **kw: Any) -> list[ChunkedSampler]:
    ranks, workers, batch = top
    out = []
    for rank in range(ranks):
        s = ChunkedSampler(Sized(n), batch, workers, ranks, rank, chunk=7, seed=3, **kw)
        s.set_epoch(epoch)
        out.append(s)
    return out


def _resumed(n: int, top: Topology, epoch: int, state: dict[str, Any],
             **kw: Any) -> list[ChunkedSampler]:
    out = _samplers(n, top, epoch, **kw)
    for s in out:
        s.load_state_dict(state)  # every rank loads rank 0's state (what Lightning saves)
        # the trainer sets the restored epoch again: the position is kept (a state saved at
        # its epoch's end is at the next epoch's start)
        s.set_epoch(max(epoch, s.epoch))
    return out


# ---------------------------------------------------------------------- evaluation shares
@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), top=topologies, shuffle=st.booleans())
def test_without_drop_last_every_row_goes_to_one_rank_once(n: int, top: Topology,
                                                            shuffle: bool) -> None:
    samplers = _samplers(n, top, 1, shuffle=shuffle, drop_last=False)
    orders = [list(s) for s in samplers]
    assert sorted(i for o in orders for i in o) == list(range(n))
    sizes = [len(o) for o in orders]
    assert max(sizes) - min(sizes) <= 1 and sizes == [len(s) for s in samplers]
    if not shuffle:  # each rank a contiguous range, in rank order
        assert [i for o in orders for i in sorted(o)] == list(range(n))
        assert all(s.tail == 0 and s.state_dict()["tail"] == 0 for s in samplers)


def test_drop_last_keeps_the_original_tail_rule() -> None:
    kept = [list(s) for s in _samplers(103, (2, 2, 5), 0)]
    assert sorted(i for o in kept for i in o) == list(range(100))  # the last 3 rows dropped
    assert _samplers(103, (2, 2, 5), 0)[0].state_dict()["tail"] == 3


# ---------------------------------------------------------------------- elastic resume
@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 300),
    old=topologies,
    new=topologies,
    third=topologies,
    shuffle=st.booleans(),
    epoch=st.integers(0, 2),
    cut=st.floats(0, 1),
    cut2=st.floats(0, 1),
)
def test_elastic_resume_sees_every_unseen_row_once(n: int, old: Topology, new: Topology,
                                                   third: Topology, shuffle: bool, epoch: int,
                                                   cut: float, cut2: float) -> None:
    first = _samplers(n, old, epoch, shuffle=shuffle)
    consumed = int(cut * len(first[0]))
    before = [i for s in first for i in list(s)[:consumed]]
    state = first[0].state_dict(consumed=consumed)
    state = torch.load(_roundtrip(state), weights_only=True)  # a checkpoint holds plain data
    second = _resumed(n, new, epoch, state, shuffle=shuffle)
    ranks, workers, batch = new
    if second[0].epoch == epoch + 1:
        # saved at the epoch's end; a rest shorter than this topology's tail stays in its
        # epoch, served by no rank (a trainer restored inside that epoch finishes it)
        assert consumed == len(first[0])
        return
    after = [list(s) for s in second]
    flat = [i for o in after for i in o]
    assert len(flat) == len(set(flat)) and not set(flat) & set(before)  # nothing twice
    missing = set(range(n)) - set(before) - set(flat)
    # only the new topology's own tail is left out: fewer than ranks x workers (x batch) rows
    bound = ranks * max(workers, 1)
    assert len(missing) == second[0].tail < bound <= bound * batch
    if new == old or consumed == 0:
        # an unchanged topology (or none consumed) keeps the original order
        assert after == [s.order().tolist()[consumed:] for s in _samplers(n, new, epoch,
                                                                          shuffle=shuffle)]
    sizes = {len(o) for o in after}
    assert len(sizes) <= 1  # equal shares: DDP ranks run the same number of batches
    # a second stop, resumed on a third topology: still nothing twice, the same tail bound
    # the count is the epoch's as len() counts it: the part skipped on resuming, or after an
    # elastic resume the batches run before it at this batch size, included
    skipped = len(second[0]) - len(after[0])
    taken = int(cut2 * len(after[0]))
    state2 = second[0].state_dict(consumed=skipped + taken)
    last = _resumed(n, third, epoch, state2, shuffle=shuffle)
    if last[0].epoch == epoch + 1:
        return
    third_part = [i for s in last for i in s]
    seen = before + [i for o in after for i in o[:taken]] + third_part
    assert len(seen) == len(set(seen))
    ranks3, workers3, _ = third
    assert len(set(range(n)) - set(seen)) < ranks3 * max(workers3, 1)
    # and the next epoch is whole again, in its original order
    nxt = _resumed(n, third, epoch, state2, shuffle=shuffle)
    for s, plain in zip(nxt, _samplers(n, third, epoch + 1, shuffle=shuffle), strict=True):
        s.set_epoch(epoch + 1)
        assert list(s) == list(plain)


def _roundtrip(state: dict[str, Any]) -> Any:
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


def test_elastic_resume_two_ranks_to_one_and_back(caplog: pytest.LogCaptureFixture) -> None:
    two = _samplers(400, (2, 2, 16), 0, shuffle=True)
    before = [i for s in two for i in list(s)[:80]]
    state = two[0].state_dict(consumed=80)
    with caplog.at_level(logging.WARNING, logger="undertale_duck"):
        (one,) = _resumed(400, (1, 0, 10), 0, state, shuffle=True)
    assert "elastic resume" in caplog.text
    rest = list(one)
    assert sorted(before + rest) == list(range(400))  # one rank, no workers: no tail at all
    # the trainer counts 5 batches done before the checkpoint: the epoch's length says so
    assert len(one) == 5 * 10 + 240
    with pytest.raises(ArgumentError, match="less than the 50 samples epoch 0 counts before"):
        one.state_dict(consumed=30)  # this run's count alone: 50 of the epoch came before
    resumed = one.state_dict(consumed=50 + 30)
    assert resumed["before"] == [{"ranks": 2, "workers": 2, "batch": 16, "drop_last": True,
                                  "consumed": 80}]
    back = _resumed(400, (2, 2, 16), 0, resumed, shuffle=True)
    later = [i for s in back for i in s]
    seen = Counter(before + rest[:30] + later)
    assert max(seen.values()) == 1 and set(seen) <= set(range(400))
    assert 400 - len(seen) == back[0].tail == 2  # 370 rows left: 2 ranks x 2 workers drop 2


def test_elastic_resume_of_the_library_loader_state_is_logged_with_its_tail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    (one,) = _samplers(101, (1, 0, 10), 0)
    state = one.state_dict(consumed=30)
    with caplog.at_level(logging.WARNING, logger="undertale_duck"):
        two = _resumed(101, (2, 2, 4), 0, state)
    assert two[0].tail == 3 and two[0].state_dict()["tail"] == 3 and "tail of 3" in caplog.text
    assert sorted(i for s in two for i in s) == list(range(30, 98))


def test_a_state_with_another_sequence_is_still_refused() -> None:
    state = _samplers(100, (1, 0, 4), 0, shuffle=True)[0].state_dict(consumed=8)
    with pytest.raises(ArgumentError, match="length"):
        _resumed(99, (1, 0, 4), 0, state, shuffle=True)
    with pytest.raises(ArgumentError, match="before"):
        _resumed(100, (1, 0, 4), 0, {**state, "before": "x"}, shuffle=True)


def test_a_before_entry_without_drop_last_reads_as_true() -> None:
    state = _samplers(100, (1, 0, 4), 0, shuffle=True)[0].state_dict(consumed=8)
    part = {"ranks": 2, "workers": 1, "batch": 4, "consumed": 4}  # as saved before drop_last
    (old,) = _resumed(100, (1, 0, 4), 0, {**state, "before": [part]}, shuffle=True)
    (new,) = _resumed(100, (1, 0, 4), 0, {**state, "before": [{**part, "drop_last": True}]},
                      shuffle=True)
    assert list(old) == list(new) and list(new)  # as a state with drop_last=True there


@pytest.mark.parametrize(("change", "match"), [
    ({"carried": 2**70}, "carries"),
    ({"carried": 101}, "carries"),  # more batches than the 100 rows make
    ({"before": [{"ranks": 2**62, "workers": 1, "batch": 4, "consumed": 4,
                  "drop_last": True}]}, "before"),
    ({"before": [{"ranks": 2**62, "workers": 1, "batch": 4, "consumed": 1,
                  "drop_last": False}]}, "consumed"),  # 100 ranks of one row: none left
    ({"before": [{"ranks": 1, "workers": 2**62, "batch": 4, "consumed": 4,
                  "drop_last": True}]}, "before"),
])
def test_counts_no_state_dict_writes_are_refused_at_once(change: dict[str, Any],
                                                         match: str) -> None:
    # before: a KeyError, an OverflowError, a MemoryError or a loop over 2**62 ranks
    state = _samplers(100, (1, 0, 4), 0, shuffle=True)[0].state_dict(consumed=8)
    with pytest.raises(ArgumentError, match=match):
        _resumed(100, (1, 0, 4), 0, {**state, **change}, shuffle=True)


@pytest.mark.filterwarnings("ignore::undertale_duck.EmptyEpochWarning")
def test_more_ranks_than_rows_are_counted_without_a_loop_over_them() -> None:
    for drop_last, tail, rows in ((False, 0, [5]), (True, 10, [])):
        s = ChunkedSampler(Sized(10), 4, 0, ranks=2**40, rank=5, drop_last=drop_last)
        assert s.tail == s.state_dict()["tail"] == tail and list(s) == rows


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 120), top=topologies, past=st.integers(0, 2**70), shuffle=st.booleans(),
       resumed=st.booleans())
def test_a_batch_past_a_workers_share_is_one_block_of_it(
    n: int, top: Topology, past: int, shuffle: bool, resumed: bool,
) -> None:
    # numpy refused the shapes of a batch of 2**62 (a state's, or a sampler's own)
    ranks, workers, _ = top
    wide = (ranks, workers, max(n, 1) + past)
    whole = (ranks, workers, max(n, 1))
    if not resumed:
        for a, b in zip(_samplers(n, wide, 1, shuffle=shuffle),
                        _samplers(n, whole, 1, shuffle=shuffle), strict=True):
            assert a.order().tolist() == b.order().tolist()
        return
    # a state saved at that batch by one rank of one worker, resumed by this topology
    state = _samplers(n, (1, 0, max(n, 1) + past), 1, shuffle=shuffle)[0].state_dict(
        consumed=n // 2)
    twin = {**state, "batch": max(n, 1)}
    for a, b in zip(_resumed(n, top, 1, state, shuffle=shuffle),
                    _resumed(n, top, 1, twin, shuffle=shuffle), strict=True):
        assert list(a) == list(b)


def test_a_state_saved_before_elastic_resume_existed_still_loads() -> None:
    (s,) = _samplers(100, (1, 2, 4), 0, shuffle=True)
    old = {k: v for k, v in s.state_dict(consumed=16).items()
           if k not in ("version", "before", "tail", "drop_last")}  # as saved then
    (t,) = _resumed(100, (1, 2, 4), 0, old, shuffle=True)
    assert list(t) == s.order().tolist()[16:]


def test_rank_batches_tell_whether_ranks_run_equal_steps() -> None:
    def steps(n: int, drop_last: bool, ranks: int = 2) -> list[int]:
        return ChunkedSampler(Sized(n), 8, 0, ranks, 0, drop_last=drop_last).rank_batches()

    assert steps(17, False) == [2, 1]
    assert steps(17, True) == [1, 1]
    assert steps(16, False) == [1, 1] and steps(32, False, 4) == [1] * 4
    assert steps(33, False, 4) == [2, 1, 1, 1]


def test_batches_carried_into_an_epoch_count_in_its_length_and_state() -> None:
    # what DataModule sets after a checkpoint at an epoch's last batch (Lightning keeps
    # counting from there): the length counts them, a state keeps them, another epoch drops them
    (s,) = _samplers(100, (1, 0, 8), 0, shuffle=True)
    end = s.state_dict(consumed=100)
    (t,) = _resumed(100, (1, 0, 8), 0, end, shuffle=True)
    t.carried = 10
    t.load_state_dict(end)  # loaded again where it left the sampler (as Lightning does)
    assert (t.epoch, t.carried, len(t)) == (1, 10, 10 * 8 + 100)
    assert list(t) == s.order(1).tolist()
    with pytest.raises(ArgumentError, match="less than the 80 samples"):
        t.state_dict(consumed=24)  # the 10 batches carried in count first, as len() counts
    mid = t.state_dict(consumed=10 * 8 + 24)
    assert mid["carried"] == 10
    (u,) = _resumed(100, (1, 0, 8), 1, mid, shuffle=True)
    assert (u.carried, len(u), list(u)) == (10, 180, s.order(1).tolist()[24:])
    u.set_epoch(2)
    assert (u.carried, len(u)) == (0, 100)
    with pytest.raises(ArgumentError, match="carried"):
        u.carried = -1


# a topology whose ranks x workers may outnumber the rows: every share empty
any_topologies = st.tuples(st.integers(1, 6), st.integers(0, 40), st.integers(1, 9))


@pytest.mark.filterwarnings("ignore::undertale_duck.EmptyEpochWarning")
@settings(max_examples=120, deadline=None)
@given(n=st.integers(1, 60), first=topologies, middle=any_topologies, last=topologies,
       shuffle=st.booleans(), drop_last=st.booleans(), set_again=st.booleans(),
       served=st.booleans())
def test_an_epochs_end_passed_on_through_any_topology_stays_its_end(
    n: int, first: Topology, middle: Topology, last: Topology, shuffle: bool,
    drop_last: bool, set_again: bool, served: bool,
) -> None:
    # a state saved at the end of epoch 2, loaded where nothing is served before it is saved
    # again (a restart right after a restore; a topology whose shares are all empty), then
    # loaded again with the epoch set again (a trainer restored inside it): epoch 2 was
    # served a second time, as the count 0 of the state in between read as "not started"
    kw = {"shuffle": shuffle, "drop_last": drop_last}
    (end,) = _samplers(n, (1, first[1], first[2]), 2, **kw)
    assert len(list(end)) == len(end)
    state = end.state_dict()
    ranks, workers, batch = middle
    between = ChunkedSampler(Sized(n), batch, workers, ranks, ranks - 1, chunk=7, seed=3, **kw)
    between.load_state_dict(state)
    if set_again:
        between.set_epoch(2)
        if served:
            assert list(between) == []  # the epoch is over: nothing left of it
    again = between.state_dict()
    for resumed in _samplers(n, last, 0, **kw):
        resumed.load_state_dict(again)
        resumed.set_epoch(2)
        assert list(resumed) == []
        resumed.set_epoch(3)
        fresh = _samplers(n, last, 3, **kw)[resumed.rank]
        assert list(resumed) == list(fresh)


@settings(max_examples=60, deadline=None)
@given(old=st.integers(1, 20), new=st.integers(1, 20), cut=st.integers(0, 24),
       more=st.integers(0, 60))
def test_consumed_counts_the_whole_epoch_as_len_does_and_other_counts_are_refused(
        old: int, new: int, cut: int, more: int) -> None:
    # consumed= meant the epoch's count on the same topology but this run's alone after an
    # elastic resume: a loop counting the epoch lost rows without a word, one counting its
    # run served them twice on the same topology
    (first,) = _samplers(400, (1, 0, old), 0, shuffle=True)
    used = min(cut * old, 400 - old)
    before = list(first)[:used]
    (second,) = _resumed(400, (1, 0, new), 0, first.state_dict(consumed=used), shuffle=True)
    earlier = len(second) - len(list(second.order())) if new != old else used
    taken = list(itertools.islice(iter(second), min(more, 400 - used)))
    right = earlier + len(taken)
    start = used if new == old else earlier  # what the resumed state had used, as len counts
    for wrong in (len(taken), used + len(taken), right + 1):
        # this run's count alone, or rows rather than len()'s count: refused wherever it is
        # below what the resumed state had used or above what this iteration handed out
        if wrong < start or wrong > right:
            with pytest.raises(ArgumentError, match=f"consumed={wrong} is (less|more) than"):
                second.state_dict(consumed=wrong)
    (third,) = _resumed(400, (1, 0, new), 0, second.state_dict(consumed=right), shuffle=True)
    seen = before + taken + (list(third) if third.epoch == 0 else [])
    assert len(seen) == len(set(seen)) == 400
