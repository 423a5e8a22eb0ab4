"""Lax pydantic takes some values of other column types (an integral float for an int, 0 or 1
for a bool): each row gets pydantic's verdict, not the whole column."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, ConfigDict, Field, Strict, create_model
from support.pydantic_reference import refused_by_pydantic, refused_by_report

from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.runner import report_for

N = 24

#: Floats an int field takes (integral, finite, strictly inside 64 bits) or refuses.
FLOATS = [1.0, 1.5, math.inf, math.nan, -0.0, -9.0, 2.0**63, 2.0**62, 4.0, None, 3.0,
          -(2.0**63), -(2.0**63) + 1024, -math.inf, 1e300, 0.5]
#: Words a bool field takes (any case, no whitespace) or refuses.
WORDS = ["true", "TRUE", "yes", " no", "On", "2", "", "t", "F", "1", "0", "tRuE", "off", "N",
         "y", "nO", "1.0", "true\n", None, "\u212a", "fALSE", "Y", "T", "yes."]


class _Lax(BaseModel):
    i: int = Field(ge=-5)
    j: int | None = Field(multiple_of=2)
    k: int
    b: bool
    c: bool | None
    e: bool | None
    d: decimal.Decimal = Field(max_digits=3)
    g: decimal.Decimal | None
    f: float = Field(le=0.5)
    t: int = Field(multiple_of=2)
    li: list[int]
    lb: list[bool]


class _Strict(_Lax):
    model_config = ConfigDict(strict=True)


class _StrictItems(BaseModel):
    li: list[Annotated[int, Strict()]]
    lb: list[bool] = Field(strict=True)  # its items keep the model's lax mode


def _table(n: int) -> pa.Table:
    floats = [FLOATS[k % len(FLOATS)] for k in range(n)]
    return pa.table({
        "i": floats,
        "j": pa.array(floats, pa.float32()),
        "k": pa.array([decimal.Decimal(k) / 2 for k in range(n)], pa.decimal128(6, 2)),
        "b": pa.array([k % 3 - (k % 5 == 0) for k in range(n)], pa.int8()),
        "c": [None if v is None or math.isnan(v) else v / 4 for v in floats],
        "e": [WORDS[k % len(WORDS)] for k in range(n)],
        "d": pa.array([k * 300 - 1000 for k in range(n)], pa.int32()),
        "g": [*floats[:-3], 0.1, 1e-7, 1e22][:n],
        "f": [k % 2 == 0 for k in range(n)],
        "t": [k % 3 == 0 for k in range(n)],
        "li": [[v] for v in floats],
        "lb": [[k % 3, 1] for k in range(n)],
    })


def _one_field(model: type[BaseModel], name: str) -> type[BaseModel]:
    """``model`` reduced to one field (its config kept), so each column's rows are compared."""
    info = model.model_fields[name]
    fields: dict[str, Any] = {name: (info.annotation, info)}
    return create_model(f"{model.__name__}_{name}", __config__=model.model_config, **fields)


@pytest.mark.parametrize(
    ("model", "name"),
    [*((m, n) for m in (_Lax, _Strict) for n in _Lax.model_fields),
     *((_StrictItems, n) for n in _StrictItems.model_fields)],
)
def test_other_column_types_give_pydantic_verdict_per_row(
    tmp_path: Path, model: type[BaseModel], name: str
) -> None:
    """A float column under int, a number or text column under bool, an int or float column
    under Decimal failed `type` on every row (also the ones pydantic takes), and a bool column
    under int or float (compared as 0 and 1); strict pydantic still refuses them all."""
    one = _one_field(model, name)
    table = _table(N).select([name])
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, one, examples=N)
    expected = refused_by_pydantic(one, table)
    assert expected and (model is not _Lax or len(expected) < N)
    assert refused_by_report(report, table) == expected
    tasks = report_for(tmp_path, one, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


class _Parsed(BaseModel):
    n: int | None


def test_text_under_a_number_says_it_cannot_give_pydantics_verdict(tmp_path: Path) -> None:
    pq.write_table(pa.table({"n": ["12", " 12 ", "1_000", "x"]}), tmp_path / "a.parquet")
    [typed] = [c for c in report_for(tmp_path, _Parsed).failed if c.check == "type"]
    assert "lax pydantic parses text as int" in typed.examples[0].value
    assert "make the field strict" in typed.examples[0].value


#: Timestamps every sixth of a day from 1969-12-30 (before the epoch too), one in seven a
#: microsecond past: a date field takes the midnights only.
MOMENTS = [dt.datetime(1969, 12, 30) + dt.timedelta(hours=4 * k, microseconds=k % 7 == 3)
           for k in range(N)]


class _Days(BaseModel):
    day: dt.date = Field(gt=dt.date(1969, 12, 30))
    ms: dt.date | None
    days: list[dt.date]
    when: dt.datetime = Field(lt=dt.datetime(1970, 1, 2, 12))
    whens: list[Annotated[dt.datetime, Field(ge=dt.datetime(1969, 12, 31))]]


class _StrictDays(_Days):
    model_config = ConfigDict(strict=True)


def _days_table(n: int) -> pa.Table:
    return pa.table({
        "day": pa.array(MOMENTS[:n], pa.timestamp("us")),
        "ms": pa.array([None if k % 5 == 0 else m for k, m in enumerate(MOMENTS[:n])],
                       pa.timestamp("ms")),
        "days": pa.array([MOMENTS[k:k + 7:6] for k in range(n)], pa.list_(pa.timestamp("us"))),
        "when": pa.array([m.date() for m in MOMENTS[:n]], pa.date32()),
        "whens": pa.array([[m.date()] for m in MOMENTS[:n]], pa.list_(pa.date32())),
    })


@pytest.mark.parametrize(
    ("model", "name"), [(m, n) for m in (_Days, _StrictDays) for n in _Days.model_fields]
)
def test_timestamps_under_date_and_dates_under_datetime_give_pydantic_verdict(
    tmp_path: Path, model: type[BaseModel], name: str
) -> None:
    """Lax pydantic takes a datetime at midnight for a date and any date for a datetime: both
    failed `type` on every row; strict pydantic refuses them all."""
    one = _one_field(model, name)
    table = _days_table(N).select([name])
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, one, examples=N)
    expected = refused_by_pydantic(one, table)
    assert model is _Days or expected  # strict refuses some rows (every non-NULL one)
    assert model is not _Days or len(expected) < N
    assert refused_by_report(report, table) == expected
    tasks = report_for(tmp_path, one, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


class _Zoned(BaseModel):
    day: dt.date


def test_a_zoned_timestamp_under_date_says_it_cannot_give_pydantics_verdict(
    tmp_path: Path,
) -> None:
    # a row holds it in the Arrow field's zone (New York's midnight is 05:00 UTC)
    moments = [dt.datetime(2024, 1, 1, 5, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, tzinfo=dt.UTC)]
    table = pa.table({"day": pa.array(moments, pa.timestamp("us", tz="America/New_York"))})
    pq.write_table(table, tmp_path / "a.parquet")
    assert refused_by_pydantic(_Zoned, table) == {1}
    [typed] = [c for c in report_for(tmp_path, _Zoned).failed if c.check == "type"]
    assert "in the time zone a row holds it in" in typed.examples[0].value
