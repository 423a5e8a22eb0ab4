"""common.progress: one callback signature; a bar on a terminal, nothing anywhere else."""

from __future__ import annotations

import io
import os
import select
import time

import pytest

from undertale_duck.common.progress import is_terminal, progress_bar


def test_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with progress_bar("validating", unit=" queries", stream=stream) as step:
        for k in range(50):
            step(f"query {k}")
    assert stream.getvalue() == ""
    assert not is_terminal(stream)
    closed = io.StringIO()
    closed.close()
    assert not is_terminal(closed)  # a closed stream is not an error


def test_a_bar_on_a_terminal_with_counts_and_the_label() -> None:
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    with open(slave, "w", encoding="utf-8", closefd=True) as stream:
        assert is_terminal(stream)
        with progress_bar("scanning shards", unit=" shards", stream=stream) as step:
            for k in range(3):
                time.sleep(0.15)  # past tqdm's redraw interval, so each step is drawn
                step(f"part-{k}.parquet")
    drawn = b""
    while True:  # everything the bar wrote, until the terminal has nothing more
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    text = drawn.decode()
    assert "scanning shards" in text and "3 shards" in text and "part-2.parquet" in text


def test_the_bar_is_closed_when_the_block_raises() -> None:
    stream = io.StringIO()
    with pytest.raises(RuntimeError), progress_bar("x", stream=stream) as step:
        step("one")
        raise RuntimeError("boom")
    assert stream.getvalue() == ""
