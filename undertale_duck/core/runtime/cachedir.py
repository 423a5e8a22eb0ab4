"""The library's own cache directory on local disk, and atomic writes of files into it."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, Literal, get_args

import platformdirs

from ...errors import ArgumentError
from . import lifecycle

#: Cache directories already warned about in this process (one warning each).
_warned: set[str] = set()

#: Environment variable naming the cache directory (default: the user's cache directory).
CACHE_ENV = "UNDERTALE_DUCK_CACHE"
#: The kinds of cache, each a folder of the cache root (:func:`kind_directory`).
CacheKind = Literal["shards", "views", "vectors", "windows", "verdicts"]
CACHE_KINDS: tuple[CacheKind, ...] = get_args(CacheKind)
#: The largest record (an index's or a verdict's JSON, a kept footer) read from a cache.
MAX_RECORD_BYTES = 64 << 20
#: Opening a cache file: never through a link at its name, never blocking (a FIFO).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class CacheUnwritableError(ArgumentError):
    """A cache directory that cannot be created or written (callers may do without it).

    Refusals (a directory inside the dataset, or not private) are plain
    :class:`ArgumentError`: they say something is wrong, not merely unavailable.
    """


def cache_root() -> Path:
    """The root of undertale_duck's caches: ``$UNDERTALE_DUCK_CACHE``, else the user cache dir.

    Returns:
        ``$UNDERTALE_DUCK_CACHE``, else the user's cache directory for ``undertale_duck``
        (platformdirs: ``$XDG_CACHE_HOME/undertale_duck`` or ``~/.cache/undertale_duck`` on
        Linux).
    """
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(platformdirs.user_cache_dir("undertale_duck", appauthor=False)).resolve()


def kind_directory(kind: CacheKind) -> Path:
    """Where one kind of cache lives: the folder ``kind`` of :func:`cache_root` (not created).

    The one rule for every cache, with or without ``$UNDERTALE_DUCK_CACHE``: shard copies
    in ``shards/``, view indexes in ``views/``, string weights in ``vectors/``, disk-tier
    windows in ``windows/``, validation verdicts in ``verdicts/``.

    Args:
        kind: One of :data:`CACHE_KINDS`.

    Returns:
        The directory's path.
    """
    if kind not in CACHE_KINDS:
        raise ValueError(f"unknown cache kind {kind!r}")  # a bug in this package
    return cache_root() / kind


def cache_dir(kind: CacheKind, protected: Sequence[str] | None = None) -> Path:
    """Create (mode 0700) and return the cache subdirectory ``kind`` (:func:`private_directory`).

    Args:
        kind: Subdirectory name, e.g. ``"views"``.
        protected: Directories holding dataset shards; a cache inside one is refused, since
            we never write into a dataset.

    Returns:
        The directory's real path.

    Raises:
        ArgumentError: If the cache directory overlaps a protected directory, is not private
            or cannot be created.
    """
    return private_directory(kind_directory(kind), protected, what="the cache directory")


def process_cache_dir(kind: CacheKind, protected: Sequence[str] | None = None) -> Path:
    """:func:`cache_dir`, or this process's own directory when the cache cannot be written.

    A cache root that cannot be created or written (a read-only home, a full disk) costs
    only the reuse across processes: the files go to ``kind`` in this process's private
    spill directory (removed at exit), with one warning per directory. Refusals (a cache
    inside the dataset, or not private) are still errors.

    Args:
        kind: Subdirectory name, e.g. ``"views"``.
        protected: Directories holding dataset shards.

    Returns:
        The directory's real path.

    Raises:
        ArgumentError: If the cache directory overlaps a protected directory or is not
            private, or if neither it nor the process's directory can be created.
    """
    try:
        return cache_dir(kind, protected)
    except CacheUnwritableError as exc:
        if str(exc) not in _warned:
            _warned.add(str(exc))
            warnings.warn(
                f"{exc}; meanwhile this process keeps its {kind} files to itself (removed "
                "at exit)",
                RuntimeWarning,
                stacklevel=2,
            )
    try:
        own = os.path.join(lifecycle.spill_directory(), kind)
    except OSError as exc:
        raise CacheUnwritableError(
            f"neither the cache directory nor a private directory under "
            f"{lifecycle.spill_root()} can be created ({exc.strerror or exc}); set {CACHE_ENV} "
            "to a directory only you can write"
        ) from None
    return private_directory(own, protected, what="the process's cache directory")


def private_directory(
    directory: str | os.PathLike[str],
    protected: Sequence[str] | None = None,
    *,
    what: str,
    hint: str = f"set {CACHE_ENV} to a directory only you can write, outside the dataset",
) -> Path:
    """Create (mode 0700) and check a directory whose files we trust; return its real path.

    The one check for every directory undertale_duck caches into (the cache root's
    subdirectories, the disk tier, the node's shard cache): it may not overlap a dataset
    (lie inside a directory holding shards, or contain one), however it is reached, and it
    must be private: a directory, owned by us, writable by no one else, below no directory
    that anyone may write without the sticky bit (whose entries anyone could swap), since
    anyone who can write there could plant files at the names we would use (window files,
    indexes, shard copies) and have them served as rows. The checks run again on what is
    there after creating it, so a link planted meanwhile is judged by where it leads.

    Args:
        directory: The directory (``~`` expanded; relative to the working directory).
        protected: Directories holding dataset shards.
        what: How errors name the directory (e.g. ``"disk_dir /x"``).
        hint: What errors tell the user to do.

    Returns:
        The directory's absolute real path.

    Raises:
        ArgumentError: If it overlaps a protected directory, is not private, or cannot be
            created.
    """
    path = Path(os.path.abspath(os.path.expanduser(os.fspath(directory))))
    # nor inside any dataset this process opened (copies there would become its shards)
    opened = lifecycle.protected_directories()
    _refuse_overlap(path.resolve(), protected, what, hint)
    _refuse_overlap(path.resolve(), opened, what, hint, contains=False)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        real = path.resolve(strict=True)
        st = os.stat(real)
    except OSError as exc:
        raise CacheUnwritableError(
            f"{what} {path} cannot be created: {exc.strerror or exc}; {hint}"
        ) from None
    _refuse_overlap(real, protected, what, hint)
    _refuse_overlap(real, opened, what, hint, contains=False)
    if not stat.S_ISDIR(st.st_mode):
        raise ArgumentError(f"{what} {real} is not a directory; {hint}")
    if not _private(st):
        mine = st.st_uid == os.getuid()
        raise ArgumentError(
            f"{what} {real} is not private ("
            + ("writable by others" if mine else "owned by another user")
            + ", who could plant files there that would be served as rows); "
            + (f"run 'chmod go-w {real}' if only you use it, or {hint}" if mine else hint)
        )
    for parent in real.parents:  # anyone may rename entries of a directory anyone may write
        with contextlib.suppress(OSError):
            st = os.stat(parent)
            if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
                raise ArgumentError(
                    f"{what} {real} is not private: {parent} is writable by anyone and not "
                    f"sticky, so others could swap {real} for a directory of their own; {hint}"
                )
    if not os.access(real, os.W_OK | os.X_OK):
        raise CacheUnwritableError(f"{what} {real} cannot be written: permission denied; {hint}")
    return real


def _private(st: os.stat_result) -> bool:
    """Whether a directory is ours alone: owned by us, writable by no one else."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def open_cached(path: str | os.PathLike[str]) -> int | None:
    """Open a cache file for reading, if it is one we can trust; else None.

    Only a regular file of ours, at a name that is not a link, in a private directory
    (see :func:`private_directory`) is opened: anything else (a file planted by someone
    else, a link, a FIFO, a device) is never read, and opening never blocks.

    Args:
        path: The cache file.

    Returns:
        A read-only file descriptor (the caller closes it), or None.
    """
    directory, name = os.path.split(os.fspath(path))
    try:
        directory_fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not _private(os.fstat(directory_fd)):
            return None
        fd = os.open(name, _READ_FLAGS, dir_fd=directory_fd)
    except OSError:
        return None
    finally:
        os.close(directory_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        return None
    return fd


def read_cached(path: str | os.PathLike[str], limit: int = MAX_RECORD_BYTES) -> bytes | None:
    """The bytes of a cache file we can trust (:func:`open_cached`), or None.

    Args:
        path: The cache file.
        limit: The most bytes read; a larger file counts as none.

    Returns:
        Its content, or None if it is absent, untrusted or larger than ``limit``.
    """
    fd = open_cached(path)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def _refuse_overlap(
    path: Path, protected: Sequence[str] | None, what: str, hint: str, *, contains: bool = True
) -> None:
    for directory in protected or []:
        real = Path(directory).resolve()
        if path == real or real in path.parents:
            raise ArgumentError(
                f"{what} {path} lies inside the dataset directory {real}; cache files are "
                f"never written in or next to a dataset: {hint}"
            )
        if contains and path in real.parents:
            raise ArgumentError(
                f"{what} {path} contains the dataset directory {real}; cache files are "
                f"never written in or next to a dataset: {hint}"
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
