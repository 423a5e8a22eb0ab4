"""Uniqueness compares values as Python does: NaN equals nothing, -0.0 equals 0.0."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from undertale_duck import schema
from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.runner import report_for

NAN = float("nan")


class _Point(BaseModel):
    x: float | None
    k: int


class _Floats(BaseModel):
    v: Annotated[float, schema.Unique] | None


class _Lists(BaseModel):
    v: Annotated[list[float | None], schema.Unique] | None


class _Structs(BaseModel):
    v: Annotated[_Point, schema.Unique] | None


class _Maps(BaseModel):
    # a MAP value reaches pydantic as a list of pairs, which only Any (or a list) takes
    v: Annotated[Any, schema.Unique] | None


def _floats(k: int) -> float | None:
    """Value of row k: NaN, signed zeros, NULL, repeated and lone numbers."""
    return [0.0, -0.0, NAN, None, 1.5, 2.0 + k, NAN, 1.5, -0.0, None, 3.25][k % 11]


def _lists(k: int) -> Any:
    return [[NAN], [NAN], [1.0, None], [1.0, None], [-0.0], [0.0], [NAN, 1.0], None, [],
            [float(k)], [[NAN], [2.0]][k % 2]][k % 11]


def _structs(k: int) -> dict[str, Any] | None:
    return [{"x": NAN, "k": 1}, {"x": NAN, "k": 1}, {"x": -0.0, "k": 2}, {"x": 0.0, "k": 2},
            None, {"x": None, "k": 3}, {"x": None, "k": 3}, {"x": 1.0, "k": k}][k % 8]


def _maps(k: int) -> list[tuple[float, float]] | None:
    return [[(1.0, NAN)], [(1.0, NAN)], [(NAN, 1.0)], [(NAN, 1.0)], [(0.0, 1.0)],
            [(-0.0, 1.0)], None, [(float(k), 2.0)]][k % 8]


CASES: dict[str, tuple[type[BaseModel], Any, pa.DataType]] = {
    "double": (_Floats, _floats, pa.float64()),
    "float": (_Floats, _floats, pa.float32()),
    "list": (_Lists, _lists, pa.list_(pa.float64())),
    "struct": (_Structs, _structs, pa.struct([("x", pa.float32()), ("k", pa.int64())])),
    "map": (_Maps, _maps, pa.map_(pa.float64(), pa.float64())),
}


def _duplicated_by_python(values: list[Any]) -> set[int]:
    """Rows whose non-None value Python finds equal (``==``) to another row's value."""
    return {
        i for i, v in enumerate(values)
        if v is not None and any(j != i and w == v for j, w in enumerate(values))
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_duplicates_are_the_values_python_finds_equal(tmp_path: Path, case: str) -> None:
    """DuckDB groups NaN with NaN, so two NaN rows (or two lists, structs or maps holding a
    NaN) were reported as duplicates; Python finds them unequal. -0.0 and 0.0 are equal in
    both. In one process and by partitioned tasks, over two shards."""
    model, make, dtype = CASES[case]
    sizes = [23, 21]
    tables = []
    start = 0
    for k, size in enumerate(sizes):
        table = pa.table({"v": pa.array([make(start + i) for i in range(size)], dtype)})
        pq.write_table(table, tmp_path / f"part-{k}.parquet", row_group_size=7)
        tables.append(table)
        start += size
    values = pa.concat_tables(tables).column("v").to_pylist()
    expected = _duplicated_by_python(values)
    assert expected
    for executor in (None, SerialExecutor(shards_per_task=1, partitions=3)):
        report = report_for(tmp_path, model, examples=len(values), executor=executor)
        unique = next(c for c in report.checks if c.check == "unique")
        assert unique.error is None
        assert unique.violations == len(expected)
        assert {e.index for e in unique.examples} == expected
        assert report.passed == (not expected)
