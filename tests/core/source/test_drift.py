"""Schema drift: the most common layout is the reference, in core.drift and in validation."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from undertale_duck.core.source.drift import reference_columns, schema_drift
from undertale_duck.validation.model import CheckResult, ValidationReport
from undertale_duck.validation.runner import report_for

COMMON = {"id": "VARCHAR", "label": "BIGINT"}
ODD = {"id": "VARCHAR", "label": "VARCHAR"}


@pytest.mark.parametrize("odd", range(5))
def test_the_odd_shard_is_named_wherever_it_sits(odd: int) -> None:
    shards = [(f"s{k}", ODD if k == odd else COMMON) for k in range(5)]
    assert reference_columns([c for _, c in shards]) == COMMON
    (drift,) = schema_drift(shards)
    assert drift.path == f"s{odd}"
    assert (drift.missing, drift.extra) == ([], [])
    assert drift.changed == [("label", "BIGINT", "VARCHAR")]
    assert drift.summary() == "types label BIGINT -> VARCHAR"


def test_ties_go_to_the_earliest_layout() -> None:
    other = {"id": "VARCHAR", "kind": "VARCHAR"}
    assert [d.path for d in schema_drift([("a", COMMON), ("b", other)])] == ["b"]
    assert [d.path for d in schema_drift([("a", other), ("b", COMMON)])] == ["b"]
    two_two = [("a", other), ("b", COMMON), ("c", COMMON), ("d", other)]
    drift = schema_drift(two_two)
    assert [d.path for d in drift] == ["b", "c"]
    assert drift[0].summary() == "missing kind, extra label"
    assert schema_drift([]) == [] and reference_columns([]) == {}


def test_column_order_is_not_drift_and_does_not_split_the_vote() -> None:
    reordered = dict(reversed(COMMON.items()))
    other = {"id": "VARCHAR"}
    # COMMON in two orders (4 shards) outvotes `other` (3 shards)
    shards = [COMMON, reordered, other, other, other, COMMON, reordered]
    assert reference_columns(shards) == COMMON
    assert list(reference_columns([reordered, COMMON])) == ["label", "id"]  # earliest's order
    drift = schema_drift([(str(k), s) for k, s in enumerate(shards)])
    assert [d.path for d in drift] == ["2", "3", "4"]
    assert all(d.missing == ["label"] and not d.extra and not d.changed for d in drift)


POOL = [
    {"a": "INTEGER", "b": "VARCHAR"},
    {"a": "BIGINT", "b": "VARCHAR"},
    {"a": "INTEGER"},
    {"a": "INTEGER", "b": "VARCHAR", "c": "BLOB"},
    {"b": "VARCHAR", "c": "DOUBLE"},
]


@st.composite
def layouts(draw: st.DrawFn) -> list[dict[str, str]]:
    """Shards drawn from a few layouts, each in a random column order."""
    picks = draw(st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=12))
    out = []
    for k in picks:
        items = draw(st.permutations(list(POOL[k].items())))
        out.append(dict(items))
    return out


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_drift_over_random_layouts(shards: list[dict[str, str]]) -> None:
    ref = reference_columns(shards)
    key = frozenset(ref.items())
    counts = Counter(frozenset(s.items()) for s in shards)
    # the reference is a shard's layout, shared by the most shards; ties -> the earliest
    assert counts[key] == max(counts.values())
    first = next(k for k, s in enumerate(shards) if frozenset(s.items()) == key)
    assert ref == shards[first]  # in that shard's column order
    assert all(counts[frozenset(s.items())] < counts[key] for s in shards[:first])
    # exactly the shards with another layout drift, in shard order, each described exactly
    drift = schema_drift([(str(k), s) for k, s in enumerate(shards)])
    odd = [str(k) for k, s in enumerate(shards) if frozenset(s.items()) != key]
    assert [d.path for d in drift] == odd
    for d in drift:
        mine = shards[int(d.path)]
        assert d.missing == [n for n in ref if n not in mine]
        assert d.extra == [n for n in mine if n not in ref]
        assert {n: (a, b) for n, a, b in d.changed} == {
            n: (t, mine[n]) for n, t in ref.items() if n in mine and mine[n] != t
        }
        assert d.summary()
    # column order never changes the verdict
    flipped = [dict(reversed(s.items())) for s in shards]
    assert [d.path for d in schema_drift([(str(k), s) for k, s in enumerate(flipped)])] == odd


# ---------------------------------------------------------------- validation uses the same rule

ARROW = pa.schema([("id", pa.string()), ("label", pa.int64())])
ARROW_ODD = pa.schema([("id", pa.string()), ("label", pa.string())])


class S(BaseModel):
    id: str
    label: int


def _write(root: Path, schemas: list[pa.Schema], rows: int = 7) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, sch in enumerate(schemas):
        labels = [k * rows + j for j in range(rows)]
        label = [str(v) for v in labels] if sch.field("label").type == pa.string() else labels
        table = pa.table({"id": [f"r{v}" for v in labels], "label": label}, schema=sch)
        path = root / f"part-{k}.parquet"
        pq.write_table(table.select(sch.names), path)
        paths.append(str(path))
    return paths


def _drift(report: ValidationReport) -> CheckResult:
    return next(c for c in report.checks if c.check == "shard_schema")


@pytest.mark.parametrize("odd", [0, 2, 3])
def test_validation_names_the_odd_shard_wherever_it_sits(tmp_path: Path, odd: int) -> None:
    paths = _write(tmp_path, [ARROW_ODD if k == odd else ARROW for k in range(4)])
    drift = _drift(report_for(tmp_path, S))
    assert not drift.passed and drift.per_shard == {paths[odd]: 7}
    assert [(e.shard, e.value) for e in drift.examples] == [
        (paths[odd], "types label BIGINT -> VARCHAR")
    ]


def test_validation_ties_and_column_order(tmp_path: Path) -> None:
    paths = _write(tmp_path / "tie", [ARROW_ODD, ARROW, ARROW, ARROW_ODD])
    drift = _drift(report_for(tmp_path / "tie", S))
    assert set(drift.per_shard) == {paths[1], paths[2]}  # the earliest layout is the reference
    assert drift.examples[0].value == "types label VARCHAR -> BIGINT"
    reordered = pa.schema([("label", pa.int64()), ("id", pa.string())])
    _write(tmp_path / "order", [ARROW, reordered, reordered])
    report = report_for(tmp_path / "order", S)
    assert _drift(report).passed and report.passed
