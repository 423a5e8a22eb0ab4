"""pydantic options (strict, ascii_only, aliases, patterns, extra): its verdict, or a refusal."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    ValidationError,
    constr,
)
from support.pydantic_reference import refused_by_pydantic
from support.pydantic_reference import refused_by_report as _refused_by_report

from undertale_duck import ArgumentError, ParquetDataset
from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.runner import report_for


class _Kind(enum.IntEnum):
    A = 1
    B = 2


class _Lax(BaseModel):
    t: tuple[int, ...] | None
    s: set[int] | None
    e: _Kind | None


class _StrictConfig(BaseModel):
    model_config = ConfigDict(strict=True)
    t: tuple[int, ...] | None


class _StrictSet(BaseModel):
    s: set[int] | None = Field(strict=True)


class _StrictEnum(BaseModel):
    model_config = ConfigDict(strict=True)
    e: _Kind | None


class _StrictInside(BaseModel):
    """A field's own strict=False is for the list only: its items keep the config's strict."""

    model_config = ConfigDict(strict=True)
    u: list[tuple[int, ...]] | None = Field(strict=False)


class _LaxField(BaseModel):
    model_config = ConfigDict(strict=True)
    t: tuple[int, ...] | None = Field(strict=False)


class _StrictElement(BaseModel):
    u: list[Annotated[tuple[int, ...], Strict()]] | None


class _Tuples(BaseModel):
    t: tuple[int, ...]


class _StrictTuples(BaseModel):
    model_config = ConfigDict(strict=True)
    t: tuple[int, ...]


class _LaxNested(BaseModel):
    """A nested model keeps its own config: the parent's strict does not reach its fields."""

    model_config = ConfigDict(strict=True)
    p: _Tuples | None


class _StrictNested(BaseModel):
    p: _StrictTuples | None


class _StrictFine(BaseModel):
    """Strict fields a Parquet column satisfies: pydantic takes these values in strict mode."""

    model_config = ConfigDict(strict=True)
    i: int
    f: float
    g: float
    d: float
    s: str
    b: bytes
    ok: bool
    when: dt.datetime
    items: list[int]
    seq: Sequence[int]
    lit: Literal[1, 2]
    money: decimal.Decimal


def _ints(n: int) -> list[list[int] | None]:
    return [None if k % 4 == 3 else list(range(k % 3)) for k in range(n)]


