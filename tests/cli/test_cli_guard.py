"""The one output guard (cli/guard.py), attacked on real files: every dataset byte is kept.

Each attack compares the sha256 of every file under the dataset directory before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import datagen

from undertale_duck.cli import main
from undertale_duck.cli.guard import OutputFile, Protected
from undertale_duck.errors import ArgumentError

SIZES = [20, 7, 13]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES)
    return root


@pytest.fixture
def out(tmp_path: Path) -> Path:
    directory = tmp_path / "out"
    directory.mkdir()
    return directory


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` (and the names of everything else)."""
    found = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            found[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            found[str(p.relative_to(root))] = "not a regular file"
    return found


def invoke(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def temporaries(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".undertale-duck-")]


@contextlib.contextmanager
def when_writing_starts(directory: Path, action: object) -> Iterator[threading.Thread]:
    """Run ``action()`` from a thread once a temporary output file appears in ``directory``."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError):
                if temporaries(directory):
                    action()  # type: ignore[operator]
                    return
            time.sleep(0.0005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        thread.join(timeout=130)


#: A query whose result takes a while to write (the temporary file lives for that long).
LONG_RESULT = "SELECT x, x * 2 AS y, 'row ' || x AS label FROM range(20000) t(x)"


# ------------------------------------------------------------------------ targets refused


def test_special_files_and_links_are_refused_even_with_force(data: Path, out: Path) -> None:
    before = snapshot(data)
    fifo = out / "fifo.csv"
    os.mkfifo(fifo)
    sock_path = out / "sock.csv"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    link = out / "link.csv"
    link.symlink_to(data / "part-00000.parquet")
    dangling = out / "dangling.csv"
    dangling.symlink_to(out / "nowhere.csv")
    try:
        cases = [
            (fifo, "is a FIFO"),
            (sock_path, "is a socket"),
            (link, "symbolic link to a shard"),
            (dangling, "symbolic link"),
            (out, "is a directory"),
        ]
        for target, words in cases:
            for command in (
                ["sql", str(data), "SELECT 1 AS a", "-o", str(target), "--force"],
                ["validate", str(data), "-s", "Dataset", "-o", str(target), "--force"],
            ):
                status, stdout, err = invoke(*command)
                assert status == 2, (command, err)
                assert words in one_line(err), err
                assert stdout == ""
        assert fifo.is_fifo() and sock_path.is_socket()
        assert link.is_symlink() and link.resolve() == data / "part-00000.parquet"
        assert dangling.is_symlink() and not (out / "nowhere.csv").exists()
        assert temporaries(out) == []
    finally:
        sock.close()
    assert snapshot(data) == before


def test_the_dataset_and_every_shard_directory_are_protected(data: Path, tmp_path: Path) -> None:
    before = snapshot(data)
    (data / "sub").mkdir()
    inside_link = tmp_path / "into-data"
    inside_link.symlink_to(data)
    shard = data / "part-00001.parquet"
    attempts = [
        # a single-file source: the file's own directory is protected
        ["sql", str(shard), "SELECT 1 AS a", "-o", str(data / "beside.csv")],
        ["sql", f"{data}/*.parquet", "SELECT 1 AS a", "-o", str(data / "sub" / "deep.csv")],
        ["sql", str(data), "SELECT 1 AS a", "-o", str(inside_link / "x.csv")],
        ["sql", str(data), "SELECT 1 AS a", "-o", str(data / "sub" / ".." / "up.csv")],
        ["validate", str(data), "-s", "Dataset", "-o", str(data / "report.json")],
        ["validate", str(shard), "-s", "Dataset", "-o", str(data / "report.html")],
        ["validate", str(data), "-s", "Dataset", "-o", str(inside_link / "sub" / "r.md")],
    ]
    for command in attempts:
        status, _, err = invoke(*command)
        assert status == 2, (command, err)
        assert "inside the dataset directory" in one_line(err), err
    for command in (
        ["sql", str(data), "SELECT 1 AS a", "-o", str(shard), "--force"],
        ["validate", str(shard), "-s", "Dataset", "-o", str(shard), "--force"],
    ):
        status, _, err = invoke(*command)
        assert status == 2 and "is a shard of the dataset" in one_line(err), err
    (data / "sub").rmdir()
    assert snapshot(data) == before


def test_existing_files_are_replaced_only_with_force(data: Path, out: Path) -> None:
    for command in (["sql", str(data), "SELECT 7 AS a"], ["validate", str(data), "-s", "Dataset"]):
        target = out / ("r.csv" if command[0] == "sql" else "r.json")
        target.write_text("precious\n")
        status, _, err = invoke(*command, "-o", str(target))
        assert status == 2 and "already exists; pass --force" in one_line(err)
        assert target.read_text() == "precious\n"
        status, _, err = invoke(*command, "-o", str(target), "--force")
        assert status == 0, err
        assert target.read_text() != "precious\n"
    assert (out / "r.csv").read_text() == "a\n7\n"
    assert sorted(p.name for p in out.iterdir()) == ["r.csv", "r.json"]


def test_legal_long_names_work_and_too_long_ones_are_a_clean_error(data: Path, out: Path) -> None:
    for length in (242, 255):
        name = "a" * (length - 4) + ".csv"
        status, _, err = invoke("sql", str(data), "SELECT 1 AS a", "-o", str(out / name))
        assert status == 0, err
        assert (out / name).read_text() == "a\n1\n"
    status, _, err = invoke("sql", str(data), "SELECT 1 AS a", "-o", str(out / ("b" * 256)))
    assert status == 2 and "File name too long" in one_line(err)
    assert temporaries(out) == []


def test_dash_is_standard_output(data: Path) -> None:
    status, stdout, err = invoke("sql", str(data), "SELECT 3 AS a", "-o", "-")
    assert (status, stdout, err) == (0, "a\n3\n", "")


def test_symlinks_planted_at_predictable_temporary_names_are_never_followed(
    data: Path, out: Path
) -> None:
    before = snapshot(data)
    shard = data / "part-00000.parquet"
    target = out / "report.html"
    # the names the old writers used: <output>.tmp-<pid> and mkstemp's .<name>.XXXX.tmp
    planted = [out / f"report.html.tmp-{os.getpid()}", out / ".report.html.tmp"]
    planted += [out / f".undertale-duck-{k:016x}.tmp" for k in range(64)]
    for p in planted:
        p.symlink_to(shard)
    status, _, err = invoke("validate", str(data), "-s", "Dataset", "-o", str(target))
    assert status == 0, err
    assert target.read_text().startswith("<!DOCTYPE html>") and not target.is_symlink()
    status, _, err = invoke("sql", str(data), "SELECT 1 AS a", "-o", str(out / "r.csv"))
    assert status == 0, err
    assert all(p.is_symlink() and p.resolve() == shard for p in planted)
    assert snapshot(data) == before


# ------------------------------------------------------------- changes while the work runs


def test_a_file_created_at_the_target_during_the_query_is_never_replaced(
    data: Path, out: Path
) -> None:
    before = snapshot(data)
    target = out / "result.csv"
    with when_writing_starts(out, lambda: target.write_text("made meanwhile\n")):
        status, _, err = invoke("sql", str(data), LONG_RESULT, "-o", str(target))
    assert status == 2, err
    assert "already exists (it appeared while the result was being written)" in one_line(err)
    assert target.read_text() == "made meanwhile\n"
    assert temporaries(out) == []
    assert snapshot(data) == before


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_a_link_or_fifo_planted_at_the_target_during_the_query_survives_force(
    data: Path, out: Path, planted: str
) -> None:
    before = snapshot(data)
    target = out / "result.csv"
    shard = data / "part-00002.parquet"

    def plant() -> None:
        if planted == "symlink":
            target.symlink_to(shard)
        else:
            os.mkfifo(target)

    with when_writing_starts(out, plant):
        status, _, err = invoke("sql", str(data), LONG_RESULT, "-o", str(target), "--force")
    assert status == 2, err
    assert ("symbolic link to a shard" if planted == "symlink" else "is a FIFO") in one_line(err)
    assert target.is_symlink() if planted == "symlink" else target.is_fifo()
    assert temporaries(out) == []
    assert snapshot(data) == before


def test_directory_swapped_for_a_link_into_the_dataset_during_the_query(
    data: Path, tmp_path: Path
) -> None:
    """The output directory is replaced by a symbolic link into the dataset while the result
    is written: the file still lands in the directory that was checked, never in the dataset."""
    before = snapshot(data)
    out = tmp_path / "results"
    out.mkdir()
    moved = tmp_path / "results-moved"

    def swap() -> None:
        out.rename(moved)
        out.symlink_to(data)

    with when_writing_starts(out, swap):
        status, _, err = invoke("sql", str(data), LONG_RESULT, "-o", str(out / "r.csv"))
    assert status == 0, err
    assert out.is_symlink()
    with open(moved / "r.csv") as fh:
        assert sum(1 for _ in fh) == 20000 + 1
    assert temporaries(moved) == []
    assert snapshot(data) == before


def test_a_directory_swapped_before_the_file_is_created_is_judged_again(
    data: Path, tmp_path: Path
) -> None:
    """Checked before the query, swapped for a link into the dataset before the file is
    created: refused when the file is created, nothing written."""
    before = snapshot(data)
    out = tmp_path / "results"
    out.mkdir()
    protected = Protected.of(str(data), [str(p) for p in sorted(data.glob("*.parquet"))])
    target = OutputFile(str(out / "r.csv"), protected=protected, force=False)  # passes now
    out.rename(tmp_path / "results-moved")
    out.symlink_to(data)
    with pytest.raises(ArgumentError, match="inside the dataset directory"), target.open() as f:
        f.write(b"never")
    assert snapshot(data) == before
    assert list((tmp_path / "results-moved").iterdir()) == []


def test_a_directory_moved_into_the_dataset_while_writing_is_refused_at_publication(
    data: Path, tmp_path: Path
) -> None:
    """Someone who may write to the dataset directory moves the output directory into it
    while the result is written: the check made again before publishing refuses it and
    removes the temporary file."""
    out = tmp_path / "results"
    out.mkdir()
    protected = Protected.of(str(data), [str(p) for p in sorted(data.glob("*.parquet"))])
    target = OutputFile(str(out / "r.csv"), protected=protected, force=False)
    before = snapshot(data)
    inside = data / "results"
    with pytest.raises(ArgumentError, match="inside the dataset directory"), target.open() as f:
        f.write(b"a\n1\n")
        out.rename(inside)
    assert list(inside.iterdir()) == []  # no result, no temporary file
    inside.rmdir()
    assert snapshot(data) == before


def test_an_interrupted_write_leaves_no_file(data: Path, out: Path) -> None:
    protected = Protected.of(str(data), [str(p) for p in sorted(data.glob("*.parquet"))])
    target = OutputFile(str(out / "r.csv"), protected=protected, force=False)
    with pytest.raises(KeyboardInterrupt), target.open() as f:
        f.write(b"partial")
        raise KeyboardInterrupt
    assert list(out.iterdir()) == []
