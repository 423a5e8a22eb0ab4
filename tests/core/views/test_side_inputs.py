"""Issue 27: side tables are inputs like shards, and no cached artefact outlives its inputs.

On real files: a side table changed or swapped after a view was indexed, special and
non-Parquet side tables, reserved names, a damaged window file in the disk tier, a shard
rewritten in place with its mtime restored. The dataset's sha256 is checked before and after.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import datagen

from undertale_duck import ArgumentError, ParquetDataset, ShardChangedError
from undertale_duck.core.bounds import weights
from undertale_duck.core.source.shard import read_footer

SIZES = [40, 30]
ROOT = Path(__file__).resolve().parents[3]
QUERY = (
    "SELECT dataset.id, dataset.label FROM dataset JOIN keep k ON dataset.label = k.label "
    "WHERE k.ok = 1"
)


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


def write_keep(path: Path, ok: list[int]) -> None:
    pq.write_table(pa.table({"label": list(range(7)), "ok": ok}), path)


def expected(ok: list[int]) -> list[dict[str, object]]:
    return [{"id": r["id"], "label": r["label"]} for r in datagen.expected(sum(SIZES))
            if ok[r["label"]]]


def test_a_side_table_changed_after_indexing_never_serves_rows_failing_the_filter(
    data: Path, tmp_path: Path
) -> None:
    before = digest(data)
    side = tmp_path / "keep.parquet"
    first, second = [1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0, 0]
    write_keep(side, first)
    ds = ParquetDataset(data, query=QUERY, tables={"keep": str(side)}, read_ahead=False)
    assert ds[0] == expected(first)[0]
    write_keep(side, second)  # same number of kept rows per window? never mind: refused
    with pytest.raises(ShardChangedError, match="side table 'keep'"):
        [ds[i] for i in range(len(ds))]
    fresh = ParquetDataset(data, query=QUERY, tables={"keep": str(side)})
    assert [fresh[i] for i in range(len(fresh))] == expected(second)
    assert digest(data) == before


def test_a_side_table_swapped_by_rename_with_equal_size_and_mtime_is_indexed_anew(
    data: Path, tmp_path: Path
) -> None:
    """``rsync -t`` replaces a file by a rename, keeping its size and mtime."""
    before = digest(data)
    side = tmp_path / "keep.parquet"
    first, second = [1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0, 0]
    write_keep(side, first)
    ds = ParquetDataset(data, query=QUERY, tables={"keep": str(side)})
    assert [ds[i] for i in range(len(ds))] == expected(first)
    old = side.stat()
    write_keep(tmp_path / "new.parquet", second)
    assert (tmp_path / "new.parquet").stat().st_size == old.st_size
    os.utime(tmp_path / "new.parquet", ns=(old.st_atime_ns, old.st_mtime_ns))
    os.rename(tmp_path / "new.parquet", side)
    # a new process: the index of the old file must not be reused
    code = (
        "from undertale_duck import ParquetDataset\n"
        f"ds = ParquetDataset({str(data)!r}, query={QUERY!r}, tables={{'keep': {str(side)!r}}})\n"
        "print(sorted({ds[i]['label'] for i in range(len(ds))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split("\n")[-2] == "[2, 3]"
    assert digest(data) == before


@pytest.mark.parametrize("kind", ["fifo", "directory", "text", "fake-magic"])
def test_special_and_non_parquet_side_tables_are_named_in_our_error(
    data: Path, tmp_path: Path, kind: str
) -> None:
    before = digest(data)
    side = tmp_path / "side.parquet"
    match = {"fifo": "not a regular file", "directory": "is a directory",
             "text": "not a Parquet file", "fake-magic": "cannot be read as a Parquet"}[kind]
    if kind == "fifo":
        os.mkfifo(side)
    elif kind == "directory":
        side.mkdir()
    elif kind == "text":
        side.write_text("label,ok\n1,1\n")
    else:
        side.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    # in a child with a timeout: a FIFO that blocked would hang the suite otherwise
    code = (
        "from undertale_duck import ParquetDataset, ArgumentError\n"
        "try:\n"
        f"    ParquetDataset({str(data)!r}, query={QUERY!r}, tables={{'keep': {str(side)!r}}})\n"
        "except ArgumentError as exc:\n"
        "    print('ERROR', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.startswith("ERROR tables['keep']: " + str(side))
    assert match in out.stdout
    assert digest(data) == before


@pytest.mark.parametrize("name", ["dataset", "DATASET", "dataset_view", "Dataset_View"])
def test_reserved_side_table_names_are_refused(data: Path, name: str) -> None:
    with pytest.raises(ArgumentError, match="dataset_view"):
        ParquetDataset(data, query="SELECT * FROM dataset", tables={name: pa.table({"a": [1]})})


def test_side_tables_that_are_not_a_dict_of_string_names_are_refused(data: Path) -> None:
    # a list of tables raised a bare ValueError from dict(); a number among string names a
    # TypeError from sorting them, and alone it was told it was reserved or empty
    table = pa.table({"a": [1]})
    query = "SELECT * FROM dataset"
    listed: list[Any] = [[table], [("x", table)], "x", (("x", table),)]
    for tables in listed:
        with pytest.raises(ArgumentError, match=r"tables must be a dict .*got (list|str|tuple)"):
            ParquetDataset(data, query=query, tables=tables)
    numbered: list[Any] = [{5: table}, {5: table, "a": table}, {"a": table, None: table}]
    for tables in numbered:
        with pytest.raises(ArgumentError, match=r"tables= names are strings .*got (5|None)"):
            ParquetDataset(data, query=query, tables=tables)


def test_side_table_names_differing_only_in_case_are_refused(data: Path) -> None:
    # DuckDB's names are case-insensitive: one table would have served both names
    tables = {"n": pa.table({"label": [0, 1], "name": ["a", "b"]}),
              "N": pa.table({"label": [0, 1], "name": ["y", "z"]})}
    with pytest.raises(ArgumentError, match="'N' and 'n' differ only in case"):
        ParquetDataset(data, query="SELECT d.id, x.name FROM dataset d JOIN N x "
                       "ON d.label = x.label", tables=tables)


def test_a_side_table_name_holding_nul_is_an_argument_error(data: Path) -> None:
    # no DuckDB identifier can hold NUL: one line naming tables=, not a bare ValueError
    with pytest.raises(ArgumentError, match=r"tables= name 'n\\x00x' holds a NUL character"):
        ParquetDataset(data, query="SELECT d.id FROM dataset d",
                       tables={"n\x00x": pa.table({"label": [0, 1]})})


def test_a_damaged_window_file_is_never_served(data: Path, tmp_path: Path) -> None:
    before = digest(data)
    directory = tmp_path / "windows"
    ds = ParquetDataset(data, disk=8, disk_dir=directory, window_bytes=2000, read_ahead=False)
    assert [ds[i] for i in range(len(ds))] == datagen.expected(sum(SIZES))
    files = sorted(Path(ds.disk_dir or "").glob("*.arrow"))
    assert files
    for path in files:  # one flipped byte inside the Arrow data, in place
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        with open(path, "r+b") as fh:
            fh.write(raw)
    again = ParquetDataset(data, disk=8, disk_dir=directory, window_bytes=2000,
                           read_ahead=False)
    assert [again[i] for i in range(len(again))] == datagen.expected(sum(SIZES))
    assert digest(data) == before


def test_a_kept_weight_does_not_outlive_a_shard_rewritten_in_place(data: Path) -> None:
    shard = sorted(data.glob("*.parquet"))[0]
    old = read_footer(str(shard))
    st = shard.stat()
    content = shard.read_bytes()
    with open(shard, "r+b") as fh:  # same inode and size; mtime restored below
        fh.write(content)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    new = read_footer(str(shard))
    assert (new.size, new.mtime_ns, new.inode) == (old.size, old.mtime_ns, old.inode)
    assert weights.record_key(new, "id") != weights.record_key(old, "id")


def test_a_side_table_dictionary_bomb_is_inside_the_memory_bound(
    data: Path, tmp_path: Path
) -> None:
    """One 4 MiB value per label: tiny on disk, 8 GiB per 2048-row vector once joined."""
    from support import hostile_files as hf

    from undertale_duck.errors import MemoryBudgetError

    before = digest(data)
    sides = tmp_path / "sides"
    sides.mkdir()
    hf.dictionary_bomb(sides / "raw.parquet", 7, 4 << 20, store_schema=False)
    bomb = pq.read_table(sides / "raw.parquet").append_column("label", pa.array(range(7)))
    pq.write_table(bomb, sides / "bomb.parquet", compression="zstd")
    query = "SELECT d.id, b.s FROM dataset d JOIN b ON d.label = b.label"
    ds = ParquetDataset(data, memory=64, query=query, tables={"b": str(sides / "bomb.parquet")})
    with pytest.raises(MemoryBudgetError, match=r"side table's column 's'.*bomb\.parquet"):
        ds.sql("SELECT * FROM dataset_view")
    # an ordinary side table joins as before
    write_keep(sides / "keep.parquet", [1, 1, 0, 0, 0, 0, 0])
    fine = ParquetDataset(data, memory=64, query=QUERY,
                          tables={"keep": str(sides / "keep.parquet")})
    got = fine.sql("SELECT id, label FROM dataset_view ORDER BY id").to_pylist()
    assert got == sorted(expected([1, 1, 0, 0, 0, 0, 0]), key=lambda r: str(r["id"]))
    assert digest(data) == before