N = 12
CASES: dict[str, tuple[type[BaseModel], pa.Table]] = {
    "lax": (_Lax, pa.table({"t": _ints(N), "s": _ints(N),
                             "e": pa.array([1 + k % 2 for k in range(N)], pa.int8())})),
    "strict-config-tuple": (_StrictConfig, pa.table({"t": _ints(N)})),
    "strict-field-set": (_StrictSet, pa.table({"s": _ints(N)})),
    "strict-enum": (_StrictEnum, pa.table({"e": pa.array(
        [None if k % 5 == 0 else 1 + k % 2 for k in range(N)], pa.int8())})),
    "strict-enum-all-null": (_StrictEnum, pa.table({"e": pa.array([None] * N, pa.int8())})),
    "strict-inside": (_StrictInside, pa.table({"u": [None if k % 3 else [[k]] for k in range(N)]})),
    "strict-false-field": (_LaxField, pa.table({"t": _ints(N)})),
    "strict-element": (_StrictElement, pa.table({"u": [[[k]] for k in range(N)]})),
    "nested-lax": (_LaxNested, pa.table({"p": [{"t": [k]} for k in range(N)]})),
    "nested-strict": (_StrictNested, pa.table({"p": [None if k % 2 else {"t": [k]}
                                                      for k in range(N)]})),
    "strict-fine": (_StrictFine, pa.table({
        "i": pa.array(range(N), pa.int16()),
        "f": pa.array([k / 2 for k in range(N)], pa.float32()),
        "g": pa.array(range(N), pa.int64()),
        "d": pa.array([decimal.Decimal(k) / 4 for k in range(N)], pa.decimal128(9, 2)),
        "s": [f"s{k}" for k in range(N)],
        "b": [bytes([k]) for k in range(N)],
        "ok": [k % 2 == 0 for k in range(N)],
        "when": pa.array(range(N), pa.timestamp("us")),
        "items": [[k] for k in range(N)],
        "seq": pa.array([[k, k] for k in range(N)], pa.list_(pa.int32(), 2)),
        "lit": [1 + k % 2 for k in range(N)],
        "money": pa.array([decimal.Decimal(k) for k in range(N)], pa.decimal128(5, 0)),
    })),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_strict_gives_pydantic_verdict(tmp_path: Path, case: str) -> None:
    """Strict pydantic takes no list for a tuple or a set and no value for an enum; rows come
    from Arrow as lists and values, so such a column fails ``type`` (it passed, unchecked)."""
    model, table = CASES[case]
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, model, examples=N)
    assert _refused_by_report(report, table) == refused_by_pydantic(model, table)
    tasks = report_for(tmp_path, model, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


def test_strict_refusals_say_why(tmp_path: Path) -> None:
    pq.write_table(CASES["strict-enum"][1], tmp_path / "a.parquet")
    [typed] = [c for c in report_for(tmp_path, _StrictEnum).failed if c.check == "type"]
    assert "strict mode takes only members of _Kind" in typed.examples[0].value


class _Ascii(BaseModel):
    a: Annotated[str, StringConstraints(ascii_only=True)] | None
    s: constr(ascii_only=True, strip_whitespace=True, min_length=2)  # type: ignore[valid-type]
    lower: Annotated[str, StringConstraints(ascii_only=True, to_lower=True)]


#: ASCII, Latin-1, emoji, a Unicode space that stripping removes, Kelvin sign (lowercase 'k').
TEXTS = ["ab", "caf\u00e9", "", "\U0001f986", "\u00a0ab", " ab\u3000", "a\x7f", "\u212a", "\x00x",
         "ab\u200b", "  a ", "\u0130"]


def test_ascii_only_gives_pydantic_verdict(tmp_path: Path) -> None:
    """ascii_only was not translated: every string passed. pydantic checks the stripped
    string (when it strips) before lowering it."""
    table = pa.table({"a": [*TEXTS[:-1], None], "s": TEXTS, "lower": TEXTS[::-1]})
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, _Ascii, examples=len(TEXTS))
    expected = refused_by_pydantic(_Ascii, table)
    assert expected and _refused_by_report(report, table) == expected
    assert {c.column for c in report.failed if c.check == "ascii"} == {"a", "s", "lower"}
    tasks = report_for(tmp_path, _Ascii, examples=len(TEXTS), executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


class _OneChoice(BaseModel):
    x: int = Field(validation_alias=AliasChoices("a"), ge=0)
    y: int = Field(validation_alias=AliasPath("b"), lt=3)
    z: int = Field(validation_alias=AliasChoices("c", AliasPath("c")), le=4)


class _ByName(BaseModel):
    model_config = ConfigDict(validate_by_alias=False, validate_by_name=True)
    x: int = Field(alias="a", ge=0)


class _Point(BaseModel):
    model_config = ConfigDict(validate_by_alias=False, validate_by_name=True)
    x: int = Field(alias="X", ge=0)


class _Nested(BaseModel):
    p: _Point


def test_aliases_naming_one_column_read_it(tmp_path: Path) -> None:
    """An AliasChoices or AliasPath of one column is that column (it read the field's name),
    and validate_by_alias=False reads the name (it read the alias), in nested models too."""
    cases: list[tuple[type[BaseModel], pa.Table]] = [
        (_OneChoice, pa.table({"a": [k - 2 for k in range(N)], "b": list(range(N)),
                               "c": list(range(N))})),
        (_ByName, pa.table({"x": [k - 3 for k in range(N)]})),
        (_Nested, pa.table({"p": [{"x": k - 1} for k in range(N)]})),
    ]
    for k, (model, table) in enumerate(cases):
        (tmp_path / str(k)).mkdir()
        pq.write_table(table, tmp_path / str(k) / "a.parquet")
        report = report_for(tmp_path / str(k), model, examples=N)
        expected = refused_by_pydantic(model, table)
        assert expected and _refused_by_report(report, table) == expected, model


class _Choices(BaseModel):
    x: int = Field(validation_alias=AliasChoices("a", "b"))


class _Inside(BaseModel):
    x: int = Field(validation_alias=AliasPath("a", 0))


class _Holder(BaseModel):
    p: _Choices


@pytest.mark.parametrize(
    ("model", "what"),
    [(_Choices, "the first of several columns"), (_Inside, "a value inside a column"),
     (_Holder, "the first of several columns")],
)
def test_aliases_naming_several_columns_are_refused(
    tmp_path: Path, model: type[BaseModel], what: str
) -> None:
    """pydantic reads the first of the columns a row holds (or a value inside one); the checks
    read one column per field, so the schema is refused instead of checking another column."""
    pq.write_table(pa.table({"a": [[1]], "b": [2], "x": [3], "p": [{"a": 1, "b": 2}]}),
                   tmp_path / "a.parquet")
    with pytest.raises(ArgumentError, match=rf"field 'x' has validation_alias=.*{what}"):
        report_for(tmp_path, model)
    ds = ParquetDataset(tmp_path)
    with pytest.raises(ArgumentError, match="validation_alias='column'"):
        ds.validate(model)
    ds.close()


class _Compiled(BaseModel):
    s: str = Field(pattern=re.compile(r"^fn-\d$"))


class _PythonEngine(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    s: str | None = Field(pattern=r"^fn-\d$")


class _PythonEngineInside(BaseModel):
    p: _PythonEngine


@pytest.mark.parametrize(
    ("model", "why"),
    [(_Compiled, "a compiled re.Pattern"), (_PythonEngine, "regex_engine='python-re'"),
     (_PythonEngineInside, "regex_engine='python-re'")],
)
def test_patterns_matched_by_python_re_are_refused(
    tmp_path: Path, model: type[BaseModel], why: str
) -> None:
    """A compiled pattern was skipped (every row passed; pydantic refuses 'x'), and under
    python-re "fn-2\\n" failed although Python's `$` matches before a final newline."""
    pq.write_table(pa.table({"s": ["fn-1", "x", "fn-2\n"], "p": [{"s": "fn-1"}] * 3}),
                   tmp_path / "a.parquet")
    with pytest.raises(ArgumentError, match=rf"field 's' has pattern .*\({why}"):
        report_for(tmp_path, model)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: int | None = Field(default=None, alias="B")


class _ClosedPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int


class _OpenHolder(BaseModel):
    p: _ClosedPoint


def test_extra_forbid_fails_rows_with_columns_the_schema_does_not_name(tmp_path: Path) -> None:
    """extra='forbid': pydantic refuses a row holding a key the model does not name, and a
    row holds every column of its shard; those rows passed. Nested: a struct's extra field."""
    shards = {
        "0": pa.table({"a": [1, 2], "B": [3, None]}),
        "1": pa.table({"a": [1, 2, 3], "B": [None] * 3, "c": ["x", "y", "z"]}),
        "2": pa.table({"B": [4], "a": [4]}),
    }
    for name, table in shards.items():
        pq.write_table(table, tmp_path / f"{name}.parquet")
    expected = {i for i, row in enumerate(r for t in shards.values() for r in t.to_pylist())
                if not _accepts(_Closed, row)}
    assert expected == {2, 3, 4}
    report = report_for(tmp_path, _Closed)
    [extra] = [c for c in report.failed if c.check != "shard_schema"]  # shard 1 drifts too
    assert (extra.check, extra.violations) == ("extra", len(expected))
    assert extra.per_shard == {str(tmp_path / "1.parquet"): 3}
    assert [e.value for e in extra.examples] == ["columns the schema forbids: c"]
    tasks = report_for(tmp_path, _Closed, executor=SerialExecutor(shards_per_task=1))
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})

    nested = tmp_path / "nested"
    nested.mkdir()
    table = pa.table({"p": [{"x": 1, "y": 2}, {"x": 3, "y": None}]})
    pq.write_table(table, nested / "a.parquet")
    assert _refused_by_report(report_for(nested, _OpenHolder), table) == refused_by_pydantic(
        _OpenHolder, table) == {0, 1}


