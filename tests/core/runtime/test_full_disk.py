"""Issue 27: a cache that cannot be written (a full disk) costs only its reuse, with a warning.

A child process runs under ``RLIMIT_FSIZE`` 0, so every file write fails (``EFBIG``, as a
full disk's ``ENOSPC`` would): views still open and serve their rows.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import datagen

ROOT = Path(__file__).resolve().parents[3]
SIZES = [40, 30]

CHILD = """
import os, resource, signal, sys, warnings
from undertale_duck import ParquetDataset
if {warm}:  # the cache directory exists and is ours: the index write itself fails
    ParquetDataset({data!r}, query="SELECT id FROM dataset WHERE label < 3")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    ds = ParquetDataset({data!r}, query="SELECT id FROM dataset WHERE label < 2")
    print([ds[i]["id"] for i in range(len(ds))])
print(any("view index cannot be kept" in str(w.message) for w in caught))
"""


def digest(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


@pytest.mark.parametrize("warm", [False, True])
def test_a_full_disk_leaves_the_view_cache_unused_with_a_warning(
    tmp_path: Path, warm: bool
) -> None:
    data = tmp_path / "data"
    datagen.write_shards(data, SIZES, row_group_size=10)
    before = digest(data)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
           "UNDERTALE_DUCK_CACHE": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(data=str(data), warm=warm)], env=env,
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    ids = [r["id"] for r in datagen.expected(sum(SIZES)) if r["label"] < 2]
    assert lines == [repr(ids), "True"]
    assert digest(data) == before
