"""Ctrl-C (a real SIGINT to a real child) stops describe, validate and the imports cleanly."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support import datagen
from support import hostile_files as hf

ROOT = Path(__file__).resolve().parents[2]

#: A schema whose pattern check makes DuckDB run a regular expression over every value.
SCHEMA = (
    "from pydantic import BaseModel, Field\n"
    "class Slow(BaseModel):\n"
    "    s: str = Field(pattern=r'x*z')\n"
)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset DuckDB needs minutes to scan: 8M rows of one 256 KiB dictionary string.

    ``describe --scan`` compares 2 TiB of strings for min/max and ``validate`` matches a
    pattern against each of them; the files themselves are a few dozen KB.
    """
    root = tmp_path_factory.mktemp("slow") / "data"
    root.mkdir()
    hf.dictionary_bomb(root / "part-00000.parquet", 8_000_000, 256 << 10)
    return root


def _default_sigint() -> None:
    # a test runner started in the background ignores SIGINT, and children inherit that
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(command: list[str], cwd: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=cwd,
        preexec_fn=_default_sigint,
    )


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "undertale_duck", *args]


def _wait_for_cpu(pid: int, seconds: float) -> None:
    """Wait until a process has used ``seconds`` of CPU: on a quiet machine far more than its
    imports take, so its DuckDB scan is running; on a loaded one a command may still be
    importing torch then (a moment a user can press Ctrl-C too, judged alike)."""
    process = psutil.Process(pid)
    for _ in range(6000):
        if sum(process.cpu_times()[:2]) >= seconds:
            return
        if process.status() == psutil.STATUS_ZOMBIE:
            raise AssertionError("the command ended before it was interrupted")
        time.sleep(0.05)
    raise AssertionError("the scan never started")


def _assert_interrupted(
    proc: subprocess.Popen[str] | subprocess.CompletedProcess[str], out: str, err: str
) -> None:
    """The command stopped as Ctrl-C should stop it: exit 130, one line, no output."""
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["undertale-duck: interrupted"]
    assert out == ""


def _reap(proc: subprocess.Popen[str]) -> None:
    """Kill a command a test left running (an assertion failed before it ended)."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def _interrupt(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        # without the interrupt the scan runs for minutes: the wait would time out
        return proc.communicate(timeout=120)
    finally:
        _reap(proc)


@pytest.mark.heavy
def test_ctrl_c_stops_describe_scan_at_once(slow: Path) -> None:
    before = hf.sha256s(slow)
    proc = _start(_cli("describe", str(slow), "--scan"))
    _wait_for_cpu(proc.pid, 4.0)
    out, err = _interrupt(proc)
    _assert_interrupted(proc, out, err)
    assert hf.sha256s(slow) == before


@pytest.mark.heavy
def test_ctrl_c_stops_validate_with_no_report_left(slow: Path, tmp_path: Path) -> None:
    schema = tmp_path / "slow_schema.py"
    schema.write_text(SCHEMA)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = hf.sha256s(slow)
    proc = _start(
        _cli("validate", str(slow), "-s", f"{schema}:Slow", "-o", str(out_dir / "r.html"))
    )
    _wait_for_cpu(proc.pid, 4.0)
    out, err = _interrupt(proc)
    _assert_interrupted(proc, out, err)
    assert list(out_dir.iterdir()) == []  # no report, no temporary file
    assert hf.sha256s(slow) == before


def _loaded(pid: int, library: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return library in maps.read()
    except OSError:
        return False


def _entry_points() -> list[list[str]]:
    points = [_cli()]
    script = shutil.which("undertale-duck", path=os.path.dirname(sys.executable))
    if script is not None:  # the console script pip installs ([project.scripts])
        points.append([script])
    return points


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
@pytest.mark.parametrize("entry", _entry_points(), ids=lambda e: os.path.basename(e[-1]))
@pytest.mark.parametrize("command", ["describe", "validate", "sql"])
def test_ctrl_c_while_importing_prints_one_line(
    entry: list[str], command: str, tmp_path: Path
) -> None:
    args = _command_args(command, tmp_path)
    # On a loaded machine the command may finish before the signal is sent (it then exits
    # 0 having done its work): a few tries, each judged only if the signal found it running
    for _ in range(5):
        proc, out, err = _interrupt_after_duckdb_loads([*entry, *args], 0.0)
        if proc.returncode != 0:
            break
    assert "Traceback" not in err
    _assert_interrupted(proc, out, err)


def _command_args(command: str, tmp_path: Path) -> list[str]:
    """The arguments of ``command`` over a small dataset written under ``tmp_path``."""
    data = tmp_path / "data"
    datagen.write_shards(data, [4])
    return {
        "describe": ["describe", str(data)],
        "validate": ["validate", str(data), "-s", "Dataset"],
        "sql": ["sql", str(data), "SELECT count(*) FROM dataset"],
    }[command]


def _interrupt_after_duckdb_loads(
    command: list[str], delay: float
) -> tuple[subprocess.Popen[str], str, str]:
    """Run ``command`` and send it SIGINT ``delay`` seconds after DuckDB's library is mapped.

    The library is mapped while the command line's modules are being imported, before
    main() runs: the signal arrives in the middle of the imports.
    """
    proc = _start(command)
    try:
        while proc.poll() is None and not _loaded(proc.pid, "_duckdb."):
            pass
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        _reap(proc)
    return proc, out, err


#: Runs the command line after arranging that the process sends itself SIGINT from inside
#: DuckDB's extension module while it initialises (the first enum it creates): a Ctrl-C at the
#: worst moment of the imports, every time. The file named by argv[1] records that it was sent.
SIGINT_INSIDE_DUCKDB_INIT = """
import enum, os, signal, sys
from pathlib import Path

