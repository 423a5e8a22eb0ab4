"""A process ends promptly while a read-ahead thread awaits a store request.

Real child processes against a real HTTP server on 127.0.0.1 that holds a whole-object
transfer half sent (``HTTPServer.state.stall``): the exit hook waits for read-ahead threads
(so none is inside DuckDB when connections close), and used to wait for such a download
too, as long as the store took to answer, time out and be retried (minutes). Seen in CI as
a script that printed its error and then hung past its 120 s timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import datagen
from support.storage_server import HTTPServer, child_env, serve_directory

CHILD = """
import json, sys
from undertale_duck import ParquetDataset
urls, cache, fail = json.loads(sys.argv[1])
ds = ParquetDataset(urls, memory=64, cache_dir=cache)
print("open", flush=True)
sys.stdin.readline()  # the server holds whole transfers from now on
ds.prefetch([0])  # a read-ahead thread downloads the first shard, and waits on the server
print("prefetch", flush=True)
sys.stdin.readline()  # end of input: the script ends with that download in flight
if fail:
    raise SystemExit("the training script failed")
"""


def _part_files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*.part-*") if p.stat().st_size > 0]


def _child(script: str, args: list[object]) -> subprocess.Popen[str]:
    """Start ``script``; its first line says it opened the dataset."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(args)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=child_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "open"
    return proc


def _next_step(proc: subprocess.Popen[str]) -> list[str]:
    """Let the child go on (a line on its input); the words of the line it prints then."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    return proc.stdout.readline().split()


def _download_begins(cache: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _part_files(cache):
        time.sleep(0.01)
    assert _part_files(cache), "the download never began"


def _exits(proc: subprocess.Popen[str]) -> str:
    """End the child's input and wait for it to exit; its standard error."""
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    # a hang detector, not a timing bound: held by the server, the download lasts 60 s
    # a try and is retried, so a process that waits for it is still here long after
    try:
        proc.wait(timeout=45)
    except subprocess.TimeoutExpired:
        pytest.fail("the process waited at exit for a download nothing would use")
    return proc.stderr.read()


@pytest.mark.parametrize("fail", [False, True], ids=["ends", "fails"])
def test_the_exit_does_not_wait_for_a_download_read_ahead(tmp_path: Path, fail: bool) -> None:
    pytest.importorskip("aiohttp")
    datagen.write_shards(tmp_path / "src", [300, 200], row_group_size=100)
    server = HTTPServer()
    proc: subprocess.Popen[str] | None = None
    try:
        urls = serve_directory(server, tmp_path / "src", "ds")
        cache = tmp_path / "cache"
        proc = _child(CHILD, [urls, str(cache), fail])
        assert _part_files(cache) == []  # opening read footers by range, no whole download
        server.state.stall.set()  # whole-object GETs send half the bytes, then hang 60 s
        assert _next_step(proc) == ["prefetch"]
        _download_begins(cache)
        assert any(method == "GET" and rng is None and path == "/ds/part-00000.parquet"
                   for method, path, rng in server.state.requests)
        err = _exits(proc)
        if fail:
            assert proc.returncode == 1 and "the training script failed" in err, err
        else:
            assert proc.returncode == 0, err
            assert "Traceback" not in err, err
        # the abandoned part file is nobody's: no trusted copy of a half-sent shard
        assert not [p for p in cache.rglob("*.parquet") if ".part-" not in p.name]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.close()


RETRYING = """
import json, threading, time
from undertale_duck.core.runtime import interrupt
from undertale_duck.core.source.remote.store import open_store
url = "http://127.0.0.1:9/part-0.parquet"
store = open_store(url, retries=40)  # 40 retries: minutes of backoff
calls = []
def flaky():
    calls.append(time.monotonic())
    raise ConnectionResetError("connection reset by peer")
errors = {}
def run(name):
    try:
        store.call("download", url, flaky)
    except Exception as exc:
        errors[name] = f"{type(exc).__name__}: {exc}"
first = threading.Thread(target=run, args=("first",), daemon=True)
first.start()
while len(calls) < 3:  # retried twice: in its backoff now or about to be
    time.sleep(0.005)
interrupt.interrupt_background()  # what the exit hook does first
first.join(30)
made = len(calls)
later = threading.Thread(target=run, args=("later",), daemon=True)
later.start()
later.join(30)
print(json.dumps([first.is_alive(), later.is_alive(), made, len(calls), errors]))
"""


def test_a_retrying_request_on_another_thread_stops_when_the_exit_begins() -> None:
    # the backoff between retries ends at once, and no new attempt is made after the exit
    # began (another thread's, that is: the main thread runs the exit hook itself)
    done = subprocess.run(
        [sys.executable, "-c", RETRYING], capture_output=True, text=True, timeout=120,
        env=child_env(), check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first_alive, later_alive, made, total, errors = json.loads(done.stdout.splitlines()[-1])
    assert not first_alive and not later_alive
    assert 3 <= made < 10, made  # stopped in its backoff, not retried 40 times
    assert total == made  # the later call never reached the store
    for name in ("first", "later"):
        assert errors[name].startswith("StorageError: cannot download"), errors
        assert "stopped, the process is exiting" in errors[name], errors


BEHIND = """
import json, sys
from undertale_duck import ParquetDataset
urls, cache = json.loads(sys.argv[1])
ds = ParquetDataset(urls, memory=64, cache_dir=cache, window_bytes="32KiB", read_ahead=False)
print("open", flush=True)
sys.stdin.readline()  # the server holds whole transfers from now on
row = ds[0]  # a window read by byte ranges, then the whole shard downloads behind it
print("read", row["id"], flush=True)
sys.stdin.readline()  # end of input: the script ends with that download in flight
"""


def test_the_exit_does_not_wait_for_a_download_behind_a_range_read(tmp_path: Path) -> None:
    # the shard's download behind a window read by ranges ran on a ThreadPoolExecutor,
    # whose thread Python's own exit joins before any exit hook can stop its request
    pytest.importorskip("aiohttp")
    datagen.write_shards(tmp_path / "src", [4000], row_group_size=500)
    server = HTTPServer()
    proc: subprocess.Popen[str] | None = None
    try:
        urls = serve_directory(server, tmp_path / "src", "ds")
        cache = tmp_path / "cache"
        proc = _child(BEHIND, [urls, str(cache)])
        server.state.stall.set()
        assert _next_step(proc) == ["read", datagen.row(0)["id"]]
        _download_begins(cache)
        assert any(method == "GET" and rng is not None for method, _, rng in
                   server.state.requests)  # the window itself was read by ranges
        err = _exits(proc)
        assert proc.returncode == 0 and "Traceback" not in err, err
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.close()
