"""The verdict on what the dataset serves: MAP columns, all-NULL columns, columns some
shards lack, columns read by alias or name; row by row against pydantic."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from support.pydantic_reference import refused_by_pydantic, refused_by_report, refused_rows

from undertale_duck import ArgumentError, ParquetDataset, SourceError
from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.runner import report_for
from undertale_duck.validation.schemas import Unique

N = 8


def _served_refused(model: type[BaseModel], root: Path) -> set[int]:
    """Indices of the rows ``ParquetDataset(root)`` serves that ``model`` refuses."""
    ds = ParquetDataset(root)
    try:
        bad = set()
        for i in range(len(ds)):
            try:
                model.model_validate(ds[i])
            except ValidationError:
                bad.add(i)
        return bad
    finally:
        ds.close()


def _same_with_tasks(root: Path, model: type[BaseModel]) -> None:
    here = report_for(root, model, examples=N)
    tasks = report_for(root, model, examples=N, executor=SerialExecutor(shards_per_task=1))
    assert tasks.model_dump(exclude={"seconds"}) == here.model_dump(exclude={"seconds"})


class _Mapped(BaseModel):
    m: dict[str, int] | None


def test_a_map_column_under_a_dict_fails_as_pydantic_fails_its_served_rows(
    tmp_path: Path,
) -> None:
    """A MAP value is served (and reaches pydantic) as a list of (key, value) pairs, which
    pydantic refuses for a dict; every non-NULL row passed."""
    maps = pa.array([None if k % 3 == 0 else [("a", k)] * (k % 2) for k in range(N)],
                    pa.map_(pa.string(), pa.int64()))
    table = pa.table({"m": maps})
    pq.write_table(table, tmp_path / "a.parquet")
    expected = refused_by_pydantic(_Mapped, table)
    assert expected == {k for k in range(N) if k % 3} == _served_refused(_Mapped, tmp_path)
    report = report_for(tmp_path, _Mapped, examples=N)
    assert refused_by_report(report, table) == expected
    [typed] = [c for c in report.failed if c.check == "type"]
    assert "list of (key, value) pairs" in typed.examples[0].value
    _same_with_tasks(tmp_path, _Mapped)


class _Optional(BaseModel):
    x: int | None = Field(default=None, ge=0)
    y: int | None
    s: str | None = Field(max_length=2)


class _Required(BaseModel):
    x: int


def test_an_all_null_column_in_some_shards_is_no_drift(tmp_path: Path) -> None:
    """A shard whose column holds only NULLs (Arrow type null) failed shard_schema (types
    BIGINT -> NULL) on every row, and a length check on it gave an error ("does not apply to
    NULL"), although the dataset serves its rows as None, which an optional field takes; a
    required one refuses them."""
    typed = pa.table({"x": pa.array(range(N), pa.int64()), "y": pa.array(range(N), pa.int64()),
                      "s": ["ab"] * N})
    nulls = pa.table({"x": pa.array([None] * N), "y": pa.array([None] * N),
                      "s": pa.array([None] * N)})
    pq.write_table(typed, tmp_path / "a.parquet")
    pq.write_table(nulls, tmp_path / "b.parquet")
    assert pq.read_schema(tmp_path / "b.parquet").field("x").type == pa.null()
    served = pa.concat_tables([typed, nulls.cast(typed.schema)])
    for model in (_Optional, _Required):
        expected = refused_by_pydantic(model, served)
        assert expected == _served_refused(model, tmp_path)
        assert expected == (set() if model is _Optional else set(range(N, 2 * N)))
        report = report_for(tmp_path, model, examples=2 * N)
        assert refused_by_report(report, served) == expected, model
        assert [c.check for c in report.failed] == ([] if model is _Optional else ["not_null"])
        _same_with_tasks(tmp_path, model)


class _Default(BaseModel):
    id: int
    x: int | None = Field(default=None, ge=0)


class _NoDefault(BaseModel):
    id: int
    x: int | None = Field(ge=0)


def test_a_column_some_shards_lack_fails_only_a_field_without_default(tmp_path: Path) -> None:
    """A shard without the column of a field with a default failed `present` on every row;
    pydantic gives a row without the key the default, and refuses it for a field without
    one (even Optional). The dataset refuses to read such shards (drift), which
    `shard_schema` still reports."""
    first = pa.table({"id": range(N), "x": [k - 2 for k in range(N)]})
    second = pa.table({"id": range(N, 2 * N)})
    pq.write_table(first, tmp_path / "a.parquet")
    pq.write_table(second, tmp_path / "b.parquet")
    ds = ParquetDataset(tmp_path)
    try:
        with pytest.raises(SourceError, match="schema drift"):
            ds[N]  # a row of the shard without the column
    finally:
        ds.close()
    rows = [*first.to_pylist(), *second.to_pylist()]
    for model in (_Default, _NoDefault):
        expected = refused_rows(model, rows)
        missing = set(range(N, 2 * N))
        assert expected & missing == (set() if model is _Default else missing)
        report = report_for(tmp_path, model, examples=2 * N)
        present = next(c for c in report.checks if c.check == "present" and c.column == "x")
        assert present.violations == (0 if model is _Default else N)
        failed_rows = {e.index for c in report.failed for e in c.examples if e.index is not None}
        if model is _NoDefault:
            failed_rows |= missing  # the shard-level present failure
        assert failed_rows == expected, model
        assert {c.check for c in report.failed} - {"present"} == {"shard_schema", "range"}
        _same_with_tasks(tmp_path, model)


class _ByName(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    x: int = Field(alias="a", ge=0)


class _ByNameForbid(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    x: int = Field(alias="a", ge=0)


class _ByNameUnique(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    x: Annotated[int, Unique] = Field(alias="a")


def test_validate_by_name_reads_the_name_where_a_shard_lacks_the_alias(tmp_path: Path) -> None:
    """With validate_by_name, pydantic reads a row's alias key, else its name; a shard holding
    only the name column failed `present` and its values were not checked. Where both are
    held the alias is read, and extra='forbid' refuses the name as an extra key."""
    shards = [
        pa.table({"a": [k - 1 for k in range(N)]}),
        pa.table({"x": [k - 2 for k in range(N)]}),
        pa.table({"a": [k - 3 for k in range(N)], "x": [1 - k for k in range(N)]}),
    ]
    for k, table in enumerate(shards):
        pq.write_table(table, tmp_path / f"{k}.parquet")
    rows = [row for table in shards for row in table.to_pylist()]
    for model in (_ByName, _ByNameForbid):
        expected = refused_rows(model, rows)
        report = report_for(tmp_path, model, examples=3 * N)
        failed = {e.index for c in report.failed for e in c.examples if e.index is not None}
        if model is _ByNameForbid:  # the shard-level extra check: the name column beside the alias
            extra = next(c for c in report.failed if c.check == "extra")
            assert [e.shard for e in extra.examples] == [str(tmp_path / "2.parquet")]
            failed |= set(range(2 * N, 3 * N))
        assert failed == expected, model
        assert {c.check for c in report.failed} - {"shard_schema", "extra"} == {"range"}
        _same_with_tasks(tmp_path, model)
    with pytest.raises(ArgumentError, match=r"field 'a' is Unique, and some shards hold it as"):
        report_for(tmp_path, _ByNameUnique)