def _accepts(model: type[BaseModel], row: dict[str, object]) -> bool:
    try:
        model.model_validate(row)
    except ValidationError:
        return False
    return True


class _Pair(BaseModel):
    t: tuple[int, int] | None
    u: tuple[int, int, int] = Field(max_length=5)


class _Mixed(BaseModel):
    t: tuple[int, str] | None


class _Holes(BaseModel):
    t: tuple[int, int | None, int] | None


def test_fixed_length_tuples_give_pydantic_verdict(tmp_path: Path) -> None:
    """tuple[int, int] takes only two items, tuple[int, str] no list of ints and
    tuple[int, int | None, int] no NULL first or last; all passed (only the first item's type
    was checked, never the length or the items of differing types)."""
    lists = [[1], [1, 2], [1, 2, 3], [], None, [4, 5]]
    cases: list[tuple[type[BaseModel], pa.Table]] = [
        (_Pair, pa.table({"t": lists, "u": [[1, 2, 3], [1], [1, 2, 3], [1, 2, 3, 4], [], [0] * 3]
                          })),
        (_Mixed, pa.table({"t": lists})),
        (_Holes, pa.table({"t": [[None, 1, 2], [1, None, 2], [1, 2, None], [1, 2, 3], None,
                                 [None, None, None], [1, None]]})),
    ]
    for k, (model, table) in enumerate(cases):
        (tmp_path / str(k)).mkdir()
        pq.write_table(table, tmp_path / str(k) / "a.parquet")
        report = report_for(tmp_path / str(k), model, examples=N)
        expected = refused_by_pydantic(model, table)
        assert expected and _refused_by_report(report, table) == expected, model
