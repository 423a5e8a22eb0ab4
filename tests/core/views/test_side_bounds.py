"""Issue 27, item 3: CSV and Arrow side tables' strings are inside the memory bound of ds.sql.

A join repeats a side table's value in every matching row: a few long values in a tiny
side table are gigabytes per DuckDB vector once joined. Each case is refused before the
query reads anything (or runs, when the values are ordinary); the dataset's sha256 is
checked before and after.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pytest
from support import datagen

from undertale_duck import MemoryBudgetError, ParquetDataset

SIZES = [40, 30]
JOIN = "SELECT d.id, b.s FROM dataset d JOIN b ON d.label = b.label"
#: Long enough that 2048 repeats pass a 64 MiB budget many times over, short enough for
#: DuckDB's CSV reader (2 MB lines at most by default).
LONG = 1_500_000


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=10)
    return root


def write_csv(path: Path, length: int, rows: int = 7) -> None:
    with open(path, "w") as out:
        out.write("label,s\n")
        for label in range(rows):
            out.write(f"{label},{chr(ord('a') + label) * length}\n")


def test_a_csv_side_table_of_long_values_joined_many_times_is_refused(
    data: Path, tmp_path: Path
) -> None:
    before = digest(data)
    side = tmp_path / "long.csv"
    write_csv(side, LONG)
    ds = ParquetDataset(data, memory=64, query=JOIN, tables={"b": str(side)})
    with pytest.raises(MemoryBudgetError, match=r"column 's' of tables\['b'\].*long\.csv"):
        ds.sql("SELECT * FROM dataset_view")
    with pytest.raises(MemoryBudgetError, match="column 's'"):
        ds.sql_batches("SELECT s FROM dataset_view")
    # its lengths are no bomb
    got = ds.sql("SELECT max(strlen(s)) AS n, count(*) AS c FROM dataset_view").to_pylist()
    assert got == [{"n": LONG, "c": sum(SIZES)}]
    assert digest(data) == before


def test_ordinary_csv_side_tables_join_as_before(data: Path, tmp_path: Path) -> None:
    """Small: under the file-size bound; larger (a 300 KB file): measured, then run."""
    before = digest(data)
    small, larger = tmp_path / "small.csv", tmp_path / "larger.csv"
    write_csv(small, 10)
    with open(larger, "w") as out:  # many short values: the file is large, no value is
        out.write("label,s\n")
        for i in range(30_000):
            out.write(f"{i},v{i % 7}\n")
    for side in (small, larger):
        ds = ParquetDataset(data, memory=64, query=JOIN, tables={"b": str(side)})
        got = ds.sql("SELECT id, s FROM dataset_view ORDER BY id").to_pylist()
        assert len(got) == sum(SIZES)
        want = {r["id"]: r["label"] for r in datagen.expected(sum(SIZES))}
        assert all(len(r["s"]) in (2, 10) and want[r["id"]] is not None for r in got)
    assert digest(data) == before


@pytest.mark.parametrize("shape", ["plain", "dictionary", "nested", "struct"])
def test_an_arrow_side_table_of_long_values_is_refused(data: Path, shape: str) -> None:
    before = digest(data)
    value = "x" * (4 << 20)
    labels = pa.array(range(7))
    if shape == "plain":
        s = pa.array([value] + ["short"] * 6)
    elif shape == "dictionary":  # one 4 MiB entry referenced by every row: 4 MiB in memory
        s = pa.DictionaryArray.from_arrays(pa.array([0] * 7, pa.int32()), pa.array([value]))
    elif shape == "nested":
        s = pa.array([["a", value]] + [["b"]] * 6)
    else:
        s = pa.array([{"t": value}] + [{"t": "b"}] * 6)
    table = pa.table({"label": labels, "s": s})
    ds = ParquetDataset(data, memory=64, query=JOIN, tables={"b": table})
    with pytest.raises(MemoryBudgetError, match=r"column 's' of tables\['b'\] \(the Arrow"):
        ds.sql("SELECT * FROM dataset_view")
    if shape in ("plain", "dictionary"):  # without its values the query runs (a nested
        # column counts whenever the view names it, as the shards' do: DuckDB copies nested
        # strings as it scans them)
        got = ds.sql("SELECT count(*) AS c FROM dataset_view").to_pylist()
        assert got == [{"c": sum(SIZES)}]
    assert digest(data) == before


def test_an_ordinary_arrow_side_table_joins_as_before(data: Path) -> None:
    table = pa.table({"label": range(7), "s": [f"v{i}" for i in range(7)]})
    ds = ParquetDataset(data, memory=64, query=JOIN, tables={"b": table})
    got = ds.sql("SELECT id, s FROM dataset_view ORDER BY id").to_pylist()
    assert len(got) == sum(SIZES) and all(r["s"].startswith("v") for r in got)
