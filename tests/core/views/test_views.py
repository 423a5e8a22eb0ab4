from __future__ import annotations

import csv
import hashlib
import math
import os
import pickle
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import (
    ArgumentError,
    ChunkedSampler,
    OutOfRangeError,
    ParquetDataset,
    QueryError,
    SourceError,
    Split,
)
from undertale_duck.core.source import windows as win
from undertale_duck.core.views import check as viewmod
from undertale_duck.core.views import index as view_index

SIZES = [150, 1, 0, 97, 300, 2]
GROUPS = [40, 1, 1, 13, 128, 1]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(cache))
    return cache


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=GROUPS)
    return root


def _reference(root: Path, query: str, tables: dict[str, Any] | None = None) -> list[dict]:
    """The query run by plain DuckDB over the whole dataset, ordered by shard and row."""
    files = sorted(str(p) for p in root.glob("*.parquet"))
    con = duckdb.connect()
    for name, value in (tables or {}).items():
        if isinstance(value, pa.Table):
            con.register("t_" + name, value)
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM "t_{name}"')
        elif str(value).endswith(".csv"):
            con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_csv('{value}')")
        else:
            con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{value}')")
    rank = ", ".join(f"('{f}', {k})" for k, f in enumerate(files))
    con.execute(
        "CREATE TABLE base AS SELECT * EXCLUDE (filename, file_row_number, f, k), "
        "file_row_number AS __r, r.k AS __s FROM read_parquet($files, filename = true, "
        f"file_row_number = true) JOIN (VALUES {rank}) r(f, k) ON filename = r.f",
        {"files": files},
    )
    rewritten = query.replace("FROM dataset", "FROM base AS dataset", 1)
    # carry the order columns through the user's projection
    select, rest = rewritten.split(" FROM ", 1)
    sql = f"{select}, dataset.__s AS __s2, dataset.__r AS __r2 FROM {rest} ORDER BY __s2, __r2"
    table = con.sql(sql).to_arrow_table()
    table = table.drop_columns([n for n in table.column_names if n.startswith("__")])
    return table.to_pylist()


VIEWS = [
    "SELECT * FROM dataset WHERE label % 2 = 0",
    "SELECT id, len(tokens) AS n, tokens[1:2] AS head FROM dataset WHERE len(tokens) > 1",
    "SELECT id, CASE WHEN label > 3 THEN 'hi' ELSE 'lo' END AS band, CAST(label AS DOUBLE) AS x "
    "FROM dataset",
    "SELECT id, score FROM dataset WHERE score IS NOT NULL AND category <> 'beta'",
    "SELECT id FROM dataset WHERE label = 99",
]


