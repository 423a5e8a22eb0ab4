"""Constraints written inside list items give pydantic's verdict, row by row."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, conint
from support.pydantic_reference import refused_by_pydantic, refused_by_report

from undertale_duck import ArgumentError
from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.runner import report_for

N = 24


class _Items(BaseModel):
    a: list[Annotated[int, Field(ge=0)]]
    b: list[conint(gt=1, lt=9)] | None  # type: ignore[valid-type]
    c: list[Annotated[str, StringConstraints(max_length=3, pattern=r"^x")]]
    d: list[Annotated[float, Field(multiple_of=0.5)] | None]
    e: list[list[Annotated[int, Field(le=5)]]]
    f: set[Annotated[int, Field(ge=0)]]
    g: tuple[Annotated[int, Field(ge=0)], ...]
    h: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(le=0)]] | None
    i: list[Annotated[float, Field(gt=0)]]
    j: list[Literal["x", "y"]]
    k: list[list[int]]


def _items(n: int) -> pa.Table:
    """Values from the row index: some items break their constraint, some are NULL or NaN."""
    nan = float("nan")
    return pa.table({
        "a": [[k, -k] if k % 3 == 1 else [] if k % 5 == 0 else [k] for k in range(n)],
        "b": [None if k % 4 == 0 else [k % 11] for k in range(n)],
        "c": [["x" * (k % 6)] if k % 2 else ["xa", "y"] if k % 4 == 0 else [] for k in range(n)],
        "d": [[k / 4, None] if k % 3 else [nan] for k in range(n)],
        "e": [[[k % 9], [], [k - 3]] if k % 2 else [] if k % 4 else [[None]] for k in range(n)],
        "f": [[k - 2, 3, 3] for k in range(n)],
        "g": [[3 - k, 4] for k in range(n)],
        "h": [None if k % 7 == 0 else [k % 3 - 1, 1 - k % 4] for k in range(n)],
        "i": [[nan] if k % 5 == 0 else [float(k % 3)] for k in range(n)],
        "j": [["x", "y"] if k % 3 else ["z"] for k in range(n)],
        "k": [[[k]] if k % 6 else [[1, None]] for k in range(n)],
    })


class _Config(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True, str_max_length=2, allow_inf_nan=False)
    s: list[str]
    f: list[float]
    own: list[Annotated[str, StringConstraints(max_length=4)]]


def _config(n: int) -> pa.Table:
    words = [" ab ", "abc", "a", "\u00a0ab\u3000", "", "abcd "]
    floats = [1.0, math.inf, math.nan, -0.5]
    return pa.table({
        "s": [[words[k % 6]] for k in range(n)],
        "f": [[floats[k % 4]] for k in range(n)],
        "own": [[words[(k + 1) % 6] * 2] for k in range(n)],
    })


@pytest.mark.parametrize(("model", "table"), [(_Items, _items(N)), (_Config, _config(N))],
                         ids=["items", "config"])
def test_item_constraints_give_pydantic_verdict(
    tmp_path: Path, model: type[BaseModel], table: pa.Table
) -> None:
    """Constraints inside list items (also sets, tuples, lists of lists, the model's config
    for str and float items) were not translated: every row with a bad item passed."""
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, model, examples=N)
    expected = refused_by_pydantic(model, table)
    assert expected and len(expected) < N
    assert refused_by_report(report, table) == expected
    tasks = report_for(tmp_path, model, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


def test_item_checks_are_named_by_their_item(tmp_path: Path) -> None:
    table = _items(N)
    pq.write_table(table, tmp_path / "a.parquet")
    failed = {(c.check, c.column, c.description) for c in report_for(tmp_path, _Items).failed}
    assert ("range", "e", "e[*][*] <= 5") in failed
    assert ("range", "h", "h[2] <= 0") in failed
    assert ("not_null", "k", "k[*] has no null elements") in failed


class _Leaf(BaseModel):
    z: int = Field(le=3)


class _Point(BaseModel):
    x: int = Field(ge=0)
    y: str | None = Field(default=None, max_length=2)
    q: list[_Leaf] = []


class _Models(BaseModel):
    ps: list[_Point | None]
    qs: list[list[_Point]] | None


def _models(n: int) -> pa.Table:
    """Structs inside lists: fields out of range, too long, NULL, and a list of them deeper;
    some struct fields hold only NULLs."""
    return pa.table({
        "ps": [[{"x": k - 3, "y": "a" * (k % 4), "q": [{"z": k % 5}]},
                None if k % 2 else {"x": None if k % 4 else 1, "y": None, "q": []}]
               for k in range(n)],
        "qs": [None if k % 3 == 0 else [[{"x": 5 - k, "y": None, "q": None if k % 5 else []}]]
               for k in range(n)],
    })


def test_models_inside_lists_give_pydantic_verdict(tmp_path: Path) -> None:
    """The fields of a nested model inside a list were not checked (only their types): a
    struct item out of range, too long or with a NULL field passed."""
    table = _models(N)
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, _Models, examples=N)
    expected = refused_by_pydantic(_Models, table)
    assert expected and len(expected) < N
    assert refused_by_report(report, table) == expected
    failed = {c.description for c in report.failed}
    assert {"ps[*].x >= 0", "length(ps[*].y) <= 2", "ps[*].q[*].z <= 3",
            "qs[*][*].q is not null"} <= failed
    tasks = report_for(tmp_path, _Models, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


class _PythonItems(BaseModel):
    x: list[Annotated[str, Field(pattern=re.compile(r"^a$"))]]


def test_item_patterns_matched_by_python_re_are_refused(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": [["a"]]}), tmp_path / "a.parquet")
    with pytest.raises(ArgumentError, match=r"field 'x' has pattern"):
        report_for(tmp_path, _PythonItems)
