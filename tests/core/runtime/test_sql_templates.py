"""Every SQL template in sql/ is safe by construction: hostile names cannot change it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset
from undertale_duck.cli import app as cli
from undertale_duck.core.runtime import sqlfiles
from undertale_duck.core.runtime.sqlfiles import (
    TemplateError,
    column_list,
    literal_list,
    quote_identifier,
    quote_literal,
)

#: Pieces an attacker puts in a column name or a path to end a comment, string or statement.
SPECIALS = [
    "\n", "\r", "'", '"', "--", "/*", "*/", ";", "\\", "$$", "$a$", "{x}", "{", "}", "`",
    "ü", "🦆", "\u2028", "\t", "E'", "[", "*", "?", "%",
]
HOSTILE = [
    "x\n; COPY (SELECT 1) TO '/tmp/pwned' --",
    "x */ ; DROP VIEW dataset; /*",
    "it's \"quoted\"",
    "a\\'; SELECT 1; --",
    "$$; SELECT 1; $$",
    "\n-- \n;\n",
]

hostile_text = st.lists(
    st.one_of(st.sampled_from(SPECIALS), st.text(min_size=1, max_size=4)), min_size=1, max_size=8
).map("".join).filter(lambda s: "\x00" not in s)


def _fragments(placeholders: set[str], a: str, b: str) -> dict[str, str]:
    """One fragment per placeholder, built the way the package builds it, from names a and b."""
    value = f"struct_extract({quote_identifier(a)}, {quote_literal(b)})"
    known = {
        "columns": column_list([a, b]),
        "files": literal_list([f"/data/{a}.parquet", f"/data/{b}.parquet"]),
        "aggregates": (
            f"count(*) - count({quote_identifier(a)}) AS n_0, min(len({quote_identifier(a)})) "
            f"AS lo_0, max({quote_identifier(b)}) AS hi_0"
        ),
        "counts": f'count_if({value} IS NULL) AS "c0", count_if({value} < $p1) AS "c1"',
        "value": value,
        "violation": f"{value} IS NULL",
        "nan": f"isnan({value}) OR ",  # a float bound's NaN part (validation/plan.py)
        # a unique value's NaN test (validation/plan.py holds_nan: the holds_nan fragments)
        "holds_nan": f"isnan({value}) OR coalesce(list_bool_or(list_transform({value}, "
        f"lambda {quote_identifier(b)}: isnan({quote_identifier(b)}))), false)",
        "item": quote_identifier(a),
        "test": f"isnan({quote_identifier(a)})",
        "key_test": f"isnan(struct_extract({quote_identifier(a)}, {quote_literal(b)}))",
        "bound": "$p0",
        # a DECIMAL's digits and places (validation/plan.py: the digits_of and
        # decimal_places_of fragments rendered around the value)
        "digits": f"length(CAST(abs({value}) AS VARCHAR))",
        "places": f"length(split_part(CAST(abs({value}) AS VARCHAR), '.', 2))",
        "length": "length",
        "guard": f"{quote_identifier(a)} IS NOT NULL AND ",
        "rows": "read_parquet($files, filename = '__undertale_shard', file_row_number = true)",
        "order": 'ORDER BY "index"\n',
        "names": column_list([a, b]),
        "view": (  # a view's query, as DuckDB's json_deserialize_sql writes it back
            f"SELECT {quote_identifier(a)} AS {quote_identifier(b)}, {quote_literal(a)} AS x "
            f"FROM dataset WHERE ({quote_identifier(b)} = {quote_literal(b)})"
        ),
        "table": quote_identifier(a),
        "path": quote_literal(f"/data/{b}.parquet"),
        "key": quote_identifier(a),  # a split's key column, seed prefix and threshold
        "prefix": quote_literal(f"{b}:"),
        "threshold": quote_literal(b),
        # the dataset view's reads and a drifting column's conversion (source/convert.py)
        "reads": (
            f"SELECT {column_list([a, b])} FROM read_parquet({literal_list([a])}) UNION ALL "
            f"SELECT {quote_identifier(a)}, {quote_identifier(b)} FROM read_parquet("
            f"{literal_list([b])})"
        ),
        "runs": (
            f"SELECT NULL AS {quote_identifier(b)}, {column_list([a])} FROM read_parquet("
            f"{literal_list([a])}) UNION ALL SELECT NULL, {quote_identifier(a)} FROM "
            f"read_parquet({literal_list([b])})"
        ),
        "column": quote_identifier(a),
        "target": f"STRUCT({quote_identifier(a)} BIGINT)",
        "own": f"STRUCT({quote_identifier(b)} DOUBLE)[]",
        "head": quote_literal(f"shard /data/{a}: column {b!r}: the value "),
        "fails": quote_literal(f" does not cast; {a}"),
        "changes": quote_literal(f" changes when cast; {b}"),
        "message": quote_literal(f"shard /data/{a}: column {b!r}"),
        "expression": f"CAST({quote_identifier(a)} AS BIGINT)",
        "back": f"TRY_CAST(TRY_CAST({quote_identifier(a)} AS BIGINT) AS VARCHAR)",
    }
    missing = placeholders - set(known)
    assert not missing, f"add a hostile builder for the new placeholder(s) {missing}"
    return {k: known[k] for k in placeholders}


def _first_word(name: str) -> str:
    text = sqlfiles.sql_text(name)
    words = [text[a:b].strip().upper() for a, b, kind in sqlfiles.tokens(text)
             if kind != duckdb.token_type.comment]
    return words[0]


def _is_expression(name: str) -> bool:
    """Whether a template is a fragment (checks/ge.sql, checks/rows.sql), not statements."""
    return _first_word(name) not in ("SELECT", "WITH", "FROM", "CREATE", "SET", "DESCRIBE")


def _shape(name: str, a: str, b: str) -> tuple[list[str], int]:
    """``(statement kinds, comment tokens)`` of a template rendered with names a and b."""
    wanted = {n for _, _, n in sqlfiles.placeholders(name)}
    text = sqlfiles.render(name, **_fragments(wanted, a, b))
    if _is_expression(name):
        text = f"SELECT {text} FROM t"
    kinds = [s.type.name for s in duckdb.extract_statements(text)]
    comments = sum(k == duckdb.token_type.comment for _, k in duckdb.tokenize(text))
    return kinds, comments


TEMPLATES = sqlfiles.templates()


def test_templates_are_discovered() -> None:
    assert {"dataset_view", "describe_scan", "read_window", "checks/aggregate"} <= set(TEMPLATES)
    shipped = Path(sqlfiles.SQL_DIRS[1] if sqlfiles.SQL_DIRS[1].is_dir() else sqlfiles.SQL_DIRS[0])
    assert len(TEMPLATES) == len(list(shipped.rglob("*.sql")))


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_template_keeps_its_statements_with_hostile_names(name: str) -> None:
    benign = _shape(name, "a", "b")
    if sqlfiles.placeholders(name):
        assert len(benign[0]) == 1, f"{name}: a template with placeholders is one statement"
    first = _first_word(name)
    expected = first if first in ("CREATE", "SET") else "SELECT"
    assert set(benign[0]) == {expected}, name
    for a in HOSTILE:
        assert _shape(name, a, a[::-1]) == benign, (name, a)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=hostile_text, b=hostile_text, index=st.integers(0, len(TEMPLATES) - 1))
def test_hypothesis_hostile_names_never_change_a_template(a: str, b: str, index: int) -> None:
    name = TEMPLATES[index]
    assert _shape(name, a, b) == _shape(name, "a", "b")


@settings(max_examples=40, deadline=None)
@given(a=hostile_text)
def test_hostile_names_are_single_tokens(a: str) -> None:
    for quoted in (quote_identifier(a), quote_literal(a)):
        assert len(duckdb.tokenize(quoted)) == 1
        sqlfiles.check_fragment(quoted)
    text = sqlfiles.render("read_window", columns=column_list([a]), guard="")
    [statement] = duckdb.extract_statements(text)
    assert statement.type == duckdb.StatementType.SELECT


@pytest.mark.parametrize(
    "template",
    [
        "-- {columns}\nSELECT 1",
        "SELECT 1 /* {columns} */",
        "SELECT '{columns}'",
        'SELECT "{columns}"',
        "SELECT $${columns}$$",
        "SELECT E'\\'{columns}'",
        "SELECT 1 -- the {columns}",
    ],
)
def test_a_placeholder_outside_sql_code_is_refused(template: str) -> None:
    with pytest.raises(TemplateError, match="inside a comment"):
        sqlfiles.scan_template(template)


def test_the_old_describe_scan_template_is_refused() -> None:
    old = (
        "-- Exact per-column statistics of one shard by a full scan (describe --scan).\n"
        "-- {aggregates} is built from quoted column identifiers: for each column k,\n"
        'SELECT count(*) AS "rows", {aggregates}\nFROM read_parquet($path);\n'
    )
    with pytest.raises(TemplateError, match="line 2"):
        sqlfiles.scan_template(old)
    assert [n for _, _, n in sqlfiles.scan_template("SELECT {a}, {b}\n-- text\n")] == ["a", "b"]


def test_render_refuses_unquoted_or_missing_fragments() -> None:
    with pytest.raises(TemplateError, match="placeholders"):
        sqlfiles.render("read_window")
    assert sqlfiles.render(
        "read_window", columns='"a"', guard="", unused="x; --"
    ) == sqlfiles.render("read_window", columns='"a"', guard="")
    for unquoted in ["x\n; COPY (SELECT 1) TO 'f' --", "a /* b", "a; b", '"a""', "'a''", "a\x00"]:
        with pytest.raises(TemplateError):
            sqlfiles.render("read_window", columns=unquoted, guard="")
    for bad in ["a\x00b"]:
        with pytest.raises(ValueError, match="NUL"):
            quote_identifier(bad)
        with pytest.raises(ValueError, match="NUL"):
            quote_literal(bad)


# --------------------------------------------------------------------------- the planted shard


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    "payload",
    [
        "x\n; COPY (SELECT 1) TO {target} --",
        "x */; COPY (SELECT 1) TO {target}; /*",
        "x'; COPY (SELECT 1) TO {target}; --",
        'x"); COPY (SELECT 1) TO {target}; --',
    ],
)
def test_planted_shard_cannot_write_through_describe_scan(
    tmp_path: Path, payload: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "pwned.csv"
    inside = data / "part-00009.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "label": [0, 1, 0]}), data / "part-00000.parquet")
    names = [payload.format(target=quote_literal(str(t))) for t in (target, inside)]
    pq.write_table(
        pa.table({"id": [4, 5], names[0]: [7, 8], names[1]: ["a", "b"]}),
        data / "part-00001.parquet",
    )
    before = _digests(data)
    status = cli.main(["describe", str(data), "--scan"])
    out = capsys.readouterr().out
    assert status == 0
    assert "COPY (SELECT 1)" in out  # the column is described, by its name
    assert not target.exists() and not inside.exists()
    assert list(outside.iterdir()) == []
    assert _digests(data) == before
    # the same shard through the library: rows and the view
    ds = ParquetDataset(data / "part-00001.parquet")
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 2}]
    column = quote_identifier(names[0])
    assert ds.sql(f"SELECT {column} AS v FROM dataset WHERE id = 4").to_pylist() == [{"v": 7}]
    assert ds[1][names[1]] == "b"
    assert not target.exists() and _digests(data) == before
    assert sorted(os.listdir(data)) == ["part-00000.parquet", "part-00001.parquet"]
