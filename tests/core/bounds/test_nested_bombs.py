"""Dictionary bombs nested in lists, structs and maps are refused before DuckDB decodes them."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import hostile_files as hf

from undertale_duck import MemoryBudgetError, ParquetDataset
from undertale_duck.core.bounds import weigh


@pytest.mark.parametrize("kind", hf.NESTED_KINDS)
def test_nested_dictionary_bomb_is_refused_naming_shard_and_column(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "bomb.parquet"
    hf.nested_dictionary_bomb(path, kind, 4000, 64 << 10)  # 250 MiB decoded (a map: 500)
    assert path.stat().st_size < 64 << 10
    before = hf.sha256s(tmp_path)
    ds = ParquetDataset(path, memory=64)
    with pytest.raises(MemoryBudgetError, match="dictionary bomb") as info:
        ds[5]
    assert info.value.path == str(path)
    assert "column 'c'" in str(info.value) and "MiB of nested string" in str(info.value)
    assert ParquetDataset(path, memory=64, columns=["id"])[5] == {"id": 5}
    # a view refers to the column or not: refused, or served as usual
    with pytest.raises(MemoryBudgetError, match="column 'c'"):
        ParquetDataset(path, memory=64, query="SELECT id, c FROM dataset WHERE id > 2")[5]
    assert ParquetDataset(path, memory=64, query="SELECT id * 2 AS d FROM dataset")[5] == {
        "d": 10
    }
    assert hf.sha256s(tmp_path) == before


@pytest.mark.parametrize("kind", hf.NESTED_KINDS)
def test_one_long_nested_value_among_short_ones_is_read(tmp_path: Path, kind: str) -> None:
    # the page headers' bound passes the budget (20,000 values of up to 300 KiB); the
    # exact weighing finds 300 KiB plus short strings: read
    path = tmp_path / "outlier.parquet"
    rows = 20_000
    values = hf.nested_dictionary_bomb(path, kind, rows, 300 << 10, outlier=True)
    assert values is not None
    ds = ParquetDataset(path, memory=64)
    for i in (0, rows // 2, rows - 1):
        assert ds[i] == {"id": i, "c": values[i]}
    assert len(str(ds[rows // 2]["c"])) > 300 << 10


def test_bound_is_cheap_for_short_nested_strings(tmp_path: Path) -> None:
    # many short entries: the page headers' bound fits, every row reads
    path = tmp_path / "short.parquet"
    rows = 5000
    table = pa.table({"c": [[f"t{i % 97}", f"u{i}"] for i in range(rows)]})
    import pyarrow.parquet as pq

    pq.write_table(table, path, row_group_size=1000)
    ds = ParquetDataset(path, memory=64)
    assert [ds[i]["c"] for i in (0, 2500, rows - 1)] == [
        ["t0", "u0"], [f"t{2500 % 97}", "u2500"], [f"t{(rows - 1) % 97}", f"u{rows - 1}"]
    ]


def test_too_many_nested_values_to_weigh_are_refused(tmp_path: Path) -> None:
    # one row of 10 million references to one 16-byte entry: weighing its dictionary indices
    # would itself pass the budget, so the window is refused from its page headers
    import numpy as np
    import pyarrow.parquet as pq

    n = 10_000_000
    leaf = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, np.int32)), pa.array(["0123456789abcdef"])
    )
    column = pa.ListArray.from_arrays(pa.array([0, 1, n, n], pa.int32()), leaf)
    path = tmp_path / "many.parquet"
    pq.write_table(pa.table({"id": [0, 1, 2], "c": column}), path, store_schema=False)
    assert path.stat().st_size < 1 << 20
    ds = ParquetDataset(path, memory=64)
    with pytest.raises(MemoryBudgetError, match="10,000,001 nested string") as info:
        ds[0]
    assert info.value.path == str(path)
    assert ParquetDataset(path, memory=64, columns=["id"])[2] == {"id": 2}


_TEXT = st.one_of(st.none(), st.text(max_size=6))
_NESTED = {
    "list": (pa.list_(pa.string()), st.one_of(st.none(), st.lists(_TEXT, max_size=4))),
    "struct": (
        pa.struct([("s", pa.string()), ("t", pa.string())]),
        st.one_of(st.none(), st.fixed_dictionaries({"s": _TEXT, "t": _TEXT})),
    ),
    "map": (
        pa.map_(pa.string(), pa.string()),
        st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=4), _TEXT), max_size=3)),
    ),
}


def _utf8(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        return sum(_utf8(v) for v in value.values())
    if isinstance(value, tuple):
        return sum(_utf8(v) for v in value)
    return sum(_utf8(v) for v in value)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), kind=st.sampled_from(sorted(_NESTED)), encode=st.booleans())
def test_exact_weight_is_the_bytes_of_the_values(
    data: st.DataObject, kind: str, encode: bool
) -> None:
    typ, values = _NESTED[kind]
    rows = data.draw(st.lists(values, max_size=12))
    array = pa.array(rows, typ)
    start = data.draw(st.integers(0, len(rows)))
    stop = data.draw(st.integers(start, len(rows)))
    sliced = array.slice(start, stop - start)
    if encode and kind == "list":  # as pyarrow reads a dictionary-encoded leaf
        flat = array.values.dictionary_encode()
        sliced = pa.ListArray.from_arrays(array.offsets, flat, mask=array.is_null()).slice(
            start, stop - start
        )
    assert weigh.value_bytes(sliced) == sum(_utf8(v) for v in rows[start:stop])


_PEAK = textwrap.dedent(
    """
    import sys, warnings
    warnings.simplefilter("ignore")
    from undertale_duck import MemoryBudgetError, ParquetDataset  # imports torch
    def hwm():  # VmHWM: ru_maxrss survives exec and would start at pytest's own size
        return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    before = hwm()
    try:
        ParquetDataset(sys.argv[1], memory=64)[0]
        print("READ")
    except MemoryBudgetError as exc:
        print("MemoryBudgetError:", exc)
    print("GREW_KIB", hwm() - before)
    """
)


@pytest.mark.heavy
@pytest.mark.parametrize("kind", hf.NESTED_KINDS)
def test_nested_dictionary_bomb_stops_before_rss_grows(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "bomb.parquet"
    hf.nested_dictionary_bomb(path, kind, 20_000, 256 << 10)  # 4.9 GiB decoded (map: 9.8)
    before = hf.sha256s(tmp_path)
    done = hf.run_python("-c", _PEAK, str(path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "MemoryBudgetError:" in out and "bomb.parquet" in out and "column 'c'" in out, out
    grew = int(out.split("GREW_KIB")[1].split()[0]) << 10
    # without the bound: a struct<s: string> grew past 1.5 GiB, a list<string> to DuckDB's
    # memory limit; refused from page headers and dictionary indices, it grows by the
    # fixed footprint of a first read
    assert grew < 2 * (64 << 20), f"peak RSS grew by {grew >> 20} MiB reading a {kind} bomb"
    assert hf.sha256s(tmp_path) == before