@pytest.mark.parametrize("query", VIEWS)
def test_view_rows_match_plain_duckdb(data: Path, query: str) -> None:
    expected = _reference(data, query)
    ds = ParquetDataset(data, memory=1, query=query)
    assert len(ds) == len(expected)
    assert [ds[i] for i in range(len(ds))] == expected
    if expected:
        assert ds[-1] == expected[-1]
        picks = [len(expected) - 1, 0, len(expected) // 2, 0]
        assert list(ds.__getitems__(picks)) == [expected[i] for i in picks]


def test_where_shorthand_and_locate(data: Path) -> None:
    ds = ParquetDataset(data, where="label = 3")
    rows = datagen.expected(sum(SIZES))
    keep = [i for i, r in enumerate(rows) if r["label"] == 3]
    assert len(ds) == len(keep)
    offsets = [0]
    for n in SIZES:
        offsets.append(offsets[-1] + n)
    for i in (0, 5, len(keep) - 1):
        g = keep[i]
        k = max(j for j in range(len(SIZES)) if offsets[j] <= g and SIZES[j])
        path, local = ds.locate(i)
        assert Path(path).name == f"part-{k:05d}.parquet"
        assert local == g - offsets[k]
        assert ds[i]["id"] == rows[g]["id"]


def test_side_tables_arrow_parquet_csv(data: Path, tmp_path: Path) -> None:
    arrow = pa.table({"label": list(range(7)), "name": [f"L{i}" for i in range(7)]})
    # in a folder of their own: a Parquet file beside the cache root makes it refused
    tmp_path = tmp_path / "sides"
    tmp_path.mkdir()
    pq.write_table(pa.table({"label": [0, 2, 4], "w": [0.5, 1.5, 2.5]}), tmp_path / "w.parquet")
    with open(tmp_path / "c.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["category", "code"])
        out.writerows([["alpha", 1], ["beta", 2], ["gamma", 3]])
    tables = {
        "names": arrow,
        "weights": str(tmp_path / "w.parquet"),
        "codes": str(tmp_path / "c.csv"),
    }
    query = (
        "SELECT dataset.id, n.name, w.w, c.code FROM dataset "
        "JOIN names n ON dataset.label = n.label "
        "LEFT JOIN weights w ON dataset.label = w.label "
        "JOIN codes c ON dataset.category = c.category WHERE dataset.label <> 6"
    )
    ds = ParquetDataset(data, query=query, tables=tables)
    expected = _reference(data, query, tables)
    assert len(expected) == sum(1 for r in datagen.expected(sum(SIZES)) if r["label"] != 6)
    assert [ds[i] for i in range(len(ds))] == expected
    assert ds.sql("SELECT count(*) AS n FROM dataset_view").column("n")[0].as_py() == len(ds)
    clone = pickle.loads(pickle.dumps(ds))
    assert clone[len(ds) - 1] == expected[-1]


def test_join_that_multiplies_rows_is_refused(data: Path) -> None:
    twice = pa.table({"label": [1, 1], "name": ["a", "b"]})
    with pytest.raises(QueryError, match="more than once"):
        ParquetDataset(
            data,
            query="SELECT d.id FROM dataset d JOIN t ON d.label = t.label",
            tables={"t": twice},
        )


REFUSED = {
    "SELECT label, count(*) FROM dataset GROUP BY label": "count_star|GROUP BY",
    "SELECT sum(label) AS s FROM dataset": "aggregate function sum",
    "SELECT * FROM dataset ORDER BY label": "ORDER BY",
    "SELECT * FROM dataset LIMIT 5": "LIMIT",
    "SELECT * FROM dataset LIMIT 5 OFFSET 2": "LIMIT",
    "SELECT DISTINCT label FROM dataset": "DISTINCT",
    "SELECT id, row_number() OVER () AS k FROM dataset": "window function",
    "SELECT id FROM dataset UNION ALL SELECT id FROM dataset": "set operation",
    "SELECT id FROM dataset EXCEPT SELECT id FROM dataset": "set operation",
    "SELECT id, random() AS r FROM dataset": "non-deterministic function random",
    "SELECT id FROM dataset WHERE now() > TIMESTAMP '2000-01-01'": "non-deterministic",
    "SELECT id, uuid() AS u FROM dataset": "non-deterministic",
    # SQL's clock values without parentheses: DuckDB parses them as column names
    "SELECT id FROM dataset WHERE current_date > DATE '2000-01-01'": "non-deterministic",
    "SELECT id, CURRENT_TIMESTAMP AS t FROM dataset": "non-deterministic",
    "SELECT id FROM dataset WHERE localtimestamp IS NOT NULL": "non-deterministic",
    # nested: the error names the clock or random function, not the one wrapping it
    "SELECT id, strftime(now(), '%Y') AS y FROM dataset": r"non-deterministic function now\(\)",
    "SELECT id FROM dataset WHERE date_part('year', now()) > 2000":
        r"non-deterministic function now\(\)",
    "SELECT id, upper(strftime(current_timestamp, '%Y')) AS y FROM dataset":
        "non-deterministic value current_timestamp",
    "SELECT id, strftime(random()::TIMESTAMP, '%Y') AS y FROM dataset":
        r"non-deterministic function random\(\)",
    # age() of one argument measures to today's midnight, though DuckDB marks it consistent
    "SELECT id, age(to_timestamp(id)) AS a FROM dataset": r"age\(\) of one argument",
    "SELECT id FROM dataset WHERE AGE(to_timestamp(id)) > INTERVAL 1 DAY": r"age\(\) of one",
    # the join kinds a view refuses are named with their article
    "SELECT d.id FROM dataset d ANTI JOIN dataset e ON d.id = e.id": "uses an ANTI join",
    # one source row would give as many rows as its list holds (the index counts one)
    "SELECT id, unnest(tokens) AS t FROM dataset": r"unnest\(\), which makes rows",
    "SELECT id, UNLIST(tokens) AS t FROM dataset": r"unlist\(\), which makes rows",
    "SELECT id, unnest(point) FROM dataset": r"unnest\(\)",
    "SELECT id FROM dataset WHERE label IN (SELECT label FROM dataset)": "subquery",
    "WITH x AS (SELECT 1) SELECT * FROM dataset": "WITH",
    "SELECT * FROM dataset USING SAMPLE 10": "SAMPLE",
    "SELECT * FROM dataset, dataset AS b": "CROSS join|once",
    "SELECT * FROM read_parquet('/etc/passwd')": "table function",
    "SELECT * FROM somewhere_else": "neither dataset",
    "SELECT id FROM dataset QUALIFY label > 1": "QUALIFY",
    "DELETE FROM dataset": "must be one SELECT statement",
    "SELECT 1; SELECT 2": "one SELECT",
    # a statement that is not a SELECT beside one: named so, not with DuckDB's "Only SELECT
    # statements can be serialized to json!"
    "SELECT * FROM dataset; DROP TABLE x": r"must be one SELECT statement over dataset \(a",
    "CREATE TABLE t AS SELECT 1; SELECT * FROM dataset": "must be one SELECT statement",
    "SELECT id, $1 AS p FROM dataset": "parameters",
    "SELECT id, label AS __ud_row FROM dataset WHERE __ud_row > 1": "reserved",
    # an alias the rewrite orders by (rows came in its order) or drops from the schema
    'SELECT *, label AS "__UD_ORDER" FROM dataset WHERE label > 1': "reserved",
    "SELECT id AS __ud_row, label FROM dataset WHERE label > 1": "reserved",
}


#: Arithmetic and date parts that DuckDB marks as session-dependent for some argument types
#: (a TIMESTAMPTZ's time zone): allowed, as connections compute in UTC.
def _expected_time_columns(i: int) -> dict[str, Any]:
    import datetime as dt

    when = dt.datetime(2023, 12, 31, 20, 0) + dt.timedelta(hours=i)
    return {
        "id": i, "plus": i % 7 + 1, "minus": i % 7 - 1,
        "year": when.year, "hour_tz": when.hour, "day": when.strftime("%Y-%m-%d"),
        "later": when + dt.timedelta(days=1), "gap": i,
    }


def test_views_may_compute_with_plus_minus_and_date_parts(tmp_path: Path) -> None:
    import datetime as dt

    n = 50
    base = dt.datetime(2023, 12, 31, 20, 0)
    root = tmp_path / "data"  # the view index's cache lies beside it, not inside
    root.mkdir()
    pq.write_table(pa.table({
        "id": pa.array(range(n), pa.int64()),
        "label": pa.array([i % 7 for i in range(n)], pa.int64()),
        "when": pa.array([base + dt.timedelta(hours=i) for i in range(n)], pa.timestamp("us")),
        "when_tz": pa.array([base + dt.timedelta(hours=i) for i in range(n)],
                            pa.timestamp("us", tz="UTC")),
    }), root / "part-0.parquet", row_group_size=16)
    query = (
        "SELECT id, label + 1 AS plus, label - 1 AS minus, year(when_tz) AS year, "
        "hour(when_tz) AS hour_tz, strftime(when_tz, '%Y-%m-%d') AS day, "
        "\"when\" + INTERVAL 1 DAY AS later, "
        "date_diff('hour', TIMESTAMPTZ '2023-12-31 20:00:00+00', when_tz) AS gap "
        "FROM dataset WHERE year(when_tz) >= 2023 AND label - 1 < 100"
    )
    ds = ParquetDataset(root, query=query)
    assert len(ds) == n
    for i in (0, 3, 4, 27, n - 1):
        row = ds[i]
        assert row == _expected_time_columns(i), i
    served = [r["id"] for b in DataLoader(ds, batch_size=8, collate_fn=list) for r in b]
    assert served == list(range(n))


@pytest.mark.parametrize("query", sorted(REFUSED))
def test_queries_that_are_not_row_by_row_are_refused(data: Path, query: str) -> None:
    with pytest.raises(QueryError, match=REFUSED[query]):
        ParquetDataset(data, query=query)


def test_age_of_two_arguments_is_served(data: Path) -> None:
    query = "SELECT id, age(TIMESTAMP '2001-01-01', TIMESTAMP '2000-01-01') AS a FROM dataset"
    ds = ParquetDataset(data, query=query)
    assert len(ds) == sum(SIZES)
    assert ds[0]["a"] == ds[len(ds) - 1]["a"] == pa.scalar(
        (12, 0, 0), pa.month_day_nano_interval()
    ).as_py()


def test_a_value_torch_cannot_hold_names_the_source_row_of_a_filtered_view(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    n = 10  # row i holds i, but row 7 holds 2**63 + 7, which no torch integer holds
    values = [2**63 + i if i == 7 else i for i in range(n)]
    pq.write_table(pa.table({"id": pa.array(range(n), pa.int64()),
                             "h": pa.array(values, pa.uint64())}),
                   root / "part-0.parquet", row_group_size=4)
    ds = ParquetDataset(root, where="id % 3 = 1", format="torch")  # rows 1, 4, 7
    assert ds.locate(2) == (str(root / "part-0.parquet"), 7)
    for read in (lambda: ds[2], lambda: ds.__getitems__([0, 2])):
        with pytest.raises(OutOfRangeError, match=r"row 2 \(local row 7\): column 'h'"):
            read()


def test_bad_arguments(data: Path) -> None:
    with pytest.raises(ArgumentError):
        ParquetDataset(data, query="SELECT * FROM dataset", where="label = 1")
    with pytest.raises(ArgumentError):
        ParquetDataset(data, where="")
    with pytest.raises(ArgumentError):
        ParquetDataset(data, tables={"t": pa.table({"a": [1]})})
    with pytest.raises(ArgumentError, match="tables"):
        ParquetDataset(data, query="SELECT * FROM dataset", tables={"t": 5})  # type: ignore[dict-item]
    with pytest.raises(QueryError, match="cannot run"):
        ParquetDataset(data, query="SELECT no_such_column FROM dataset")


def _digest(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


def test_index_is_reused_and_invalidated(data: Path, private_cache: Path) -> None:
    before = _digest(data)
    query = "SELECT id, label FROM dataset WHERE label < 3"
    first = ParquetDataset(data, query=query)
    assert first.view is not None and not first.view.reused
    again = ParquetDataset(data, query=query)
    assert again.view is not None and again.view.reused
    assert again.fingerprint == first.fingerprint
    assert len(list((private_cache / "views").glob("*.json"))) == 1
    other = ParquetDataset(data, query="SELECT id, label FROM dataset WHERE label < 4")
    assert other.view is not None and not other.view.reused
    assert other.fingerprint != first.fingerprint
    assert _digest(data) == before  # nothing written into the dataset
    # rewrite one shard with different rows: the index must not be trusted
    shard = data / "part-00003.parquet"
    table = pq.read_table(shard)
    labels = pa.array([0] * table.num_rows, type=table.schema.field("label").type)
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", labels), shard)
    os.utime(shard, ns=(1, 1))
    changed = ParquetDataset(data, query=query)
    assert changed.view is not None and not changed.view.reused
    assert changed.fingerprint != first.fingerprint
    assert len(changed) == len(first) + sum(1 for i in range(97) if (151 + i) % 7 >= 3)


def test_cache_inside_the_dataset_is_refused(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(data / "cache"))
    with pytest.raises(ArgumentError, match="inside the dataset"):
        ParquetDataset(data, where="label = 1")
    assert not (data / "cache").exists()


def test_view_through_sampler_and_workers(data: Path) -> None:
    query = "SELECT id, tokens FROM dataset WHERE label <> 2"
    ds = ParquetDataset(data, memory=1, query=query, format="torch")
    expected = [r["id"] for r in _reference(data, query)]
    sampler = ChunkedSampler(ds, 8, workers=2, shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2, collate_fn=list)
    seen = [row["id"] for batch in loader for row in batch]
    assert len(seen) == len(set(seen)) == len(sampler)
    assert set(seen) <= set(expected)
    assert len(expected) - len(seen) < 2 * 8


@settings(max_examples=25, deadline=None)
@given(
    kept=st.lists(st.integers(0, 40), min_size=0, max_size=12),
)
def test_view_plan_is_dense(kept: list[int]) -> None:
    windows = [win.Window(0, 40 * k, 40 * (k + 1), 40 * k) for k in range(len(kept))]
    plan = win.view_plan(windows, kept)
    assert sum(w.rows for w in plan) == sum(kept)
    assert all(w.rows > 0 for w in plan)
    offset = 0
    for w in plan:
        assert w.offset == offset
        offset = w.end
        assert w.span == 40


HOSTILE = st.text(
    alphabet=st.sampled_from(list("ab'\";-/*\n\\ ")), min_size=1, max_size=12
)


@settings(max_examples=30, deadline=None)
@given(name=HOSTILE)
def test_hostile_literals_stay_values(name: str) -> None:
    # a string literal holding comment markers, quotes and newlines stays one value
    literal = "'" + name.replace("'", "''") + "'"
    checked = viewmod.check(f"SELECT id, {literal} AS tag FROM dataset WHERE category <> {literal}")
    con = duckdb.connect()
    con.execute("CREATE TABLE dataset AS SELECT 'x' AS id, 'c' AS category, 1 AS __ud_row")
    rows = con.sql(checked.window_sql).fetchall()
    assert rows == ([("x", name, 1)] if name != "c" else [])


@pytest.mark.parametrize(
    ("query", "suggested"),
    [
        ("SELECT id, rowid FROM dataset WHERE label = 2", None),
        ("SELECT id FROM dataset WHERE label = 2 AND file_row_number >= 0", ["id", "label"]),
    ],
)
def test_an_unknown_column_is_never_told_to_use_the_views_own(
    data: Path, query: str, suggested: list[str] | None
) -> None:
    # DuckDB's "Candidate bindings" offered __ud_row, a column the view refuses to be named
    with pytest.raises(QueryError, match="view query cannot run over the dataset") as caught:
        ParquetDataset(data, columns=["id", "label"], query=query)
    text = str(caught.value)
    assert "__ud_" not in text and "not found in FROM clause" in text
    if suggested is None:
        assert "Candidate bindings" not in text
    else:
        shown = text.split("Candidate bindings: ", 1)[1]
        assert sorted(name.strip('" ') for name in shown.split(",")) == suggested


def test_input_columns_named_like_the_views_own_are_refused(tmp_path: Path) -> None:
    # the view carries the source row as __ud_row and orders by __ud_order: an input
    # column of either name was read in their place (other rows, in another order)
    root = tmp_path / "reserved"
    root.mkdir()
    n = 40
    pq.write_table(pa.table({"id": list(range(n)), "k": [g % 4 for g in range(n)],
                             "__UD_row": [7] * n, "__ud_order": [n - g for g in range(n)]}),
                   root / "part-0.parquet", row_group_size=6)
    with pytest.raises(QueryError, match="column '__UD_row' starts with '__ud_'"):
        ParquetDataset(root, where="k = 1")
    kept = ParquetDataset(root, where="k = 1", columns=["id", "k"])
    assert [kept[i]["id"] for i in range(len(kept))] == list(range(1, n, 4))
    side = pa.table({"k": [0, 1, 2, 3], "__ud_order": [5, 1, 3, 2]})
    for select in ("d.id, s.*", "*", "s.*, d.*"):
        with pytest.raises(QueryError, match=r"'__ud_order.*reserved"):
            ParquetDataset(root, columns=["id", "k"], tables={"s": side},
                           query=f"SELECT {select} FROM dataset d JOIN s ON d.k = s.k "
                                 "WHERE d.id % 3 = 0")
    joined = ParquetDataset(root, columns=["id", "k"], tables={"s": side},
                            query="SELECT d.id, s.k FROM dataset d JOIN s ON d.k = s.k "
                                  "WHERE d.id % 3 = 0")
    assert [joined[i] for i in range(len(joined))] == [
        {"id": g, "k": g % 4} for g in range(0, n, 3)]


def test_indexing_reports_progress_per_shard(data: Path) -> None:
    ds = ParquetDataset(data, where="label = 1")
    assert ds.view is not None
    base = win.plan([s.row_groups for s in ds.source.shards], ds.window_bytes)
    labels: list[str] = []
    con = ds._connect(lambda c: None)
    try:
        counts = view_index.count_rows(
            con, ds.view.query, ds.source.columns, ds.source.shards, base, labels.append
        )
    finally:
        con.close()
    assert sum(counts) == len(ds)
    assert labels == [f"part-{k:05d}.parquet" for k, n in enumerate(SIZES) if n]


def test_a_views_columns_have_duckdbs_types_as_docs_views_says(tmp_path: Path) -> None:
    import datetime as dt

    import torch

    root = tmp_path / "d"
    root.mkdir()
    pq.write_table(pa.table({
        "i": pa.array([0, 1, 2]),
        "dur": pa.array([dt.timedelta(seconds=1), dt.timedelta(microseconds=5), None],
                        pa.duration("us")),
        "h": pa.array([1.5, -2.0, 0.25], pa.float16()),
        "s": pa.array(["a", "b", "c"], pa.large_string()),
    }), root / "a.parquet")
    plain = ParquetDataset(root, format="torch")
    view = ParquetDataset(root, format="torch", where="i >= 0")
    assert [plain[k]["dur"] for k in range(3)] == [dt.timedelta(seconds=1),
                                                   dt.timedelta(microseconds=5), None]
    assert [view[k]["dur"] for k in range(3)] == [1_000_000, 5, None]  # the count of its unit
    assert view.schema.field("dur").type == pa.int64()
    assert plain[0]["h"].dtype == torch.float16 and view[0]["h"].dtype == torch.float32
    assert [float(view[k]["h"]) for k in range(3)] == [1.5, -2.0, 0.25]
    assert [view[k]["s"] for k in range(3)] == ["a", "b", "c"] == [plain[k]["s"] for k in range(3)]


NAN_FILTERS: dict[str, Any] = {
    # DuckDB's semantics: NaN equals NaN and sorts above every number
    "isnan(f)": lambda v: math.isnan(v),
    "f > 1": lambda v: math.isnan(v) or v > 1,
    "f < 1": lambda v: not math.isnan(v) and v < 1,
    "f <> 0": lambda v: math.isnan(v) or v != 0,
    "NOT (f <= 2)": lambda v: math.isnan(v) or v > 2,
    "f = 'nan'::DOUBLE": lambda v: math.isnan(v),
}


@pytest.mark.parametrize("condition", sorted(NAN_FILTERS))
@pytest.mark.parametrize("dtype", [pa.float64(), pa.float32()])
def test_nan_beside_finite_values_in_a_row_group_is_kept(
    tmp_path: Path, condition: str, dtype: pa.DataType
) -> None:
    """Writers leave NaN out of a row group's min/max; DuckDB's optimizers trusted those and
    the indexing pass dropped the NaN rows a filter keeps."""
    data = tmp_path / "data"
    data.mkdir()
    rows = 0
    for k, size in enumerate([30, 1, 17]):
        ids = list(range(rows, rows + size))
        values = [float("nan") if i % 4 == 1 else float(i % 5) - 1 for i in ids]
        table = pa.table({"id": ids, "f": pa.array(values, dtype)})
        pq.write_table(table, data / f"part-{k}.parquet", row_group_size=6)
        rows += size
    keep = NAN_FILTERS[condition]
    want = [i for i in range(rows) if keep(float("nan") if i % 4 == 1 else float(i % 5) - 1)]
    for kw in ({}, {"memory": 1, "window_bytes": 64}):
        ds = ParquetDataset(data, where=condition, **kw)  # type: ignore[arg-type]
        assert [ds[k]["id"] for k in range(len(ds))] == want
        ds.close()
    ds = ParquetDataset(data, query=f"SELECT id, f * 2 AS g FROM dataset WHERE {condition}")
    assert [row["id"] for row in ds.__getitems__(list(range(len(ds))))] == want
    ds.close()


@pytest.mark.parametrize("where", [None, "i >= 0"])
def test_a_view_serves_a_drifting_column_in_the_datasets_type_or_fails(
    tmp_path: Path, where: str | None
) -> None:
    # row i: i, and label i % 3, as int64 in part-0 but as int32 (castable) in part-1 and as
    # text "x<i>" in part-2; a view served part-2's text as is (ds[7] == {"label": "x7"}),
    # and head --where died with "unexpected ArrowInvalid"
    data = tmp_path / "data"
    data.mkdir()
    for k, typ in enumerate([pa.int64(), pa.int32(), pa.string()]):
        rows = range(4 * k, 4 * k + 4)
        labels = [f"x{i}" for i in rows] if typ == pa.string() else [i % 3 for i in rows]
        pq.write_table(
            pa.table({"i": pa.array(rows, pa.int64()), "label": pa.array(labels, typ)}),
            data / f"part-{k}.parquet",
        )
    ds = ParquetDataset(data, where=where)
    assert len(ds) == 12
    for i in range(8):
        row = ds[i]
        assert row == {"i": i, "label": i % 3} and type(row["label"]) is int
    for i in (8, 11, -1):
        with pytest.raises(SourceError,
                           match=r"is string there but int64 in the (dataset|view)") as info:
            ds[i]
        assert info.value.path == str(data / "part-2.parquet")


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("SELECT * FROM dataset d JOIN s ON d.k = s.k", "'k'"),
        ("SELECT d.id, d.id FROM dataset d", "'id'"),
        ('SELECT id AS x, k AS "X" FROM dataset', "'x' and 'X'"),
        ("SELECT d.k, s.K FROM dataset d LEFT JOIN s ON d.k = s.K", "'k' and 'K'"),
    ],
)
def test_a_view_repeating_a_column_name_is_refused(
    tmp_path: Path, query: str, named: str
) -> None:
    # DuckDB served the second of two same-named (in any case) columns renamed, as 'k_1'
    # or 'X_1': a column the query never names
    root = tmp_path / "data"
    root.mkdir()
    n = 30
    pq.write_table(pa.table({"id": list(range(n)), "k": [g % 4 for g in range(n)]}),
                   root / "part-0.parquet", row_group_size=7)
    side = pa.table({"K": [0, 1, 2, 3], "name": ["a", "b", "c", "d"]})
    with pytest.raises(QueryError, match=f"two columns named {named}.*distinct name with AS"):
        ParquetDataset(root, tables={"s": side}, query=query)
    using = ParquetDataset(root, tables={"s": side},
                           query="SELECT * FROM dataset JOIN s USING (k) WHERE id % 3 = 0")
    assert using.schema.names == ["id", "k", "name"]
    assert [using[i] for i in range(len(using))] == [
        {"id": g, "k": g % 4, "name": "abcd"[g % 4]} for g in range(0, n, 3)]


def test_computed_interval_hugeint_and_varint_columns_are_served_as_documented(
    tmp_path: Path,
) -> None:
    # docs/views.md: INTERVAL as MonthDayNano, HUGEINT as Decimal, VARINT as DuckDB's bytes
    import datetime as dt
    import decimal

    n = 30
    root = tmp_path / "data"
    root.mkdir()
    base = dt.datetime(2026, 1, 1)
    pq.write_table(pa.table({
        "id": pa.array(range(n), pa.int64()),
        "t": pa.array([base + dt.timedelta(seconds=97 * i) for i in range(n)], pa.timestamp("us")),
    }), root / "part-0.parquet", row_group_size=8)
    ds = ParquetDataset(root, query=(
        "SELECT id, t - TIMESTAMP '2026-01-01' AS iv, CAST(id AS HUGEINT) * 10 AS h, "
        "CAST(id AS VARINT) AS v, CAST(CAST(id AS VARINT) AS BIGINT) AS back FROM dataset"
    ))
    for i in (0, 1, 17, n - 1):
        row = ds[i]
        assert row["iv"] == pa.MonthDayNano([0, 0, 97 * i * 10**9])
        assert row["h"] == decimal.Decimal(10 * i) and isinstance(row["h"], decimal.Decimal)
        assert isinstance(row["v"], bytes) and row["back"] == i


@pytest.mark.parametrize(("where", "columns", "said"), [
    ("label >", None, "cannot be used: syntax error"),
    ("nope > 1", None, 'cannot run over the dataset: .*"nope" not found'),
    ("nope > 1", ["id"], 'cannot run over the dataset: .*"nope" not found'),
    ("count(*) > 1", None, "uses the aggregate function count_star"),
    ("label > 1) UNION ALL (SELECT * FROM dataset", None, "UNION"),
    ("it's", ["id", "label"], "cannot be used"),
    ("1=1; SELECT 1", None, "must be one SQL condition on the rows, without ';'"),
    ("label > 1; DROP TABLE dataset", None, "must be one SQL condition on the rows"),
    ("'abc'", None, "Could not convert string 'abc' to BOOL$"),
    # the user's own words like DuckDB's quote of the query are the user's: kept whole
    ("label = 'LINE 1: x'", None, "Could not convert string 'LINE 1: x' to INT64$"),
])
def test_a_failing_where_names_the_condition_given(
    data: Path, where: str, columns: list[str] | None, said: str
) -> None:
    # the errors named "view query", a query the user never wrote
    with pytest.raises(QueryError) as caught:
        ParquetDataset(data, where=where, columns=columns)
    text = str(caught.value)
    assert text.startswith(f"where={where!r} "), text
    assert re.search(said, text), text
    assert "view query" not in text
    # nor DuckDB's quote of the query made of it ("LINE 10: ... ORDER BY __ud_order")
    assert "LINE" not in text.replace("LINE 1: x", "") and "__ud_" not in text
    # a query= view still names its query as such
    with pytest.raises(QueryError, match=r"^view query "):
        ParquetDataset(data, query=f"SELECT * FROM dataset WHERE {where}", columns=columns)
    # with a split, the condition given: not the split's own SQL added to it
    with pytest.raises(QueryError) as caught:
        ParquetDataset(data, where=where, columns=columns, split=Split("id", 0.2))
    text = str(caught.value)
    assert text.startswith(f"where={where!r} ") and re.search(said, text), text
    assert "md5" not in text and "view query" not in text
