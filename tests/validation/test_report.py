"""Report renderers: aligned text, JSON round-trips, well-formed Markdown, HTML that parses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field

from undertale_duck import ArgumentError, ValidationReport, schema
from undertale_duck.validation.render import (
    REPORT_FORMATS,
    render,
    to_html,
    to_json,
    to_markdown,
    to_text,
)
from undertale_duck.validation.runner import report_for


class S(BaseModel):
    id: Annotated[str, schema.Unique]
    label: int = Field(ge=0)
    kind: Literal["a|b", "<c>"]
    blob: bytes | None


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    arrow = pa.schema(
        [("id", pa.string()), ("label", pa.int64()), ("kind", pa.string()), ("blob", pa.binary())]
    )
    pq.write_table(pa.Table.from_pylist(rows, arrow), path)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[ValidationReport, ValidationReport]:
    bad = tmp_path_factory.mktemp("bad")
    rows = [{"id": f"r{i}", "label": i, "kind": "a|b", "blob": b"\x00\xff"} for i in range(30)]
    _write(bad / "part-0.parquet", rows)
    rows = [
        {"id": f"r{i}", "label": -i, "kind": "<script>x</script>", "blob": None}
        for i in range(28, 40)
    ]
    _write(bad / "part-1.parquet", rows)
    (bad / "part-2.parquet").write_bytes(b"PAR1 truncated & <broken>")
    good = tmp_path_factory.mktemp("good")
    _write(good / "part-0.parquet", [{"id": "x", "label": 1, "kind": "<c>", "blob": b""}])
    return report_for(bad, S), report_for(good, S)


def test_the_failing_report_is_what_the_renderers_get(
    reports: tuple[ValidationReport, ValidationReport],
) -> None:
    bad, good = reports
    assert good.passed and not bad.passed
    failed = {(c.check, c.column, c.violations) for c in bad.failed}
    assert failed == {
        ("readable", None, 1),
        ("unique", "id", 4),
        ("range", "label", 12),
        ("literal", "kind", 12),
    }
    assert bad.source.endswith("bad0") or "bad" in Path(bad.source).name


def test_json_round_trips(reports: tuple[ValidationReport, ValidationReport]) -> None:
    for report in reports:
        text = to_json(report)
        data = json.loads(text)
        assert data["passed"] is report.passed
        assert len(data["checks"]) == len(report.checks)
        assert ValidationReport.model_validate_json(text) == report
    blob_example = json.loads(to_json(reports[0]))
    values = [e["value"] for c in blob_example["checks"] for e in c["examples"]]
    assert "<script>x</script>" in values


def test_text_is_an_aligned_table(reports: tuple[ValidationReport, ValidationReport]) -> None:
    text = to_text(reports[0])
    lines = text.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("status"))
    table = lines[header : header + 2 + len(reports[0].checks)]
    starts = [m.start() for m in re.finditer(r"\S+", table[0])]
    for line in table[2:]:
        assert line.split()[0] in ("PASS", "FAIL")
        for col in starts[1:3]:  # check and column start under their headers
            assert line[col - 1] == " " and line[col] != " ", line
    assert "FAILED: " in text
    assert "#28 (" in text  # unique example with its global index
    assert "part-2.parquet" in text and "truncated" in text
    assert to_text(reports[1]).splitlines()[3].startswith("PASSED")


def test_a_count_of_one_is_singular(reports: tuple[ValidationReport, ValidationReport]) -> None:
    """The text, markdown and summary said "1 shards" and "1 rows"."""
    bad, good = reports  # bad: 42 rows in 3 shards, one unreadable; good: 1 row in 1 shard
    assert to_text(good).splitlines()[2].startswith("rows:   1 in 1 shard (")
    assert "\n- rows: 1 in 1 shard\n" in to_markdown(good)
    assert " against test_report.S (1 row, 1 shard): all " in good.summary()
    assert to_text(bad).splitlines()[2].startswith("rows:   42 in 3 shards (")
    assert "\n- rows: 42 in 3 shards\n" in to_markdown(bad)
    summary = bad.summary()
    assert "(42 rows, 3 shards)" in summary and "readable: 1 shard [" in summary
    assert "unique(id): 4 rows [" in summary


def test_markdown_tables_are_well_formed(
    reports: tuple[ValidationReport, ValidationReport],
) -> None:
    text = to_markdown(reports[0])
    tables: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    tables = [t for t in tables if t]
    assert len(tables) >= 4  # checks, examples of failed checks, shards
    for table in tables:
        widths = {len(re.findall(r"(?<!\\)\|", row)) for row in table}
        assert len(widths) == 1, table
        assert re.fullmatch(r"\|(-+:?\|)+", table[1].replace("---:", "---"))
    assert "a\\|b" in text  # the pipe in a value is escaped
    assert "&lt;script>" in text


class _StrictHTML(HTMLParser):
    VOID = frozenset({"meta", "br", "hr", "img", "input", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack)
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_parses_and_is_self_contained(
    reports: tuple[ValidationReport, ValidationReport],
) -> None:
    for report in reports:
        page = to_html(report)
        parser = _StrictHTML()
        parser.feed(page)
        parser.close()
        assert parser.stack == []
        assert {"html", "head", "style", "body", "table"} <= set(parser.seen)
        assert "script" not in parser.seen and "link" not in parser.seen
        assert "http://" not in page and "https://" not in page
    page = to_html(reports[0])
    parser = _StrictHTML()
    parser.feed(page)
    text = "".join(parser.text)
    assert "<script>x</script>" in text  # escaped in the page, intact as text
    assert "part-2.parquet" in text and "Shards" in text
    assert "SQL" in parser.text


def test_render_dispatch(reports: tuple[ValidationReport, ValidationReport]) -> None:
    report = reports[0]
    assert render(report, "json") == to_json(report)
    assert render(report, "md") == to_markdown(report)
    for fmt in REPORT_FORMATS:
        assert render(report, fmt).endswith("\n")
    with pytest.raises(ArgumentError, match="unknown report format"):
        render(report, "xml")


def test_render_depends_only_on_the_report_model() -> None:
    """Importing the renderers loads the model, never the check engine (or DuckDB's queries)."""
    engine = ["runner", "state", "layout", "rowscan", "unique", "plan", "targets"]
    code = (
        "import sys, json\n"
        "import undertale_duck.validation.render\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    loaded = set(json.loads(proc.stdout))
    assert "undertale_duck.validation.model" in loaded
    assert not {f"undertale_duck.validation.{m}" for m in engine} & loaded


def test_text_tables_right_align_counts(
    reports: tuple[ValidationReport, ValidationReport],
) -> None:
    lines = to_text(reports[0]).splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("status"))
    end = lines[header].index("violations") + len("violations")
    for line in lines[header + 2 : header + 2 + len(reports[0].checks)]:
        assert line[end - 1] != " " and line[end] == " ", line  # numbers end under the header
    shards = lines.index("shards with problems:") + 1
    rows_end = lines[shards].index(" rows") + len(" rows")
    for line in lines[shards + 2 :]:
        assert line[rows_end - 1] != " " and line[rows_end] == " ", line


def test_schema_error_for_a_missing_column_names_every_column_the_schema_needs(
    tmp_path: Path,
) -> None:
    from undertale_duck import ParquetDataset, SchemaError

    # shaped as a first guess at a tokenized dataset: no mask
    pq.write_table(
        pa.table({"id": ["fn-0", "fn-1"], "tokens": [[1], [2, 3]], "label": [0, 1]}),
        tmp_path / "x.parquet",
    )
    with pytest.raises(SchemaError) as caught:
        ParquetDataset(tmp_path / "x.parquet").validate(schema.TokenizedClassificationDataset)
    message = str(caught.value)
    assert "present(mask)" in message
    assert message.endswith(
        "TokenizedClassificationDataset needs the columns id, tokens, mask, label"
    )


def test_schema_error_names_a_schema_from_a_file_by_its_class(tmp_path: Path) -> None:
    from undertale_duck import ParquetDataset, SchemaError
    from undertale_duck.validation.schemas import load_schema

    # the name is "/path/sch.py:Missing": its last '.' cut "py:Missing" from it
    (tmp_path / "sch.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Missing(BaseModel):\n    nope: int\n"
    )
    pq.write_table(pa.table({"i": [1, 2]}), tmp_path / "x.parquet")
    model = load_schema(f"{tmp_path / 'sch.py'}:Missing")
    with pytest.raises(SchemaError) as caught:
        ParquetDataset(tmp_path / "x.parquet").validate(model)
    assert str(caught.value).endswith(". Missing needs the columns nope")


def test_report_for_takes_memory_as_parquetdataset_does(tmp_path: Path) -> None:
    _write(tmp_path / "part-0.parquet",
           [{"id": f"r{i}", "label": i, "kind": "<c>", "blob": None} for i in range(5)])
    report = report_for(tmp_path, S, memory="1GiB")  # a size string, as memory= takes
    assert report.passed and report.rows == 5
    with pytest.raises(ArgumentError, match="memory must be a finite size >= 0"):
        report_for(tmp_path, S, memory=-1)  # not silently "no budget"
    with pytest.raises(ArgumentError, match="memory must be a size such as"):
        report_for(tmp_path, S, memory="lots")
