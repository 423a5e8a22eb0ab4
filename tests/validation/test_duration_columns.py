"""Arrow duration columns: served as ``timedelta``, read by DuckDB as integer counts.

pyarrow stores a ``duration`` as a Parquet INT64 with its Arrow type in the file's metadata,
so the dataset (pyarrow's decode) serves ``datetime.timedelta`` values while DuckDB reads a
``BIGINT``. The verdict follows what the dataset serves, row by row against pydantic.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field, ValidationError
from support.pydantic_reference import refused_by_report

from undertale_duck import ParquetDataset
from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.runner import report_for

N = 12


def _table(lo: int, hi: int) -> pa.Table:
    """Durations of 1.5 s times the global index g; a NULL every fifth row."""
    return pa.table({
        "g": pa.array(range(lo, hi), pa.int64()),
        "wait": pa.array(
            [None if g % 5 == 0 else dt.timedelta(milliseconds=1500 * g) for g in range(lo, hi)],
            pa.duration("ms"),
        ),
    })


@pytest.fixture
def data(tmp_path: Path) -> Path:
    pq.write_table(_table(0, N // 2), tmp_path / "part-0.parquet")
    pq.write_table(_table(N // 2, N), tmp_path / "part-1.parquet")
    return tmp_path


def _served_refused(model: type[BaseModel], ds: ParquetDataset) -> set[int]:
    """Indices of the rows the dataset serves that ``model`` refuses."""
    bad = set()
    for i in range(len(ds)):
        try:
            model.model_validate(ds[i])
        except ValidationError:
            bad.add(i)
    return bad


class _Waited(BaseModel):
    wait: dt.timedelta | None


class _Counted(BaseModel):
    wait: int | None


class _Anything(BaseModel):
    wait: Any


class _Required(BaseModel):
    wait: dt.timedelta


class _Bounded(BaseModel):
    wait: dt.timedelta | None = Field(le=dt.timedelta(seconds=6))


@pytest.mark.parametrize("model", [_Waited, _Counted, _Anything, _Required])
def test_a_duration_column_is_judged_as_the_timedeltas_the_dataset_serves(
    data: Path, model: type[BaseModel]
) -> None:
    ds = ParquetDataset(data)
    try:
        expected = _served_refused(model, ds)
    finally:
        ds.close()
    report = report_for(data, model, examples=N)
    assert refused_by_report(report, pa.concat_tables([_table(0, N // 2), _table(N // 2, N)])) \
        == expected
    assert report.passed == (not expected)
    tasks = report_for(data, model, examples=N, executor=SerialExecutor(shards_per_task=1))
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


def test_an_int_field_over_durations_fails_type_saying_what_is_served(data: Path) -> None:
    report = report_for(data, _Counted)
    (failed,) = report.failed
    assert failed.check == "type" and failed.violations == N
    reason = str(failed.examples[0].value)
    assert "Arrow duration[ms]" in reason and "datetime.timedelta" in reason


def test_constraints_on_durations_are_not_passed_unchecked(data: Path) -> None:
    """DuckDB's counts are not the served timedeltas: the constraints fail, saying why."""
    report = report_for(data, _Bounded)
    assert not report.passed
    (failed,) = report.failed
    assert failed.check == "type" and "constraints cannot be checked" in str(
        failed.examples[0].value
    )


def test_a_view_serves_duckdb_s_integers_and_is_judged_so(data: Path) -> None:
    view = ParquetDataset(data, where="g >= 0")
    try:
        assert _served_refused(_Counted, view) == set()
        assert view.report(_Counted).passed
        assert not view.report(_Required).passed
    finally:
        view.close()
