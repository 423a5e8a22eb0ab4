"""Validation verdicts: load() and DataModule scan a dataset once per schema and fingerprint."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, create_model
from support import datagen

from undertale_duck import ParquetDataset, SchemaError, load, schema
from undertale_duck.core.runtime import CACHE_ENV
from undertale_duck.validation import verdicts


class Rows(schema.Dataset):
    label: int = Field(ge=0, lt=7)


class Stricter(schema.Dataset):
    label: int = Field(ge=0, lt=6)


def _same_name(unique: bool, low: int) -> type[BaseModel]:
    """Schemas that differ only in a marker or a nested constraint: same name, same module."""
    inner = create_model("Inner", x=(int, Field(ge=low)))
    ident: Any = Annotated[str, schema.Unique] if unique else str
    return create_model("Same", id=(ident, ...), point=(inner, ...))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache directory and no verdict remembered in this process."""
    root = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(root))
    verdicts.forget()
    yield root / "verdicts"
    verdicts.forget()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, [30, 25, 12], row_group_size=10)
    return root


class Scans:
    """Counts real validation scans: ParquetDataset.report still runs, we only count calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = ParquetDataset.report

        def counted(ds: ParquetDataset, model: type[BaseModel]) -> Any:
            self.calls += 1
            return original(ds, model)

        monkeypatch.setattr(ParquetDataset, "report", counted)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Scans:
    return Scans(monkeypatch)


def _ids(rows: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"][4:]) for r in rows]


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------- reuse
def test_load_scans_once_then_reuses(cache: Path, data: Path, scans: Scans) -> None:
    before = verdicts.stats()
    files = _snapshot(data)
    for _ in range(3):
        loader = load(data, Rows, _ids, 8)
        assert [i for b in loader for i in b] == list(range(67))
    assert scans.calls == 1
    after = verdicts.stats()
    assert (after.scans - before.scans, after.reused - before.reused) == (1, 2)
    written = list(cache.glob("*.json"))
    assert len(written) == 1
    record = json.loads(written[0].read_text())
    assert record["passed"] is True and record["rows"] == 67 and record["shards"] == 3
    assert _snapshot(data) == files  # nothing written into the dataset
    assert not list(cache.glob(".*"))  # no temporary file left behind


def test_the_disk_cache_serves_a_new_process(cache: Path, data: Path, scans: Scans) -> None:
    load(data, Rows, _ids, 8)
    verdicts.forget()  # as a new process: only the disk remembers
    load(data, Rows, _ids, 8)
    assert scans.calls == 1
    # a real new process computes the same key (schema identity is stable across processes)
    load(data, schema.Dataset, _ids, 8)
    code = ("import sys; from undertale_duck import ParquetDataset, schema;"
            "from undertale_duck.validation import verdicts;"
            "print(verdicts.verdict_key(ParquetDataset(sys.argv[1]), schema.Dataset))")
    out = subprocess.run([sys.executable, "-c", code, str(data)], check=True,
                         capture_output=True, text=True, timeout=120, env={**os.environ})
    key = out.stdout.strip()
    assert key == verdicts.verdict_key(ParquetDataset(data), schema.Dataset)
    assert (cache / f"{key}.json").exists()


def test_a_changed_shard_is_scanned_again(cache: Path, data: Path, scans: Scans) -> None:
    load(data, Rows, _ids, 8)
    shard = sorted(data.glob("*.parquet"))[1]
    stat = shard.stat()
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched
    load(data, Rows, _ids, 8)
    assert scans.calls == 2
    copy = shard.with_suffix(".tmp")
    shutil.copy2(shard, copy)  # same bytes and times, another inode
    os.replace(copy, shard)
    load(data, Rows, _ids, 8)
    assert scans.calls == 3
    datagen.write_shards(data, [30, 25, 12, 5], row_group_size=10)  # a shard added
    load(data, Rows, _ids, 8)
    assert scans.calls == 4
    load(data, Rows, _ids, 8)
    assert scans.calls == 4


def test_schema_identity_sees_markers_and_nested_constraints() -> None:
    plain, unique, nested = _same_name(False, 0), _same_name(True, 0), _same_name(False, 1)
    assert plain.model_json_schema() == unique.model_json_schema()  # JSON schema misses Unique
    identities = {verdicts.schema_identity(m) for m in (plain, unique, nested)}
    assert len(identities) == 3
    assert verdicts.schema_identity(plain) == verdicts.schema_identity(_same_name(False, 0))


def test_another_schema_is_scanned_again(cache: Path, data: Path, scans: Scans) -> None:
    ds = ParquetDataset(data)
    load(ds, Rows, _ids, 8)
    load(ds, _same_name(False, 0), _ids, 8)
    load(ds, _same_name(True, 0), _ids, 8)
    with pytest.raises(SchemaError):
        load(ds, _same_name(False, 1), _ids, 8)  # point.x is 0 in row 0
    with pytest.raises(SchemaError):
        load(ds, Stricter, _ids, 8)
    load(ds, _same_name(True, 0), _ids, 8)
    assert scans.calls == 5


def test_other_columns_are_another_fingerprint(cache: Path, data: Path, scans: Scans) -> None:
    load(data, Rows, _ids, 8)
    load(data, Rows, _ids, 8, columns=["id", "label"])
    load(data, Rows, _ids, 8, columns=["id", "label"])
    assert scans.calls == 2


def test_a_failing_dataset_is_checked_every_time(cache: Path, data: Path, scans: Scans) -> None:
    for _ in range(2):
        with pytest.raises(SchemaError) as caught:
            load(data, Stricter, _ids, 8)
        assert not caught.value.report.passed  # type: ignore[attr-defined]
    assert scans.calls == 2
    assert not list(cache.glob("*.json"))


def test_a_cache_inside_the_dataset_is_never_written(tmp_path: Path, data: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    scans: Scans) -> None:
    monkeypatch.setenv(CACHE_ENV, str(data / ".cache"))
    verdicts.forget()
    files = _snapshot(data)
    load(data, Rows, _ids, 8)
    load(data, Rows, _ids, 8)
    assert scans.calls == 1  # remembered in this process all the same
    assert _snapshot(data) == files and not (data / ".cache").exists()
    verdicts.forget()


def test_an_unusable_cache_costs_only_a_scan(tmp_path: Path, data: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            scans: Scans) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv(CACHE_ENV, str(blocker))
    verdicts.forget()
    load(data, Rows, _ids, 8)
    verdicts.forget()
    load(data, Rows, _ids, 8)
    assert scans.calls == 2
    verdicts.forget()


def test_a_damaged_verdict_file_is_ignored(cache: Path, data: Path, scans: Scans) -> None:
    load(data, Rows, _ids, 8)
    (path,) = cache.glob("*.json")
    for damage in ["{not json", json.dumps({"key": path.stem, "passed": False}),
                   json.dumps({"key": "other", "passed": True}), ""]:
        path.write_text(damage)
        verdicts.forget()
        load(data, Rows, _ids, 8)
    assert scans.calls == 5
    assert json.loads(path.read_text())["passed"] is True  # rewritten by the last scan


def test_datamodule_scans_each_split_once(cache: Path, data: Path, tmp_path: Path,
                                          scans: Scans) -> None:
    from undertale_duck import DataModule

    val = tmp_path / "val"
    datagen.write_shards(val, [9, 4], row_group_size=5)
    dm = DataModule(data, val, Rows, _ids, 8, test=val, predict=data)
    for _ in range(2):
        dm.train_dataloader()
        dm.val_dataloader()
        dm.test_dataloader()
        dm.predict_dataloader()
    assert scans.calls == 2  # one per dataset


def test_explicit_validate_always_scans(cache: Path, data: Path, scans: Scans) -> None:
    ds = ParquetDataset(data)
    load(ds, Rows, _ids, 8)
    ds.validate(Rows)
    ds.validate(Rows)
    assert scans.calls == 3


# ---------------------------------------------------------------------- torch.distributed
DIST_SCRIPT = """
import json
import os
import sys

