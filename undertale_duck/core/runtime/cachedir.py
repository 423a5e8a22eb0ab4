"""The library's own cache directory on local disk, and atomic writes of files into it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal, get_args

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

#: The standard cache directory tag (https://bford.info/cachedir/) marking our directories.
TAG_NAME = "CACHEDIR.TAG"
TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
TAG = (
    TAG_SIGNATURE
    + b"\n# This file is a cache directory tag created by undertale_duck.\n"
    + b"# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
#: Our folder inside a directory given to us that is not ours (it holds other files).
OWN_FOLDER = "undertale_duck-cache"
#: A cache entry's record (``<entry>.record``): what we wrote there, so only it is deleted.
RECORD_SUFFIX = ".record"
#: The format of records (a record of another format is not ours).
RECORD_FORMAT = "undertale_duck-entry-1"
#: File names that a dataset source lists as shards (as core/source/local.py).
PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
#: Files without a Parquet suffix whose first bytes :func:`foreign_parquet` reads, at most.
MAGIC_LOOKS = 64
#: A download's part file (``<name>.parquet.part-...``): its bytes start as the shard's.
_PART = re.compile(r"\.(?:parquet|parq|pq)\.part-", re.IGNORECASE)
#: A shard copy of the cache layout before records (``<40 hex>.parquet`` beside its ``.lock``).
_OLD_ENTRY = re.compile(r"([0-9a-f]{40})\.parquet")
#: Directories already resolved and checked by this process, held open by descriptor.
_resolved: dict[tuple[object, ...], tuple[Path, int]] = {}
#: The same, by real path: where their files are reached (:func:`held_path`).
_held: dict[Path, int] = {}
_resolved_lock = threading.RLock()


def _after_fork_in_child() -> None:
    global _resolved_lock
    # another thread (a background download resolving the shard cache) may have held it at
    # fork(): the child's copy would stay locked, and its first cache access hang
    _resolved_lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)

#: Where a process reaches an open descriptor by path (Linux; absent elsewhere).
_PROC_FD = "/proc/self/fd"


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
    """Create (mode 0700), check and claim a directory whose files we trust; return it.

    The one rule for every directory undertale_duck caches into (the cache root's
    subdirectories, the disk tier, the node's shard cache):

    - it may not overlap a dataset: lie inside a directory holding shards this process
      opened (or ``protected``), contain one, or be or lie inside a directory whose
      immediate entries include Parquet files other than our own recorded entries
      (whoever opened that dataset);
    - it must be private: a directory owned by us and writable by no one else, below
      directories owned by us or root, none writable by anyone without the sticky bit
      (anyone who could write there could plant files at the names we use, or swap the
      directory, and have them served as rows);
    - it must be ours: marked by the standard ``CACHEDIR.TAG``. A new or empty directory,
      or one holding our records, is tagged; any other directory (the user's own files, a
      cache of undertale_duck's older layout, which is left alone) gets our own folder
      ``undertale_duck-cache`` inside it, which then follows the same rule.

    The directory is resolved once (its real path, no links) and held open by a directory
    descriptor, and its files are reached through that descriptor (:func:`held_path`): a
    link or directory swapped afterwards can neither redirect writes nor serve a planted
    file. Later calls return the same real path; only a held directory that was deleted
    (or, where descriptors cannot be reached by path, swapped) is resolved again.

    Args:
        directory: The directory (``~`` expanded; relative to the working directory).
        protected: Directories holding dataset shards.
        what: How errors name the directory (e.g. ``"disk_dir /x"``).
        hint: What errors tell the user to do.

    Returns:
        The absolute real path of the directory the files go to.

    Raises:
        ArgumentError: If it overlaps a dataset, is not private, or cannot be created
            (:class:`CacheUnwritableError`).
    """
    path = Path(os.path.abspath(os.path.expanduser(os.fspath(directory))))
    # nor inside any dataset this process opened (copies there would become its shards)
    opened = tuple(lifecycle.protected_directories())
    memo = (str(path), tuple(protected or ()), opened)
    with _resolved_lock:  # one thread resolves (and claims) at a time
        held = _resolved.get(memo)
        if held is not None:
            real, fd = held
            if _same_directory(real, fd) or (_reachable(fd) and _alive(fd)):
                return real  # swapped or not, its files are reached through the descriptor
            del _resolved[memo]
            if _held.get(real) == fd:
                del _held[real]
            os.close(fd)
        return _resolve(path, protected, opened, memo, what, hint)


def held_path(directory: str | os.PathLike[str]) -> Path:
    """Where to reach the files of a directory :func:`private_directory` returned.

    Through the directory descriptor held open since it was resolved
    (``/proc/self/fd/<n>``: the kernel follows the descriptor, never the path's names
    again), so a link or directory swapped at the path is never written into nor read
    from. A directory not held by this process, or a system without ``/proc``, is reached
    by its path.

    Args:
        directory: A directory's real path, or any path.

    Returns:
        The path to use for its files.
    """
    real = Path(directory)
    with _resolved_lock:
        fd = _held.get(real)
    if fd is None or not _reachable(fd):
        return real
    return Path(_PROC_FD, str(fd))


#: A held directory's path in a message: whole (not the end of a longer path, nor the
#: start of a longer name such as ``3.bak``).
_HELD_IN_TEXT = re.compile(r"(?<![\w.~/-])" + re.escape(_PROC_FD) + r"/(\d+)(?=/|[^\w.-]|$)")


def unheld(text: str) -> str:
    """``text`` with each held directory's ``/proc/self/fd/<n>`` path put back as its own.

    DuckDB's errors name the files it read by the path it was given, which for the files
    of our cache directories is the held one (:func:`held_path`): meaningless to a user.

    Args:
        text: A message, e.g. DuckDB's.

    Returns:
        The message naming the directories by their real paths (other text unchanged).
    """
    if _PROC_FD not in text:
        return text
    with _resolved_lock:
        real = {fd: path for path, fd in _held.items()}

    def back(match: re.Match[str]) -> str:
        path = real.get(int(match[1]))
        return str(path) if path is not None else match[0]

    return _HELD_IN_TEXT.sub(back, text)


def _reachable(fd: int) -> bool:
    """Whether an open directory descriptor can be reached by path (``/proc`` is mounted)."""
    try:
        return stat.S_ISDIR(os.stat(f"{_PROC_FD}/{fd}").st_mode)
    except OSError:
        return False


def _alive(fd: int) -> bool:
    """Whether a held directory still exists (a deleted one has no links left)."""
    try:
        return os.fstat(fd).st_nlink > 0
    except OSError:
        return False


def _resolve(
    path: Path, protected: Sequence[str] | None, opened: Sequence[str], memo: tuple[object, ...],
    what: str, hint: str,
) -> Path:
    """:func:`private_directory` once not memoised (called with ``_resolved_lock`` held)."""
    real = _check_private(path, protected, opened, what, hint)
    owned = _claim(real, what, hint)
    if owned != real:  # not ours: our own folder inside it, under the same rule
        owned = _claim(_check_private(owned, protected, opened, what, hint), what, hint,
                       folder=False)
    try:
        fd = os.open(owned, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CacheUnwritableError(
            f"{what} {owned} cannot be opened: {exc.strerror or exc}; {hint}"
        ) from None
    _resolved[memo] = (owned, fd)
    _held[owned] = fd
    return owned


def _same_directory(real: Path, fd: int) -> bool:
    """Whether ``real`` still names the directory held open as ``fd`` (not a swapped link)."""
    try:
        now = os.stat(real, follow_symlinks=False)
        held = os.fstat(fd)
    except OSError:
        return False
    return stat.S_ISDIR(now.st_mode) and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _check_private(
    path: Path, protected: Sequence[str] | None, opened: Sequence[str], what: str, hint: str
) -> Path:
    """Create ``path`` and check it as :func:`private_directory` says; return its real path."""
    _refuse_overlap(path.resolve(), protected, what, hint)
    _refuse_overlap(path.resolve(), opened, what, hint, contains=False)
    _refuse_datasets(path.resolve(), what, hint)
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
    _refuse_datasets(real, what, hint)
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
            if st.st_uid not in (0, os.getuid()):
                raise ArgumentError(
                    f"{what} {real} is not private: {parent} belongs to another user, who "
                    f"could swap {real} for a directory of their own; {hint}"
                )
    if not os.access(real, os.W_OK | os.X_OK):
        raise CacheUnwritableError(f"{what} {real} cannot be written: permission denied; {hint}")
    return real


def _refuse_datasets(path: Path, what: str, hint: str) -> None:
    """Refuse a cache that is, or lies inside, a directory holding someone's Parquet files.

    The walk up stops below general places (the home directory, a sticky shared directory
    such as ``/tmp``, the filesystem root): a stray Parquet file there is no dataset.
    """
    for directory in (path, *path.parents):
        if directory != path and _general(directory):
            break
        found = foreign_parquet(directory)
        if found is not None:
            raise ArgumentError(
                f"{what} {path} "
                + ("is" if directory == path else "lies inside")
                + f" a directory holding Parquet files ({directory / found}); cache files "
                f"are never written in or next to a dataset: {hint}"
            )


def _general(directory: Path) -> bool:
    """Whether a directory is a general place (home, root, or sticky and shared like /tmp)."""
    if directory == Path(directory.anchor) or directory == Path.home().resolve():
        return True
    try:
        st = os.stat(directory)
    except OSError:
        return False
    return bool(st.st_mode & stat.S_ISVTX and st.st_mode & stat.S_IWOTH)


def foreign_parquet(directory: Path) -> str | None:
    """The first Parquet file among ``directory``'s immediate entries that is not ours.

    Ours are the entries our records name (:func:`read_record`) and the shard copies of
    the cache layout before records (``<40 hex>.parquet`` beside its ``.lock``, left alone).

    Returns:
        The file's name, or None (none, or the directory cannot be listed).
    """
    try:
        names = set(os.listdir(directory))
    except OSError:
        return None
    looked = 0
    for name in sorted(names):
        if not name.lower().endswith(PARQUET_SUFFIXES):
            # a dataset's shards may have no suffix (sources take files by their magic
            # bytes): the first few such files are looked at; a part file is a download's
            if _PART.search(name) is None and looked < MAGIC_LOOKS:
                looked += 1
                if _starts_parquet(directory / name):
                    return name
            continue
        old = _OLD_ENTRY.fullmatch(name)
        if old is not None and f"{old.group(1)}.lock" in names:
            continue
        if name + RECORD_SUFFIX in names and read_record(directory, name) is not None:
            continue
        return name
    return None


def _starts_parquet(path: Path) -> bool:
    """Whether ``path`` is a regular file starting with the Parquet magic bytes."""
    try:  # never a link followed, never a FIFO waited on
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, 4, 0) == b"PAR1"
    except OSError:
        return False
    finally:
        os.close(fd)


def tagged(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` is a cache of ours: it carries our ``CACHEDIR.TAG``."""
    data = read_cached(os.path.join(directory, TAG_NAME), limit=4096)
    return data is not None and data.startswith(TAG_SIGNATURE) and b"undertale_duck" in data


def _claim(real: Path, what: str, hint: str, *, folder: bool = True) -> Path:
    """Where our files go in the private directory ``real``: itself if ours, else our folder.

    Ours: tagged by us, or empty, or holding our records (an existing cache of ours, which
    is adopted); those are tagged now. Any other directory holds someone else's files: with
    ``folder``, our folder inside it is returned, else it is refused.
    """
    if tagged(real):
        return real
    try:
        names = os.listdir(real)
    except OSError as exc:
        raise CacheUnwritableError(
            f"{what} {real} cannot be listed: {exc.strerror or exc}; {hint}"
        ) from None
    # our own tag being written by another process (.CACHEDIR.TAG.*.tmp) is no one's file
    names = [n for n in names if not (n.startswith(f".{TAG_NAME}.") and n.endswith(".tmp"))]
    ours = not names or any(
        n.endswith(RECORD_SUFFIX) and read_record(real, n[: -len(RECORD_SUFFIX)]) is not None
        for n in names
    )
    if ours:
        try:
            write_atomic(real, TAG_NAME, TAG)
        except OSError as exc:
            raise CacheUnwritableError(
                f"{what} {real} cannot be written: {exc.strerror or exc}; {hint}"
            ) from None
        return real
    if folder:
        return real / OWN_FOLDER
    raise ArgumentError(
        f"{what} {real} holds files that are not undertale_duck's (and no {TAG_NAME} of "
        f"ours); {hint}"
    )


def write_record(directory: Path, entry: str, fields: dict[str, Any]) -> None:
    """Record that we wrote ``directory/entry`` (atomically, as ``<entry>.record``).

    Args:
        directory: A directory from :func:`private_directory`.
        entry: The entry's file name.
        fields: What else the record keeps (JSON values), e.g. its size and checksum.
    """
    record = {"format": RECORD_FORMAT, "entry": entry, **fields}
    write_atomic(directory, entry + RECORD_SUFFIX, json.dumps(record).encode())


def read_record(directory: Path, entry: str) -> dict[str, Any] | None:
    """Our record of ``directory/entry`` (:func:`write_record`), or None if there is none.

    Returns:
        The record's fields, or None when absent, untrusted or not a record of ours.
    """
    raw = read_cached(directory / (entry + RECORD_SUFFIX), limit=1 << 16)
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        return None
    return data if data.get("entry") == entry else None


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
    directory = os.fspath(held_path(directory)) if directory else directory
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
    through = held_path(directory)  # the directory resolved and held, never a swapped one
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=through)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, through / name)
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
