from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from undertale_duck.core.source import windows as win

groups = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5000)), max_size=6)
layouts = st.lists(groups, max_size=6)


@given(layouts, st.integers(1, 20_000))
def test_plan_covers_every_row_once_in_order(shards: list[list[tuple[int, int]]],
                                             target: int) -> None:
    plan = win.plan(shards, target)
    total = sum(r for g in shards for r, _ in g)
    assert sum(w.rows for w in plan) == total
    position = 0
    for w in plan:
        assert w.rows >= 1
        assert w.offset == position
        position += w.rows
    # windows never cross shards and stay inside them
    for w in plan:
        assert 0 <= w.start < w.stop <= sum(r for r, _ in shards[w.shard])


@given(layouts, st.integers(1, 20_000))
def test_plan_aligns_to_row_groups(shards: list[list[tuple[int, int]]], target: int) -> None:
    plan = win.plan(shards, target)
    starts = {(w.shard, w.start) for w in plan}
    for k, groups_ in enumerate(shards):
        local = 0
        for rows, nbytes in groups_:
            if rows:
                size = nbytes if nbytes > 0 else rows * win.FALLBACK_ROW_BYTES
                # a row group either starts a window or was merged into one that fits
                if size > target:
                    assert (k, local) in starts
            local += rows
    # every window either fits the target or lies inside one row group
    for w in plan:
        bounds = []
        local = 0
        for rows, _ in shards[w.shard]:
            bounds.append((local, local + rows))
            local += rows
        inside_one = any(a <= w.start and w.stop <= b for a, b in bounds)
        assert inside_one or _bytes(shards[w.shard], w.start, w.stop) <= target


def _bytes(groups_: list[tuple[int, int]], start: int, stop: int) -> int:
    total, local = 0, 0
    for rows, nbytes in groups_:
        if rows and start <= local and local + rows <= stop:
            total += nbytes if nbytes > 0 else rows * win.FALLBACK_ROW_BYTES
        local += rows
    return total


@given(layouts, st.integers(1, 20_000), st.data())
def test_locate_finds_the_window(shards: list[list[tuple[int, int]]], target: int,
                                 data: st.DataObject) -> None:
    plan = win.plan(shards, target)
    total = sum(w.rows for w in plan)
    if total == 0:
        return
    i = data.draw(st.integers(0, total - 1))
    w = plan[win.locate(win.starts(plan), i)]
    assert w.offset <= i < w.end


@given(st.integers(0, 100), st.integers(-300, 300))
def test_normalize_index_matches_python(length: int, index: int) -> None:
    reference = list(range(length))
    try:
        expected = reference[index]
    except IndexError:
        with pytest.raises(IndexError):
            win.normalize_index(index, length)
    else:
        assert win.normalize_index(index, length) == expected


def test_plan_rejects_bad_target() -> None:
    with pytest.raises(ValueError):
        win.plan([[(1, 1)]], 0)


def test_default_window_bytes_bounds() -> None:
    assert win.default_window_bytes(0) == 1 << 20
    assert win.default_window_bytes(4096 << 20) == 64 << 20
    assert win.default_window_bytes(256 << 20) == 16 << 20
    assert win.default_window_bytes(16 << 20) == 1 << 20
    assert win.default_window_bytes(1 << 20) == 512 << 10  # a window must fit a tiny budget
    assert win.default_window_bytes(1) == 1


def test_group_bytes_falls_back_per_row_when_the_footer_has_no_size() -> None:
    assert win.group_bytes(10, 4096) == 4096
    assert win.group_bytes(10, 0) == 10 * win.FALLBACK_ROW_BYTES
    assert win.group_bytes(10, -1) == 10 * win.FALLBACK_ROW_BYTES
