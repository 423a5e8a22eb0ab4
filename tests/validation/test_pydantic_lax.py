"""Lax pydantic takes some values of other column types (an integral float for an int, 0 or 1
for a bool): each row gets pydantic's verdict, not the whole column."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    NaiveDatetime,
    Strict,
    StringConstraints,
    create_model,
)
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


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class _Mode(enum.Enum):
    OFF = 0
    ON = 1
    NONE = None


class _Word(enum.StrEnum):
    A = "a"
    B = "b"


class _Choices(BaseModel):
    lit: Literal[1, 2]
    opt: Literal[0, True, "x"] | None
    level: _Level
    mode: _Mode
    big: Literal[2**53 + 1, 2**64, -3]
    dec: Literal[1, 2] | None
    flag: Literal[1, 2]
    num: Literal[True]
    lits: list[Literal[1, 2]]
    word: Literal["a", "b"]
    words: _Word


class _StrictChoices(_Choices):
    model_config = ConfigDict(strict=True)


#: Numbers an int Literal takes (equal to an allowed int as Python compares them) or refuses.
NUMBERS = [1.0, 1.5, 2.0, -0.0, 0.0, math.nan, math.inf, None, -3.0, 2.0**53, 2.0**64, 3.0,
           -math.inf, 1e300, 0.5, 2.0**53 + 2]


def _choices_table(n: int) -> pa.Table:
    floats = [NUMBERS[k % len(NUMBERS)] for k in range(n)]
    return pa.table({
        "lit": floats,
        "opt": pa.array(floats, pa.float32()),
        "level": floats,
        "mode": floats,
        "big": floats,
        "dec": pa.array([None if k % 7 == 0 else decimal.Decimal(k % 9) / 4 for k in range(n)],
                        pa.decimal128(6, 2)),
        "flag": [k % 3 == 0 for k in range(n)],
        "num": pa.array([k % 4 - 1 for k in range(n)], pa.int16()),
        "lits": [[v, 1.0] if k % 5 else [] for k, v in enumerate(floats)],
        "word": [["a", "b", "A", "c", " a"][k % 5] for k in range(n)],
        "words": [["a", "b", "A", "c", " a"][k % 5] for k in range(n)],
    })


@pytest.mark.parametrize(
    ("model", "name"),
    [(m, n) for m in (_Choices, _StrictChoices) for n in _Choices.model_fields],
)
def test_int_literals_and_enums_over_other_numbers_give_pydantic_verdict_per_row(
    tmp_path: Path, model: type[BaseModel], name: str
) -> None:
    """Lax pydantic takes 1.0, Decimal("1.00") and True for the 1 of Literal[1, 2] or an
    IntEnum (and 1 for True): a float, DECIMAL or BOOLEAN column under an int Literal or Enum
    failed `type` on every row; strict stays as it was (every non-NULL row fails `type`)."""
    one = _one_field(model, name)
    table = _choices_table(N).select([name])
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, one, examples=N)
    if model is _StrictChoices:
        if name in ("word", "words"):
            return  # text under a text Literal: strict as lax (an Enum refuses text)
        typed = [c for c in report.failed if c.check == "type"]
        assert typed and all(e.index is None for e in typed[0].examples)
        return
    expected = refused_by_pydantic(one, table)
    assert expected and len(expected) < N
    assert refused_by_report(report, table) == expected
    tasks = report_for(tmp_path, one, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


#: Octets a str field takes (UTF-8, decoded) or refuses; DuckDB's decode refuses the same.
OCTETS = [b"abc", b"\xc3\xa9t\xc3\xa9", b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"", None,
          b"\xf4\x90\x80\x80", b"a\x00b", b"\xf0\x9f\x98\x80x", b"\xc3", b" ab ", b"abcdef"]
TEXTS = ["abc", "été", "", None, "\U0001f600", "ab", "é", "abcd", " é "]


class _Texts(BaseModel):
    s: str
    short: Annotated[str, StringConstraints(max_length=3, strip_whitespace=True)] | None
    ascii: Annotated[str, StringConstraints(pattern=r"^\w+$", ascii_only=True)] | None
    items: list[Annotated[str, Field(min_length=2)]]
    b: bytes | None
    octets: Annotated[bytes, Field(max_length=3)] | None
    chunks: list[Annotated[bytes, Field(min_length=2)]]
    word: _Word | None  # a str Enum decodes bytes; a Literal["a", "b"] refuses them


class _StrictTexts(_Texts):
    model_config = ConfigDict(strict=True)


def _texts_table(n: int) -> pa.Table:
    octets = [OCTETS[k % len(OCTETS)] for k in range(n)]
    texts = [TEXTS[k % len(TEXTS)] for k in range(n)]
    return pa.table({
        "s": pa.array(octets, pa.binary()),
        "short": pa.array(octets, pa.binary()),
        "ascii": pa.array(octets, pa.binary()),
        "items": pa.array([[v, b"xy"] if k % 4 else [] for k, v in enumerate(octets)],
                          pa.list_(pa.binary())),
        "b": texts,
        "octets": texts,
        "chunks": [[v, "xy"] if k % 4 else [] for k, v in enumerate(texts)],
        "word": pa.array([[b"a", b"b", b"A", b"\xff", None, b"c"][k % 6] for k in range(n)]),
    })


@pytest.mark.parametrize(
    ("model", "name"), [(m, n) for m in (_Texts, _StrictTexts) for n in _Texts.model_fields]
)
def test_bytes_under_str_and_text_under_bytes_give_pydantic_verdict_per_row(
    tmp_path: Path, model: type[BaseModel], name: str
) -> None:
    """Lax pydantic decodes UTF-8 bytes for a str (its length in characters) and encodes a str
    for bytes (its length in octets): both failed `type` on every row; strict refuses them."""
    one = _one_field(model, name)
    table = _texts_table(N).select([name])
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, one, examples=N)
    if model is _StrictTexts:  # as it was: the whole column (strict takes an empty list)
        typed = [c for c in report.failed if c.check == "type"]
        assert typed and all(e.index is None for e in typed[0].examples)
        return
    expected = refused_by_pydantic(one, table)
    assert len(expected) < N and (expected or name == "b")  # `b` takes every str
    assert refused_by_report(report, table) == expected
    tasks = report_for(tmp_path, one, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


class _Point(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int = Field(ge=0)


class _Points(BaseModel):
    points: list[_Point] | None
    maybe: list[_Point | None]
    point: _Point | None
    fine: list[_Point]


class _StrictPoints(_Points):
    model_config = ConfigDict(strict=True)


def _points_table(n: int) -> pa.Table:
    def point(k: int) -> dict[str, int]:
        return {"x": k % 5 - 1, "y": k}

    return pa.table({
        "points": [None if k % 6 == 0 else [point(k)] * (k % 3) for k in range(n)],
        "maybe": [[None] * (k % 2) + [point(k)] * (k % 4 == 3) for k in range(n)],
        "point": [None if k % 3 == 0 else point(k) for k in range(n)],
        "fine": [[{"x": k % 5 - 1}] * (k % 3) for k in range(n)],
    })


@pytest.mark.parametrize(
    ("model", "name"), [(m, n) for m in (_Points, _StrictPoints) for n in _Points.model_fields]
)
def test_structs_with_a_field_a_forbidding_model_lacks_fail_the_rows_that_hold_one(
    tmp_path: Path, model: type[BaseModel], name: str
) -> None:
    """A list of structs holding a field a nested model with extra="forbid" does not name
    failed `type` on every row; pydantic refuses only the rows holding such a struct (an empty
    list, a NULL list or NULL items hold none). Strict keeps the whole-column failure."""
    one = _one_field(model, name)
    table = _points_table(N).select([name])
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, one, examples=N)
    expected = refused_by_pydantic(one, table)
    assert expected and len(expected) < N
    if model is _StrictPoints and name != "fine":  # as it was: the whole column
        typed = [c for c in report.failed if c.check == "type"]
        assert typed and all(e.index is None for e in typed[0].examples)
        return
    assert refused_by_report(report, table) == expected
    tasks = report_for(tmp_path, one, examples=N, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


class _LevelText(BaseModel):
    level: _Level


def test_text_under_an_int_enum_says_it_cannot_give_pydantics_verdict(tmp_path: Path) -> None:
    table = pa.table({"level": ["1", " 2", "1.0", "x"]})
    pq.write_table(table, tmp_path / "a.parquet")
    assert refused_by_pydantic(_LevelText, table) == {3}  # parsed as int rules say
    [typed] = [c for c in report_for(tmp_path, _LevelText).failed if c.check == "type"]
    assert "lax pydantic parses text as an int for _Level" in typed.examples[0].value


#: Ints around the edges of lax pydantic's Unix times: seconds up to 2e10 in magnitude,
#: milliseconds beyond, the years 1 to 9999, midnights (whole days) for a date.
_LO, _HI, _SECONDS = -62_135_596_800_000, 253_402_300_799_999, 20_000_000_000
UNIX_TIMES = [
    0, 1, -1, 86_400, -86_400, 86_401, _SECONDS, _SECONDS + 1, -_SECONDS, -_SECONDS - 1,
    _SECONDS - _SECONDS % 86_400, -(_SECONDS - _SECONDS % 86_400), 86_400_000 * 231_482,
    -86_400_000 * 231_482, _LO, _LO - 1, _LO + 86_400_000, _HI, _HI + 1, _HI - 86_399_999,
    2**63 - 1, -(2**63), 1_700_000_000, 1_700_000_000_000, 1_700_006_400_000, 172_800,
    -172_800_000_000, 100, 99_999, 1_000_000_000_000_000,
]
_ZONE = dt.timezone(dt.timedelta(hours=2))


class _Unix(BaseModel):
    when: dt.datetime
    after: dt.datetime = Field(ge=dt.datetime(1970, 1, 2))  # naive: UTC wall-clock time
    before: dt.datetime = Field(lt=dt.datetime(2023, 11, 15, 1, tzinfo=_ZONE))
    aware: AwareDatetime = Field(le=dt.datetime(2286, 1, 1))
    naive: NaiveDatetime  # refuses every int: its datetime is in UTC
    day: dt.date
    later: dt.date = Field(gt=dt.date(1970, 1, 2))
    many: list[Annotated[dt.datetime, Field(gt=dt.datetime(1970, 1, 1, 0, 0, 1))]]


class _StrictUnix(_Unix):
    model_config = ConfigDict(strict=True)


_INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(),
              pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def _fits(value: int, typ: pa.DataType) -> bool:
    bits = typ.bit_width
    if pa.types.is_unsigned_integer(typ):
        return 0 <= value < 2**bits
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


@pytest.mark.parametrize("typ", _INT_TYPES, ids=str)
@pytest.mark.parametrize("model", [_Unix, _StrictUnix])
def test_ints_under_datetimes_and_dates_give_pydantic_verdict_per_row(
    tmp_path: Path, typ: pa.DataType, model: type[BaseModel]
) -> None:
    """Lax pydantic takes an int as a Unix time for a datetime (and a midnight for a date):
    every row failed `type`, and its bounds were not compared with that datetime."""
    values = [v for v in UNIX_TIMES if _fits(v, typ)]
    values += [v % (2 ** (typ.bit_width - 1)) for v in (37, 86_400, 1_700_000_000)]
    column = pa.array(values, typ)
    table = pa.table({name: column for name in model.model_fields if name != "many"})
    table = table.append_column("many", pa.array([[v] for v in values], pa.list_(typ)))
    pq.write_table(table, tmp_path / "a.parquet")
    for name in model.model_fields:
        one = _one_field(model, name)
        report = report_for(tmp_path, one, examples=len(values))
        expected = refused_by_pydantic(one, table.select([name]))
        assert refused_by_report(report, table) == expected, name
        if model is _StrictUnix or name == "naive":
            assert expected == set(range(len(values)))  # an int is never one
    lax = refused_by_pydantic(_one_field(_Unix, "when"), table.select(["when"]))
    assert len(lax) < len(values)  # some rows pass: the verdict is per row


@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.sampled_from(UNIX_TIMES)
                | st.integers(-3 * _SECONDS, 3 * _SECONDS).map(lambda d: d * 86_400)
                | st.integers(-(10**6), 3 * 10**6).map(lambda d: d * 86_400_000),
                min_size=1, max_size=24))
@settings(max_examples=25, deadline=None)
def test_any_int64s_under_datetimes_and_dates_get_pydantics_verdict(values: list[int]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        column = pa.array(values, pa.int64())
        table = pa.table({"after": column, "later": column, "before": column})
        pq.write_table(table, root / "a.parquet")
        for name in ("after", "later", "before"):
            one = _one_field(_Unix, name)
            report = report_for(root, one, examples=len(values))
            assert refused_by_report(report, table) == refused_by_pydantic(
                one, table.select([name])), name
