"""More attacks on the output guard, each a real command in a child process.

Hard links to shards, ``/proc/self/fd`` and device names, the dataset spelled another way,
hostile file names, a full disk and a file size limit, and the permissions of a replaced
file. Every attack compares the sha256 of every dataset file (and its link count) before
and after.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import datagen
from support import hostile_files as hf

ROOT = Path(__file__).resolve().parents[2]
MAIN = hf.CLI_MAIN
QUERY = "SELECT id, label FROM dataset ORDER BY id"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, [20, 7])
    return root


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """sha256 and link count of every file below ``root`` (and every other entry's kind)."""
    found = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        if stat.S_ISREG(st.st_mode):
            found[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(),
                                               st.st_nlink)
        else:
            found[str(p.relative_to(root))] = (stat.filemode(st.st_mode), st.st_nlink)
    return found


def cli(*args: str | bytes, cwd: Path | None = None, fsize: int | None = None,
        umask: int | None = None) -> tuple[int, str]:
    """Run the command line in a child; return its status and standard error."""
    def limits() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if umask is not None:
            os.umask(umask)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", MAIN, *args], cwd=cwd, env=env, capture_output=True,
        timeout=300, check=False, preexec_fn=limits,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    return done.returncode, err


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".undertale-duck-")]


def test_a_hard_link_to_a_shard_is_never_replaced(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    shard = sorted(data.glob("*.parquet"))[0]
    os.link(shard, out / "result.csv")
    before = snapshot(data)
    for force in ([], ["--force"]):
        status, err = cli("sql", str(data), QUERY, "--output", str(out / "result.csv"), *force)
        assert status == 2 and "is a shard of the dataset" in err, err
        assert snapshot(data) == before  # same bytes, and still two links to the inode
        assert os.path.samefile(shard, out / "result.csv")


def test_descriptor_and_device_names_are_refused(data: Path) -> None:
    before = snapshot(data)
    for target in ("/proc/self/fd/1", "/dev/stdout", "/dev/null"):
        for force in ([], ["--force"]):
            status, err = cli("sql", str(data), QUERY, "--output", target, *force)
            assert status == 2 and ("symbolic link" in err or "character device" in err), err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert snapshot(data) == before


def test_the_dataset_is_protected_however_it_is_spelled(data: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(data, target_is_directory=True)
    (data / "sub").mkdir()
    before = snapshot(data)
    spellings = [
        (str(data), str(data / "a.csv"), None),
        (str(data) + "/", str(tmp_path) + "//data//b.csv", None),
        ("./data", "./data/c.csv", tmp_path),
        ("data", "data/sub/../d.csv", tmp_path),
        ("data", "data/sub/e.csv", tmp_path),
        (str(link) + "/", str(link / "f.csv"), None),
        ("link", "data/g.csv", tmp_path),
        ("data", "link/h.csv", tmp_path),
        (".", "i.csv", data),
        (".", str(data / "j.csv"), data),
        (str(data), "k.csv", data),
        (str(data), "../../data/l.csv", data / "sub"),
        (str(data), "../l.csv", data / "sub"),
        (str(data / "part-00000.parquet"), str(data / "m.csv"), None),
        (str(link / "part-00000.parquet"), str(data / "n.csv"), None),
        (str(data) + "/*.parquet", str(data / "sub" / "o.csv"), None),
    ]
    if os.path.isdir("/proc/self/cwd"):  # Linux: the same directory through /proc links
        spellings += [
            (str(data), "/proc/self/cwd/p.csv", data),
            (str(data), f"/proc/self/root{data}/q.csv", None),
        ]
    for source, target, cwd in spellings:
        status, err = cli("sql", source, QUERY, "--output", target, cwd=cwd)
        assert status == 2 and "lies inside the dataset directory" in err, (source, target, err)
    assert snapshot(data) == before
    # beside the dataset, in the directory that holds it, is allowed
    status, err = cli("sql", "data", QUERY, "--output", "beside.csv", cwd=tmp_path)
    assert status == 0, err
    assert (tmp_path / "beside.csv").read_text().startswith("id,label\n")
    assert snapshot(data) == before


@pytest.mark.parametrize(
    "name",
    ["new\nline.csv", "tab\tand space.csv", "ünïcødé €.csv", "-dash.csv", b"bad\xffutf8.csv",
     "x" * 251 + ".csv"],
)
def test_hostile_output_names_are_written_at_exactly_that_name(
    data: Path, tmp_path: Path, name: str | bytes
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = os.path.join(os.fsencode(out), os.fsencode(name))
    status, err = cli("sql", str(data), QUERY, "--output", target)
    assert status == 0, err
    assert os.listdir(os.fsencode(out)) == [os.fsencode(name)]
    with open(target, "rb") as fh:
        assert fh.read().startswith(b"id,label\nrow-00000000,0\n")


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_a_file_size_limit_leaves_no_partial_file(data: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    big = "SELECT range AS n, repeat('x', 50) AS pad FROM range(200000)"
    status, err = cli("sql", str(data), big, "--output", str(out / f"big.{fmt}"), fsize=8192)
    assert status == 2 and "cannot be written: File too large" in err, err
    assert os.listdir(out) == []  # neither the result nor its temporary file


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounts need root")
def test_a_full_disk_leaves_no_partial_file(data: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        big = "SELECT range AS n, repeat('x', 50) AS pad FROM range(200000)"
        for fmt in ("csv", "parquet", "jsonl"):
            status, err = cli("sql", str(data), big, "--output", str(small / f"big.{fmt}"))
            assert status == 2 and "No space left on device" in err, err
            assert os.listdir(small) == []
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_replacing_a_private_file_keeps_it_private(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    private = out / "private.csv"
    private.write_text("old")
    os.chmod(private, 0o600)
    status, err = cli("sql", str(data), QUERY, "--output", str(private), "--force", umask=0)
    assert status == 0, err
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("id,label\n")
    fresh = out / "fresh.csv"  # a new file follows the umask, as any tool's does
    status, err = cli("sql", str(data), QUERY, "--output", str(fresh), umask=0o077)
    assert status == 0, err
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert leftovers(out) == []


def test_query_and_schema_files_are_inputs_never_replaced(data: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    query = work / "q.sql"
    query.write_text(QUERY)
    schema = work / "schema.py"
    schema.write_text(
        "from pydantic import Field\nfrom undertale_duck import schema\n\n"
        "class Rows(schema.Dataset):\n    label: int = Field(ge=0, lt=7)\n"
    )
    view = work / "view.sql"
    view.write_text("SELECT * FROM dataset WHERE label = 1")
    kept = {p: p.read_bytes() for p in (query, schema, view)}
    attempts = [
        ("sql", str(data), f"@{query}", "--output", str(query), "--force"),
        ("sql", str(data), QUERY, "--query", f"@{view}", "--output", str(view), "--force"),
        ("validate", str(data), "--schema", f"{schema}:Rows", "--output", str(schema),
         "--force"),
    ]
    for args in attempts:
        status, err = cli(*args)
        assert status == 2 and "inputs are read-only" in err, (args, err)
    assert {p: p.read_bytes() for p in kept} == kept
    status, err = cli("validate", str(data), "--schema", f"{schema}:Rows", "--output",
                      str(work / "report.json"))
    assert status == 0, err
