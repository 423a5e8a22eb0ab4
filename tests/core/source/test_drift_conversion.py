"""Schema drift read alike by every path: the plain dataset, views and ad hoc SQL.

A shard whose column has another type than the first shard's is served converted to the
first shard's type, and a value the cast would change raises the same SourceError, whether
rows are read (``ds[i]``), filtered by a view, or queried with ``ds.sql``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset
from undertale_duck.errors import SourceError


def _write(directory: Path, shards: list[dict[str, pa.Array]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for k, columns in enumerate(shards):
        pq.write_table(pa.table(columns), directory / f"p{k}.parquet")
    return directory


def _labels(tmp_path: Path) -> Path:
    """a, c: ``label`` int64 (i % 4); b: ``label`` text ('5'..'9')."""
    return _write(tmp_path / "labels", [
        {"i": pa.array(range(5)), "label": pa.array([i % 4 for i in range(5)])},
        {"i": pa.array(range(5, 10)), "label": pa.array([str(i) for i in range(5, 10)])},
        {"i": pa.array(range(10, 15)), "label": pa.array([i % 4 for i in range(10, 15)])},
    ])


def _plain_rows(directory: Path, **options: Any) -> list[dict[str, Any]]:
    ds = ParquetDataset(directory, **options)
    try:
        return [ds[i] for i in range(len(ds))]
    finally:
        ds.close()


def test_a_view_filters_a_drifted_shard_by_the_dataset_types(tmp_path: Path) -> None:
    # b's labels are served as the ints 5..9; the view filtered b's text as text ('5' >=
    # '10') and kept all five, and `label > 4` failed to bind on b (VARCHAR vs INTEGER)
    data = _labels(tmp_path)
    rows = _plain_rows(data)
    assert [r["label"] for r in rows[5:10]] == [5, 6, 7, 8, 9]
    ds = ParquetDataset(data)
    for where, expected in (("label >= '10'", []), ("label > 4", rows[5:10])):
        view = ParquetDataset(data, where=where)
        assert len(view) == len(expected), where
        assert [view[i] for i in range(len(view))] == expected
        assert view.sql("SELECT count(*) AS n FROM dataset_view").to_pylist() == [
            {"n": len(expected)}
        ]
        counted = ds.sql(f"SELECT count(*) AS n FROM dataset WHERE {where}").to_pylist()
        assert counted == [{"n": len(expected)}], where
        view.close()
    ds.close()


def test_text_drifted_to_numbers_is_compared_as_text(tmp_path: Path) -> None:
    # the first shard says `k` is text: the second shard's 10 and 2 are '10' and '2', so
    # all four rows pass k < '3' (the view compared 10 < 3 as numbers and kept three)
    data = _write(tmp_path / "k", [{"k": pa.array(["10", "2"])}, {"k": pa.array([10, 2])}])
    assert _plain_rows(data) == [{"k": "10"}, {"k": "2"}, {"k": "10"}, {"k": "2"}]
    view = ParquetDataset(data, where="k < '3'")
    assert [view[i]["k"] for i in range(len(view))] == ["10", "2", "10", "2"]
    view.close()


def test_the_string_bound_weighs_each_shard_by_its_own_types(tmp_path: Path) -> None:
    # with a memory budget the window read bounded strlen(k), the first shard's type, on
    # the second shard's BIGINT column: a Binder Error, where memory=0 served the row
    data = _write(tmp_path / "k", [{"k": pa.array(["10", "2"])}, {"k": pa.array([10, 2])}])
    assert _plain_rows(data, memory=0) == _plain_rows(data) == [
        {"k": "10"}, {"k": "2"}, {"k": "10"}, {"k": "2"}
    ]
    # and the other way: numbers first, text that is a number's in the second shard
    data = _write(tmp_path / "n", [{"k": pa.array([10, 2])}, {"k": pa.array(["7", "8"])}])
    assert _plain_rows(data) == _plain_rows(data, memory=0) == [
        {"k": 10}, {"k": 2}, {"k": 7}, {"k": 8}
    ]


#: (first shard's column, second shard's column): the second's first value does not fit.
LOSSY = {
    "float_to_int": (pa.array([1], pa.int64()), pa.array([1.5, 2.0], pa.float64())),
    "double_to_float": (pa.array([0.5], pa.float32()), pa.array([0.1], pa.float64())),
    "list": (pa.array([[1]], pa.list_(pa.int64())), pa.array([[2.5, 3.0]], pa.list_(pa.float64()))),
    "struct": (
        pa.array([{"x": 1}], pa.struct([("x", pa.int64())])),
        pa.array([{"x": 2.5}], pa.struct([("x", pa.float64())])),
    ),
    "int_to_bool": (pa.array([True]), pa.array([5])),
    "timestamp_to_date": (
        pa.array([0], pa.date32()),
        pa.array([86_400 * 1_000_000 + 5], pa.timestamp("us")),
    ),
    "naive_to_utc": (
        pa.array([0], pa.timestamp("s", tz="UTC")), pa.array([3600], pa.timestamp("s"))
    ),
    "struct_field_dropped": (
        pa.array([{"x": 1}], pa.struct([("x", pa.int64())])),
        pa.array([{"z": 9, "x": 2}], pa.struct([("z", pa.int64()), ("x", pa.int64())])),
    ),
}


@pytest.mark.parametrize("case", sorted(LOSSY))
def test_a_lossy_cast_raises_the_same_source_error_everywhere(tmp_path: Path, case: str) -> None:
    # ds.sql served 1.5 as 2, 0.1 as 0.10000000149011612, [2.5, 3.0] as [2, 3], 5 as True,
    # a timestamp as its date and a naive time as UTC, where ds[i] refuses each
    first, second = LOSSY[case]
    data = _write(tmp_path / case, [{"v": first}, {"v": second}])
    shard = str(data / "p1.parquet")
    own, wanted = (pq.read_schema(data / f"p{k}.parquet").field("v").type for k in (1, 0))
    prefix = f"shard {shard}: column 'v' is {own} there but {wanted} in the dataset"
    ds = ParquetDataset(data)
    with pytest.raises(SourceError) as plain:
        ds[1]
    with pytest.raises(SourceError) as queried:
        ds.sql("SELECT v FROM dataset")
    with pytest.raises(SourceError) as streamed:
        ds.sql_batches("SELECT v FROM dataset").read_all()
    view = ParquetDataset(data, query="SELECT v FROM dataset")
    with pytest.raises(SourceError) as served:
        view[1]
    with pytest.raises(SourceError) as filtered:
        ParquetDataset(data, where="v IS NOT NULL")
    for error in (plain, queried, streamed, served, filtered):
        assert str(error.value).startswith(prefix), (case, str(error.value))
        assert "schema drift between shards" in str(error.value)
        assert error.value.path == shard
    # the first shard alone, and rows other paths do not read, still work
    assert ds[0] == {"v": first[0].as_py()}
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 1 + len(second)}]
    view.close()
    ds.close()


def _column(kind: str, values: list[int], frac: int) -> pa.Array:
    """A second shard's column of ``kind`` from the row values (``frac``: halves added)."""
    if kind == "float64":
        return pa.array([v + frac / 2 for v in values], pa.float64())
    if kind == "string":
        return pa.array([" " * frac + str(v) for v in values])
    if kind == "int32":
        return pa.array(values, pa.int32())
    return pa.array([dt.date(1970, 1, 1) + dt.timedelta(days=v) for v in values])


