"""The validation executors run ``describe --scan`` and a view's indexing pass: same results."""

from __future__ import annotations

import json
import os
import pickle
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support import planted

from undertale_duck import ParquetDataset
from undertale_duck.core.describe import describe
from undertale_duck.core.runtime import CACHE_ENV, TaskMap
from undertale_duck.errors import ArgumentError
from undertale_duck.validation.executors import SerialExecutor, TorchDistributedExecutor

SIZES = [40, 25, 1, 30, 20, 18, 12]
DRIFTS = ["plain", "plain", "plain", "label32", "no_tag", "label_text", "extra"]
RAY_LOCAL = {"num_cpus": 2, "object_store_memory": 200 << 20}


@pytest.fixture(scope="module", autouse=True)
def own_home(ray_home: Path) -> Path:
    """Ray started by this module's tests keeps its token in the tests' one Ray home."""
    return ray_home


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of the test's own: every view is indexed anew."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    return cache


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("drifted")
    planted.write(root, SIZES, DRIFTS)
    (root / "part-99999.parquet").write_bytes(b"not parquet at all")
    return root


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain")
    planted.write(root, [40, 25, 1, 30, 20, 33])
    return root


class Pickling(SerialExecutor):
    """Sends every task and result through pickle, as a cluster or a rank does."""

    def __init__(self) -> None:
        super().__init__()
        self.ran = 0

    def map(self, function: Callable[[Any], Any], tasks: Sequence[Any],
            progress: Any = None, *, memory_bytes: int = 0) -> list[Any]:
        travelled = pickle.loads(pickle.dumps((function, list(tasks))))
        self.ran += len(tasks)
        out = super().map(*travelled, progress, memory_bytes=memory_bytes)
        return list(pickle.loads(pickle.dumps(out)))


def test_executors_are_the_core_task_map() -> None:
    assert isinstance(SerialExecutor(), TaskMap)
    assert isinstance(TorchDistributedExecutor(), TaskMap)


def test_describe_scan_by_tasks_is_the_in_process_description(drifted: Path) -> None:
    here = describe(drifted, scan=True).to_dict()
    executor = Pickling()
    labels: list[str] = []
    tasks = describe(drifted, scan=True, executor=executor, progress=labels.append).to_dict()
    assert tasks == here
    assert executor.ran == len(SIZES)  # one task per readable shard
    assert labels == ["shard task"] * len(SIZES)  # progress as each task finishes
    assert here["errors"] and here["statistics"] == "scan"


def test_describe_without_scan_runs_no_task(drifted: Path) -> None:
    executor = Pickling()
    assert describe(drifted, executor=executor).to_dict() == describe(drifted).to_dict()
    assert executor.ran == 0


def test_describe_ray_without_scan_is_refused(
    plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray")
    from undertale_duck.cli import main

    assert main(["describe", str(plain), "--ray"]) == 2
    assert "--scan" in capsys.readouterr().err


def _view(source: Path, executor: TaskMap | None, **options: Any) -> dict[str, Any]:
    ds = ParquetDataset(source, index_executor=executor, window_bytes=2048, **options)
    try:
        assert ds.view is not None and not ds.view.reused
        kept = ds.view.kept
        bits = [kept.rows(w.shard, w.start, w.stop).tolist()  # type: ignore[union-attr]
                for w in ds.windows] if kept is not None else None
        return {"windows": [(w.shard, w.start, w.stop, w.rows) for w in ds.windows],
                "rows": [dict(ds[i]) for i in range(len(ds))], "kept": bits}
    finally:
        ds.close()


def test_indexing_pass_by_tasks_is_the_in_process_index(plain: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    where = "label > 1 AND tag <> 'b'"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "here"))
    here = _view(plain, None, where=where)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "tasks"))
    executor = Pickling()
    tasks = _view(plain, executor, where=where)
    assert tasks == here and executor.ran == 6
    assert 0 < len(here["rows"]) < sum([40, 25, 1, 30, 20, 33])


