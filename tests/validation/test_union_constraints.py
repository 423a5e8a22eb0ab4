"""Unions whose types carry their own checks: refused, never a pass that pydantic contradicts."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
from support.pydantic_reference import refused_by_pydantic, refused_by_report

from undertale_duck import ArgumentError, ParquetDataset
from undertale_duck.validation.runner import report_for

N = 24


def _table() -> pa.Table:
    """Rows as functions of the global index g: some of each union's values fail its arm."""
    g = range(N)
    return pa.table({
        "v": pa.array([k - 10 for k in g], pa.int64()),
        "s": pa.array(["abc"[k % 3] * (1 + k % 2) for k in g]),
        "l": pa.array([[k - 10, k] for k in g], pa.list_(pa.int64())),
        "pt": pa.array(
            [{"a": k % 3, "b": None} if k % 2 else {"a": None, "b": "x" * (k % 4)} for k in g],
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
    })


@pytest.fixture
def data(tmp_path: Path) -> Path:
    pq.write_table(_table(), tmp_path / "part-0.parquet")
    return tmp_path


class _Kind(enum.StrEnum):
    A = "a"


class _A(BaseModel):
    a: int = Field(le=1)
    b: None = None


class _B(BaseModel):
    b: str = Field(min_length=2)
    a: None = None


class _Ranged(BaseModel):
    v: Annotated[int, Field(ge=0)] | str


class _Lettered(BaseModel):
    s: Literal["a", "b"] | int


class _Enumed(BaseModel):
    s: _Kind | int | None


class _Items(BaseModel):
    l: list[Annotated[int, Field(ge=0)] | str]  # noqa: E741


class _Models(BaseModel):
    pt: _A | _B


class _Configured(BaseModel):
    model_config = ConfigDict(str_max_length=1)
    s: str | int


class _Inner(BaseModel):
    v: Annotated[int, Field(ge=0)] | str


class _Nested(BaseModel):
    inner: _Inner | None = None


@pytest.mark.parametrize(
    ("model", "field"),
    [(_Ranged, "v"), (_Lettered, "s"), (_Enumed, "s"), (_Items, "l"), (_Models, "pt"),
     (_Configured, "s")],
)
def test_a_union_with_checks_of_its_own_is_refused_where_pydantic_refuses_rows(
    data: Path, model: type[BaseModel], field: str
) -> None:
    """Each of these schemas passed every row while pydantic refuses some of them."""
    assert refused_by_pydantic(model, _table())  # what a passing report would contradict
    with pytest.raises(ArgumentError) as caught:
        report_for(data, model)
    message = str(caught.value)
    assert f"schema {model.__name__}: field {field!r}" in message and "union" in message
    assert "\n" not in message
    ds = ParquetDataset(data)
    try:
        with pytest.raises(ArgumentError):
            ds.validate(model)
    finally:
        ds.close()


def test_a_nested_model_s_union_is_refused_naming_its_field(data: Path) -> None:
    with pytest.raises(ArgumentError, match="schema _Inner: field 'v'"):
        report_for(data, _Nested)


class _WholeField(BaseModel):
    v: int | str = Field(ge=0)  # pydantic applies it to the union's values
    s: str | bytes
    l: list[int | float] | None  # noqa: E741


def test_unions_without_checks_of_their_own_are_still_judged_as_pydantic(data: Path) -> None:
    expected = refused_by_pydantic(_WholeField, _table())
    assert expected == {k for k in range(N) if k < 10}
    report = report_for(data, _WholeField, examples=N)
    assert refused_by_report(report, _table()) == expected


class _Strict(BaseModel):
    v: StrictInt | StrictStr
    s: Annotated[str, Field(strict=True)] | bytes


def test_strictness_alone_in_a_union_is_judged_as_pydantic(data: Path) -> None:
    expected = refused_by_pydantic(_Strict, _table())
    report = report_for(data, _Strict, examples=N)
    assert refused_by_report(report, _table()) == expected == set()
