"""Our caches attacked on real files: planted files, shared directories, FIFOs, unwritable roots.

Every cache directory passes one check (core/cachedir.py ``private_directory``): owned by us,
writable by no one else, outside the dataset; every cache file is read only when it is a
regular file of ours (never through a link, never blocking on a FIFO). The dataset's bytes
are compared before and after each attack.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from pydantic import Field
from support import datagen

from undertale_duck import ArgumentError, ParquetDataset, SchemaError, schema
from undertale_duck.core.read.disk_tier import DIGEST_BYTES, TRAILER_MAGIC
from undertale_duck.core.read.disk_tier import digest as window_digest
from undertale_duck.core.runtime import cachedir
from undertale_duck.core.source.remote.shard_cache import key_of
from undertale_duck.errors import SourceError
from undertale_duck.validation import verdicts

SIZES = [30, 20]
ROOT = Path(__file__).resolve().parents[3]


class Strict(schema.Dataset):
    label: int = Field(ge=0, lt=3)  # the generated labels reach 6: the dataset fails


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    datagen.write_shards(root, SIZES, row_group_size=10)
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "cache"
    monkeypatch.setenv(cachedir.CACHE_ENV, str(root))
    verdicts.forget()
    yield root
    verdicts.forget()


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def shared(path: Path) -> Path:
    """A directory anyone may write to (as /tmp is, less the sticky bit)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def run_child(code: str, env: dict[str, str], timeout: float = 120) -> str:
    """Run Python in a child process; a hang (a blocking FIFO) fails instead of hanging."""
    environment = {**os.environ, **env, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], env=environment, capture_output=True, text=True,
            timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the child hung (a FIFO in the cache was opened for reading)")
    assert done.returncode == 0, done.stderr
    return done.stdout


def ids_in_child(arguments: str, env: dict[str, str]) -> list[str]:
    """Every row's ``id`` of ``ParquetDataset(<arguments>)`` opened in a child process."""
    code = (
        "from undertale_duck import ParquetDataset\n"
        f"ds = ParquetDataset({arguments})\n"
        "import json; print(json.dumps([ds[i]['id'] for i in range(len(ds))]))\n"
    )
    return list(json.loads(run_child(code, env)))


# ---------------------------------------------------------------------- disk tier
def test_windows_planted_in_a_shared_directory_are_never_served(
    data: Path, tmp_path: Path
) -> None:
    before = digest(data)
    for mode in (0o777, 0o1777, 0o775):  # others (or the group) may write: refused
        directory = shared(tmp_path / f"shared-{mode:o}")
        os.chmod(directory, mode)
        with pytest.raises(ArgumentError, match="not private"):
            ParquetDataset(data, disk=8, disk_dir=directory)
        assert not list(directory.iterdir())
    link = tmp_path / "link-to-shared"
    link.symlink_to(tmp_path / "shared-777")
    with pytest.raises(ArgumentError, match="not private"):  # judged where the link leads
        ParquetDataset(data, disk=8, disk_dir=link)
    assert digest(data) == before


def _forge(path: Path) -> None:
    """Rewrite a window file as valid Arrow IPC with the same rows and columns, other values.

    With a valid checksum trailer too: only the other defences (a file of ours, in a private
    directory, not a link) can refuse it.
    """
    body = path.read_bytes()[: -len(TRAILER_MAGIC) - DIGEST_BYTES]
    table = ipc.open_file(pa.BufferReader(body)).read_all()
    forged = table.set_column(0, "id", pa.array(["PLANTED"] * table.num_rows, pa.string()))
    forged_path = path.with_name("forged.ipc")
    with pa.OSFile(str(forged_path), "wb") as sink, ipc.new_file(sink, forged.schema) as out:
        out.write_table(forged)
    written = forged_path.read_bytes()
    forged_path.write_bytes(
        written + TRAILER_MAGIC
        + window_digest(path.name.removesuffix(".arrow"), written).to_bytes(DIGEST_BYTES, "big")
    )
    os.chmod(forged_path, 0o644)
    path.unlink()
    forged_path.rename(path)


def test_links_fifos_and_foreign_files_at_window_names_are_discarded(
    data: Path, tmp_path: Path
) -> None:
    """Even in our own directory, a window name holding a link or a FIFO is never opened."""
    directory = tmp_path / "windows"
    first = ParquetDataset(data, disk=8, disk_dir=directory, window_bytes=2000)
    expected = [first[i] for i in range(len(first))]
    files = sorted(directory.glob("*.arrow"))
    assert len(files) >= 3
    decoy = tmp_path / "decoy.arrow"  # valid IPC, wrong values: only reachable by the link
    shutil.copy(files[0], decoy)
    _forge(decoy)
    files[0].unlink()
    files[0].symlink_to(decoy)
    files[1].unlink()
    os.mkfifo(files[1])
    before = digest(data)
    ids = ids_in_child(f"{str(data)!r}, disk=8, disk_dir={str(directory)!r}, window_bytes=2000",
                       {})
    assert ids == [row["id"] for row in expected]
    assert not files[0].is_symlink() and decoy.exists()  # the link was removed, not followed
    assert digest(data) == before