marker = Path(sys.argv.pop(1))
create = enum.EnumType._create_

def _create_(*args, **kwargs):
    # duckdb/__init__.py is running `import _duckdb`, which binds the name once it is done
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and not hasattr(duckdb, "_duckdb") and not marker.exists():
        marker.write_text("sent")
        os.kill(os.getpid(), signal.SIGINT)
    return create(*args, **kwargs)

enum.EnumType._create_ = _create_
sys.argv[0] = "undertale-duck"
from undertale_duck.cli import entry
entry()
"""


@pytest.mark.parametrize("command", ["describe", "sql"])
def test_ctrl_c_inside_duckdbs_module_initialisation_prints_one_line(
    command: str, tmp_path: Path
) -> None:
    # Without deferral DuckDB's module aborts the process here ("Critical nanobind error",
    # SIGABRT) or the interrupt comes back as a traceback of another exception
    args = _command_args(command, tmp_path)
    marker = tmp_path / "sent"
    proc = _start([sys.executable, "-c", SIGINT_INSIDE_DUCKDB_INIT, str(marker), *args])
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        _reap(proc)
    assert marker.read_text() == "sent"  # the signal came from inside DuckDB's initialisation
    _assert_interrupted(proc, out, err)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_ctrl_c_at_any_moment_of_the_imports_prints_one_line(tmp_path: Path) -> None:
    # SIGINT sent at spread moments after DuckDB's library is mapped: each run either finished
    # (a loaded machine) or stopped with one line; none aborted or printed a traceback
    args = _command_args("describe", tmp_path)
    interrupted = 0
    for delay in (0.0, 0.003, 0.008, 0.015, 0.03, 0.06):
        proc, out, err = _interrupt_after_duckdb_loads(_cli(*args), delay)
        if proc.returncode == 0:  # it ended before the signal: nothing to judge
            continue
        _assert_interrupted(proc, out, err)
        interrupted += 1
    assert interrupted > 0, "every run ended before its signal; none was judged"


@pytest.mark.heavy
@pytest.mark.parametrize("command", ["describe", "validate"])
def test_ctrl_c_stops_a_view_being_indexed(slow: Path, tmp_path: Path, command: str) -> None:
    # --where builds a view: its indexing pass matches the pattern against every value
    schema = tmp_path / "slow_schema.py"
    schema.write_text(SCHEMA)
    where = ["--where", "NOT regexp_full_match(s, 'x*z')"]
    args = ["-s", f"{schema}:Slow"] if command == "validate" else []
    before = hf.sha256s(slow)
    proc = _start(_cli(command, str(slow), *args, *where))
    _wait_for_cpu(proc.pid, 4.0)
    out, err = _interrupt(proc)
    _assert_interrupted(proc, out, err)
    assert hf.sha256s(slow) == before


#: A view whose one window is the whole 8M-row shard, each row a regular expression over a
#: 256 KiB string: reading its first window keeps DuckDB busy for hours (its indexing pass
#: runs no expression).
SLOW_VIEW = "SELECT regexp_full_match(s, 'x*z') AS m FROM dataset"
#: CPU seconds after which the command is reading the window: well past its imports and
#: the view's indexing pass (about 4 s together).
READING_CPU = 8.0


@pytest.mark.heavy
@pytest.mark.parametrize("command", ["head", "row", "batch"])
def test_ctrl_c_stops_a_window_read_at_once(slow: Path, command: str) -> None:
    args = {
        "head": ["head", str(slow), "-n", "1"],
        "row": ["row", str(slow), "0"],
        "batch": ["batch", str(slow), "--step", "0", "--batch", "4", "--values"],
    }[command]
    before = hf.sha256s(slow)
    proc = _start(_cli(*args, "--query", SLOW_VIEW))
    _wait_for_cpu(proc.pid, READING_CPU)
    out, err = _interrupt(proc)
    _assert_interrupted(proc, out, err)
    assert hf.sha256s(slow) == before


@pytest.mark.heavy
@pytest.mark.parametrize("command", ["describe", "head"])
def test_ctrl_c_pressed_again_while_exiting_changes_nothing(slow: Path, command: str) -> None:
    # The second Ctrl-C is sent as soon as the first one's line is read: the command is then
    # still leaving main(), or running its exit hooks; it once printed the line twice, or a
    # traceback from threading's exit hook, or died by SIGINT instead of exiting 130
    args = {
        "describe": ["describe", str(slow), "--where", "NOT regexp_full_match(s, 'x*z')"],
        "head": ["head", str(slow), "-n", "1", "--query", SLOW_VIEW],
    }[command]
    proc = _start(_cli(*args))
    try:
        _wait_for_cpu(proc.pid, READING_CPU if command == "head" else 4.0)
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        first = proc.stderr.readline()
        with contextlib.suppress(ProcessLookupError):  # it may have exited already
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        _reap(proc)
    _assert_interrupted(proc, out, first + err)


def _interrupt_python(
    script: str, slow: Path
) -> tuple[str, str, subprocess.Popen[str]]:
    """Run ``script`` over the slow view; SIGINT once it has printed OPEN and read 4 s more."""
    proc = _start([sys.executable, "-c", script, str(slow), SLOW_VIEW])
    assert proc.stdout is not None
    assert proc.stdout.readline().split() == ["OPEN"]
    opened = sum(psutil.Process(proc.pid).cpu_times()[:2])
    _wait_for_cpu(proc.pid, opened + 4.0)
    out, err = _interrupt(proc)
    return out, err, proc


_READ = (
    "import sys\n"
    "from undertale_duck import ParquetDataset\n"
    "ds = ParquetDataset(sys.argv[1], query=sys.argv[2])\n"
    "print('OPEN', flush=True)\n"
    "try:\n"
    "    ds[0]\n"
    "except KeyboardInterrupt:\n"
    "    print('INTERRUPTED', flush=True)\n"
    "print(len(ds))\n"
)


@pytest.mark.heavy
def test_ctrl_c_stops_a_window_read_from_python(slow: Path) -> None:
    out, err, proc = _interrupt_python(_READ, slow)  # ds[0] is reading
    assert proc.returncode == 0, err
    assert out.split() == ["INTERRUPTED", "8000000"], (out, err)


_READ_AHEAD = (
    "import sys, time\n"
    "from undertale_duck import ParquetDataset\n"
    "ds = ParquetDataset(sys.argv[1], query=sys.argv[2])\n"
    "ds.prefetch([0])\n"  # the one window is read on a read-ahead thread
    "print('OPEN', flush=True)\n"
    "time.sleep(3600)\n"
)


@pytest.mark.heavy
def test_ctrl_c_exits_while_a_window_is_read_ahead(slow: Path) -> None:
    # the main thread is idle; Ctrl-C ends the script, and the exit hook, which waits for
    # read-ahead threads, interrupts their read rather than waiting hours for it
    out, err, proc = _interrupt_python(_READ_AHEAD, slow)  # the read-ahead thread is reading
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    assert out == ""


_SECOND_CTRL_C = (
    "import sys\n"
    "from undertale_duck import cli\n"
    "from undertale_duck.cli import app\n"
    "def main():\n"
    "    app._say_interrupted()  # what main() does on the first Ctrl-C\n"
    "    raise KeyboardInterrupt  # the second one, as main() returns\n"
    "app.main = main\n"
    "cli.entry()\n"
)


def test_a_second_ctrl_c_after_main_returned_prints_no_second_line() -> None:
    # The same moment as the test above, made deterministic: main() has printed the line and
    # returned 130 when the second KeyboardInterrupt reaches entry(); it printed a second line
    proc = subprocess.run(
        [sys.executable, "-c", _SECOND_CTRL_C], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )
    _assert_interrupted(proc, proc.stdout, proc.stderr)


_CTRL_C_AT_SHUTDOWN = (
    "import os, signal\n"
    "from undertale_duck import cli\n"
    "from undertale_duck.cli import app\n"
    "class Late:\n"
    "    def __del__(self):  # a module global: runs after the interpreter's signal teardown\n"
    "        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C arriving as the process ends\n"
    "late = Late()\n"
    "def main():\n"
    "    return app._say_interrupted()  # what main() does on the first Ctrl-C\n"
    "app.main = main\n"
    "cli.entry()\n"
)


def test_a_ctrl_c_while_the_interpreter_shuts_down_changes_nothing() -> None:
    # The moment of test_ctrl_c_pressed_again_while_exiting_changes_nothing that it met only
    # now and then: once Python has torn down its signal handling (after the exit hooks),
    # SIGINT's default action is back and killed the process (status -SIGINT, not 130)
    proc = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AT_SHUTDOWN], capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )
    _assert_interrupted(proc, proc.stdout, proc.stderr)


#: main() meets a Ctrl-C inside code that ``exec`` runs, as it does when one lands while a
#: command imports torch lazily (``dataclasses`` and ``namedtuple`` build methods with exec):
#: caught there and reported, or left to reach entry().
_CTRL_C_INSIDE_EXEC = (
    "from undertale_duck import cli\n"
    "from undertale_duck.cli import app\n"
    "CAUGHT = {caught}\n"
    "def main():\n"
    "    try:\n"
    "        {code}\n"
    "    except KeyboardInterrupt:\n"
    "        if not CAUGHT:\n"
    "            raise\n"
    "        return app._say_interrupted()\n"
    "    return 0\n"
    "app.main = main\n"
    "cli.entry()\n"
)


@pytest.mark.parametrize("how", ["-m", "script"])  # python -m; a file, as the console script
@pytest.mark.parametrize("caught", [True, False], ids=["caught-in-main", "caught-in-entry"])
@pytest.mark.parametrize(
    "code",
    [
        "exec('raise KeyboardInterrupt')",
        "eval('(_ for _ in ()).throw(KeyboardInterrupt())')",
        "exec('import signal, os; os.kill(os.getpid(), signal.SIGINT)')",
    ],
    ids=["exec", "eval", "signal-inside-exec"],
)
def test_a_ctrl_c_inside_code_run_by_exec_exits_130(
    how: str, caught: bool, code: str, tmp_path: Path
) -> None:
    # CPython records any KeyboardInterrupt leaving exec'd code, caught or not, and at exit
    # killed the process with SIGINT: under load the first Ctrl-C of the test above landed in
    # describe's lazy import of torch and the command died by SIGINT (status -2, not 130)
    script = _CTRL_C_INSIDE_EXEC.format(caught=caught, code=code)
    module = tmp_path / "ctrl_c_inside_exec.py"
    module.write_text(script)
    command = {
        "-m": [sys.executable, "-m", module.stem],
        "script": [sys.executable, str(module)],
    }[how]
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])},
        preexec_fn=_default_sigint,
    )
    _assert_interrupted(proc, proc.stdout, proc.stderr)
