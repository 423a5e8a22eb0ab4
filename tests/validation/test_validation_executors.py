"""Every executor of the validation plan gives the in-process report: checks, counts, examples."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import planted

from undertale_duck import ParquetDataset
from undertale_duck.errors import ArgumentError
from undertale_duck.validation import runner
from undertale_duck.validation.executors import SerialExecutor, TorchDistributedExecutor

#: Shard sizes and layouts: two type groups (int64/int32 labels), a missing column, a wrong
#: type, an extra column, a one-row shard.
SIZES = [40, 25, 1, 30, 20, 18, 12]
DRIFTS = ["plain", "plain", "plain", "label32", "no_tag", "label_text", "extra"]


@pytest.fixture(scope="module", autouse=True)
def own_home(ray_home: Path) -> Path:
    """Ray started by this module's tests keeps its token in the tests' one Ray home."""
    return ray_home


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("drifted")
    planted.write(root, SIZES, DRIFTS)
    (root / "part-99999.parquet").write_bytes(b"not parquet at all")  # an unreadable shard
    return root


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain")
    planted.write(root, [40, 25, 1, 30, 20])
    return root


def _in_process(source: Path) -> dict[str, Any]:
    return planted.dump(runner.report_for(source, planted.Planted))


def test_the_planted_dataset_fails_every_kind_of_check(drifted: Path) -> None:
    report = runner.report_for(drifted, planted.Planted)
    failed = {(c.check, c.column) for c in report.failed}
    assert {("readable", None), ("shard_schema", None), ("present", "tag"), ("type", "label"),
            ("unique", "id"), ("unique", "name"), ("length", "name"), ("range", "score"),
            ("range", "label"), ("not_null", "label"), ("literal", "tag"),
            ("not_null", "point.y")} <= failed
    unique = next(c for c in report.checks if c.check == "unique" and c.column == "id")
    assert len(unique.per_shard) > 2 and unique.examples


@pytest.mark.parametrize(("per_task", "parts"), [(1, 1), (1, 3), (2, 2), (100, 4)])
def test_serial_tasks_give_the_in_process_report(drifted: Path, per_task: int, parts: int) -> None:
    executor = SerialExecutor(shards_per_task=per_task, partitions=parts)
    report = runner.report_for(drifted, planted.Planted, executor=executor)
    assert planted.dump(report) == _in_process(drifted)


def test_dataset_report_takes_an_executor(plain: Path) -> None:
    ds = ParquetDataset(plain)
    here = ds.report(planted.Planted)
    tasks = ds.report(planted.Planted, executor=SerialExecutor(partitions=3))
    ds.close()
    assert not here.passed
    assert planted.dump(tasks) == planted.dump(here)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 45), min_size=1, max_size=5),
    per_task=st.integers(1, 3),
    parts=st.integers(1, 4),
    examples=st.integers(0, 7),
)
def test_any_split_gives_the_same_report(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], per_task: int, parts: int,
    examples: int,
) -> None:
    root = tmp_path_factory.mktemp("split")
    planted.write(root, sizes)
    here = runner.report_for(root, planted.Planted, examples=examples)
    split = runner.report_for(root, planted.Planted, examples=examples,
                              executor=SerialExecutor(shards_per_task=per_task, partitions=parts))
    assert planted.dump(split) == planted.dump(here)


class _Forking(SerialExecutor):
    """Forks while the tasks run, as starting Ray does (the dataset's connection then closes)."""

    def execute(self, plan: Any, progress: Any) -> Any:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return super().execute(plan, progress)


def test_a_fork_while_tasks_run_changes_nothing(plain: Path) -> None:
    ds = ParquetDataset(plain)
    here = ds.report(planted.Planted)
    forked = ds.report(planted.Planted, executor=_Forking())
    ds.close()
    assert planted.dump(forked) == planted.dump(here)


def test_progress_advances_as_tasks_finish(plain: Path) -> None:
    labels: list[str] = []
    runner.report_for(plain, planted.Planted, progress=labels.append,
                      executor=SerialExecutor(shards_per_task=2))
    assert labels.count("shard task") == 3  # 5 shards, 2 per task


def test_a_task_executor_refuses_a_view(plain: Path) -> None:
    ds = ParquetDataset(plain, where="label > 1")
    with pytest.raises(ArgumentError, match="view"):
        ds.report(planted.Planted, executor=SerialExecutor())
    ds.close()


def test_distributed_without_a_process_group_says_so(plain: Path) -> None:
    with pytest.raises(ArgumentError, match="init_process_group"):
        runner.report_for(plain, planted.Planted, executor=TorchDistributedExecutor())


def test_ray_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from undertale_duck.validation.ray_executor import RayExecutor

    monkeypatch.setitem(sys.modules, "ray", None)  # as when ray is not installed
    with pytest.raises(ArgumentError, match=r"undertale_duck\[ray\]"):
        RayExecutor()


@pytest.mark.heavy
def test_tasks_read_shards_in_object_storage_where_they_run(drifted: Path, plain: Path) -> None:
    from support.storage_server import S3Server

    server = S3Server()
    try:
        server.bucket("data")
        options = server.options()
        url = server.upload(drifted, "s3://data/drifted")
        here = runner.report_for(url, planted.Planted, storage_options=options)
        tasks = runner.report_for(url, planted.Planted, storage_options=options,
                                  executor=SerialExecutor(partitions=2))
        assert not here.passed and here.shards == len(SIZES) + 1
        assert planted.dump(tasks) == planted.dump(here)
        ds = ParquetDataset(server.upload(plain, "s3://data/plain"), storage_options=options)
        assert planted.dump(ds.report(planted.Planted, executor=SerialExecutor())) == (
            planted.dump(ds.report(planted.Planted)))
        ds.close()
    finally:
        server.close()


# ---------------------------------------------------------------------- torch.distributed
def _rank(rank: int, port: int, source: str, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        report = runner.report_for(source, planted.Planted, executor=TorchDistributedExecutor())
        Path(out, f"rank-{rank}.json").write_text(report.model_dump_json())
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.heavy
def test_two_gloo_ranks_both_end_with_the_in_process_report(drifted: Path, tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(_free_port(), str(drifted), str(tmp_path)), nprocs=2, join=True)
    reports = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert reports[0] == reports[1]  # the very same report, seconds included
    reports[0].pop("seconds")
    assert reports[0] == json.loads(json.dumps(_in_process(drifted)))


# ---------------------------------------------------------------------- Ray
RAY_LOCAL = {"num_cpus": 2, "object_store_memory": 200 << 20}


@pytest.mark.heavy
def test_a_local_ray_gives_the_in_process_report(drifted: Path) -> None:
    pytest.importorskip("ray")
    from undertale_duck.validation.ray_executor import RayExecutor

    executor = RayExecutor(init_options=RAY_LOCAL)  # starts a local Ray, stops it after
    report = runner.report_for(drifted, planted.Planted, executor=executor)
    assert planted.dump(report) == _in_process(drifted)


@pytest.mark.heavy
def test_ray_refuses_a_budget_no_node_has(plain: Path) -> None:
    ray = pytest.importorskip("ray")
    from undertale_duck.validation.ray_executor import LOCAL_DEFAULTS, RayExecutor

    ray.init(**RAY_LOCAL, **LOCAL_DEFAULTS)  # a Ray already started here is used as it is
    try:
        with pytest.raises(ArgumentError, match="lower memory"):
            runner.report_for(plain, planted.Planted, memory=64 << 20,  # 64 TiB
                              executor=RayExecutor())
        assert ray.is_initialized()
    finally:
        ray.shutdown()


JOIN_SCRIPT = """
import json
import sys

sys.path.insert(0, sys.argv[4])
from support import planted
from undertale_duck import ParquetDataset
from undertale_duck.validation import runner
from undertale_duck.validation.ray_executor import RayExecutor

address, drifted, plain = sys.argv[1:4]
report = runner.report_for(drifted, planted.Planted, executor=RayExecutor(address))
ds = ParquetDataset(plain)
there = ds.report(planted.Planted, executor=RayExecutor(address))
ds.close()
print(json.dumps({"drifted": planted.dump(report), "plain": planted.dump(there)}))
"""


@pytest.mark.heavy
def test_a_ray_cluster_joined_by_address_validates_like_one_process(
    drifted: Path, plain: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    ray_bin = Path(sys.executable).with_name("ray")
    port = _free_port()
    # `ray start` turns token authentication on; a client joining by address uses it only
    # when its environment says so (Ray's rule): the clients run in processes of their own
    short = tempfile.mkdtemp(prefix="udray-")  # Ray's socket paths must stay short
    # HOME too: `ray start` writes its token to ~/.ray, and the user's home is not the test's
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0",
           "HOME": short}
    subprocess.run([str(ray_bin), "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True)  # into $HOME/.ray, where `ray start` finds it
    log = (tmp_path / "head.log").open("wb")
    # --block keeps `ray start` alive as the parent of the cluster's processes, in a session
    # of their own: stopping that process group (and only it) stops this cluster
    head = subprocess.Popen(
        [str(ray_bin), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         f"--object-store-memory={200 << 20}", "--include-dashboard=false",
         f"--temp-dir={short}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
    )
    try:
        _wait_for_port(port, tmp_path / "head.log")
        address = f"127.0.0.1:{port}"
        tests = str(Path(planted.__file__).resolve().parents[1])  # the support package's parent
        joined = subprocess.run(
            [sys.executable, "-c", JOIN_SCRIPT, address, str(drifted), str(plain), tests],
            capture_output=True, text=True, env=env,
        )
        assert joined.returncode == 0, joined.stderr[-3000:]
        found = json.loads(joined.stdout.strip().splitlines()[-1])
        assert found["drifted"] == json.loads(json.dumps(_in_process(drifted)))
        ds = ParquetDataset(plain)
        here = planted.dump(ds.report(planted.Planted))
        ds.close()
        assert found["plain"] == json.loads(json.dumps(here))
        cli = Path(sys.executable).with_name("undertale-duck")
        command = [str(cli), "validate", str(drifted), "--schema",
                   f"{Path(planted.__file__).resolve()}:Planted", "--format", "json"]
        done = subprocess.run([*command, "--ray", address], capture_output=True, text=True,
                              env=env)
        assert done.returncode == 1, done.stderr[-3000:]
        local = subprocess.run(command, capture_output=True, text=True)
        got, want = json.loads(done.stdout), json.loads(local.stdout)
        got.pop("seconds")
        want.pop("seconds")
        assert got == want
    finally:
        _stop(head)
        log.close()
        shutil.rmtree(short, ignore_errors=True)


def _wait_for_port(port: int, log: Path) -> None:
    for _ in range(1800):  # a loaded machine may take minutes to start Ray
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"the Ray head did not listen on port {port}: {log.read_text()[-3000:]}")


def _stop(head: subprocess.Popen[bytes]) -> None:
    """Stop the cluster this test started: its own process group, by id."""
    try:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)  # what SIGTERM left (raylet, gcs_server)
    head.wait()


def test_cli_ray_without_ray_names_the_extra(
    plain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from undertale_duck.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # as when ray is not installed
    schema_arg = f"{Path(planted.__file__).resolve()}:Planted"
    assert main(["validate", str(plain), "--schema", schema_arg, "--ray"]) == 2
    assert "undertale_duck[ray]" in capsys.readouterr().err


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}", "localhost:{port}"])
def test_a_ray_address_nothing_answers_at_is_refused_at_once(plain: Path, form: str) -> None:
    pytest.importorskip("ray")
    import socket

    from undertale_duck.validation.ray_executor import RayExecutor

    with socket.socket() as probe:  # a port bound but not listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        address = form.format(port=probe.getsockname()[1])
        with pytest.raises(ArgumentError, match="cannot reach the Ray cluster") as info:
            runner.report_for(plain, planted.Planted, executor=RayExecutor(address))
    assert address in str(info.value)
    import ray

    assert not ray.is_initialized()


@pytest.mark.parametrize("address", ["nonsense", "ray://nonsense"])
def test_a_ray_address_ray_cannot_use_is_one_error_line(
    plain: Path, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ray's ValueError (an address it cannot parse; ray:// without ray[client]) reached the
    # command line as "unexpected ValueError", naming neither the address nor --ray
    pytest.importorskip("ray")
    from undertale_duck.cli import main

    schema_arg = f"{Path(planted.__file__).resolve()}:Planted"
    assert main(["validate", str(plain), "--schema", schema_arg, f"--ray={address}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected" not in err
    assert f"cannot join the Ray cluster at address {address!r}" in err
    import ray

    assert not ray.is_initialized()