# ---------------------------------------------------------------------- verdicts
def test_a_verdict_planted_in_a_shared_cache_never_passes_a_failing_dataset(
    data: Path, cache: Path
) -> None:
    planted = shared(shared(cache) / "verdicts")
    ds = ParquetDataset(data)
    key = verdicts.verdict_key(ds, Strict)
    (planted / f"{key}.json").write_text(json.dumps({"key": key, "passed": True}))
    with pytest.raises(SchemaError):
        verdicts.validate(ds, Strict)


def test_a_fifo_at_a_verdict_name_never_blocks(data: Path, cache: Path) -> None:
    (cache / "verdicts").mkdir(parents=True, mode=0o700)
    os.chmod(cache, 0o700)
    code = (
        "import os\n"
        "from pydantic import Field\n"
        "from undertale_duck import ParquetDataset, SchemaError, schema\n"
        "from undertale_duck.validation import verdicts\n"
        "class Strict(schema.Dataset):\n"
        "    label: int = Field(ge=0, lt=3)\n"
        f"ds = ParquetDataset({str(data)!r})\n"
        "key = verdicts.verdict_key(ds, Strict)\n"
        f"os.mkfifo(os.path.join({str(cache / 'verdicts')!r}, key + '.json'))\n"
        "try:\n"
        "    verdicts.validate(ds, Strict)\n"
        "except SchemaError:\n"
        "    print('failed as it should')\n"
    )
    assert run_child(code, {cachedir.CACHE_ENV: str(cache)}).strip() == "failed as it should"
    assert [p.name for p in (cache / "verdicts").iterdir()]  # the FIFO is there, untouched


# ---------------------------------------------------------------------- view indexes
def test_a_fifo_at_a_view_index_name_never_blocks(data: Path, cache: Path) -> None:
    ds = ParquetDataset(data, where="label = 1")
    wanted = [ds[i]["id"] for i in range(len(ds))]
    records = sorted((cache / "views").glob("*.json"))
    bitmaps = sorted((cache / "views").glob("*.rows"))
    assert records and bitmaps
    bitmaps[0].unlink()
    os.mkfifo(bitmaps[0])
    records[0].unlink()
    os.mkfifo(records[0])
    before = digest(data)
    assert ids_in_child(f"{str(data)!r}, where='label = 1'",
                        {cachedir.CACHE_ENV: str(cache)}) == wanted
    assert digest(data) == before