def test_indexing_with_side_tables_by_tasks(plain: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # an Arrow side table travels with the task; a file side table is read where it runs
    ids = pa.table({"key": pa.array(range(0, 149, 3), pa.int64()),
                    "weight": pa.array([float(k) for k in range(0, 149, 3)])})
    (tmp_path / "sides").mkdir()
    path = tmp_path / "sides" / "side.parquet"
    import pyarrow.parquet as pq

    pq.write_table(ids, path)
    query = ("SELECT d.id, d.name, a.weight, f.weight AS again FROM dataset d "
             "JOIN arrow_side a ON a.key = d.id JOIN file_side f ON f.key = d.id")
    tables = {"arrow_side": ids, "file_side": str(path)}
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache" / "here"))
    here = _view(plain, None, query=query, tables=tables)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache" / "tasks"))
    tasks = _view(plain, Pickling(), query=query, tables=tables)
    assert tasks == here and here["rows"]


def test_index_executor_must_map(plain: Path) -> None:
    with pytest.raises(ArgumentError, match="index_executor"):
        ParquetDataset(plain, where="label > 1", index_executor="ray")  # type: ignore[arg-type]


def test_a_failing_index_task_is_our_error(plain: Path, fresh_cache: Path) -> None:
    from undertale_duck.errors import QueryError

    with pytest.raises(QueryError, match=r"where=.CAST\(name AS INTEGER\) > 0. failed on shard"):
        ParquetDataset(plain, where="CAST(name AS INTEGER) > 0", index_executor=Pickling())


# ---------------------------------------------------------------------- torch.distributed
def _rank(rank: int, port: int, drifted: str, plain: str, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      **{CACHE_ENV: str(Path(out, f"cache-{rank}"))})
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        executor = TorchDistributedExecutor()
        found = describe(drifted, scan=True, executor=executor).to_dict()
        view = _view(Path(plain), executor, where="label > 1 AND tag <> 'b'")
        Path(out, f"rank-{rank}.json").write_text(json.dumps({"describe": found, "view": view},
                                                             default=str))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.heavy
def test_two_gloo_ranks_describe_and_index_as_one_process(
    drifted: Path, plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(_free_port(), str(drifted), str(plain), str(tmp_path)), nprocs=2,
             join=True)
    zero, one = (json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1))
    assert zero == one
    assert zero["describe"] == json.loads(json.dumps(describe(drifted, scan=True).to_dict(),
                                                     default=str))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "here"))
    here = _view(plain, None, where="label > 1 AND tag <> 'b'")
    assert zero["view"] == json.loads(json.dumps(here, default=str))


# ---------------------------------------------------------------------- Ray
@pytest.mark.heavy
def test_a_local_ray_describes_and_indexes_as_one_process(
    drifted: Path, plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ray = pytest.importorskip("ray")
    from undertale_duck.cli import main
    from undertale_duck.validation.ray_executor import LOCAL_DEFAULTS, RayExecutor

    ray.init(**RAY_LOCAL, **LOCAL_DEFAULTS)  # used as it is by every run below
    try:
        executor = RayExecutor()
        assert describe(drifted, scan=True, executor=executor).to_dict() == (
            describe(drifted, scan=True).to_dict())
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ray"))
        there = _view(plain, executor, where="label > 1 AND tag <> 'b'")
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "here"))
        assert there == _view(plain, None, where="label > 1 AND tag <> 'b'")
        capsys.readouterr()
        assert main(["describe", str(drifted), "--scan", "--ray", "--format", "json"]) == 2
        got = json.loads(capsys.readouterr().out)
        assert main(["describe", str(drifted), "--scan", "--format", "json"]) == 2
        assert got == json.loads(capsys.readouterr().out)
    finally:
        ray.shutdown()



@pytest.mark.heavy
def test_a_local_ray_started_by_the_cli_prints_nothing_of_its_own(
    drifted: Path, ray_home: Path
) -> None:
    # `describe --scan --ray` printed Ray's "Started a local Ray instance" and its token
    # notice on stderr, around the report
    pytest.importorskip("ray")
    import subprocess
    import sys

    from support.storage_server import child_env

    cli = Path(sys.executable).with_name("undertale-duck")
    env = {**child_env(), "HOME": str(ray_home), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(
        [str(cli), "describe", str(drifted), "--scan", "--ray", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    here = subprocess.run(
        [str(cli), "describe", str(drifted), "--scan", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    # an unreadable shard among them: reported, exit 2, our one line about it on stderr
    assert (done.returncode, here.returncode) == (2, 2), done.stderr[-3000:]
    assert "not a Parquet file" in here.stderr
    assert done.stderr == here.stderr  # and nothing of Ray's
    assert json.loads(done.stdout) == json.loads(here.stdout)
