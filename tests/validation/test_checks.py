"""SQL checks over every shard: planted violations found with exact counts and examples."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, conint, constr, create_model
from support import datagen
from support.pydantic_reference import refused_by_pydantic

from undertale_duck import ArgumentError, ParquetDataset, SchemaError, schema
from undertale_duck.validation.executors import SerialExecutor
from undertale_duck.validation.model import CheckResult, ValidationReport
from undertale_duck.validation.runner import report_for

SHARD = 50
SHARDS = 4


class Func(schema.Dataset):
    """A schema with one of each constraint."""

    id: Annotated[str, schema.Unique, Field(pattern=r"^fn-\d{6}$")]
    label: int = Field(ge=0, lt=10)
    tokens: list[int] = Field(min_length=1, max_length=8)
    kind: Literal["lib", "exe"]
    name: str | None = Field(max_length=12)


ARROW = pa.schema(
    [
        ("id", pa.string()),
        ("label", pa.int64()),
        ("tokens", pa.list_(pa.int32())),
        ("kind", pa.string()),
        ("name", pa.string()),
    ]
)


def good_row(i: int) -> dict[str, Any]:
    return {
        "id": f"fn-{i:06d}",
        "label": i % 10,
        "tokens": [i % 97 + k for k in range(1 + i % 8)],
        "kind": ("lib", "exe")[i % 2],
        "name": None if i % 9 == 0 else f"f{i}",
    }


def write(
    directory: Path,
    rows: list[dict[str, Any]],
    *,
    shard: int = SHARD,
    arrow: Callable[[int], pa.Schema] = lambda k: ARROW,
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, start in enumerate(range(0, len(rows), shard)):
        part = rows[start : start + shard]
        sch = arrow(k)
        table = pa.Table.from_pylist([{n: r.get(n) for n in sch.names} for r in part], sch)
        path = directory / f"part-{k:05d}.parquet"
        pq.write_table(table, path, row_group_size=16)
        paths.append(path)
    return paths


# planted problems, all after the first shard (global index -> change)
PLANTED: dict[int, dict[str, Any]] = {
    60: {"id": None},
    170: {"id": None},
    120: {"id": "fn-000010"},  # duplicates row 10
    199: {"id": "fn-000150"},  # duplicates row 150
    75: {"label": -1},
    180: {"label": 10},
    181: {"label": 99},
    130: {"id": "FN-000130"},
    131: {"id": "fn-13"},
    90: {"tokens": []},
    191: {"tokens": list(range(9))},
    140: {"tokens": [1, None, 3]},
    100: {"kind": "dll"},
    101: {"kind": "dll"},
    102: {"kind": "so"},
    160: {"name": "a-very-long-function-name"},
}


def planted_rows() -> list[dict[str, Any]]:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    for i, change in PLANTED.items():
        rows[i].update(change)
    return rows


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    write(root, planted_rows())
    return root


def by(report: ValidationReport, check: str, column: str | None = None, **kw: str) -> CheckResult:
    found = [
        c
        for c in report.checks
        if c.check == check
        and c.column == column
        and all(getattr(c, k) == v for k, v in kw.items())
    ]
    assert len(found) == 1, (check, column, [c.description for c in found])
    return found[0]


def shard_of(root: Path, index: int) -> str:
    return str(root / f"part-{index // SHARD:05d}.parquet")


def test_planted_violations_exact_counts_and_examples(planted: Path) -> None:
    report = ParquetDataset(planted).report(Func)
    assert not report.passed
    assert report.rows == SHARD * SHARDS and report.shards == SHARDS
    expected = {
        ("not_null", "id", "id is not null"): [60, 170],
        ("unique", "id", "id is unique"): [10, 120, 150, 199],
        ("range", "label", "label >= 0"): [75],
        ("range", "label", "label < 10"): [180, 181],
        ("pattern", "id", r"id matches '^fn-\\d{6}$'"): [130, 131],
        ("length", "tokens", "length(tokens) >= 1"): [90],
        ("length", "tokens", "length(tokens) <= 8"): [191],
        ("not_null", "tokens", "tokens has no null elements"): [140],
        ("literal", "kind", "kind in {'lib', 'exe'}"): [100, 101, 102],
        ("length", "name", "length(name) <= 12"): [160],
    }
    failed = {(c.check, c.column, c.description) for c in report.failed}
    assert failed == set(expected)
    rows = planted_rows()
    for (kind, column, description), indices in expected.items():
        check = by(report, kind, column, description=description)
        assert check.violations == len(indices), check
        assert sorted(e.index for e in check.examples if e.index is not None) == indices
        for e in check.examples:
            assert e.index is not None
            assert e.shard == shard_of(planted, e.index)
            assert e.row == e.index % SHARD
            expected_value = rows[e.index][column]
            assert e.value == expected_value
        per_shard: dict[str, int] = {}
        for i in indices:
            per_shard[shard_of(planted, i)] = per_shard.get(shard_of(planted, i), 0) + 1
        assert check.per_shard == per_shard
        assert check.sql
    # the unique examples are grouped by value
    unique = by(report, "unique", "id")
    assert [e.value for e in unique.examples] == ["fn-000010"] * 2 + ["fn-000150"] * 2
    # every other check passed, and structural checks are there
    for kind in ("readable", "shard_schema"):
        assert by(report, kind).passed
    for column in ("id", "label", "tokens", "kind", "name"):
        assert by(report, "present", column).passed
        assert by(report, "type", column).passed
    assert by(report, "not_null", "label").passed
    assert all(c.column != "name" or c.check != "not_null" for c in report.checks)
    summaries = {s.path: s.violations for s in report.shard_summaries}
    assert summaries[shard_of(planted, 0)] == 1  # row 10 duplicates row 120
    assert sum(summaries.values()) == sum(len(v) for v in expected.values())


def test_validate_raises_with_counts(planted: Path) -> None:
    ds = ParquetDataset(planted)
    with pytest.raises(SchemaError) as info:
        ds.validate(Func)
    message = str(info.value)
    assert "not_null(id): 2 rows" in message
    assert "unique(id): 4 rows" in message
    assert "literal(kind): 3 rows" in message
    assert isinstance(info.value.report, ValidationReport)
    assert not info.value.report.passed
    ds[0]  # the dataset still serves rows after validating


def test_report_for_path_matches_dataset_report(planted: Path) -> None:
    a = ParquetDataset(planted).report(Func)
    b = report_for(str(planted), Func)
    strip = {"seconds", "source"}
    assert a.model_dump(exclude=strip) == b.model_dump(exclude=strip)


def test_clean_dataset_passes(tmp_path: Path) -> None:
    write(tmp_path, [good_row(i) for i in range(120)])
    ds = ParquetDataset(tmp_path)
    ds.validate(Func)
    report = ds.report(Func)
    assert report.passed and report.rows == 120
    assert all(c.passed and c.violations == 0 and not c.examples for c in report.checks)
    ds.validate(schema.Dataset)


def test_violations_only_in_last_shard(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    last = SHARD * SHARDS - 1
    rows[last]["label"] = 12
    rows[last - 3]["id"] = None
    write(tmp_path, rows)
    report = report_for(tmp_path, Func)
    label = by(report, "range", "label", description="label < 10")
    assert label.violations == 1 and label.per_shard == {shard_of(tmp_path, last): 1}
    assert [(e.index, e.row, e.value) for e in label.examples] == [(last, SHARD - 1, 12)]
    nulls = by(report, "not_null", "id")
    assert [(e.index, e.value) for e in nulls.examples] == [(last - 3, None)]
    assert {(c.check, c.description) for c in report.failed} == {
        ("range", "label < 10"),
        ("not_null", "id is not null"),
    }


def test_wrong_type_in_one_shard(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    rows[20]["label"] = 50  # a range violation in a shard with the right type
    for i in range(2 * SHARD, 3 * SHARD):
        rows[i]["label"] = str(rows[i]["label"])

    def arrow(k: int) -> pa.Schema:
        return ARROW.set(1, pa.field("label", pa.string())) if k == 2 else ARROW

    write(tmp_path, rows, arrow=arrow)
    bad = shard_of(tmp_path, 2 * SHARD)
    report = ParquetDataset(tmp_path).report(Func)
    typed = by(report, "type", "label")
    assert not typed.passed and typed.violations == SHARD
    assert typed.per_shard == {bad: SHARD}
    assert [e.shard for e in typed.examples] == [bad]
    assert "VARCHAR" in str(typed.examples[0].value)
    drift = by(report, "shard_schema")
    assert not drift.passed and drift.per_shard == {bad: SHARD}
    assert "label BIGINT -> VARCHAR" in str(drift.examples[0].value)
    # value checks still ran on the other shards
    label = by(report, "range", "label", description="label < 10")
    assert label.violations == 1 and [e.index for e in label.examples] == [20]
    assert by(report, "literal", "kind").passed
    assert {c.check for c in report.failed} == {"type", "shard_schema", "range"}


def test_missing_column_in_one_shard(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    rows[5]["kind"] = "dll"

    def arrow(k: int) -> pa.Schema:
        return ARROW.remove(ARROW.get_field_index("kind")) if k == 3 else ARROW

    write(tmp_path, rows, arrow=arrow)
    bad = shard_of(tmp_path, 3 * SHARD)
    report = report_for(tmp_path, Func)
    present = by(report, "present", "kind")
    assert not present.passed and present.per_shard == {bad: SHARD}
    assert [e.shard for e in present.examples] == [bad]
    drift = by(report, "shard_schema")
    assert drift.per_shard == {bad: SHARD} and "missing kind" in str(drift.examples[0].value)
    literal = by(report, "literal", "kind")
    assert literal.violations == 1 and [e.index for e in literal.examples] == [5]
    assert by(report, "not_null", "kind").passed
    assert {c.check for c in report.failed} == {"present", "shard_schema", "literal"}


def test_truncated_shard_is_a_failed_check(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    rows[10]["label"] = -5
    paths = write(tmp_path, rows)
    size = os.path.getsize(paths[1])
    with open(paths[1], "r+b") as fh:
        fh.truncate(size // 2)
    report = report_for(tmp_path, Func)
    readable = by(report, "readable")
    assert not readable.passed and readable.violations == 1
    assert [e.shard for e in readable.examples] == [str(paths[1])]
    assert "truncated" in str(readable.examples[0].value)
    assert report.rows == SHARD * (SHARDS - 1) and report.shards == SHARDS
    label = by(report, "range", "label", description="label >= 0")
    assert [(e.index, e.value) for e in label.examples] == [(10, -5)]
    assert {c.check for c in report.failed} == {"readable", "range"}
    summary = next(s for s in report.shard_summaries if s.path == str(paths[1]))
    assert not summary.readable and summary.rows is None and summary.error


def test_corrupt_data_pages_are_a_failed_check(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    rows[160]["kind"] = "dll"
    rows[170]["id"] = rows[20]["id"]
    paths = write(tmp_path, rows)
    meta = pq.read_metadata(paths[2])
    column = meta.row_group(0).column(0)
    start = column.data_page_offset
    with open(paths[2], "r+b") as fh:  # scribble over the first data page of `id`
        fh.seek(start)
        fh.write(b"\xff" * 64)
    report = report_for(tmp_path, Func)
    readable = by(report, "readable")
    assert not readable.passed
    assert [e.shard for e in readable.examples] == [str(paths[2])]
    assert report.rows == SHARD * (SHARDS - 1)
    assert by(report, "not_null", "label").passed
    # the other shards are still checked, with examples
    literal = by(report, "literal", "kind")
    assert literal.violations == 1 and [e.index for e in literal.examples] == [160]
    unique = by(report, "unique", "id")
    assert unique.violations == 2 and [e.index for e in unique.examples] == [20, 170]
    assert {c.check for c in report.failed} == {"readable", "literal", "unique"}


def test_changed_shard_after_open_is_reported(tmp_path: Path) -> None:
    paths = write(tmp_path, [good_row(i) for i in range(100)])
    ds = ParquetDataset(tmp_path)
    write(tmp_path, [good_row(i) for i in range(120)], shard=60)
    report = ds.report(Func)
    readable = by(report, "readable")
    assert not readable.passed and "changed on disk" in str(readable.examples[0].value)
    assert {e.shard for e in readable.examples} == {str(p) for p in paths}


def test_nested_struct_fields(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [40, 30, 30], row_group_size=16)

    class Point(BaseModel):
        x: int = Field(lt=90)
        tags: list[str] = Field(max_length=1)

    class S(BaseModel):
        id: Annotated[str, schema.Unique]
        point: Point
        score: float | None
        category: Literal["alpha", "beta", "gamma"]
        blob: bytes = Field(max_length=2)

    report = report_for(tmp_path, S)
    x = by(report, "range", "point.x")
    assert x.violations == 10 and [e.index for e in x.examples] == [90, 91, 92, 93, 94]
    tags = by(report, "length", "point.tags")
    assert tags.violations == sum(1 for i in range(100) if i % 3 == 2)
    blob = by(report, "length", "blob")
    assert blob.violations == sum(1 for i in range(100) if i % 4 == 3)
    assert blob.examples[0].value == base64.b64encode(bytes([3, 4, 5])).decode()  # common.jsonvalue
    assert by(report, "literal", "category").passed  # dictionary-encoded strings
    assert by(report, "type", "point").passed


def test_optional_column_with_default_may_be_absent(tmp_path: Path) -> None:
    write(tmp_path, [good_row(i) for i in range(60)])

    class S(Func):
        extra: int = 0

    class T(Func):
        extra: int

    assert report_for(tmp_path, S).passed
    report = report_for(tmp_path, T)
    assert by(report, "present", "extra").violations == 60


def test_invalid_pattern_is_a_failed_check_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, [good_row(i) for i in range(20)])

    class S(BaseModel):
        id: str = Field(pattern=r"^\p{Letter}")  # pydantic's engine takes it, RE2 does not
        label: int = Field(ge=0)

    report = report_for(tmp_path, S)
    pattern = by(report, "pattern", "id")
    assert not pattern.passed and pattern.error and "regular expression" in pattern.error
    assert by(report, "range", "label").passed


def test_not_a_schema_is_an_argument_error(planted: Path) -> None:
    from undertale_duck import ArgumentError

    with pytest.raises(ArgumentError):
        ParquetDataset(planted).report(dict)  # type: ignore[arg-type]


def test_directory_with_only_broken_shards(tmp_path: Path) -> None:
    paths = write(tmp_path, [good_row(i) for i in range(60)], shard=30)
    for p in paths:
        with open(p, "r+b") as fh:
            fh.truncate(100)
    report = report_for(tmp_path, Func)
    assert not report.passed and report.rows == 0
    assert by(report, "readable").violations == 2


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    data=st.data(),
)
def test_null_counts_and_examples_match_planted(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], data: st.DataObject
) -> None:
    total = sum(sizes)
    nulls = sorted(data.draw(st.sets(st.integers(0, max(total - 1, 0)), max_size=8)))
    nulls = [i for i in nulls if i < total]
    rows = [good_row(i) for i in range(total)]
    for i in nulls:
        rows[i]["label"] = None
    root = tmp_path_factory.mktemp("hyp")
    offset = 0
    for k, size in enumerate(sizes):
        part = rows[offset : offset + size]
        table = pa.Table.from_pylist(part, ARROW) if part else ARROW.empty_table()
        pq.write_table(table, root / f"part-{k:05d}.parquet", row_group_size=7)
        offset += size
    report = report_for(root, Func, examples=3)
    check = by(report, "not_null", "label")
    assert check.violations == len(nulls)
    assert [e.index for e in check.examples] == nulls[:3]
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    for e in check.examples:
        assert e.index is not None and e.row is not None
        k = int(Path(e.shard).stem.split("-")[1])
        assert starts[k] + e.row == e.index
    shutil.rmtree(root)


@pytest.mark.heavy
def test_benchmark_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_validation.py"
    spec = importlib.util.spec_from_file_location("bench_validation", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered as `python bench_validation.py` registers __main__: pydantic resolves the
    # schema's postponed annotations (`from __future__ import annotations`) in its module
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    out = tmp_path / "out.json"
    results = module.main(["--rows", "20000", "--shards", "3", "--repeat", "1", "--out", str(out)])
    assert set(results["seconds"]) == {"scan", "decode", "validate builtin", "validate constrained"}
    assert out.exists() and results["rows"] == 20000


def test_column_order_may_differ_between_shards(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * 2)]
    rows[70]["label"] = -3

    def arrow(k: int) -> pa.Schema:
        return pa.schema(list(reversed(list(ARROW)))) if k == 1 else ARROW

    write(tmp_path, rows, arrow=arrow)
    report = report_for(tmp_path, Func)
    assert by(report, "shard_schema").passed
    assert {c.check for c in report.failed} == {"range"}
    label = by(report, "range", "label", description="label >= 0")
    assert [(e.index, e.value) for e in label.examples] == [(70, -3)]


def test_hostile_column_names_and_nested_unique(tmp_path: Path) -> None:
    weird = 'we"ird col; DROP'
    arrow = pa.schema(
        [
            (weird, pa.int64()),
            ("select", pa.string()),
            ("s", pa.struct([("k", pa.string())])),
        ]
    )
    rows = [{weird: i - 2, "select": f"v{i}", "s": {"k": f"k{i % 5}"}} for i in range(12)]
    pq.write_table(pa.Table.from_pylist(rows, arrow), tmp_path / "a.parquet")

    class Inner(BaseModel):
        k: Annotated[str, schema.Unique]

    class S(BaseModel):
        weird_value: int = Field(alias=weird, ge=0)
        select: Annotated[str, schema.Unique] = Field(pattern=r"^v\d+$")
        s: Inner

    report = report_for(tmp_path, S)
    assert {(c.check, c.column, c.violations) for c in report.failed} == {
        ("range", weird, 2),
        ("unique", "s.k", 12),
    }
    assert [e.value for e in by(report, "range", weird).examples] == [-2, -1]


@pytest.mark.parametrize("line_break", ["\n", "\r", "\u2028"])
def test_column_names_holding_a_line_break_give_pydantic_verdict(
    tmp_path: Path, line_break: str
) -> None:
    # a check's SQL was put on one line after the column name went in: the name's line
    # break became a space (or a line after it starting with `--` was dropped), and every
    # check on the column failed with a Binder Error instead of counting
    name, field, items = f"a{line_break}-- b", f"x{line_break}--y", f"l{line_break}"
    arrow = pa.schema([
        (name, pa.string()),
        ("s", pa.struct([(field, pa.int64())])),
        (items, pa.list_(pa.int64())),
    ])
    rows = [{name: None if i % 4 == 0 else str(i), "s": {field: i - 3}, items: [i - 2, i]}
            for i in range(12)]
    table = pa.Table.from_pylist(rows, arrow)
    pq.write_table(table, tmp_path / "a.parquet")
    inner = create_model("Inner", x=(int, Field(alias=field, ge=0)))
    model = create_model(
        "Broken",
        text=(str | None, Field(alias=name, max_length=1, pattern=r"\d")),
        s=(inner, ...),
        values=(list[Annotated[int, Field(ge=0)]], Field(alias=items)),
    )
    report = report_for(tmp_path, model, examples=12)
    assert [c.error for c in report.checks if c.error] == []
    assert {e.index for c in report.failed for e in c.examples} == refused_by_pydantic(
        model, table
    ) == {0, 1, 2, *range(10, 12)}


def test_corruption_seen_only_by_the_uniqueness_query(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(SHARD * SHARDS)]
    rows[170]["id"] = rows[20]["id"]
    paths = write(tmp_path, rows)
    column = pq.read_metadata(paths[1]).row_group(0).column(0)
    with open(paths[1], "r+b") as fh:
        fh.seek(column.data_page_offset)
        fh.write(b"\xff" * 64)
    report = report_for(tmp_path, schema.Dataset)  # not_null(id) is answered from statistics
    readable = by(report, "readable")
    assert [e.shard for e in readable.examples] == [str(paths[1])]
    unique = by(report, "unique", "id")
    assert unique.error is None and unique.violations == 2
    assert [e.index for e in unique.examples] == [20, 170]


@pytest.mark.parametrize("statistics", [True, False])
def test_null_checks_from_footer_statistics_or_a_scan(tmp_path: Path, statistics: bool) -> None:
    rows = [good_row(i) for i in range(90)]
    rows[75]["tokens"] = [4, None]
    for k, start in enumerate(range(0, 90, 30)):
        table = pa.Table.from_pylist(rows[start : start + 30], ARROW)
        pq.write_table(table, tmp_path / f"p{k}.parquet", write_statistics=statistics)
    report = report_for(tmp_path, Func)
    label = by(report, "not_null", "label")
    elements = by(report, "not_null", "tokens", description="tokens has no null elements")
    assert label.passed and label.violations == 0
    assert elements.violations == 1 and [e.index for e in elements.examples] == [75]
    # with statistics the footers prove `label` has no NULL; without them a scan counts it
    assert ("parquet_metadata" in label.sql) is statistics
    assert ('count_if("label" IS NULL)' in label.sql) is not statistics
    assert "count_if(list_count" in elements.sql


def test_constraint_that_does_not_fit_the_type_fails_alone(tmp_path: Path) -> None:
    rows = [good_row(i) for i in range(30)]
    rows[3]["label"] = -1
    write(tmp_path, rows)

    class S(BaseModel):
        tokens: list[int] = Field(gt=0)  # a bound on a list: meaningless
        label: int = Field(ge=0, pattern="x")  # a pattern on an integer
        kind: str

    report = report_for(tmp_path, S)
    failed = {(c.check, c.column): c for c in report.failed}
    assert set(failed) == {("range", "tokens"), ("pattern", "label"), ("range", "label")}
    assert "does not apply" in (failed[("range", "tokens")].error or "")
    assert "does not apply" in (failed[("pattern", "label")].error or "")
    assert failed[("range", "label")].violations == 1 and failed[("range", "label")].error is None


def test_glob_characters_in_shard_names_are_read_literally(tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from support import datagen as dg

    from undertale_duck import ParquetDataset
    from undertale_duck.schema import Dataset

    table = dg.table(0, 20)
    # a decoy that an unescaped glob "a[1].parquet" would read instead of the real file
    pq.write_table(dg.table(100, 105), tmp_path / "a1.parquet")
    first = table.slice(0, 10).to_pylist()
    first[3]["id"] = first[0]["id"]
    pq.write_table(type(table).from_pylist(first, schema=table.schema), tmp_path / "a[1].parquet")
    pq.write_table(table.slice(10, 10), tmp_path / "b*.parquet")
    ds = ParquetDataset([tmp_path / "a[1].parquet", tmp_path / "b*.parquet"])
    report = ds.report(Dataset)
    assert report.rows == 20
    unique = next(c for c in report.checks if c.check == "unique" and c.column == "id")
    assert unique.violations == 2
    assert sorted(e.index for e in unique.examples) == [0, 3]
    assert all(e.shard == str(tmp_path / "a[1].parquet") for e in unique.examples)


def test_example_values_follow_the_one_json_convention(tmp_path: Path) -> None:
    """Examples go through common.jsonvalue: bytes base64, non-finite floats as JSON text."""
    import json

    from undertale_duck.common.jsonvalue import jsonable

    scores = [0.5, float("nan"), float("inf"), 2.0, 0.25]
    blobs = [b"", b"\x00\xff", b"ab", b"\x01\x02\x03", b"x"]
    pq.write_table(pa.table({"score": scores, "blob": blobs}), tmp_path / "a.parquet")

    class S(BaseModel):
        score: float = Field(le=1)
        blob: bytes = Field(max_length=2)

    report = report_for(tmp_path, S)
    score = by(report, "range", "score")
    assert [(e.index, e.value) for e in score.examples] == [(1, "NaN"), (2, "Infinity"), (3, 2.0)]
    blob = by(report, "length", "blob")
    assert [e.value for e in blob.examples] == [base64.b64encode(b"\x01\x02\x03").decode()]
    assert all(e.value == jsonable(e.value) for c in report.checks for e in c.examples)
    # strict JSON: no bare NaN/Infinity constants anywhere in the report
    json.loads(report.model_dump_json(), parse_constant=lambda c: pytest.fail(f"bare {c}"))


# ---------------------------------------------------------------- verdicts as pydantic's own
class _Kind(enum.IntEnum):
    A = 1
    B = 2


def _offenders_by_report(report: ValidationReport) -> set[int]:
    assert [c.error for c in report.checks if c.error] == []
    assert all(c.passed for c in report.checks if c.check in ("present", "type", "readable"))
    return {e.index for c in report.failed for e in c.examples if e.index is not None}


FLOATS = [k / 10 for k in range(-30, 31)] + [0.25, -0.35, 1e-10, float("nan"), float("inf"),
                                              -float("inf"), 1e300, 5e-324]
UNICODE = ["fn-123", "fn-\u0663\u0664\u0665", "fn-12", "caf\u00e9", "\u65e5\u672c", "a b",
           "\u00a0", "\u2003x", "", "x_1", "fn-123\n", "\u0661"]


class _NanBounds(BaseModel):
    ge: float = Field(ge=0)


class _NanGt(BaseModel):
    gt: float = Field(gt=-1)


class _Multiple(BaseModel):
    m: float = Field(multiple_of=0.1)


class _Multiple32(BaseModel):
    m: float = Field(multiple_of=0.3, le=2)


class _DecimalBounds(BaseModel):
    d: decimal.Decimal = Field(ge=decimal.Decimal("1.00000000000000001"))


class _DecimalMultiple(BaseModel):
    d: decimal.Decimal = Field(multiple_of=decimal.Decimal("0.1"))


class _MixedLiteral(BaseModel):
    v: Literal[1, "a"]


class _Digits(BaseModel):
    s: str = Field(pattern=r"^fn-\d{3}$")


class _Word(BaseModel):
    s: str = Field(pattern=r"^[\w]+$")


class _Space(BaseModel):
    s: str = Field(pattern=r"\s|^\S*\d$")


class _Tuple(BaseModel):
    t: tuple[int, ...] = Field(max_length=3)


class _Set(BaseModel):
    t: set[int] = Field(min_length=2, max_length=2)


class _Enum(BaseModel):
    e: _Kind


class _InsideOptional(BaseModel):
    """Constraints inside an optional type: pydantic applies them, FieldInfo.metadata lacks them."""

    a: Annotated[int, Field(ge=0)] | None
    b: conint(lt=3) | None = None  # type: ignore[valid-type]
    c: constr(pattern=r"^x") | None = None  # type: ignore[valid-type]


class _NoneAllowed(BaseModel):
    """None allowed without Optional; a column read through its validation alias."""

    lit: Literal[None, "a"]
    anything: object
    v: int = Field(validation_alias="v col", ge=0)


class _Finite(BaseModel):
    f: float = Field(allow_inf_nan=False)


class _FiniteByConfig(BaseModel):
    """The model's config refuses NaN and infinities; a field's own setting wins."""

    model_config = ConfigDict(allow_inf_nan=False)
    f: float
    g: float = Field(allow_inf_nan=True)


class _DecimalDigits(BaseModel):
    d: decimal.Decimal = Field(max_digits=4, decimal_places=2)


class _DecimalPlaces(BaseModel):
    d: decimal.Decimal | None = Field(decimal_places=1)


class _Stripped(BaseModel):
    s: constr(strip_whitespace=True, min_length=2, max_length=3, pattern=r"^a")  # type: ignore[valid-type]


class _StrippedByConfig(BaseModel):
    """The config strips and bounds every str; a field's own length wins over the config's."""

    model_config = ConfigDict(str_strip_whitespace=True, str_max_length=2)
    s: str
    t: str = Field(max_length=4)


#: Unicode White_Space (what pydantic strips) and characters that are not (U+200B, U+FEFF).
SPACED = ["a", " a ", "\u3000ab\t", "\u0085abc\u00a0", "ab\u200b", "\ufeffab", "  ", "",
          "\u2028a\u2029", "\u1680abcd", "b  ", "\x0ba\x0c", "\u202fab\u205f"]
DECIMALS = [decimal.Decimal(v) for v in ("0.000", "0.5", "1.250", "12.5", "99.99", "100", "-12.34",
                                         "-0.001", "0.010", "123.4", "1000", "-99.999", "10.1")]
DEC = pa.decimal128(38, 17)
CASES: dict[str, tuple[type[BaseModel], pa.Table]] = {
    "nan-ge": (_NanBounds, pa.table({"ge": FLOATS})),
    "nan-gt-float32": (_NanGt, pa.table({"gt": pa.array(FLOATS, pa.float32())})),
    "multiple-of-float": (_Multiple, pa.table({"m": FLOATS + [k * 0.1 for k in range(200)]})),
    "multiple-of-float32": (_Multiple32, pa.table({"m": pa.array(FLOATS, pa.float32())})),
    "multiple-of-float-on-ints": (_Multiple, pa.table({"m": pa.array(range(-5, 5), pa.int16())})),
    "decimal-bound": (_DecimalBounds, pa.table({"d": pa.array(
        [decimal.Decimal("1.00000000000000001"), decimal.Decimal(1), decimal.Decimal(2)], DEC)})),
    "decimal-multiple": (_DecimalMultiple, pa.table({"d": pa.array(
        [decimal.Decimal(k) / 100 for k in range(0, 120, 5)], pa.decimal128(10, 2))})),
    "literal-mixed-text": (_MixedLiteral, pa.table({"v": ["a", "1", "b", "a"]})),
    "literal-mixed-int": (_MixedLiteral, pa.table({"v": [1, 2, 1, 0]})),
    "int-enum": (_Enum, pa.table({"e": pa.array([1, 2, 3, 0], pa.int8())})),
    "pattern-digits": (_Digits, pa.table({"s": UNICODE})),
    "pattern-word": (_Word, pa.table({"s": UNICODE})),
    "pattern-space": (_Space, pa.table({"s": UNICODE})),
    "tuple-elements": (_Tuple, pa.table({"t": [[1], [1, None], [None], [1, 2, 3, 4], []]})),
    "set-length": (_Set, pa.table({"t": [[1, 1, 2], [1, 2], [1, 1], [1, 2, 3], [3, 3, 3, 4]]})),
    "none-allowed-and-validation-alias": (_NoneAllowed, pa.table({
        "lit": ["a", None, "b"], "anything": [None, 1, None], "v col": [0, -1, 1]})),
    "finite": (_Finite, pa.table({"f": FLOATS})),
    "finite-float32": (_Finite, pa.table({"f": pa.array(FLOATS, pa.float32())})),
    "finite-on-ints": (_Finite, pa.table({"f": pa.array(range(-3, 3), pa.int64())})),
    "finite-by-config": (_FiniteByConfig, pa.table({"f": FLOATS[-8:], "g": FLOATS[-8:][::-1]})),
    "decimal-digits": (_DecimalDigits, pa.table({"d": pa.array(DECIMALS, pa.decimal128(10, 3))})),
    "decimal-digits-scale-0": (_DecimalDigits, pa.table({"d": pa.array(
        [decimal.Decimal(v) for v in (0, 5, 10, 99, 100, 1000, -10, 12345)],
        pa.decimal128(8, 0))})),
    "decimal-places": (_DecimalPlaces, pa.table({"d": pa.array([*DECIMALS, None],
                                                                 pa.decimal128(12, 4))})),
    "strip-whitespace": (_Stripped, pa.table({"s": SPACED})),
    "strip-whitespace-by-config": (_StrippedByConfig, pa.table({"s": SPACED, "t": SPACED[::-1]})),
    "inside-optional": (_InsideOptional, pa.table({
        "a": [0, -1, None, 2, 5], "b": [0, 1, 2, 3, None], "c": ["x", "y", None, "xy", "ax"]})),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_offending_rows_are_the_rows_pydantic_refuses(tmp_path: Path, case: str) -> None:
    """NaN against a bound, float multiples, exact decimals, mixed literals, Unicode classes
    in patterns, tuple elements and set lengths: each row fails exactly when pydantic says so."""
    model, table = CASES[case]
    pq.write_table(table, tmp_path / "a.parquet")
    report = report_for(tmp_path, model, examples=table.num_rows)
    expected = refused_by_pydantic(model, table)
    assert _offenders_by_report(report) == expected
    assert report.passed == (not expected)
    tasks = report_for(tmp_path, model, examples=table.num_rows, executor=SerialExecutor())
    assert tasks.model_dump(exclude={"seconds"}) == report.model_dump(exclude={"seconds"})


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    digits=st.none() | st.integers(1, 8),
    places=st.none() | st.integers(0, 5),
    scale=st.integers(0, 6),
    values=st.lists(st.integers(-(10**9), 10**9) | st.sampled_from([0, 10, 100, -1000]),
                    min_size=1, max_size=25),
)
def test_decimal_digits_are_counted_as_pydantic_counts_them(
    tmp_path: Path, digits: int | None, places: int | None, scale: int, values: list[int]
) -> None:
    """max_digits/decimal_places over DECIMAL(p, s) columns: trailing zeros, zeros, negative
    values, places beyond max_digits: each row fails exactly when pydantic refuses it."""

    class D(BaseModel):
        d: decimal.Decimal = Field(max_digits=digits, decimal_places=places)

    column = pa.array([decimal.Decimal(v).scaleb(-scale) for v in values],
                      pa.decimal128(10 + scale, scale))
    path = tmp_path / f"{digits}-{places}-{scale}-{len(values)}"
    path.mkdir(exist_ok=True)
    pq.write_table(pa.table({"d": column}), path / "a.parquet")
    report = report_for(path, D, examples=len(values))
    assert _offenders_by_report(report) == refused_by_pydantic(D, pa.table({"d": column}))
    shutil.rmtree(path)


@pytest.mark.parametrize("examples", [-1, True, 2.5, 1 << 63])
def test_examples_must_be_a_whole_number(tmp_path: Path, examples: Any) -> None:
    """A negative count was DuckDB's LIMIT error (in the report, or raised by task executors)."""
    pq.write_table(pa.table({"id": ["a", "a", "b"]}), tmp_path / "a.parquet")
    for executor in (None, SerialExecutor()):
        with pytest.raises(ArgumentError, match="examples must be a whole number"):
            report_for(tmp_path, schema.Dataset, examples=examples, executor=executor)
    report = report_for(tmp_path, schema.Dataset, examples=0)
    assert by(report, "unique", "id").violations == 2 and by(report, "unique", "id").examples == []