# ---------------------------------------------------------------------- unwritable caches
def test_an_unwritable_cache_root_costs_only_reuse_with_one_warning(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv(cachedir.CACHE_ENV, str(blocker))
    before = digest(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        view = ParquetDataset(data, where="label = 1")
        again = ParquetDataset(data, where="label = 1")
        tiered = ParquetDataset(data, disk=8)
    assert [view[i] for i in range(len(view))] == [again[i] for i in range(len(again))]
    assert len(view) == sum(1 for i in range(sum(SIZES)) if i % 7 == 1)
    assert tiered.disk_dir is None and tiered[3] == datagen.expected(4)[3]
    shown = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert sum("views" in m for m in shown) == 1, shown  # once per directory, not per use
    assert sum("disk tier is off" in m for m in shown) == 1, shown
    assert all("cannot be created" in m for m in shown), shown
    with pytest.raises(ArgumentError, match="cannot be created"):  # named by the user: an error
        ParquetDataset(data, disk=8, disk_dir=blocker / "windows")
    assert digest(data) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission")
def test_a_read_only_cache_directory_degrades(
    data: Path, cache: Path, tmp_path: Path
) -> None:
    (cache / "views").mkdir(parents=True, mode=0o700)
    os.chmod(cache / "views", 0o500)
    try:
        with pytest.warns(RuntimeWarning, match="cannot be written"):
            view = ParquetDataset(data, where="label = 2")
        assert len(view) == sum(1 for i in range(sum(SIZES)) if i % 7 == 2)
    finally:
        os.chmod(cache / "views", 0o700)


# ---------------------------------------------------------------------- shard cache
def test_a_shard_copy_planted_in_a_shared_shard_cache_is_never_served(
    data: Path, tmp_path: Path
) -> None:
    fs = fsspec.filesystem("memory")
    root = f"memory://planted-{os.getpid()}-{time.monotonic_ns()}"
    shard = sorted(data.glob("*.parquet"))[0]
    fs.pipe(f"{root}/{shard.name}", shard.read_bytes())
    try:
        directory = shared(tmp_path / "shards")
        ds = ParquetDataset(root + "/", cache_dir=directory, memory=64)
        listed = ds.source.shards[0]
        # the attacker's copy: same name (from the listing) and size, other rows
        forged = pq.read_table(shard)
        forged = forged.set_column(0, "id", pa.array(["PLANTED"] * forged.num_rows))
        pq.write_table(forged, directory / "forged.parquet")
        os.rename(
            directory / "forged.parquet",
            directory / f"{key_of(listed.path, getattr(listed, 'version', None), listed.size)}"
            ".parquet",
        )
        with pytest.raises(SourceError, match=r"not private|holding Parquet files"):
            ds[0]
    finally:
        fs.rm(root, recursive=True)


# ---------------------------------------------------------------------- spill directory
@pytest.mark.parametrize("variable", ["UNDERTALE_DUCK_TMPDIR", "TMPDIR"])
def test_a_temporary_directory_inside_the_dataset_gets_no_spill_files(
    data: Path, variable: str
) -> None:
    before = digest(data)
    code = (
        "import os, warnings\n"
        "warnings.simplefilter('always')\n"
        "from undertale_duck import ParquetDataset\n"
        f"ds = ParquetDataset({str(data)!r}, memory=64)\n"
        "print(ds.sql('SELECT count(*) AS n FROM dataset').column('n')[0].as_py())\n"
        "print(ds[5]['id'])\n"
        f"print(sorted(os.listdir({str(data)!r})))\n"  # while the process is alive
    )
    env = {variable: str(data)}
    if variable == "TMPDIR":
        env["UNDERTALE_DUCK_TMPDIR"] = ""
    lines = run_child(code, env).splitlines()
    assert lines == [str(sum(SIZES)), "row-00000005", str(sorted(before))]
    assert digest(data) == before and sorted(os.listdir(data)) == sorted(before)


def test_an_unwritable_default_shard_cache_downloads_for_this_process_only(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv(cachedir.CACHE_ENV, str(blocker))
    fs = fsspec.filesystem("memory")
    root = f"memory://unwritable-{os.getpid()}-{time.monotonic_ns()}"
    for shard in sorted(data.glob("*.parquet")):
        fs.pipe(f"{root}/{shard.name}", shard.read_bytes())
    try:
        with pytest.warns(RuntimeWarning, match="cannot be created") as caught:
            ds = ParquetDataset(root + "/", memory=64)
            rows = [ds[i] for i in range(len(ds))]
        assert rows == datagen.expected(sum(SIZES))
        assert sum("shards" in str(w.message) for w in caught) == 1
        with pytest.raises(SourceError, match="cannot be created"):  # named: an error
            ParquetDataset(root + "/", memory=64, cache_dir=blocker / "shards")[0]
    finally:
        fs.rm(root, recursive=True)


def test_a_cache_below_a_directory_anyone_may_rename_in_is_refused(
    data: Path, tmp_path: Path
) -> None:
    open_parent = shared(tmp_path / "anyone")  # 0777 without the sticky bit
    mine = open_parent / "mine"
    mine.mkdir(mode=0o700)
    with pytest.raises(ArgumentError, match="not sticky"):
        ParquetDataset(data, disk=8, disk_dir=mine)
    os.chmod(open_parent, 0o1777)  # as /tmp: others cannot rename what is ours
    assert ParquetDataset(data, disk=8, disk_dir=mine).disk_dir == str(mine)


def test_the_shard_cache_never_evicts_or_clears_the_users_own_files(
    data: Path, tmp_path: Path
) -> None:
    directory = tmp_path / "mixed"
    directory.mkdir(mode=0o700)
    mine = {
        "important.parquet": sorted(data.glob("*.parquet"))[0].read_bytes(),
        "notes.footer": b"my notes",
        "draft.parquet.part-1": b"half a file",
        "0" * 39 + ".parquet": b"not quite a key",
    }
    for name, content in mine.items():
        (directory / name).write_bytes(content)
    fs = fsspec.filesystem("memory")
    root = f"memory://mixed-{os.getpid()}-{time.monotonic_ns()}"
    for shard in sorted(data.glob("*.parquet")):
        fs.pipe(f"{root}/{shard.name}", shard.read_bytes())
    try:
        ds = ParquetDataset(root + "/", memory=64, cache_dir=directory, cache_limit="1KB")
        # a directory holding the user's Parquet files is never a cache (issue 27)
        with pytest.raises(SourceError, match="holding Parquet files"):
            ds[0]
        cache = ds.source.store.cache
        with pytest.raises(SourceError, match="holding Parquet files"):
            cache.make_room(1 << 30)
        with pytest.raises(SourceError, match="holding Parquet files"):
            cache.clear()
        assert {name: (directory / name).read_bytes() for name in mine} == mine
        assert not list(directory.glob("*.footer.part-*"))
    finally:
        fs.rm(root, recursive=True)


def test_no_cache_goes_inside_a_dataset_this_process_opened(data: Path) -> None:
    """Shard copies in a local dataset's directory would become shards of that dataset."""
    before = digest(data)
    local = ParquetDataset(data)
    fs = fsspec.filesystem("memory")
    root = f"memory://inside-{os.getpid()}-{time.monotonic_ns()}"
    fs.pipe(f"{root}/a.parquet", sorted(data.glob("*.parquet"))[0].read_bytes())
    try:
        remote = ParquetDataset(root + "/", memory=64, cache_dir=data / "copies")
        with pytest.raises(SourceError, match="lies inside the dataset directory"):
            remote[0]
        with pytest.raises(ArgumentError, match="lies inside the dataset directory"):
            ParquetDataset(root + "/", memory=64, disk=8, disk_dir=data / "windows")
    finally:
        fs.rm(root, recursive=True)
    assert local[0] == datagen.expected(1)[0]
    assert digest(data) == before and not (data / "copies").exists()


def test_a_cache_root_in_or_through_the_dataset_is_refused(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = tmp_path / "link"
    link.symlink_to(data, target_is_directory=True)
    before = digest(data)
    for root in (data, data / "sub", link, link / "deeper"):
        monkeypatch.setenv(cachedir.CACHE_ENV, str(root))
        with pytest.raises(ArgumentError, match="inside the dataset directory"):
            ParquetDataset(data, where="label = 1")
        with pytest.raises(ArgumentError, match="inside the dataset directory"):
            ParquetDataset(data, disk=8)
        verdicts.forget()
        with pytest.raises(SchemaError):  # a verdict is neither read nor written there
            verdicts.validate(ParquetDataset(data), Strict)
    assert digest(data) == before and sorted(os.listdir(data)) == sorted(before)
    sticky = tmp_path / "tmp-like"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    monkeypatch.setenv(cachedir.CACHE_ENV, str(sticky))  # as /tmp itself: its own views/
    view = ParquetDataset(data, where="label = 1")
    assert stat.S_IMODE(os.stat(sticky / "views").st_mode) == 0o700 and len(view) > 0


@pytest.mark.heavy
def test_a_spawned_worker_keeps_spill_files_out_of_the_dataset(data: Path) -> None:
    before = digest(data)
    script = data.parent / "spawned.py"
    script.write_text(
        "import os\n"
        "import torch\n"
        "from undertale_duck import ParquetDataset\n\n"
        "def ids_of(rows):\n"
        "    return [r['id'] for r in rows]\n\n"
        "if __name__ == '__main__':\n"
        f"    ds = ParquetDataset({str(data)!r}, memory=64)\n"
        "    loader = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=1,\n"
        "        multiprocessing_context='spawn', persistent_workers=True, collate_fn=ids_of)\n"
        "    ids = [i for batch in loader for i in batch]\n"
        f"    print(len(ids), sorted(os.listdir({str(data)!r})))\n"  # the worker is alive
    )
    env = {**os.environ, "TMPDIR": str(data), "UNDERTALE_DUCK_TMPDIR": "",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300, check=False, cwd=data.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{sum(SIZES)} {sorted(before)}"
    assert digest(data) == before


def test_fifos_in_the_shard_cache_never_block(data: Path, tmp_path: Path) -> None:
    directory = tmp_path / "shards"
    directory.mkdir(mode=0o700)
    code = (
        "import os, fsspec\n"
        "from undertale_duck import ParquetDataset\n"
        "fs = fsspec.filesystem('memory')\n"
        f"data, cache = {str(data)!r}, {str(directory)!r}\n"
        "for name in sorted(os.listdir(data)):\n"
        "    fs.pipe('memory://fifo/' + name, open(os.path.join(data, name), 'rb').read())\n"
        "def opened(limit):\n"
        "    return ParquetDataset('memory://fifo/', memory=64, cache_dir=cache,\n"
        "                          cache_limit=limit)\n"
        "first = opened('1GB')\n"  # saves the footers
        "first[0]\n"
        # its read-ahead would otherwise go on downloading (and locking) beside the plants
        "first.reader.stop_read_ahead()\n"
        "first.close()\n"
        "names = [n for n in os.listdir(cache) if n.endswith('.footer')] + ['.evict.lock']\n"
        "assert len(names) == 3, names\n"
        "for name in names:\n"
        "    if os.path.lexists(os.path.join(cache, name)):\n"
        "        os.unlink(os.path.join(cache, name))\n"
        "    os.mkfifo(os.path.join(cache, name))\n"
        "ds = opened('1KB')\n"
        "print([ds[i]['id'] for i in (0, len(ds) - 1)])\n"
    )
    shown = run_child(code, {})
    assert shown.strip() == str(["row-00000000", f"row-{sum(SIZES) - 1:08d}"])
