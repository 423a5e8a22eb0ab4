"""The library's own cache directory on local disk, and atomic writes of files into it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import ArgumentError

#: Environment variable naming the cache directory (default: the user's cache directory).
CACHE_ENV = "UNDERTALE_DUCK_CACHE"


def cache_root() -> Path:
    """The root of undertale_duck's caches: ``$UNDERTALE_DUCK_CACHE``, else the user cache dir.

    Returns:
        ``$UNDERTALE_DUCK_CACHE``, else ``$XDG_CACHE_HOME/undertale_duck``, else
        ``~/.cache/undertale_duck``.
    """
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base).expanduser().resolve() / "undertale_duck"


def cache_dir(kind: str, protected: list[str] | None = None) -> Path:
    """Create (mode 0700) and return the cache subdirectory ``kind``.

    Args:
        kind: Subdirectory name, e.g. ``"views"``.
        protected: Directories holding dataset shards; a cache inside one is refused, since
            we never write into a dataset.

    Returns:
        The directory.

    Raises:
        ArgumentError: If the cache directory lies inside a protected directory or cannot be
            created.
    """
    root = cache_root()
    path = root / kind
    _refuse_inside(path, protected)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        # what is there now: a symlink planted at `kind` must not lead into a dataset, and a
        # directory others can write to could hand us index files that are not ours
        real = path.resolve(strict=True)
        st = os.stat(real)
    except OSError as exc:
        raise ArgumentError(
            f"cannot create the cache directory {path}: {exc.strerror}; set {CACHE_ENV} to a "
            "writable directory"
        ) from None
    _refuse_inside(real, protected)
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise ArgumentError(
            f"the cache directory {real} is not private (owned by another user, or writable "
            f"by others); set {CACHE_ENV} to a directory only you can write"
        )
    return real


def _refuse_inside(path: Path, protected: list[str] | None) -> None:
    for directory in protected or []:
        real = Path(directory).resolve()
        if path == real or real in path.parents:
            raise ArgumentError(
                f"the cache directory {path} lies inside the dataset directory {real}; set "
                f"{CACHE_ENV} to a directory outside the dataset"
            )


@contextlib.contextmanager
def atomic_file(directory: Path, name: str) -> Iterator[BinaryIO]:
    """Write ``directory/name`` atomically: yield a private temp file, rename it on success.

    Readers never see a half-written file; concurrent writers of the same name each write
    a complete file and the last rename wins (every writer writes the same content). On an
    exception the temp file is removed and nothing is published.

    Args:
        directory: A cache directory from :func:`cache_dir`.
        name: The file name (no path separators).

    Yields:
        The open temp file, for binary writes.
    """
    if os.sep in name or name in (".", ".."):
        raise ValueError(f"bad cache file name {name!r}")
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, directory / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def write_atomic(directory: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to ``directory/name`` atomically (see :func:`atomic_file`).

    Args:
        directory: A cache directory from :func:`cache_dir`.
        name: The file name (no path separators).
        data: The bytes.

    Returns:
        The final path.
    """
    with atomic_file(directory, name) as out:
        out.write(data)
    return directory / name