@pytest.mark.parametrize("name", ["file_row_number", "__Undertale_Shard"])
def test_a_shard_with_a_column_the_scan_adds_is_unreadable_alone(tmp_path: Path, name: str) -> None:
    """Such a column made every check query fail to bind: every check was an error."""

    class S(BaseModel):
        id: Annotated[int, schema.Unique]
        x: int = Field(ge=0)

    pq.write_table(pa.table({"id": [0, 1, 1], "x": [0, -1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [3, 4], "x": [-3, 4], name: [0, 1]}), tmp_path / "b.parquet")
    for executor in (None, SerialExecutor()):
        report = report_for(tmp_path, S, executor=executor)
        assert [c.error for c in report.checks if c.error] == []
        readable = by(report, "readable")
        assert readable.violations == 1
        assert readable.examples[0].shard == str(tmp_path / "b.parquet")
        assert name in readable.examples[0].value and "rename" in readable.examples[0].value
        assert by(report, "range", "x").violations == 1  # the other shard is still checked
        assert by(report, "unique", "id").violations == 2
        assert report.rows == 3


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
def test_datetime_bounds_of_the_other_awareness_compare_as_pydantic(
    tmp_path: Path, zone: str
) -> None:
    """A naive bound against instants, or an aware bound against naive times, was converted
    in DuckDB's session time zone (the machine's): the verdict changed with the machine."""
    utc, plus5 = dt.UTC, dt.timezone(dt.timedelta(hours=5))
    times = [dt.datetime(2019, 12, 31, 18) + dt.timedelta(hours=i) for i in range(12)]
    naive = pa.table({"t": pa.array(times, pa.timestamp("us"))})
    aware = pa.table({"t": pa.array([t.replace(tzinfo=utc) for t in times],
                                    pa.timestamp("us", tz="UTC"))})

    class AwareBound(BaseModel):
        t: dt.datetime = Field(ge=dt.datetime(2020, 1, 1, tzinfo=plus5))

    class NaiveBound(BaseModel):
        t: dt.datetime = Field(lt=dt.datetime(2020, 1, 1, 3))

    for model, table in ((AwareBound, naive), (NaiveBound, aware), (AwareBound, aware)):
        shutil.rmtree(tmp_path / "d", ignore_errors=True)
        (tmp_path / "d").mkdir()
        pq.write_table(table, tmp_path / "d" / "a.parquet")
        report = report_for(tmp_path / "d", model, examples=12,
                            duckdb_config={"TimeZone": zone})
        assert _offenders_by_report(report) == refused_by_pydantic(model, table)


def test_unique_inside_an_optional_type_is_checked(tmp_path: Path) -> None:
    class S(BaseModel):
        id: Annotated[str, schema.Unique] | None

    pq.write_table(pa.table({"id": ["a", "b", "a", None, None]}), tmp_path / "a.parquet")
    unique = by(report_for(tmp_path, S), "unique", "id")
    assert unique.violations == 2 and [e.index for e in unique.examples] == [0, 2]


@pytest.mark.parametrize("name", ["v", "V", "n", "index", "value"])
def test_unique_beside_a_column_named_like_the_query_aliases(tmp_path: Path, name: str) -> None:
    """A data column `v` was what `GROUP BY v` bound to: the uniqueness query failed."""
    table = pa.table({"id": [i % 4 for i in range(10)], name: [i * 7 for i in range(10)]})
    pq.write_table(table, tmp_path / "a.parquet")
    for executor in (None, SerialExecutor()):
        unique = by(report_for(tmp_path, _IntId, executor=executor),
                    "unique", "id")
        assert unique.error is None and unique.violations == 10
        assert [(e.index, e.value) for e in unique.examples] == [(0, 0), (4, 0), (8, 0), (1, 1),
                                                                 (5, 1)]


class _IntId(BaseModel):
    id: Annotated[int, schema.Unique]


class _NanEveryBound(BaseModel):
    ge: float = Field(ge=-3)
    gt: float = Field(gt=-3)
    le: float = Field(le=3)
    lt: float = Field(lt=3)


@pytest.mark.parametrize("dtype", [pa.float64(), pa.float32()])
@pytest.mark.parametrize("group", [2, 3, 7])
def test_nan_beside_finite_values_in_a_row_group_is_counted(
    tmp_path: Path, dtype: pa.DataType, group: int
) -> None:
    """Writers leave NaN out of a row group's min/max; DuckDB's optimizers trusted those and
    counted no NaN (every bound passed). Each NaN row fails each bound, as pydantic says."""
    values = [float("nan") if k % 5 == 1 else (k % 5) - 2.0 for k in range(40)]  # within bounds
    table = pa.table({name: pa.array(values, dtype) for name in ("ge", "gt", "le", "lt")})
    for k in range(2):  # two shards: every group holds finite values beside its NaN
        pq.write_table(table, tmp_path / f"part-{k}.parquet", row_group_size=group)
    both = pa.concat_tables([table, table])
    expected = refused_by_pydantic(_NanEveryBound, both)
    assert expected  # the NaN rows
    report = report_for(tmp_path, _NanEveryBound, examples=both.num_rows)
    assert _offenders_by_report(report) == expected
    assert sorted(c.violations for c in report.failed) == [len(expected)] * 4  # every bound
    tasks = report_for(tmp_path, _NanEveryBound, examples=both.num_rows, executor=SerialExecutor())
    assert _offenders_by_report(tasks) == expected
    ds = ParquetDataset(tmp_path, memory=1)  # the dataset's own database too
    assert _offenders_by_report(ds.report(_NanEveryBound, examples=both.num_rows)) == expected
    assert len(ds) == both.num_rows
    assert ds[0]["ge"] == values[0] and ds[len(ds) - 1]["lt"] == values[-1]  # reads served
    ds.close()
