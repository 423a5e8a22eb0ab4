"""Validation of views: the schema describes the view's rows; examples carry view indices."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from support import datagen

from undertale_duck import ParquetDataset, SchemaError, ValidationReport, load, schema
from undertale_duck.core.runtime import sqlfiles
from undertale_duck.validation.render import REPORT_FORMATS, render

SIZES = [120, 0, 57, 1, 200, 43]
GROUPS = [32, 1, 10, 1, 64, 7]
STARTS = [sum(SIZES[:k]) for k in range(len(SIZES))]
LAST = STARTS[-1]  # global index of the last shard's first row

#: A view keeping 6 rows out of 7, with computed columns (``g`` is the source global index).
QUERY = (
    "SELECT id, CAST(substr(id, 5) AS BIGINT) AS g, len(tokens) AS n, label "
    "FROM dataset WHERE label <> 3"
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(cache))
    return cache


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=GROUPS)
    return root


def _rows(ds: ParquetDataset) -> list[dict[str, Any]]:
    return [ds[i] for i in range(len(ds))]


def _check(report: ValidationReport, kind: str, column: str | None) -> Any:
    found = [c for c in report.checks if c.check == kind and c.column == column]
    assert len(found) == 1, [(c.check, c.column) for c in report.checks]
    return found[0]


def _assert_examples_name_view_rows(ds: ParquetDataset, check: Any, column: str) -> None:
    """Every example's index is the offending view row, and locate() gives its shard and row."""
    assert check.examples
    for e in check.examples:
        assert e.index is not None and 0 <= e.index < len(ds)
        assert ds.locate(e.index) == (e.shard, e.row)
        assert ds[e.index][column] == e.value


def test_computed_column_violation_in_last_shard(data: Path) -> None:
    class S(BaseModel):
        id: str
        g: int = Field(lt=LAST)
        n: int = Field(ge=0)

    ds = ParquetDataset(data, query=QUERY)
    report = ds.report(S)
    assert not report.passed
    assert report.query is not None and "substr" in report.query
    assert report.rows == len(ds)
    bad = [i for i, r in enumerate(_rows(ds)) if r["g"] >= LAST]
    last = ds.shards[-1]
    check = _check(report, "range", "g")
    assert check.violations == len(bad) == sum(1 for i in range(LAST, sum(SIZES)) if i % 7 != 3)
    assert check.per_shard == {last: len(bad)}
    assert [e.index for e in check.examples] == bad[:5]
    _assert_examples_name_view_rows(ds, check, "g")
    for e in check.examples:
        assert e.row == e.value - LAST  # the local source row, not the view's
    assert [c.check for c in report.failed] == ["range"]
    # shard summaries count the view's rows in each shard
    kept = Counter(ds.locate(i)[0] for i in range(len(ds)))
    assert [s.rows for s in report.shard_summaries] == [kept.get(p, 0) for p in ds.shards]
    assert [s.violations for s in report.shard_summaries] == [0] * 5 + [len(bad)]
    with pytest.raises(SchemaError, match=r"range\(g\): \d+ rows"):
        ds.validate(S)


def test_passing_view_and_types_from_the_view(data: Path) -> None:
    class Good(BaseModel):
        id: str = Field(pattern=r"^row-\d{8}$")
        g: int = Field(ge=0, lt=sum(SIZES))
        n: int = Field(ge=0, le=4)
        label: Literal[0, 1, 2, 4, 5, 6]

    ds = ParquetDataset(data, query=QUERY)
    report = ds.report(Good)
    assert report.passed, report.summary()
    ds.validate(Good)
    # the same schema on the plain dataset fails: g and n do not exist, label holds 3
    plain = ParquetDataset(data).report(Good)
    assert {(c.check, c.column) for c in plain.failed} >= {
        ("present", "g"), ("present", "n"), ("literal", "label")
    }

    class Wrong(BaseModel):
        n: str  # len() gives an integer in the view

    typed = ParquetDataset(data, query=QUERY).report(Wrong)
    check = _check(typed, "type", "n")
    assert not check.passed and check.violations == len(ds)
    assert "BIGINT" in check.examples[0].value