import torch.distributed as dist
from pydantic import Field

from undertale_duck import SchemaError, load, schema
from undertale_duck.core.runtime import CACHE_ENV
from undertale_duck.validation import verdicts

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2)
data, mine, out = sys.argv[1], sys.argv[2 + rank], sys.argv[4]


class Rows(schema.Dataset):
    label: int = Field(ge=0, lt=7)


class Stricter(schema.Dataset):
    label: int = Field(ge=0, lt=6)


result = {}
load(data, Rows, None, 8)
result["pass"] = verdicts.stats().__dict__
try:
    load(data, Stricter, None, 8)
except SchemaError as exc:
    result["error"] = str(exc)
    result["report"] = None if exc.report is None else exc.report.passed
result["fail"] = verdicts.stats().__dict__
load(mine, Rows, None, 8)  # each rank has other files here: each validates its own
result["own"] = verdicts.stats().__dict__
dist.destroy_process_group()
with open(f"{out}/rank-{rank}.json", "w") as f:
    json.dump(result, f)
"""


@pytest.mark.heavy
def test_the_ranks_validate_together_or_each_its_own(
    cache: Path, data: Path, tmp_path: Path
) -> None:
    import socket

    (tmp_path / "dist.py").write_text(DIST_SCRIPT)
    own = []
    for rank in (0, 1):
        own.append(tmp_path / f"own-{rank}")
        datagen.write_shards(own[-1], [5 + rank], row_group_size=5)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "WORLD_SIZE": "2", CACHE_ENV: str(cache.parent)}
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "dist.py"), str(data),
                               str(own[0]), str(own[1]), str(tmp_path)],
                              env={**env, "RANK": str(rank)}, stderr=subprocess.PIPE, text=True)
             for rank in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    zero, one = (json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1))
    # the same files on every rank: the ranks scan them together, a share each
    both = {"scans": 1, "reused": 0, "shared": 0, "together": 1}
    assert zero["pass"] == both and one["pass"] == both
    # a failing dataset: scanned together, every rank raises SchemaError with the report
    both = {"scans": 2, "reused": 0, "shared": 0, "together": 2}
    assert zero["fail"] == both and one["fail"] == both
    assert zero["report"] is False and one["report"] is False
    assert zero["error"] == one["error"] and "label" in one["error"]
    # different files on each rank: rank 0 validates its own, then so does rank 1
    assert zero["own"]["scans"] == 3 and one["own"]["scans"] == 3
    assert zero["own"]["together"] == one["own"]["together"] == 2


def test_a_view_has_its_own_verdict(cache: Path, data: Path, scans: Scans) -> None:
    small = ParquetDataset(data, where="label < 3")
    load(small, Stricter, _ids, 8)  # labels 0..2 only: conforms
    load(ParquetDataset(data, where="label < 3"), Stricter, _ids, 8)
    assert scans.calls == 1
    load(ParquetDataset(data, where="label < 4"), Stricter, _ids, 8)
    assert scans.calls == 2
    with pytest.raises(SchemaError):  # the whole dataset has label 6: never the view's verdict
        load(ParquetDataset(data), Stricter, _ids, 8)
    assert scans.calls == 3
