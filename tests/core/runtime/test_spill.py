"""Spill files: a private 0700 directory per process, removed at exit and after a kill."""

from __future__ import annotations

import fcntl
import hashlib
import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import datagen

from undertale_duck.core.runtime import lifecycle
from undertale_duck.core.runtime.duck import connect

#: Spills a big sort in a tiny memory_limit through the dataset's connection and through a
#: bare connect() (validation and describe), run from a cwd inside the dataset, while a
#: thread records every file that appears in the spill directory.
SPILL_SCRIPT = r"""
import json, os, sys, threading
from undertale_duck.core.runtime import lifecycle
from undertale_duck.core.runtime import connect, default_duckdb_config
from undertale_duck.core.source import Source

SORT = ("SELECT sum(hash(x) * r) AS s FROM (SELECT range AS x, row_number() OVER () AS r "
        "FROM (SELECT range FROM range(1000000) ORDER BY hash(range) DESC))")
tight = {"memory_limit": "16MB", "threads": 1}
con = Source(".").connection({**default_duckdb_config(), **tight})
spill = lifecycle.spill_directory()
seen, here, done = set(), set(), threading.Event()

def watch():
    while not done.is_set():
        try:
            seen.update(os.listdir(spill))
            here.update(os.listdir("."))
            done.wait(0.002)
        except OSError:
            pass

thread = threading.Thread(target=watch, daemon=True)
thread.start()
rows = con.cursor().sql(SORT).fetchall()
n = con.cursor().sql("SELECT count(*) FROM dataset").fetchall()[0][0]
bare = connect({"preserve_insertion_order": True, **tight})
again = bare.sql(SORT).fetchall()
done.set()
thread.join()
setting = bare.sql("SELECT current_setting('temp_directory')").fetchall()[0][0]
cap = bare.sql("SELECT current_setting('max_temp_directory_size')").fetchall()[0][0]
mode = os.stat(spill).st_mode & 0o777
print(json.dumps({"spill": spill, "seen": sorted(seen), "here": sorted(here), "rows": n,
                  "same": rows == again, "setting": setting, "cap": cap, "mode": mode}))
"""


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


def _env(root: Path, variable: str = lifecycle.SPILL_ROOT_ENV) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != lifecycle.SPILL_ROOT_ENV}
    env[variable] = str(root)
    repo = Path(__file__).resolve().parents[3]
    env["PYTHONPATH"] = os.pathsep.join([str(repo), env.get("PYTHONPATH", "")])
    return env


def test_spill_goes_to_a_private_directory_removed_at_exit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    datagen.write_shards(data, [50, 50])
    root = tmp_path / "tmp"
    root.mkdir()
    # the old predictable name, planted as a symlink into the dataset: never followed
    (root / "undertale_duck").symlink_to(data, target_is_directory=True)
    before = _digest(data)
    done = subprocess.run(  # the default root: the system temporary directory ($TMPDIR)
        [sys.executable, "-c", SPILL_SCRIPT], cwd=data, env=_env(root, "TMPDIR"),
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    spill = Path(out["spill"])
    assert spill.parent == root and spill.name.startswith(lifecycle.SPILL_PREFIX)
    assert out["mode"] == 0o700
    assert any(name.startswith("duckdb_temp") for name in out["seen"])  # it did spill
    assert out["rows"] == 100 and out["same"]
    assert out["setting"] == str(spill)
    assert out["cap"].endswith("iB")  # the documented cap is set, not DuckDB's 90% of disk
    assert not spill.exists()  # removed at exit
    assert out["here"] == sorted(before)  # nothing appeared in the cwd (the dataset) meanwhile
    assert _digest(data) == before  # nor is anything changed or left there
    assert sorted(p.name for p in root.iterdir()) == ["undertale_duck"]
    assert (root / "undertale_duck").is_symlink()


KILLED_SCRIPT = r"""
import sys, time
from undertale_duck.core.runtime import lifecycle
from undertale_duck.core.runtime import connect
connect().close()
print(lifecycle.spill_directory(), flush=True)
time.sleep(600)
"""


def test_directory_of_a_killed_process_is_removed_by_the_next(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    root.mkdir()
    victim = subprocess.Popen(
        [sys.executable, "-c", KILLED_SCRIPT], env=_env(root), stdout=subprocess.PIPE, text=True
    )
    assert victim.stdout is not None
    left = Path(victim.stdout.readline().strip())
    assert left.is_dir() and str(victim.pid) in left.name
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    victim.stdout.close()
    assert left.is_dir()  # a killed process cleans nothing up
    done = subprocess.run(
        [sys.executable, "-c",
         "from undertale_duck.core.runtime import connect; connect().close()"],
        env=_env(root), capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not left.exists()
    assert list(root.iterdir()) == []  # and the next process removed its own at exit


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_sweep_removes_only_dead_owners_directories(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    root.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.parquet").write_bytes(b"PAR1 precious")
    dead = _dead_pid()
    stale = root / f"{lifecycle.SPILL_PREFIX}{dead}-abc123"
    stale.mkdir()
    (stale / "duckdb_temp_storage.tmp").write_bytes(b"x" * 100)
    planted = root / f"{lifecycle.SPILL_PREFIX}{dead}-sym"
    planted.symlink_to(victim, target_is_directory=True)
    alive = root / f"{lifecycle.SPILL_PREFIX}{os.getppid()}-live"
    alive.mkdir()
    locked = root / f"{lifecycle.SPILL_PREFIX}{dead}-lock"  # alive in another pid namespace
    locked.mkdir()
    fd = os.open(locked / lifecycle.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    other = root / "not-ours-12"
    other.mkdir()
    try:
        assert lifecycle.remove_stale_spill_directories(str(root)) == [str(stale)]
    finally:
        os.close(fd)
    assert not stale.exists()
    assert planted.is_symlink() and (victim / "keep.parquet").read_bytes() == b"PAR1 precious"
    assert alive.is_dir() and locked.is_dir() and other.is_dir()
    # with the lock released the owner is known to be gone
    assert lifecycle.remove_stale_spill_directories(str(root)) == [str(locked)]


def _child_spill(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    con = connect()
    queue.put(con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0])
    con.close()


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_forked_child_has_its_own_directory_removed_when_it_exits(tmp_path: Path) -> None:
    parent = connect()
    mine = parent.sql("SELECT current_setting('temp_directory')").fetchall()[0][0]
    assert mine == lifecycle.spill_directory()
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_spill, args=(queue,))
    child.start()
    theirs = queue.get(timeout=120)
    child.join(timeout=120)
    assert child.exitcode == 0
    assert theirs != mine and str(child.pid) in Path(theirs).name
    assert not os.path.exists(theirs)  # removed by the child on its way out (os._exit)
    assert os.path.isdir(mine)  # the parent's is the parent's
    parent.close()


def test_user_temp_directory_is_kept(tmp_path: Path) -> None:
    con = connect({"temp_directory": str(tmp_path / "mine"), "max_temp_directory_size": "1GiB"})
    got = con.sql(
        "SELECT current_setting('temp_directory'), current_setting('max_temp_directory_size')"
    ).fetchall()[0]
    con.close()
    assert got[0] == str(tmp_path / "mine")
    assert got[1].replace(" ", "") in {"1GiB", "1.0GiB"}
