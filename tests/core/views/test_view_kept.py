"""Views served from the index's kept rows: the query without its filter over the rows kept."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen

from undertale_duck import ParquetDataset
from undertale_duck.core.views.index import IndexedView


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(cache))
    return cache


def _reference(root: Path, select: str, where: str) -> list[dict]:
    """``SELECT <select> FROM dataset WHERE <where>`` by plain DuckDB, in shard and row order."""
    files = sorted(str(p) for p in root.glob("*.parquet"))
    con = duckdb.connect()
    table = con.sql(
        f"SELECT {select}, filename AS __f, file_row_number AS __r "
        "FROM read_parquet($files, filename = true, file_row_number = true) AS dataset "
        f"WHERE {where}",
        params={"files": files},
    ).to_arrow_table()
    rank = {f: k for k, f in enumerate(files)}
    rows = table.to_pylist()
    rows.sort(key=lambda r: (rank[r["__f"]], r["__r"]))
    return [{k: v for k, v in r.items() if not k.startswith("__")} for r in rows]


def _served_from_kept(ds: ParquetDataset) -> int:
    """How many of the view's windows are read through the kept-rows query."""
    view = ds.view
    assert isinstance(view, IndexedView)
    return sum(1 for w in view.windows if view.window_query(w)[1])


WHERES = [
    "label % 2 = 0",
    "label IN (1, 5) OR score IS NULL",
    "len(tokens) > 2 AND category <> 'beta'",
    "point.x % 3 = 1",
    "label = 6",
]


@settings(max_examples=20, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 90), min_size=1, max_size=4),
    group=st.integers(1, 40),
    where=st.sampled_from(WHERES),
    memory=st.sampled_from([1, 64]),
)
def test_kept_rows_serve_the_same_rows_as_the_query(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    group: int,
    where: str,
    memory: int,
) -> None:
    root = tmp_path_factory.mktemp("data")
    datagen.write_shards(root, sizes, row_group_size=group)
    select = "id, label * 10 AS ten, tokens[1:2] AS head"
    expected = _reference(root, select, where)
    ds = ParquetDataset(root, memory=memory, query=f"SELECT {select} FROM dataset WHERE {where}")
    assert len(ds) == len(expected)
    assert [ds[i] for i in range(len(ds))] == expected
    view = ds.view
    assert isinstance(view, IndexedView) and view.kept is not None
    # every window with kept rows is served from them, whether it drops rows or not: the
    # filter is never run again in the reader's database (NaN, decision in core/views/index)
    assert _served_from_kept(ds) == sum(1 for w in view.windows if w.rows > 0)
    for i in range(len(ds)):  # locate from the bitmap agrees with locating by SQL
        w = view.windows[ds.window_of(i)]
        assert view.kept_rows(w) is not None
    plain = dataclasses.replace(view, kept=None)
    assert [ds.locate(i) for i in range(len(ds))] == [
        _locate_by_sql(ds, plain, i) for i in range(len(ds))
    ]


def _locate_by_sql(ds: ParquetDataset, view: IndexedView, i: int) -> tuple[str, int]:
    saved = ds.view
    ds.view = view
    try:
        return ds.locate(i)
    finally:
        ds.view = saved


def test_rows_the_filter_drops_are_never_projected(tmp_path: Path) -> None:
    # the projection fails on the rows the filter drops; serving without the filter must
    # still never evaluate it on them
    datagen.write_shards(tmp_path / "d", [40, 33], row_group_size=8)
    select = (
        "id, CAST(CASE WHEN label = 3 THEN 'x' ELSE CAST(label AS VARCHAR) END AS INTEGER) AS v"
    )
    where = "label <> 3"
    query = f"SELECT {select} FROM dataset WHERE {where}"
    ds = ParquetDataset(tmp_path / "d", memory=1, query=query)
    assert _served_from_kept(ds) > 0
    assert [ds[i] for i in range(len(ds))] == _reference(tmp_path / "d", select, where)


def test_damaged_or_missing_bitmap_falls_back_to_the_query(
    tmp_path: Path, private_cache: Path
) -> None:
    datagen.write_shards(tmp_path / "d", [70, 45], row_group_size=16)
    select, where = "id, label", "label % 3 = 0"
    query = f"SELECT {select} FROM dataset WHERE {where}"
    expected = _reference(tmp_path / "d", select, where)
    first = ParquetDataset(tmp_path / "d", memory=1, query=query)
    assert [first[i] for i in range(len(first))] == expected
    [bitmap] = list((private_cache / "views").glob("*.rows"))
    original = bitmap.read_bytes()
    # rows 0-7 keep 0, 3, 6, 7 (0x93): ^0xF0 keeps 1, 2, 6, 7 (as many rows, other ones) and
    # ^0x01 one row fewer; neither may ever be served
    for flipped in (original[0] ^ 0xF0, original[0] ^ 0x01):
        bitmap.write_bytes(bytes([flipped]) + original[1:])
        damaged = ParquetDataset(tmp_path / "d", memory=1, query=query)
        assert damaged.view is not None and damaged.view.reused
        assert _served_from_kept(damaged) == 0
        assert [damaged[i] for i in range(len(damaged))] == expected
        assert [first[i] for i in range(len(first))] == expected  # mapped before the change
    bitmap.unlink()
    missing = ParquetDataset(tmp_path / "d", memory=1, query=query)
    assert _served_from_kept(missing) == 0
    assert [missing[i] for i in range(len(missing))] == expected


