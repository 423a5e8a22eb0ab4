"""The shell's history file goes through the output guard: planted links, FIFOs, the dataset."""

from __future__ import annotations

import os
import pty
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import datagen
from support import hostile_files as hf
from support.terminal import read_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "train"
    datagen.write_shards(root, [6, 4])
    return root


def _session(data: Path, state: Path, statement: bytes) -> bytes:
    """Run one statement in a shell on a terminal with ``XDG_STATE_HOME=state``; return
    everything the terminal showed."""
    master, slave = pty.openpty()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": str(state),
        "TERM": "dumb",
        "COLUMNS": "120",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "undertale_duck", "shell", str(data)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    try:
        shown = read_until(master, b"duck> ")
        os.write(master, statement + b"\r")
        shown += read_until(master, b"duck> ")
        os.write(master, b".quit\r")
        shown += read_until(master, b"\xff", timeout=30)  # until the terminal closes
        assert proc.wait(timeout=60) == 0, shown
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert b"Traceback" not in shown
    return shown


def test_history_is_private_and_replaced_atomically(data: Path, tmp_path: Path) -> None:
    _session(data, tmp_path, b"SELECT 1 AS one;")
    path = tmp_path / "undertale-duck" / "shell_history"
    first = path.stat()
    assert stat.S_IMODE(first.st_mode) == 0o600
    _session(data, tmp_path, b"SELECT 2 AS two;")
    text = path.read_text()
    assert "SELECT 1 AS one;" in text and "SELECT 2 AS two;" in text  # read, then saved
    assert path.stat().st_ino != first.st_ino  # a new file renamed into place
    assert [p.name for p in path.parent.iterdir()] == ["shell_history"]  # no temporary left


@pytest.mark.parametrize("victim_in_dataset", [True, False])
def test_planted_symlink_at_the_history_path_is_never_written_through(
    data: Path, tmp_path: Path, victim_in_dataset: bool
) -> None:
    state = tmp_path / "state"
    (state / "undertale-duck").mkdir(parents=True)
    victim = data / "part-00000.parquet" if victim_in_dataset else tmp_path / "victim.txt"
    if not victim_in_dataset:
        victim.write_text("precious\n")
    link = state / "undertale-duck" / "shell_history"
    link.symlink_to(victim)
    before = hf.sha256s(data) | hf.sha256s(victim.parent)
    shown = _session(data, state, b"SELECT 3 AS three;")
    assert b"3" in shown
    assert b"warning: the shell history file" in shown and b"symbolic link" in shown, shown
    assert hf.sha256s(data) | hf.sha256s(victim.parent) == before
    assert link.is_symlink() and os.readlink(link) == str(victim)
    assert sorted(p.name for p in link.parent.iterdir()) == ["shell_history"]


def test_history_inside_the_dataset_is_neither_read_nor_written(
    data: Path, tmp_path: Path
) -> None:
    state = data / "state"  # XDG_STATE_HOME inside the dataset directory
    before = hf.sha256s(data)
    listing = sorted(p.name for p in data.iterdir())
    shown = _session(data, state, b"SELECT 4 AS four;")
    assert b"lies inside the dataset directory" in shown, shown
    assert hf.sha256s(data) == before
    assert sorted(p.name for p in data.iterdir()) == listing  # not even a directory made


def test_fifo_at_the_history_path_neither_blocks_nor_is_replaced(
    data: Path, tmp_path: Path
) -> None:
    (tmp_path / "undertale-duck").mkdir()
    fifo = tmp_path / "undertale-duck" / "shell_history"
    os.mkfifo(fifo)
    shown = _session(data, tmp_path, b"SELECT 5 AS five;")  # reading it would block
    assert b"not a regular file" in shown, shown
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