def test_side_table_column_is_checked(data: Path) -> None:
    names = pa.table({"label": list(range(7)), "name": ["add", "mul", "div", "sub", "x", "y", "Z"]})

    class S(BaseModel):
        id: str
        name: str = Field(pattern=r"^[a-z]+$")

    query = (
        "SELECT d.id, n.name FROM dataset d JOIN names n ON d.label = n.label "
        "WHERE d.label % 2 = 0"
    )
    ds = ParquetDataset(data, query=query, tables={"names": names})
    report = ds.report(S)
    rows = _rows(ds)
    bad = [i for i, r in enumerate(rows) if r["name"] == "Z"]
    check = _check(report, "pattern", "name")
    assert check.violations == len(bad) > 5
    # a join does not keep scan order: the first offending rows are still found, in order
    assert [e.index for e in check.examples] == bad[:5]
    _assert_examples_name_view_rows(ds, check, "name")
    assert sum(check.per_shard.values()) == len(bad)
    assert report.rows == len(ds) == len(rows)


def test_null_checks_scan_computed_columns(data: Path) -> None:
    """Footer statistics say nothing about computed columns: null checks scan the view."""

    class S(BaseModel):
        x: int
        label: int

    query = "SELECT CASE WHEN label = 5 THEN NULL ELSE label END AS x, label FROM dataset"
    ds = ParquetDataset(data, query=query)
    report = ds.report(S)
    x = _check(report, "not_null", "x")
    assert x.violations == sum(1 for i in range(sum(SIZES)) if i % 7 == 5)
    assert "parquet_metadata" not in x.sql and "parquet_metadata" not in report.model_dump_json()
    _assert_examples_name_view_rows(ds, x, "x")
    assert _check(report, "not_null", "label").passed


def test_unique_over_a_view(data: Path) -> None:
    class S(BaseModel):
        k: Annotated[int, schema.Unique]
        id: Annotated[str, schema.Unique]

    query = "SELECT id, CAST(substr(id, 5) AS BIGINT) % 100 AS k FROM dataset WHERE label <> 0"
    ds = ParquetDataset(data, query=query)
    report = ds.report(S)
    rows = _rows(ds)
    counts = Counter(r["k"] for r in rows)
    duplicated = [i for i, r in enumerate(rows) if counts[r["k"]] > 1]
    check = _check(report, "unique", "k")
    assert check.violations == len(duplicated)
    per_shard = Counter(ds.locate(i)[0] for i in duplicated)
    assert check.per_shard == dict(per_shard)
    # grouped by value (smallest first), each value's rows in view order
    first = sorted(duplicated, key=lambda i: (rows[i]["k"], i))[:5]
    assert [e.index for e in check.examples] == first
    _assert_examples_name_view_rows(ds, check, "k")
    assert _check(report, "unique", "id").passed


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ("meta", "br"):
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack.pop() == tag


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_view_report_in_every_format(data: Path, fmt: str) -> None:
    class S(BaseModel):
        g: int = Field(lt=LAST)

    ds = ParquetDataset(data, query=QUERY + " AND id <> 'a|b<c>'")
    report = ds.report(S)
    text = render(report, fmt)
    first = _check(report, "range", "g").examples[0]
    assert first.index is not None and first.index != LAST + first.row  # a view index
    if fmt == "json":
        assert ValidationReport.model_validate_json(text) == report
        assert json.loads(text)["query"] == report.query
        return
    heading = {"text": "\nview:   SELECT", "markdown": "\n- view: SELECT", "html": "<dt>view</dt>"}
    assert heading[fmt] in text and "substr" in text
    assert re.search(rf"\b{first.index}\b", text)
    if fmt == "html":
        parser = _Parser()
        parser.feed(text)
        assert parser.stack == []
        assert "a|b&lt;c&gt;" in text
    if fmt == "markdown":
        assert "a\\|b&lt;c>" in text