def _outcome(read: Any) -> Any:
    try:
        return read()
    except SourceError as exc:
        # the reason after it is each reader's cast's own words (Arrow's, DuckDB's)
        return ("SourceError", str(exc).split("(schema drift between shards)")[0])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(first="float32", kind="string", frac=0, rows=3)  # DuckDB writes 1.0, Arrow 1
@given(
    first=st.sampled_from(["int64", "string", "float32"]),
    kind=st.sampled_from(["float64", "string", "int32", "date"]),
    frac=st.integers(0, 1),
    rows=st.integers(1, 6),
)
def test_every_path_serves_a_drifted_column_alike(
    tmp_path_factory: pytest.TempPathFactory, first: str, kind: str, frac: int, rows: int
) -> None:
    """Invariant: the plain rows, ``ds.sql`` and a view over every row give the same values
    of a drifted column, or all raise SourceError naming the shard and the column."""
    # floats drifted into a text column are text in each reader's own words (Arrow: '1',
    # DuckDB: '1.0'; docs/views.md says so): not the same values, left out here
    assume(not (first == "string" and kind == "float64"))
    data = tmp_path_factory.mktemp("drift")
    head = {"int64": pa.array([0], pa.int64()), "string": pa.array(["0"]),
            "float32": pa.array([0.0], pa.float32())}[first]
    _write(data, [{"v": head}, {"v": _column(kind, list(range(1, rows + 1)), frac)}])
    ds = ParquetDataset(data)
    plain = _outcome(lambda: [ds[i]["v"] for i in range(len(ds))])
    sql = _outcome(lambda: ds.sql("SELECT v FROM dataset").column(0).to_pylist())

    def viewed() -> list[Any]:
        view = ParquetDataset(data, where="v IS NOT NULL")
        try:
            return [view[i]["v"] for i in range(len(view))]
        finally:
            view.close()

    assert plain == sql == _outcome(viewed), (first, kind, frac, rows)
    ds.close()
