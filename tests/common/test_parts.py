"""consecutive_parts: a sequence cut back into consecutive parts of given sizes."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from undertale_duck.common.parts import consecutive_parts


@given(data=st.data(), length=st.integers(0, 60))
def test_parts_rejoin_to_the_whole_in_order(data: st.DataObject, length: int) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, length), max_size=8)))
    sizes = [b - a for a, b in itertools.pairwise([0, *cuts, length])]
    values = [f"v{i}" for i in range(length)]
    parts = consecutive_parts(values, sizes)
    assert [len(p) for p in parts] == sizes
    assert list(itertools.chain.from_iterable(parts)) == values
    array = np.arange(length)
    views = consecutive_parts(array, sizes)
    assert all(np.shares_memory(v, array) for v in views if len(v))  # views, not copies
    assert np.array_equal(np.concatenate([array[:0], *views]), array)
