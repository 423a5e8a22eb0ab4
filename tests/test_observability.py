"""What the library tells: logs under ``undertale_duck``, progress on a terminal only, reprs."""

from __future__ import annotations

import fcntl
import logging
import os
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from support import datagen

from undertale_duck import ChunkedSampler, Mixture, ParquetDataset, ReadOnlyError, Stream
from undertale_duck.schema import Dataset

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("observability") / "train"
    datagen.write_shards(root, [120, 80], row_group_size=20)
    return root


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    assert all(r.name.startswith("undertale_duck") for r in caplog.records)
    return [r.getMessage() for r in caplog.records]


def test_opening_indexing_evictions_and_refusals_are_logged(
    data: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.DEBUG, logger="undertale_duck"):
        ds = ParquetDataset(data, memory=0.01, window_bytes=500)
        [ds[i] for i in range(0, 200, 7)]  # a budget of a few windows: evictions
        with pytest.raises(ReadOnlyError):
            ds.sql("COPY (SELECT 1) TO 'x.csv'")
        view = ParquetDataset(data, where="label > 2")
        ParquetDataset(data, where="label > 2")  # the same view again: its index is reused
    logged = messages(caplog)
    assert any(m.startswith(f"opened {data}: 2 shards, 200 rows") for m in logged)
    assert any(m.startswith("evicted window") for m in logged)
    assert any(m.startswith("refused: ") for m in logged)
    assert any(m.startswith("indexing view") and "label > 2" in m for m in logged)
    assert any(m.startswith("view index") and "reused" in m for m in logged)
    assert len(view) > 0
    # a library prints nothing itself: stdout and stderr (not a terminal here) stay empty
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_silent_without_logging_configured(data: Path) -> None:
    # the package's NullHandler: Python's last-resort handler never prints our records
    code = (
        "import undertale_duck, logging\n"
        f"ds = undertale_duck.ParquetDataset({str(data)!r}, where='label > 1')\n"
        "ds[0]; ds.report(undertale_duck.schema.Dataset)\n"
        "assert logging.getLogger('undertale_duck').handlers\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


def test_downloads_are_logged(
    data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from support.storage_server import HTTPServer, serve_directory

    server = HTTPServer()
    try:
        urls = serve_directory(server, data, "train")
        with caplog.at_level(logging.INFO, logger="undertale_duck"):
            ds = ParquetDataset(urls, cache_dir=tmp_path / "shards")
            assert ds[0]["id"] == datagen.expected(1)[0]["id"]
        assert any(m.startswith(f"downloading {urls[0]}") for m in messages(caplog))
    finally:
        server.close()


def test_report_draws_a_progress_bar_on_a_terminal_only(data: Path) -> None:
    pty = pytest.importorskip("pty")
    code = (
        "import undertale_duck\n"
        f"ds = undertale_duck.ParquetDataset({str(data)!r})\n"
        "print(ds.report(undertale_duck.schema.Dataset).passed)\n"
    )
    master, slave = pty.openpty()
    # a terminal of 0 columns (a fresh pty's size) gets an empty bar: give it a real width
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    env = {**os.environ, "TQDM_MININTERVAL": "0"}  # draw every step, however fast
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    drawn = b""
    while True:  # until the child's end closes the terminal (EIO or EOF): no timing involved
        ready, _, _ = select.select([master], [], [], 120)
        assert ready, "the child wrote nothing for 120 s"
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    assert child.stdout is not None
    out = child.stdout.read()
    child.wait(timeout=120)
    assert child.returncode == 0 and out == b"True\n"
    assert b"validating" in drawn
    # the same in a pipe: nothing on stderr
    piped = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert piped.stdout == "True\n" and piped.stderr == ""


def test_reprs_say_what_each_object_is(data: Path) -> None:
    ds = ParquetDataset(data, memory=64)
    text = repr(ds)
    assert text.startswith(f"ParquetDataset({str(data)!r}, memory=64")
    assert "rows=200" in text and "shards=2" in text and "columns=[id, label," in text
    view = ParquetDataset(data, where="label > 2")
    assert "query='SELECT * FROM dataset WHERE label > 2'" in repr(view)
    mix = Mixture([Stream(ds, choose=10, name="a"), Stream(view, repeat=1)])
    assert repr(mix) == f"Mixture([a: 10 of 200 rows, stream1: {len(view)} of {len(view)} rows], " \
        f"epoch={10 + len(view)} rows)"
    sampler = ChunkedSampler(ds, 8, 2, 2, 1, shuffle=True, seed=3)
    assert repr(sampler).startswith(
        "ChunkedSampler(ParquetDataset of 200 rows, batch=8, workers=2, rank 1 of 2, "
        "shuffle=True, seed=3"
    )
    report = view.report(Dataset)
    text = repr(report)
    assert text.startswith(f"ValidationReport({str(data)!r}, query=")
    assert f"rows={len(view)}" in text and "passed=True" in text and "failed=[]" in text
    assert len(text) < 400  # not every check and example
