"""JSON values: integers (HUGEINT sums included) are JSON numbers wherever we write JSON."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import io
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from support import datagen

from undertale_duck import ParquetDataset
from undertale_duck.cli import main
from undertale_duck.common.jsonvalue import INT_MIN, UINT_MAX, jsonable
from undertale_duck.validation.render import render

SIZES = [40, 23, 37]
TOTAL = sum(SIZES)
LABEL_SUM = sum(i % 7 for i in range(TOTAL))
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
DIGITS = re.compile(r"-?\d+")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("jsonvalue") / "data"
    datagen.write_shards(root, SIZES, row_group_size=16)
    return root


def strict_load(text: str) -> Any:
    """Parse JSON as a strict reader with 64-bit integers does: a wider integer, or NaN and
    infinities (which are not JSON), is an error."""

    def integer(token: str) -> int:
        value = int(token)
        if not INT64_MIN <= value <= UINT_MAX:
            raise ValueError(f"integer {token} does not fit 64 bits")
        return value

    def constant(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_int=integer, parse_constant=constant)


def strings(value: Any) -> list[str]:
    """Every string in a parsed JSON value (keys excluded)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def no_int64_as_string(value: Any) -> None:
    """No string in the value is an integer that fits 64 bits (it should have been a number)."""
    for text in strings(value):
        if DIGITS.fullmatch(text):
            assert not INT_MIN <= int(text) <= UINT_MAX, f"{text!r} written as a string"


def run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    assert status == 0, err.getvalue()
    return out.getvalue()


# ---------------------------------------------------------------------- the conversion itself
@given(st.integers(min_value=-(1 << 130), max_value=1 << 130))
def test_integers_are_numbers_within_64_bits(value: int) -> None:
    for given_as in (value, decimal.Decimal(value)):
        parsed = json.loads(json.dumps(jsonable(given_as)))
        if INT_MIN <= value <= UINT_MAX:
            assert type(parsed) is int and parsed == value
        else:
            assert parsed == str(value)  # exact, as a decimal string


def test_the_edges() -> None:
    assert INT_MIN == INT64_MIN and UINT_MAX == (1 << 64) - 1
    assert jsonable(INT64_MIN) == INT64_MIN and jsonable(INT64_MIN - 1) == str(INT64_MIN - 1)
    assert jsonable(UINT_MAX) == UINT_MAX and jsonable(UINT_MAX + 1) == str(UINT_MAX + 1)
    assert jsonable(decimal.Decimal("48163")) == 48163
    assert jsonable(decimal.Decimal("1E+3")) == 1000
    assert jsonable(decimal.Decimal("12.50")) == "12.50"  # a decimal with a scale stays exact
    assert jsonable(decimal.Decimal("5.00")) == "5.00"
    assert jsonable(decimal.Decimal("NaN")) == "NaN"
    assert jsonable(np.int64(-3)) == -3 and type(jsonable(np.uint64(7))) is int
    assert jsonable(True) is True and jsonable(None) is None
    assert jsonable([decimal.Decimal(2), {"k": decimal.Decimal(-4)}]) == [2, {"k": -4}]
    assert jsonable(uuid.UUID(int=5)) == str(uuid.UUID(int=5))
    assert jsonable(dt.date(2024, 1, 2)) == "2024-01-02"