def test_plain_report_has_no_query(data: Path) -> None:
    class S(BaseModel):
        label: int

    report = ParquetDataset(data).report(S)
    assert report.passed and report.query is None
    for fmt in REPORT_FORMATS:
        text = render(report, fmt)
        assert "view:" not in text and "<dt>view" not in text


def test_load_validates_the_view(data: Path) -> None:
    class S(BaseModel):
        n: int = Field(ge=1)

    view = ParquetDataset(data, query=QUERY)
    with pytest.raises(SchemaError, match=r"range\(n\)"):
        load(view, S, None, 8)
    kept = ParquetDataset(data, query=QUERY + " AND len(tokens) >= 1")
    loader = load(kept, S, None, 8)
    assert sum(len(b) for b in loader) == len(kept)


def test_view_with_a_newline_in_a_literal(data: Path) -> None:
    """A view's SQL is never substituted inside an SQL comment (where a newline escapes)."""

    class S(BaseModel):
        id: str = Field(pattern="^row-")

    ds = ParquetDataset(data, where="id <> 'a\n-- b\nc' AND label <> 3")
    assert len(ds) == sum(1 for i in range(sum(SIZES)) if i % 7 != 3)
    assert ds[0]["id"] == "row-00000000"
    assert ds.report(S).passed


def test_no_placeholder_inside_an_sql_comment() -> None:
    for directory in sqlfiles.SQL_DIRS:
        for path in directory.rglob("*.sql"):
            for line in path.read_text(encoding="utf-8").splitlines():
                comment = line.partition("--")[2]
                assert not re.search(r"\{\w+\}", comment), (path, line)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    modulus=st.integers(1, 9),
    keep=st.integers(0, 8),
    bound=st.integers(0, sum(SIZES)),
    limit=st.integers(1, 7),
)
def test_counts_and_examples_match_the_rows(
    data: Path, modulus: int, keep: int, bound: int, limit: int
) -> None:
    """For any filter and bound: the count is the offending rows; examples are the first."""
    from undertale_duck.validation import runner
    from undertale_duck.validation.relation import view_rows

    class S(BaseModel):
        g: int = Field(lt=bound)

    query = (
        "SELECT CAST(substr(id, 5) AS BIGINT) AS g FROM dataset "
        f"WHERE CAST(substr(id, 5) AS BIGINT) % {modulus} <> {keep}"
    )
    ds = ParquetDataset(data, query=query)
    assert ds.view is not None
    report = runner.run(
        S,
        ds.source.shards,
        ds.reader.connection.cursor(),
        examples=limit,
        relation=view_rows(ds.view, ds.source.columns),
    )
    rows = _rows(ds)
    bad = [i for i, r in enumerate(rows) if r["g"] >= bound]
    check = _check(report, "range", "g")
    assert check.violations == len(bad)
    assert [e.index for e in check.examples] == bad[:limit]
    for e in check.examples:
        assert ds.locate(e.index) == (e.shard, e.row)


def test_computed_column_that_fails_is_a_failed_check(data: Path) -> None:
    """A cast that fails on the data is reported with DuckDB's reason, not raised."""

    class S(BaseModel):
        x: int = Field(ge=0)

    ds = ParquetDataset(data, query="SELECT CAST(id AS INTEGER) AS x FROM dataset")
    report = ds.report(S)
    check = _check(report, "range", "x")
    assert not report.passed and check.error is not None
    # which string DuckDB names first depends on its threads: any row id will do
    assert "the check query failed on" in check.error
    assert re.search(r"row-\d{8}", check.error)
    assert _check(report, "readable", None).passed  # the shards themselves are fine
