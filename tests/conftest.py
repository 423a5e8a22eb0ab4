from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

from support import datagen

SLOW = Path(__file__).with_name("slow.txt")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the cases tests/slow.txt lists as ``slow`` (``tasks.py quick`` leaves them out)."""
    listed = {line.strip() for line in SLOW.read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)


# Shared 2-core machines make per-example timings meaningless: no hypothesis deadlines.
settings.register_profile("undertale_duck", deadline=None)
settings.load_profile("undertale_duck")


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep the library's caches (view indexes, verdicts) out of the user's cache directory."""
    root = tmp_path_factory.mktemp("undertale_duck_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UNDERTALE_DUCK_CACHE", str(root))
        yield root


@pytest.fixture(scope="session")
def ray_home_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one home every Ray started by this test process uses (see ``ray_home``)."""
    return tmp_path_factory.mktemp("ray-home")


@pytest.fixture(scope="module")
def ray_home(ray_home_path: Path) -> Iterator[Path]:
    """A home for the tests that start Ray: never the user's ``~/.ray``.

    ``ray.init`` writes its token under ``~/.ray`` and a process remembers that token
    authentication is on: a second Ray started in the same process under another home
    finds no token and its GCS server aborts. So every module that starts Ray uses this
    one home, whichever test process runs it.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(ray_home_path))
        yield ray_home_path


@pytest.fixture(scope="session")
def uneven(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """Uneven shards (including 1-row and 0-row ones) and row groups, plus clutter files."""
    root = tmp_path_factory.mktemp("uneven")
    sizes = [150, 1, 0, 97, 300, 2]
    datagen.write_shards(root, sizes, row_group_size=[40, 1, 1, 13, 128, 1])
    (root / "_SUCCESS").write_text("")
    (root / ".part-00000.parquet.crc").write_bytes(b"crc")
    (root / "part-00001.parquet.crc").write_bytes(b"crc")
    (root / "README.txt").write_text("not parquet")
    (root / ".hidden.parquet").write_bytes(b"not parquet at all")
    return root, sum(sizes)