# ---------------------------------------------------------------------- sql --format json/jsonl
QUERY = """
SELECT sum(label) AS total, count(*) AS n, max(label)::HUGEINT AS h, sum(label)::UHUGEINT AS u,
       sum(label::DECIMAL(18, 0)) AS d0, 9223372036854775807::BIGINT AS big,
       (-9223372036854775808)::BIGINT AS small, 18446744073709551615::UBIGINT AS ubig,
       (-170141183460469231731687303715884105727)::HUGEINT AS beyond, 12.50::DECIMAL(10, 2) AS d,
       3::TINYINT AS t, [sum(label), 1::HUGEINT] AS l, {'s': sum(label)} AS st
FROM dataset
"""


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_sql_sum_is_a_number(data: Path, fmt: str) -> None:
    text = run("sql", str(data), QUERY, "-f", fmt)
    parsed = strict_load(text) if fmt == "json" else [strict_load(x) for x in text.splitlines()]
    assert len(parsed) == 1
    row = parsed[0]
    assert row == {
        "total": LABEL_SUM, "n": TOTAL, "h": 6, "u": LABEL_SUM, "d0": LABEL_SUM,
        "big": INT64_MAX, "small": INT64_MIN, "ubig": UINT_MAX,
        "beyond": "-170141183460469231731687303715884105727", "d": "12.50", "t": 3,
        "l": [LABEL_SUM, 1], "st": {"s": LABEL_SUM},
    }
    assert type(row["total"]) is int
    no_int64_as_string({k: v for k, v in row.items() if k != "beyond"})


def test_sql_sum_end_to_end(data: Path) -> None:
    # as the issue saw it: a user's shell, python -m undertale_duck
    result = subprocess.run(
        [sys.executable, "-m", "undertale_duck", "sql", str(data),
         "SELECT label, sum(label) AS s FROM dataset GROUP BY label ORDER BY label", "-f", "json"],
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )
    assert result.returncode == 0, result.stderr
    rows = strict_load(result.stdout)
    assert [r["s"] for r in rows] == [
        sum(i % 7 for i in range(TOTAL) if i % 7 == k) for k in range(7)
    ]
    assert all(type(r["s"]) is int for r in rows)


# ---------------------------------------------------------------------- describe, reports
def test_describe_json_has_numbers(data: Path) -> None:
    for extra in ([], ["--scan"]):
        described = strict_load(run("describe", str(data), "-f", "json", *extra))
        no_int64_as_string(described)
        label = next(c for c in described["columns"] if c["name"] == "label")
        assert (label["min"], label["max"]) == (0, 6)


class Small(BaseModel):
    id: str
    label: int = Field(le=3)


def test_validation_report_json_has_numbers(data: Path) -> None:
    report = ParquetDataset(data).report(Small)
    assert not report.passed
    parsed = strict_load(render(report, "json"))
    no_int64_as_string(parsed)
    failed = next(c for c in parsed["checks"] if c["check"] == "range")
    assert type(failed["violations"]) is int
    assert failed["examples"] and all(type(e["value"]) is int for e in failed["examples"])


# ----------------------------------------------------------------- durations and intervals
def test_intervals_and_durations_are_the_same_iso_8601_text(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "durations"
    root.mkdir()
    spans = [dt.timedelta(seconds=1), dt.timedelta(days=1), dt.timedelta(seconds=-1.5)]
    pq.write_table(pa.table({"span": pa.array(spans, pa.duration("us"))}),
                   root / "part-0.parquet")
    # a Parquet duration through head, as ParquetDataset returns it
    assert run("head", str(root), "-f", "csv").splitlines() == [
        "span", "P0DT1S", "P1DT0S", "-P0DT1.5S"]
    # DuckDB's INTERVAL through sql: the same text for the same span, in every text format
    query = ("SELECT INTERVAL 1 SECOND AS s, INTERVAL 1 DAY AS d, INTERVAL '-1.5 seconds' AS n,"
             " INTERVAL '14 months 3 days' AS m, INTERVAL '1 month -2 days' AS mixed")
    expected = {"s": "P0DT1S", "d": "P1DT0S", "n": "-P0DT1.5S", "m": "P14M3DT0S",
                "mixed": "P1M-2DT0S"}
    assert json.loads(run("sql", str(root), query, "-f", "json")) == [expected]
    assert json.loads(run("sql", str(root), query, "-f", "jsonl")) == expected
    assert run("sql", str(root), query, "-f", "csv").splitlines() == [
        ",".join(expected), ",".join(expected.values())]
    assert jsonable(pa.MonthDayNano([0, 0, 1])) == "P0DT0.000000001S"  # nanoseconds kept
