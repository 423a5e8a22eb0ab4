"""``Unique`` inside list items has no defined meaning: the schema is refused, not ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from undertale_duck import ArgumentError, ParquetDataset
from undertale_duck.schema import Unique
from undertale_duck.validation.runner import report_for

SIZES = [4, 0, 3]  # rows per shard, one shard empty


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Items repeat inside a row (g, g) and across rows (g // 2)."""
    root = tmp_path_factory.mktemp("unique_items")
    first = 0
    for k, n in enumerate(SIZES):
        g = range(first, first + n)
        pq.write_table(pa.table({
            "l": pa.array([[v, v, v // 2] for v in g], pa.list_(pa.int64())),
            "s": pa.array([[{"x": v // 2}] for v in g], pa.list_(pa.struct([("x", pa.int64())]))),
            "t": pa.array([{"x": v // 2} for v in g], pa.struct([("x", pa.int64())])),
        }), root / f"part-{k}.parquet")
        first += n
    return root


class _X(BaseModel):
    x: Annotated[int, Unique]


class _Items(BaseModel):
    l: list[Annotated[int, Unique]]  # noqa: E741


class _OptionalItems(BaseModel):
    l: list[Annotated[int, Unique] | None] | None  # noqa: E741


class _TupleItem(BaseModel):
    l: tuple[int, Annotated[int, Unique], int]  # noqa: E741


class _ModelItems(BaseModel):
    s: list[_X]


class _Holder(BaseModel):
    t: _X


class _DeepItems(BaseModel):
    s: list[list[_Holder | None]] | None = None


class _Inner(BaseModel):
    l: list[Annotated[int, Unique]]  # noqa: E741


class _Nested(BaseModel):
    t: _Inner | None = None


@pytest.mark.parametrize(("model", "field", "where"), [
    (_Items, "l", "Annotated[int, Unique]"),
    (_OptionalItems, "l", "Annotated[int, Unique]"),
    (_TupleItem, "l", "Annotated[int, Unique]"),
    (_ModelItems, "s", "_X, whose field 'x' is Unique"),
    (_DeepItems, "s", "_Holder, whose field 't': field 'x' is Unique"),
    (_Nested, "l", "Annotated[int, Unique]"),
], ids=["items", "optional", "tuple", "model", "deep", "nested"])
def test_unique_inside_list_items_is_refused_naming_the_field(
    data: Path, model: type[BaseModel], field: str, where: str
) -> None:
    """These schemas passed every row: the marker inside the items was silently ignored."""
    with pytest.raises(ArgumentError) as caught:
        report_for(data, model)
    message = str(caught.value)
    owner = "_Inner" if model is _Nested else model.__name__
    assert f"schema {owner}: field {field!r} marks values inside its list items Unique" in message
    assert where in message and "Annotated[list[int], Unique]" in message
    assert "\n" not in message
    ds = ParquetDataset(data)
    try:
        with pytest.raises(ArgumentError, match="inside its list items"):
            ds.report(model)
    finally:
        ds.close()


class _WholeList(BaseModel):
    l: Annotated[list[int], Unique]  # noqa: E741


def test_unique_on_a_whole_list_or_a_struct_field_is_still_checked(data: Path) -> None:
    """Rows are lists [g, g, g // 2] (all different) and structs {x: g // 2} (in pairs)."""
    whole = report_for(data, _WholeList)
    assert [(c.column, c.passed) for c in whole.checks if c.check == "unique"] == [("l", True)]
    nested = report_for(data, _Holder)
    (unique,) = [c for c in nested.checks if c.check == "unique"]
    assert (unique.column, unique.violations) == ("t.x", 6)  # x = 0, 0, 1, 1, 2, 2, 3
