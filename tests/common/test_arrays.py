"""numpy_of and int64_array: pyarrow's own conversions' values, without importing pandas."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck.common.arrays import int64_array, numpy_of, pylist_of

NUMBERS = [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
    pa.uint64(), pa.float16(), pa.float32(), pa.float64(),
]


def _values(typ: pa.DataType, n: int, seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    if pa.types.is_boolean(typ):
        return [bool(v) for v in rng.integers(0, 2, n)]
    if pa.types.is_floating(typ):
        return [float(v) for v in rng.integers(-1000, 1000, n) / 8]
    info = np.iinfo(np.dtype(str(typ)))
    return [int(info.min) + int(v) * (int(info.max) - int(info.min)) // 2**30
            for v in rng.integers(0, 2**30, n, endpoint=True)]


@settings(max_examples=200, deadline=None)
@given(
    typ=st.sampled_from([*NUMBERS, pa.bool_()]),
    n=st.integers(0, 70),
    start=st.integers(0, 20),
    length=st.integers(0, 70),
    nulls=st.sets(st.integers(0, 69)),
    seed=st.integers(0, 2**16),
)
def test_numpy_of_equals_pyarrows_conversion(
    typ: pa.DataType, n: int, start: int, length: int, nulls: set[int], seed: int
) -> None:
    values = _values(typ, n, seed)
    whole = pa.array([None if k in nulls else v for k, v in enumerate(values)], typ)
    array = whole.slice(min(start, n), length)  # offsets, into bit-packed booleans too
    zero = pa.scalar(False if pa.types.is_boolean(typ) else 0, typ)
    want = pc.fill_null(array, zero).to_numpy(zero_copy_only=False)
    got = numpy_of(array, zero_nulls=True)
    assert got.dtype == want.dtype and got.shape == (len(array),)
    assert np.array_equal(got, want)
    if not array.null_count:
        plain = numpy_of(array)
        assert plain.dtype == want.dtype and np.array_equal(plain, want)
        if not pa.types.is_boolean(typ) and len(array):
            assert not plain.flags.writeable  # a view of Arrow's memory, which is immutable


def test_numpy_of_hands_other_types_and_unfilled_nulls_to_pyarrow() -> None:
    days = pa.array([0, 1, None], pa.date32())
    assert numpy_of(days).tolist() == days.to_numpy(zero_copy_only=False).tolist()
    ints = pa.array([1, None, 3], pa.int64())  # without zero_nulls: pyarrow's floats and NaN
    got = numpy_of(ints)
    assert got.dtype == np.float64 and got[0] == 1 and np.isnan(got[1])


def exact(value: Any) -> Any:
    """A value with its type and float bits spelled out (-0.0, NaN and inf differ)."""
    if isinstance(value, list):
        return [exact(v) for v in value]
    return (type(value).__name__, repr(value))


#: Values beside the generated ones that a conversion gets wrong first.
EDGES: dict[str, list[Any]] = {
    "f": [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e-7, 65504.0, 6.0e-8],
}


def _edgy(typ: pa.DataType, n: int, seed: int) -> list[Any]:
    values = _values(typ, n, seed)
    if pa.types.is_floating(typ):
        return [*values, *EDGES["f"]]
    info = np.iinfo(np.dtype(str(typ)))
    return [*values, int(info.min), int(info.max), 0]


@settings(max_examples=200, deadline=None)
@given(
    typ=st.sampled_from(NUMBERS),
    shape=st.sampled_from(["scalar", "list", "large_list", "equal lists"]),
    n=st.integers(0, 40),
    start=st.integers(0, 10),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_pylist_of_equals_to_pylist_value_for_value(
    typ: pa.DataType, shape: str, n: int, start: int, seed: int, data: st.DataObject,
) -> None:
    values = _edgy(typ, n, seed)
    if shape == "scalar":
        array = pa.array(values, typ)
    else:
        rows = len(values) // 3 + 1
        if shape == "equal lists":
            width = data.draw(st.integers(0, 4), label="width")
            lengths = [width] * rows
        else:
            lengths = data.draw(st.lists(st.integers(0, 6), min_size=rows, max_size=rows),
                                label="lengths")
        flat = pa.array([values[k % len(values)] for k in range(sum(lengths))], typ)
        lead = data.draw(st.integers(0, 3), label="values lead")  # a child with an offset
        child = pa.concat_arrays([pa.array(values[:lead], typ), flat]).slice(lead)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        make = pa.LargeListArray if shape == "large_list" else pa.ListArray
        kind = np.int64 if shape == "large_list" else np.int32
        array = make.from_arrays(pa.array(bounds.astype(kind)), child)
    array = array.slice(min(start, len(array)), data.draw(st.integers(0, 50), label="length"))
    got = pylist_of(array)
    assert got is not None
    assert exact(got) == exact(array.to_pylist())


@pytest.mark.parametrize("array", [
    pa.array([1, None, 3], pa.int32()),
    pa.array([[1], None], pa.list_(pa.int32())),
    pa.array([[1], [None, 2]], pa.list_(pa.int64())),
    pa.array([True, False]),
    pa.array([[True]], pa.list_(pa.bool_())),
    pa.array(["a"]),
    pa.array([[1, 2]], pa.list_(pa.int8(), 2)),
    pa.array([[[1]]], pa.list_(pa.list_(pa.int8()))),
    pa.array([0], pa.date32()),
], ids=["nulls", "null list", "null value", "bool", "bool lists", "strings", "fixed size",
        "nested", "dates"])
def test_pylist_of_leaves_the_rest_to_pyarrow(array: pa.Array) -> None:
    assert pylist_of(array) is None


@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_int64_array_holds_the_values(values: list[int]) -> None:
    for source in (values, np.array(values, dtype=np.int64), np.array(values)[::-1][::-1]):
        array = int64_array(source)
        assert array.type == pa.int64() and array.null_count == 0
        assert array.to_pylist() == values
    table = pa.table({"x": list(range(100))})
    picks = [v % 100 for v in values]
    assert table.take(int64_array(np.array(picks))).column("x").to_pylist() == picks


def test_int64_array_refuses_more_than_one_dimension() -> None:
    with pytest.raises(ValueError, match="1-d"):
        int64_array(np.zeros((2, 2), dtype=np.int64))


# A fresh process: pyarrow imports pandas on its first to_numpy, pa.array or pa.scalar.
_NO_PANDAS = textwrap.dedent(
    """
    import sys, traceback

    attempts = []

    class Refuse:  # pyarrow swallows a failed import of pandas: each attempt is counted
        def find_spec(self, name, path, target=None):
            if name == "pandas" or name.startswith("pandas."):
                attempts.append("".join(traceback.format_stack()))
                raise ImportError("pandas is refused here")
            return None

    sys.meta_path.insert(0, Refuse())
    from torch.utils.data import DataLoader, RandomSampler
    from undertale_duck import ChunkedSampler, Pack, ParquetDataset, collate

    root = sys.argv[1]
    seen = 0
    for fmt in ("python", "torch"):
        ds = ParquetDataset(root, format=fmt, memory=64)
        assert ds[0]["label"] == 0 and ds[len(ds) - 1]["label"] == (len(ds) - 1) % 10
        assert [r["label"] for r in ds.__getitems__([5, 903, 3])] == [5, 3, 3]
        for shuffle in (False, True):
            sampler = ChunkedSampler(ds, 16, 0, shuffle=shuffle)
            for b in DataLoader(ds, batch_size=16, sampler=sampler, collate_fn=collate):
                seen += len(b["label"])
        for b in DataLoader(ds, batch_size=16, sampler=RandomSampler(ds), collate_fn=collate):
            seen += len(b["label"])
        ds.close()
    tiered = ParquetDataset(root, format="torch", memory=64, disk=64, disk_dir=sys.argv[2],
                            window_bytes=64 << 10)
    for _ in range(2):  # the second pass reads the windows back from the disk tier
        for b in DataLoader(tiered, batch_size=16, sampler=RandomSampler(tiered),
                            collate_fn=collate):
            seen += len(b["label"])
    assert tiered.disk_stats.hits > 0, tiered.disk_stats
    tiered.close()
    view = ParquetDataset(root, where="label < 5", format="torch")
    for b in DataLoader(view, batch_size=16, sampler=RandomSampler(view), collate_fn=collate):
        seen += len(b["label"])
    packed = ParquetDataset(root, columns=["tokens", "label"], format="torch",
                            pack=Pack(column="tokens", length=8, eod=0))
    for b in DataLoader(packed, batch_size=4, sampler=RandomSampler(packed), collate_fn=collate):
        seen += len(b["tokens"])
    sys.stderr.write("".join(attempts))
    print("rows", seen, len(attempts))
    """
)


def test_training_never_imports_pandas(tmp_path: Path) -> None:
    pytest.importorskip("pandas")  # the test extra installs it, as most environments have it
    root = tmp_path / "data"
    root.mkdir()
    for s in range(3):
        i = np.arange(s * 500, (s + 1) * 500)
        table = pa.table({
            "id": pa.array([f"row-{k}" for k in i]),
            "tokens": pa.array([list(range(1, k % 7 + 2)) for k in i], pa.list_(pa.int32())),
            "fixed": pa.array([[k, k + 1] for k in i], pa.list_(pa.int64(), 2)),
            "holes": pa.array([[k, None] if k % 3 == 0 else [k] for k in i],
                              pa.list_(pa.int16())),
            "flag": pa.array(i % 2 == 0),
            "maybe": pa.array([None if k % 5 == 0 else float(k) for k in i]),
            "label": pa.array(i % 10, pa.int64()),
        })
        pq.write_table(table, root / f"part-{s}.parquet", row_group_size=200)
    env = {**os.environ, "UNDERTALE_DUCK_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-c", _NO_PANDAS, str(root), str(tmp_path / "disk")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows, attempts = done.stdout.split()[-2:]
    assert int(rows) > 2 * 3 * 1500
    assert attempts == "0", done.stderr[-3000:]  # where pandas was asked for
