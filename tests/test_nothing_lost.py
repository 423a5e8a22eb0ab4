"""Nothing lost: no code path, including refused write attempts, changes a dataset's files.

``snapshot`` records every file under a dataset directory (sha256, size, mtime, inode, mode)
and the directory listing itself; a test runs every read, SQL, validation, sampler, loader and
command-line path against a dataset, including every way to try to write, and compares.
The session's shared ``uneven`` fixture is also compared byte for byte with a fresh copy
written the same way, so a test anywhere earlier in the session that changed it is caught.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import (
    ChunkedSampler,
    ParquetDataset,
    QueryError,
    ReadOnlyError,
    SchemaError,
    UndertaleDuckError,
    cli,
    load,
    schema,
)
from undertale_duck.core.runtime.sqlfiles import quote_literal

Snapshot = dict[str, tuple[str, int, int, int, int]]


def snapshot(root: Path) -> Snapshot:
    """Every file and directory under ``root``: sha256, size, mtime_ns, inode and mode."""
    out: Snapshot = {}
    for directory, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(directory, name)
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            key = str(path.relative_to(root))
            out[key] = (digest, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)
    return out


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "undertale_duck", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
    )


def _collate(batch: list[dict[str, Any]]) -> list[Any]:
    return [row["id"] for row in batch]


def test_every_path_leaves_the_dataset_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    sizes = [60, 0, 45, 1]
    paths = datagen.write_shards(root, sizes, row_group_size=[16, 1, 10, 1])
    (root / "_SUCCESS").write_text("")
    (root / "notes.txt").write_text("not parquet")
    total = sum(sizes)
    want = datagen.expected(total)
    before = snapshot(root)
    assert len(before) == 6

    # ---------------------------------------------------------------- the dataset
    ds = ParquetDataset(root, memory=1, window_bytes=1)
    assert [ds[i] for i in range(total)] == want
    assert ds.__getitems__(list(range(total))[::-3]) == want[::-3]
    assert ds[-1] == want[-1] and ds.locate(61) == (str(paths[2]), 1)
    clone = pickle.loads(pickle.dumps(ds))
    assert clone[5] == want[5]
    ds.refresh()
    ds.close()
    assert ds.cache_stats.bytes == 0
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=_collate, timeout=60)
    assert [i for b in loader for i in b] == [r["id"] for r in want]
    sampler = ChunkedSampler(ds, batch=8, workers=2, ranks=1, rank=0, shuffle=True)
    assert sorted(sampler) == sorted(set(sampler))
    rows = [r for b in load(root, schema.Dataset, _collate, batch=16, workers=0) for r in b]
    assert sorted(rows) == sorted(r["id"] for r in want)

    # ---------------------------------------------------------------- SQL, with write attempts
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": total}]
    shard = quote_literal(str(paths[0]))
    directory = quote_literal(str(root))
    attempts = [
        f"COPY (SELECT 1 AS x) TO {shard} (FORMAT parquet)",
        f"COPY dataset TO {shard}",
        f"COPY dataset TO {directory} (FORMAT parquet, PARTITION_BY (label))",
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO {shard}",
        f"ATTACH {quote_literal(str(root / 'db.duckdb'))} AS x",
        f"ATTACH {shard} AS x",
        "CREATE TABLE t AS SELECT * FROM dataset",
        "CREATE OR REPLACE VIEW dataset AS SELECT 1 AS id",
        "DROP VIEW dataset",
        f"SET temp_directory = {directory}",
        f"EXPORT DATABASE {directory}",
        f"CALL enable_logging(storage = 'file', storage_path = {directory})",
        "INSTALL httpfs",
        f"SELECT 1; COPY (SELECT 1) TO {shard}",
    ]
    for attempt in attempts:
        with pytest.raises(QueryError):
            ds.sql(attempt)
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": total}]

    # ---------------------------------------------------------------- validation
    ds.validate(schema.Dataset)
    with pytest.raises(SchemaError):
        ds.validate(schema.TokenizedDataset)  # no mask column: fails, writes nothing
    assert not ds.report(schema.TokenizedClassificationDataset).passed

    # ---------------------------------------------------------------- command line
    out = tmp_path / "out"
    out.mkdir()
    ok = [
        ("sql", str(root), "SELECT count(*) AS n FROM dataset"),
        ("sql", str(root), "SELECT id FROM dataset", "--output", str(out / "r.parquet")),
        ("describe", str(root)),
        ("head", str(root), "-n", "3"),
        ("row", str(root), "7"),
        ("validate", str(root), "--schema", "Dataset", "--output", str(out / "report.json")),
    ]
    for args in ok:
        assert cli.main(list(args)) == 0, args
    refused = [
        ("sql", str(root), f"COPY dataset TO {shard}"),
        ("sql", str(root), f"EXPLAIN ANALYZE COPY dataset TO {shard}"),
        ("sql", str(root), "SELECT 1 AS x", "--output", str(paths[0]), "--force"),
        ("sql", str(root), "SELECT 1 AS x", "--output", str(root / "new.csv")),
        ("validate", str(root), "--schema", "TokenizedDataset"),
    ]
    monkeypatch.chdir(root)  # relative outputs would land inside the dataset
    for args in refused:
        assert cli.main(list(args)) != 0, args
    assert cli.main(["sql", ".", "SELECT 2 AS y", "--output", "y.csv"]) != 0
    # and once as a real process, from inside the dataset directory
    done = _cli("sql", ".", f"COPY dataset TO {shard}", cwd=root)
    assert done.returncode == 1 and "read-only" in done.stderr
    assert "Traceback" not in done.stderr
    capsys.readouterr()

    # ---------------------------------------------------------------- nothing changed
    after = snapshot(root)
    assert after == before


def test_session_fixture_is_intact(uneven: tuple[Path, int], tmp_path: Path) -> None:
    """Whatever ran before in this session, the shared fixture is byte for byte as written."""
    root, total = uneven
    fresh = tmp_path / "fresh"
    sizes = [150, 1, 0, 97, 300, 2]
    datagen.write_shards(fresh, sizes, row_group_size=[40, 1, 1, 13, 128, 1])
    assert total == sum(sizes)
    mine = {k: v[0] for k, v in snapshot(fresh).items()}
    theirs = {k: v[0] for k, v in snapshot(root).items() if k in mine}
    assert theirs == mine
    extra = {"_SUCCESS", ".part-00000.parquet.crc", "part-00001.parquet.crc", "README.txt",
             ".hidden.parquet"}
    assert set(snapshot(root)) == set(mine) | extra


def test_refused_write_errors_are_ours(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [4])
    ds = ParquetDataset(tmp_path)
    with pytest.raises(ReadOnlyError) as info:
        ds.sql(f"COPY dataset TO {quote_literal(str(tmp_path / 'part-00000.parquet'))}")
    assert isinstance(info.value, UndertaleDuckError)
    assert "read-only" in str(info.value)