def test_large_window_keeps_source_order(tmp_path: Path) -> None:
    # one window of many rows, read by several DuckDB threads
    datagen.write_shards(tmp_path / "d", [12_000, 9_000], row_group_size=3_000)
    select, where = "id, label", "label % 2 = 1 OR score IS NULL"
    ds = ParquetDataset(
        tmp_path / "d", memory=512, query=f"SELECT {select} FROM dataset WHERE {where}"
    )
    assert _served_from_kept(ds) > 0
    expected = _reference(tmp_path / "d", select, where)
    got = ds.__getitems__(list(range(len(ds))))
    assert list(got) == expected


def test_source_order_whatever_duckdb_config_says(tmp_path: Path) -> None:
    # the scan queries do not sort: they need DuckDB to keep insertion order, which a
    # duckdb_config must not turn off for window reads (rows came back shuffled)
    datagen.write_shards(tmp_path / "d", [30_000], row_group_size=1_000)
    config = {"preserve_insertion_order": False, "threads": 4}
    for select, where in (("id, score, tokens", "label % 3 <> 1"), ("id, label", "true")):
        ds = ParquetDataset(tmp_path / "d", memory=512, duckdb_config=config,
                            window_bytes="256MiB",
                            query=f"SELECT {select} FROM dataset WHERE {where}")
        assert len(ds.windows) == 1  # one window of many row groups, several threads
        expected = _reference(tmp_path / "d", select, where)
        assert list(ds.__getitems__(list(range(len(ds))))) == expected


def test_cache_planted_symlink_or_shared_directory_is_refused(
    tmp_path: Path, private_cache: Path
) -> None:
    import hashlib

    from undertale_duck import ArgumentError

    data = tmp_path / "d"
    datagen.write_shards(data, [30, 20], row_group_size=8)

    def digest() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.iterdir()}

    before = digest()
    private_cache.mkdir()
    (private_cache / "views").symlink_to(data, target_is_directory=True)
    with pytest.raises(ArgumentError, match="inside the dataset"):
        ParquetDataset(data, where="label = 1")
    assert digest() == before
    (private_cache / "views").unlink()
    (private_cache / "views").mkdir(mode=0o700)
    os.chmod(private_cache / "views", 0o777)  # others could swap the index files
    with pytest.raises(ArgumentError, match="not private"):
        ParquetDataset(data, where="label = 1")
    assert not list((private_cache / "views").iterdir())
    os.chmod(private_cache / "views", 0o700)
    ds = ParquetDataset(data, where="label = 1")
    assert len(ds) == sum(1 for i in range(50) if i % 7 == 1)
    assert digest() == before


def _binary_bomb(path: Path, rows: int = 50_000) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    dictionary = pa.array([bytes(64 << 10)], pa.binary())
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), dictionary)
    pq.write_table(pa.table({"id": np.arange(rows), "b": column}), path)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, b FROM dataset WHERE id % 2 = 0",  # served from the kept rows
        "SELECT id, octet_length(b) AS n, b FROM dataset",  # no filter: the whole query
        "SELECT * FROM dataset WHERE id > 10",
    ],
)
def test_dictionary_bomb_through_a_view_stops_at_the_budget(tmp_path: Path, query: str) -> None:
    from undertale_duck import MemoryBudgetError

    path = tmp_path / "d" / "bomb.parquet"
    path.parent.mkdir()
    _binary_bomb(path)  # 3 GiB of one 64 KiB value
    ds = ParquetDataset(path, memory=64, query=query)
    with pytest.raises(MemoryBudgetError, match="dictionary bomb") as info:
        ds[7]
    assert info.value.path == str(path)


def test_view_not_reading_the_bomb_column_is_served(tmp_path: Path) -> None:
    path = tmp_path / "d" / "bomb.parquet"
    path.parent.mkdir()
    _binary_bomb(path)
    query = "SELECT id * 2 AS twice FROM dataset WHERE id % 5 = 0"
    ds = ParquetDataset(path, memory=64, query=query)
    assert len(ds) == 10_000
    assert [ds[i] for i in (0, 7, 9_999)] == [{"twice": 0}, {"twice": 70}, {"twice": 99_990}]


def test_one_long_value_through_a_view_is_still_read(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 20_000
    texts = [f"row {i}" for i in range(rows)]
    texts[12_346] = "L" * (300 << 10)
    path = tmp_path / "d" / "outlier.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"i": list(range(rows)), "s": texts}), path)
    ds = ParquetDataset(path, memory=64, where="i % 2 = 0")
    assert ds[6_173] == {"i": 12_346, "s": texts[12_346]}
    assert ds[0] == {"i": 0, "s": "row 0"}
