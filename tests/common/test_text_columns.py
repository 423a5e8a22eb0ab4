"""Plain text columns (describe, validate's text report, row, the shell's .shards) line up on a
terminal when cells hold wide characters (CJK, fullwidth forms) or combining marks: widths are
counted in terminal cells, not in code points."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from support.cli_run import invoke

from undertale_duck.common.text import aligned

CELLS = st.lists(
    st.sampled_from(["a", "é", "e\u0301", "日", "本", "Ａ", "—", "ü", "7"]), max_size=6
).map("".join)


def starts(line: str, text: str) -> int:
    """The terminal column at which ``text`` starts in ``line``."""
    return cell_len(line[: line.index(text)])


@given(st.lists(st.tuples(CELLS, CELLS), min_size=1, max_size=5))
def test_aligned_columns_start_at_one_terminal_column(rows: list[tuple[str, str]]) -> None:
    # a marker after each first cell: it must sit in one terminal column on every line
    lines = aligned(["name", "x"], [[a, f"|{b}"] for a, b in rows], indent="").splitlines()
    body = lines[2:]
    assert len({starts(line, "|") for line in body}) == 1, lines
    assert starts(lines[0], "x") == starts(body[0], "|"), lines
    widest = max(cell_len(a) for a in ["name", *(r[0] for r in rows)])
    assert cell_len(lines[1].split()[0]) == widest


def test_describe_and_row_line_up_wide_values_and_names(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    n = 6
    table = pa.table({"名前": [f"日本{i}" if i % 2 else f"x{i}" for i in range(n)],
                      "v": list(range(n))})
    pq.write_table(table, root / "part-0.parquet")
    status, out, err = invoke("describe", str(root))
    assert status == 0, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["name", "type"])
    columns = lines[header : header + 4]  # header, rule, 名前, v
    # the type column starts in one terminal column whatever the names' widths
    types = ["type", None, "VARCHAR", "BIGINT"]
    assert len({starts(line, t) for line, t in zip(columns, types, strict=True) if t}) == 1, columns
    status, out, err = invoke("row", str(root), "1")
    assert status == 0, err
    values = out.splitlines()[1:]
    assert len({starts(line, "'" if "名前" in line else "1") for line in values}) == 1, values
