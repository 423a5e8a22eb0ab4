"""pydantic's ``AwareDatetime`` and ``NaiveDatetime``: the column's time zone decides each row."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NaiveDatetime, create_model
from support.pydantic_reference import refused_rows

from undertale_duck.validation.model import ValidationReport
from undertale_duck.validation.runner import report_for

SIZES = [7, 0, 5, 9]  # rows per shard, one shard empty
N = sum(SIZES)
START = dt.datetime(2024, 1, 1)


def _at(g: int) -> dt.datetime | None:
    """Row g's wall-clock time (None every fifth row)."""
    return None if g % 5 == 0 else START + dt.timedelta(hours=7 * g)


def _table(first: int, n: int) -> pa.Table:
    g = range(first, first + n)
    times = [_at(k) for k in g]
    return pa.table({
        "naive": pa.array(times, pa.timestamp("us")),
        "naive_ns": pa.array(times, pa.timestamp("ns")),
        "zoned": pa.array(times, pa.timestamp("ms", "Europe/Paris")),
        "zoned_ns": pa.array(times, pa.timestamp("ns", "UTC")),
        "day": pa.array([None if t is None else t.date() for t in times], pa.date32()),
        "naive_list": pa.array([None if t is None else [t, t] for t in times],
                               pa.list_(pa.timestamp("us"))),
        "zoned_list": pa.array([None if t is None else [t] for t in times],
                               pa.list_(pa.timestamp("us", "UTC"))),
    })


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("aware")
    rows: list[dict[str, Any]] = []
    first = 0
    for k, n in enumerate(SIZES):
        table = _table(first, n)
        pq.write_table(table, root / f"part-{k}.parquet")
        rows.extend(table.to_pylist())  # what model_validate sees, as the brute force reads it
        first += n
    return root, rows


def _refused_by_report(report: ValidationReport, rows: list[dict[str, Any]], column: str
                       ) -> set[int]:
    """Global indices a one-field report fails (a shard-level ``type``: its non-NULL rows)."""
    assert [c.error for c in report.checks if c.error] == []
    offsets = {}
    first = 0
    for shard in report.shard_summaries:
        offsets[shard.path] = range(first, first + (shard.rows or 0))
        first += shard.rows or 0
    bad: set[int] = set()
    for check in report.failed:
        for example in check.examples:
            if example.index is None:
                bad |= {g for g in offsets[example.shard] if rows[g][column] is not None}
            else:
                bad.add(example.index)
    return bad


AWARE_BOUND = dt.datetime(2024, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=5)))
NAIVE_BOUND = dt.datetime(2024, 1, 3, 12)

FIELDS: list[Any] = [
    AwareDatetime,
    NaiveDatetime,
    AwareDatetime | None,
    NaiveDatetime | None,
    Annotated[AwareDatetime, Field(ge=AWARE_BOUND)] | None,
    Annotated[NaiveDatetime, Field(lt=NAIVE_BOUND)] | None,
]
FIELD_IDS = ["aware", "naive", "aware-optional", "naive-optional", "aware-ge", "naive-lt"]
COLUMNS = ["naive", "naive_ns", "zoned", "zoned_ns", "day"]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("annotation", FIELDS, ids=FIELD_IDS)
def test_aware_and_naive_datetimes_refuse_the_rows_pydantic_refuses(
    data: tuple[Path, list[dict[str, Any]]], annotation: Any, strict: bool
) -> None:
    """AwareDatetime over a naive TIMESTAMP (or DATE) and NaiveDatetime over a TIMESTAMP WITH
    TIME ZONE passed as "not checked", while pydantic refuses each of their non-NULL rows."""
    root, rows = data
    for column in COLUMNS:
        model = create_model("Row", __config__=ConfigDict(strict=strict),
                             **{column: (annotation, ...)})
        report = report_for(root, model, examples=N)
        expected = refused_rows(model, [{column: r[column]} for r in rows])
        assert _refused_by_report(report, rows, column) == expected, column
        assert "not checked" not in str([c.description for c in report.checks])


@pytest.mark.parametrize(
    ("annotation", "column"),
    [(list[AwareDatetime], "naive_list"), (list[AwareDatetime], "zoned_list"),
     (list[NaiveDatetime], "naive_list"), (list[NaiveDatetime], "zoned_list")],
    ids=["aware-naive", "aware-zoned", "naive-naive", "naive-zoned"],
)
def test_list_items_follow_the_same_rule(
    data: tuple[Path, list[dict[str, Any]]], annotation: Any, column: str
) -> None:
    root, rows = data
    model = create_model("Row", **{column: (annotation | None, ...)})
    report = report_for(root, model, examples=N)
    expected = refused_rows(model, [{column: r[column]} for r in rows])
    assert _refused_by_report(report, rows, column) == expected


class _Aware(BaseModel):
    naive: AwareDatetime | None


class _Naive(BaseModel):
    zoned: NaiveDatetime | None


@pytest.mark.parametrize(("model", "says"), [
    (_Aware, "AwareDatetime refuses every value of this column, a datetime without a time zone"),
    (_Naive, "NaiveDatetime refuses every value of this column, a datetime with a time zone"),
], ids=["aware", "naive"])
def test_the_type_failure_says_why(
    data: tuple[Path, list[dict[str, Any]]], model: type[BaseModel], says: str
) -> None:
    report = report_for(data[0], model)
    (failed,) = report.failed
    assert failed.check == "type"
    assert {e.value for e in failed.examples} and all(says in e.value for e in failed.examples)
