"""A naive datetime bound over timestamps written in a time zone: pydantic compares it with
each value's wall-clock time in the Arrow field's zone, which DuckDB does not keep."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field, create_model
from support.pydantic_reference import refused_by_pydantic

from undertale_duck.validation.model import CheckResult, ValidationReport
from undertale_duck.validation.runner import report_for

UTC = dt.UTC
#: 14:00 and 23:00 in Tokyo, 05:00 and 14:00 UTC: a naive bound of noon splits them apart.
TIMES = [dt.datetime(2024, 5, 5, 5, tzinfo=UTC), dt.datetime(2024, 5, 5, 14, tzinfo=UTC), None]
NOON = dt.datetime(2024, 5, 5, 12)


def _model(annotation: Any) -> type[BaseModel]:
    return create_model("Row", t=(annotation | None, ...))


def _range(report: ValidationReport) -> CheckResult:
    (found,) = [c for c in report.checks if c.check == "range"]
    return found


def _rows(report: ValidationReport) -> set[int]:
    return {e.index for c in report.failed for e in c.examples if e.index is not None}


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "-05:00"])
def test_naive_bound_over_another_zone_is_an_error_naming_it(tmp_path: Path, zone: str) -> None:
    """The range check errs (naming the column and zone); the type check still runs."""
    table = pa.table({"t": pa.array(TIMES, pa.timestamp("us", tz=zone))})
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, _model(Annotated[dt.datetime, Field(lt=NOON)]), examples=3)
    error = _range(report).error or ""
    assert f"t holds timestamps in the time zone {zone}" in error
    assert "give the bound a time zone" in error
    assert [c.check for c in report.checks if c.error] == ["range"]


@pytest.mark.parametrize("zone", ["UTC", "+00:00", "Etc/UTC"])
def test_naive_bound_over_utc_gives_pydantic_verdict(tmp_path: Path, zone: str) -> None:
    table = pa.table({"t": pa.array(TIMES, pa.timestamp("us", tz=zone))})
    pq.write_table(table, tmp_path / "a.parquet")
    model = _model(Annotated[dt.datetime, Field(lt=NOON)])
    report = report_for(tmp_path, model, examples=3)
    assert _range(report).error is None
    assert _rows(report) == refused_by_pydantic(model, table) == {1}


def test_aware_bound_over_another_zone_gives_pydantic_verdict(tmp_path: Path) -> None:
    """An aware bound compares instants, in pydantic as in DuckDB: no error."""
    table = pa.table({"t": pa.array(TIMES, pa.timestamp("us", tz="Asia/Tokyo"))})
    pq.write_table(table, tmp_path / "a.parquet")
    model = _model(Annotated[dt.datetime, Field(lt=NOON.replace(tzinfo=UTC))])
    report = report_for(tmp_path, model, examples=3)
    assert _range(report).error is None
    assert _rows(report) == refused_by_pydantic(model, table) == {1}


def test_one_shard_in_another_zone_errs_for_the_group(tmp_path: Path) -> None:
    """A UTC shard and a Tokyo shard are one DuckDB schema: the Tokyo one is not missed."""
    for name, zone in (("a", "UTC"), ("b", "Asia/Tokyo")):
        table = pa.table({"t": pa.array(TIMES, pa.timestamp("us", tz=zone))})
        pq.write_table(table, tmp_path / f"{name}.parquet")
    report = report_for(tmp_path, _model(Annotated[dt.datetime, Field(ge=NOON)]), examples=6)
    assert "time zone Asia/Tokyo" in (_range(report).error or "")


def test_list_items_in_another_zone_err(tmp_path: Path) -> None:
    column = pa.array([[t] for t in TIMES], pa.list_(pa.timestamp("ms", tz="Asia/Tokyo")))
    pq.write_table(pa.table({"t": column}), tmp_path / "a.parquet")
    report = report_for(tmp_path, _model(list[Annotated[dt.datetime, Field(le=NOON)]]),
                        examples=3)
    assert "time zone Asia/Tokyo" in (_range(report).error or "")
