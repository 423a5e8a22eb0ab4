"""Numbers at the edges of their types: integer minima under digit checks, ints beyond 2**53
under a float field's bounds. Each row fails exactly when pydantic refuses it."""

from __future__ import annotations

import decimal
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model
from support.pydantic_reference import refused_by_pydantic

from undertale_duck.validation.model import ValidationReport
from undertale_duck.validation.runner import report_for

D = decimal.Decimal


def _offenders(report: ValidationReport) -> set[int]:
    """Rows the report fails; a check that errs (no verdict) fails the test."""
    assert [c.error for c in report.checks if c.error] == []
    return {e.index for c in report.failed for e in c.examples if e.index is not None}


def _same_as_pydantic(path: Path, model: type[BaseModel], table: pa.Table) -> set[int]:
    pq.write_table(table, path / "a.parquet")
    report = report_for(path, model, examples=table.num_rows)
    expected = refused_by_pydantic(model, table)
    assert _offenders(report) == expected
    return expected


def _field(annotation: Any) -> type[BaseModel]:
    return create_model("M", v=(annotation, ...))


MINIMA = {pa.int8(): -(2**7), pa.int16(): -(2**15), pa.int32(): -(2**31), pa.int64(): -(2**63)}


@pytest.mark.parametrize("arrow", list(MINIMA), ids=str)
@pytest.mark.parametrize("constraint", [{"max_digits": 2}, {"decimal_places": 0},
                                        {"max_digits": 19, "decimal_places": 0}],
                         ids=["max_digits", "decimal_places", "both"])
def test_digits_of_an_integer_types_minimum_are_counted(
    tmp_path: Path, arrow: pa.DataType, constraint: dict[str, int]
) -> None:
    """The minimum (-128 ... -2**63) has one more digit than abs() can hold: it is counted,
    the scan's other checks still run, and no check errs."""
    low = MINIMA[arrow]
    model = _field(Annotated[D, Field(**constraint)] | None)
    table = pa.table({"v": pa.array([5, low, -low - 1, -7, 0, None], arrow)})
    expected = _same_as_pydantic(tmp_path, model, table)
    assert (1 in expected) == (constraint.get("max_digits") == 2)  # -2**7 has 3 digits


def test_digits_inside_a_list_of_int64_minimum(tmp_path: Path) -> None:
    """``list[Annotated[Decimal, Field(max_digits=3)]]`` over list<int64> holding -2**63."""
    model = _field(list[Annotated[D, Field(max_digits=3)]])
    table = pa.table({"v": pa.array([[1, -(2**63)], [5], [-999, 999]], pa.list_(pa.int64()))})
    assert _same_as_pydantic(tmp_path, model, table) == {0}


def test_float_field_compares_an_int64_as_the_float_pydantic_makes(tmp_path: Path) -> None:
    """2**53 + 1 is the float 2**53 to pydantic, within ``le=2**53``; 2**53 + 2 is not."""
    model = _field(Annotated[float, Field(le=2**53)])
    table = pa.table({"v": pa.array([2**53 + 1, 2**53 + 2, 2**53], pa.int64())})
    assert _same_as_pydantic(tmp_path, model, table) == {1}


BIG = 2**53


@settings(max_examples=15, deadline=None)
@example(kind="ge", bound=BIG + 1, values=[BIG, BIG + 1, BIG + 2, BIG - 2],
         arrow=pa.decimal128(20, 0))
@example(kind="lt", bound=D(BIG) + D("0.5"), values=[BIG - 1, BIG, BIG + 1, BIG + 2],
         arrow=pa.decimal128(24, 2))
@given(
    kind=st.sampled_from(["ge", "gt", "le", "lt", "multiple_of"]),
    bound=st.integers(BIG - 8, BIG + 8) | st.sampled_from([BIG * 3, D(BIG) + D("0.5")]),
    values=st.lists(st.integers(BIG - 8, BIG + 8), min_size=4, max_size=12),
    arrow=st.sampled_from([pa.int64(), pa.decimal128(20, 0), pa.decimal128(24, 2)]),
)
def test_float_field_bounds_over_exact_numbers_match_pydantic(
    tmp_path_factory: Any, kind: str, bound: int | D, values: list[int], arrow: pa.DataType
) -> None:
    """ge, gt, le, lt and multiple_of of a float field over int64 and DECIMAL columns near
    2**53, where the float rounds: each row fails exactly when pydantic refuses it."""
    if arrow == pa.int64():
        values = [*values, -(2**63), 2**63 - 1]  # the float of 2**63 - 1 is 2**63
    model = _field(Annotated[float, Field(**{kind: bound})])
    column = pa.array([v if arrow == pa.int64() else D(v) for v in values], arrow)
    _same_as_pydantic(tmp_path_factory.mktemp("f"), model, pa.table({"v": column}))
