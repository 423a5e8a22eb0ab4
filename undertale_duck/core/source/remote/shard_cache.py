"""The node's shard cache: remote shards downloaded once, shared by processes, LRU under a limit."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import xxhash

from ....common.sizes import parse_size
from ....common.text import first_line, redact_url
from ....errors import ArgumentError, ShardChangedError, SourceError
from ...runtime import (
    RECORD_SUFFIX,
    CacheUnwritableError,
    acquire,
    held_path,
    kind_directory,
    open_cached,
    private_directory,
    process_cache_dir,
    read_cached,
    read_record,
    release,
    try_acquire,
    write_record,
)
from ..shard import Shard

__all__ = [
    "CacheCounters", "Fetch", "NoRoomError", "ShardCache", "default_directory", "key_of",
    "local_shard",
]

#: Environment variables giving the default cache directory and byte limit.
ENV_DIR = "UNDERTALE_DUCK_CACHE"
ENV_LIMIT = "UNDERTALE_DUCK_CACHE_LIMIT"
#: The default limit's ceiling; the default is also at most 80% of the disk the cache can use.
DEFAULT_LIMIT = 64 << 30
DATA_SUFFIX = ".parquet"
LOCK_SUFFIX = ".lock"
FOOTER_SUFFIX = ".footer"
PART_MARK = ".part-"
EVICT_LOCK = ".evict.lock"
#: Seconds after which a footer's part file is a killed process's leftover (swept).
FOOTER_PART_AGE = 60.0

#: A kept footer starts with this, then the CRC-32 of its key and the footer bytes (4 bytes,
#: big end; see :func:`_footer_crc`).
FOOTER_MAGIC = b"UDFOOT1\n"
#: Bytes read per step when checksumming a shard copy.
_CHUNK = 1 << 20

#: The names of our files (a key of :func:`key_of` and a suffix). Eviction and clear() also
#: require our record of a copy (``<key>.parquet.record``) or our header on a footer, so
#: they never touch a file we did not write, whatever its name.
OUR_FILES = re.compile(
    r"[0-9a-f]{40}(?:" + re.escape(FOOTER_SUFFIX) + "|" + re.escape(DATA_SUFFIX) + ")"
    + "(?:" + re.escape(PART_MARK) + r"[0-9a-f-]+)?"
)
#: A copy's record being written (:func:`.runtime.atomic_file`'s temp file): written under
#: the key's exclusive lock, so one whose key is idle was left by a killed process.
RECORD_TEMP = re.compile(
    r"\.([0-9a-f]{40})" + re.escape(DATA_SUFFIX + RECORD_SUFFIX) + r"\.[A-Za-z0-9_]+\.tmp"
)


def default_directory() -> Path:
    """The shard cache's default directory: the ``shards`` folder of the cache root.

    ``$UNDERTALE_DUCK_CACHE/shards``, else the user's cache directory's (by default
    ``~/.cache/undertale_duck/shards``): one per user and node, never inside a dataset
    (:func:`undertale_duck.core.runtime.kind_directory`).
    """
    return kind_directory("shards")


def _footer_crc(key: str, data: bytes) -> int:
    """The CRC-32 a kept footer records: of its key (its file's name), then its bytes.

    With the key in it, the footer of another object at this name (two files swapped or
    copied) fails the check like a damaged one, and is read from the store again.
    """
    return zlib.crc32(data, zlib.crc32(key.encode()))


def key_of(path: str, version: str | None, size: int) -> str:
    """The cache name of one version of an object: a hash of its name, version and size.

    ``path`` is what names the object: a remote shard's :attr:`~.store.RemoteShard.cache_name`
    (its URL, without a signature where its version names its content, and its store's
    endpoint).
    """
    text = f"{path}\0{version or ''}\0{size}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]

#: Logs under ``undertale_duck`` (silent unless the application configures logging).
_log = logging.getLogger(__name__)

Fetch = Callable[[Shard, str], None]
#: Downloads of one shard one read may make: a copy refused right after it was written (a
#: filesystem that reports our file as another user's) would otherwise download forever.
MAX_DOWNLOADS = 3
#: Shard copies whose checksum this process checked: (path, device, inode, mtime_ns,
#: ctime_ns, size). The ctime too: writing a file and putting its mtime back changes it.
_verified: set[tuple[str, int, int, int, int, int]] = set()
_verified_lock = threading.Lock()


def file_xxh3(path: str | os.PathLike[str]) -> int:
    """The XXH3-64 of a file's bytes (read in 1 MiB steps): what a copy's record holds.

    XXH3 (``xxhash``) runs at 2-3x the speed of the standard library's fastest checksum,
    CRC-32 (benchmarks/bench_checksum.py); it guards against damaged copies, not against
    forgery: only we can write our private cache directories.
    """
    digest = xxhash.xxh3_64()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return int(digest.intdigest())


def file_crc32(path: str | os.PathLike[str]) -> int:
    """The CRC-32 of a file's bytes (read in 1 MiB steps), as earlier versions' records hold.

    A copy recorded by an earlier version is still checked (by this) rather than fetched
    again.
    """
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc
_HINT = f"pass cache_dir= or set ${ENV_DIR} to a directory only you can write"


class NoRoomError(Exception):
    """A download that may not evict anything does not fit under the cache's limit."""


@dataclass
class CacheCounters:
    """What this process's shard cache did (other processes on the node keep their own).

    Attributes:
        hits: Shards found already downloaded (by any process).
        downloads: Shards this process downloaded.
        downloaded_bytes: Bytes this process downloaded.
        waits: Shards another process was downloading; this one waited and used its copy.
        evictions: Cached shards this process deleted to stay under the limit.
    """

    hits: int = 0
    downloads: int = 0
    downloaded_bytes: int = 0
    waits: int = 0
    evictions: int = 0


#: Lock files this process holds open, and the thread that opened each: a forked child
#: closes those of threads it does not have (a background download's), whose flock would
#: otherwise stay held by the child's copy of the descriptor after the parent's download.
_held: dict[int, int] = {}
_held_lock = threading.Lock()


def _close(fd: int) -> None:
    with _held_lock:
        _held.pop(fd, None)
    os.close(fd)


class _Closing:
    """A lock file descriptor for ``contextlib.closing``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        _close(self.fd)


def _after_fork_in_child() -> None:
    global _held_lock
    _held_lock = threading.Lock()  # another thread may have held it at fork()
    me = threading.get_ident()
    for fd, owner in list(_held.items()):
        if owner != me:
            with contextlib.suppress(OSError):
                os.close(fd)
            del _held[fd]


os.register_at_fork(after_in_child=_after_fork_in_child)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _seen(path: str, st: os.stat_result) -> tuple[str, int, int, int, int, int]:
    """A copy's state as :data:`_verified` keeps it."""
    return (path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _ours(st: os.stat_result) -> bool:
    """Whether a copy is a regular file (not a link) that we own.

    A copy another user owns could change between its checksum and a read.
    """
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()


def _private_copy(path: str, st: os.stat_result) -> os.stat_result | None:
    """A copy of ours made private if others may write it; its stat then, or None.

    Copies of an earlier release, or written under a permissive umask, may be writable by
    the group or others. The new stat has a new ctime, so its checksum is checked again.
    """
    if not st.st_mode & 0o022:
        return st
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return None
        os.fchmod(fd, 0o600)
        return os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    """Whether ``fd`` is still the file at ``path`` (an evictor may have removed it)."""
    st = _stat(path)
    return st is not None and os.fstat(fd).st_ino == st.st_ino


class ShardCache:
    """Remote shards as local files in one directory, shared by every process of the node.

    Each object version (URL, version, size) is one file ``<key>.parquet`` with a lock file
    ``<key>.lock``, and its footer bytes ``<key>.footer`` (reopening reads nothing remote). A
    process downloads under an exclusive ``flock`` on the lock file into
    ``<key>.parquet.part-*`` and renames only after the store's version and the size check
    out; others wait on the lock and use that copy, so each shard is downloaded once per
    node. A shard in use is held under a shared lock, which eviction (least recently used
    first, by the lock file's modification time) never breaks. A killed process leaves at
    most a ``.part-`` file, never trusted and deleted by the next eviction pass.

    Args:
        directory: Where shards are kept (default, and for an empty string:
            :func:`default_directory`).
        limit: Byte limit (an int or a size such as ``"20GiB"``); default
            ``$UNDERTALE_DUCK_CACHE_LIMIT``, else the smaller of 64 GiB and 80% of what the
            cache's disk can hold (free space plus shards already cached). Shards in use
            are kept even beyond it.
    """

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, limit: int | str | None = None
    ) -> None:
        if directory is not None and not isinstance(directory, str | os.PathLike):
            raise ArgumentError(f"cache_dir must be a directory path, got {directory!r}")
        if directory == "":  # an unset variable's default: the default, never the working dir
            directory = None
        self._given = directory is not None
        self.directory = (
            Path(os.fspath(directory)).expanduser().absolute()
            if directory is not None
            else default_directory()
        )
        if limit is None and os.environ.get(ENV_LIMIT):
            limit = parse_size(os.environ[ENV_LIMIT], ENV_LIMIT, "bytes")
        self._limit = None if limit is None else parse_size(limit, "cache_limit", "bytes")
        self.stats = CacheCounters()
        self._ready = False
        self._given_as: Path | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(stats=CacheCounters(), _ready=False)
        return state

    @property
    def limit(self) -> int:
        """The byte limit (the default is computed on first use)."""
        if self._limit is None:
            self._ensure_directory()
            usage = shutil.disk_usage(self._io)
            cached = sum(size for _, size, _ in self._entries())
            self._limit = min(DEFAULT_LIMIT, int(0.8 * (usage.free + cached)))
        return self._limit

    def _ensure_directory(self) -> None:
        # private and ours: anyone else able to write there could plant a shard copy that
        # would be served as the shard's rows. Resolved once and held open (private_directory
        # memoises it): each use gets the same real directory, never a swapped link's target.
        if self._given_as is None:
            self._given_as = self.directory
        try:
            try:
                self.directory = private_directory(self._given_as, what="the directory",
                                                   hint=_HINT)
            except CacheUnwritableError:
                if self._given:
                    raise
                # the default cannot be written: this process downloads into its own
                # directory (removed at exit), as process_cache_dir does for other caches
                self.directory = process_cache_dir("shards")
            if not os.access(self.directory, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "permission denied")
        except ArgumentError as exc:
            raise SourceError(
                f"cannot use the shard cache directory {self.directory}: {exc}",
                str(self.directory),
            ) from None
        except OSError as exc:
            raise self._unusable(exc) from None
        self._ready = True

    # ------------------------------------------------------------------ paths
    @property
    def _io(self) -> Path:
        """Where the directory's files are reached: through its held descriptor.

        Held open since it was resolved (:func:`held_path`), so a link or directory swapped
        at its path can neither receive our files nor serve a planted one.
        """
        return held_path(self.directory)

    def key(self, shard: Shard) -> str:
        """The cache file name of one version of an object (its name, version and size)."""
        return key_of(getattr(shard, "cache_name", shard.path), getattr(shard, "version", None),
                      shard.size)

    def path(self, shard: Shard) -> str:
        """Where the shard's cached copy lives (whether or not it is there yet)."""
        return str(self._io / (self.key(shard) + DATA_SUFFIX))

    def _lock_path(self, key: str) -> str:
        return str(self._io / (key + LOCK_SUFFIX))

    def _entries(self) -> list[tuple[str, int, float]]:
        """``(name, bytes, last use)`` of each cached shard (its key) and footer (its name)."""
        out = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self._io) as it:
            for entry in it:
                name = entry.name
                footer = name.endswith(FOOTER_SUFFIX)
                if OUR_FILES.fullmatch(name) is None or PART_MARK in name:  # the user's, or a part
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if footer:
                    if self._our_footer(name):
                        out.append((name, st.st_size, st.st_mtime))
                    continue
                key = name[: -len(DATA_SUFFIX)]
                if not self._recorded(key, st):  # not written by us: never touched
                    continue
                lock = _stat(self._lock_path(key))
                out.append((key, st.st_size, lock.st_mtime if lock else 0.0))
        return out

    # ------------------------------------------------------------------ footers
    def load_footer(self, key: str) -> bytes | None:
        """The footer bytes kept for an object version, or None (never an error)."""
        try:
            self._ensure_directory()
        except SourceError:
            return None
        path = self._io / (key + FOOTER_SUFFIX)
        data = read_cached(path)
        head = len(FOOTER_MAGIC) + 4
        if data is None or not data.startswith(FOOTER_MAGIC) or len(data) < head:
            return None
        body = data[head:]
        if _footer_crc(key, body) != int.from_bytes(data[len(FOOTER_MAGIC):head], "big"):
            return None  # damaged or another object's: read from the store again (kept anew)
        with contextlib.suppress(OSError):
            os.utime(path)  # last use, for LRU eviction
        return body

    def _our_footer(self, name: str) -> bool:
        """Whether a footer file starts with our header (so we wrote it)."""
        fd = open_cached(self._io / name)
        if fd is None:
            return False
        with os.fdopen(fd, "rb") as fh:
            return fh.read(len(FOOTER_MAGIC)) == FOOTER_MAGIC

    def save_footer(self, key: str, data: bytes) -> None:
        """Keep an object version's footer bytes (best effort: a failure only costs a read)."""
        try:
            self._ensure_directory()
        except SourceError:
            return
        path = self._io / (key + FOOTER_SUFFIX)
        part = f"{path}{PART_MARK}{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)  # private whatever the umask
            with os.fdopen(fd, "wb") as fh:
                fh.write(FOOTER_MAGIC + _footer_crc(key, data).to_bytes(4, "big") + data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(part, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(part)

    def trim_footers(self) -> int | None:
        """Delete least recently used footers while the cache holds more than its limit.

        Footers are saved without making room (a dataset opening thousands of shards would
        scan the directory once per footer); this one scan after they are saved keeps the
        cache within its limit. Footers never evict a cached shard: a footer costs one range
        read to fetch again, a shard a whole download.

        Returns:
            Bytes held after (None: the cache directory could not be used).
        """
        try:
            with self._guard():
                return self._fit(0, None, shards=False)
        except (SourceError, OSError):
            return None  # best effort, as saving them is: a footer costs a range read

    # ------------------------------------------------------------------ use
    @contextlib.contextmanager
    def pin(self, shard: Shard, fetch: Fetch, *, evict: bool = True) -> Iterator[Shard]:
        """Hold a shard's cached copy for reading, downloading it first if no process has.

        Args:
            shard: The remote shard (its ``path`` is the URL, ``size`` and ``version`` the
                object as listed).
            fetch: Downloads the shard to a given local path and checks its version.
            evict: Whether other shards may be evicted to make room for it; if not, and it
                does not fit, :class:`NoRoomError` is raised and nothing is downloaded.

        Yields:
            The cached copy as a local :class:`Shard` (same footer, local path).

        Raises:
            ShardChangedError: If the object changed since it was listed.
            StorageError: If the store fails after retries.
            SourceError: If the cache directory cannot be used.
        """
        self._ensure_directory()
        key = self.key(shard)
        data = str(self._io / (key + DATA_SUFFIX))
        lock = self._lock_path(key)
        downloads = 0
        while True:
            fd = self._open(lock)
            try:
                acquire(fd, "shared")
                if not _same_file(fd, lock):
                    continue  # evicted between open and lock: take the new lock file
                st = self._valid(key, data, shard)
                if st is None:
                    release(fd)  # no upgrade in place: two would deadlock
                    acquire(fd, "exclusive")
                    if not _same_file(fd, lock):
                        continue
                    st = self._valid(key, data, shard)
                    if st is None:
                        if downloads == MAX_DOWNLOADS:
                            # each copy downloaded was refused at once (or evicted before
                            # use): never a loop of downloads
                            raise SourceError(
                                f"the shard cache {self.directory} refused {downloads} copies "
                                f"of {redact_url(shard.path)} just downloaded (or evicted each "
                                "before it could be read); check that the directory is yours "
                                "and on a local filesystem, and that cache_limit holds the "
                                "shard, or pass another cache_dir",
                                shard.path,
                            )
                        downloads += 1
                        self._download(shard, key, data, fetch, evict)
                    else:
                        self.stats.waits += 1
                    acquire(fd, "shared")
                    st = self._valid(key, data, shard)
                    if not _same_file(fd, lock) or st is None:
                        continue  # evicted while the lock was converted: fetch again
                else:
                    self.stats.hits += 1
                os.utime(lock)  # last use, for LRU eviction
                yield local_shard(shard, data, st)
                return
            finally:
                _close(fd)

    def cached(self, shard: Shard) -> bool:
        """Whether the node holds a whole, checked copy of the shard now (nothing fetched)."""
        self._ensure_directory()
        key = self.key(shard)
        return self._valid(key, str(self._io / (key + DATA_SUFFIX)), shard) is not None

    def has_room(self, size: int) -> bool:
        """Whether ``size`` more bytes fit under the limit without evicting anything."""
        with self._guard():
            return self._held(None) + size <= self.limit

    @contextlib.contextmanager
    def scratch(self, shard: Shard) -> Iterator[tuple[int, str]]:
        """A private, empty part file of the shard for one read, deleted afterwards.

        It is held under a shared lock on the shard's lock file, like a copy in use: its
        bytes count against the limit as a download in flight, and a killed process's
        leftover is swept like any part file.

        Yields:
            ``(file descriptor open for writing, path)``.

        Raises:
            SourceError: If the cache directory cannot be used.
        """
        self._ensure_directory()
        key = self.key(shard)
        lock = self._lock_path(key)
        while True:
            fd = self._open(lock)
            acquire(fd, "shared")
            if _same_file(fd, lock):
                break
            _close(fd)  # evicted between open and lock: take the new lock file
        part = str(self._io / (key + DATA_SUFFIX + PART_MARK + _part_suffix()))
        try:
            try:
                out = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                              | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise self._unusable(exc, os.path.basename(part)) from None
            try:
                yield out, part
            finally:
                os.close(out)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(part)
        finally:
            _close(fd)

    def _recorded(self, key: str, st: os.stat_result) -> dict[str, Any] | None:
        """Our record of the copy ``key`` if it records this very file (size and inode)."""
        record = read_record(self.directory, key + DATA_SUFFIX)
        if record is None or record.get("size") != st.st_size:
            return None
        return record if record.get("inode") == [st.st_dev, st.st_ino] else None

    def _valid(self, key: str, data: str, shard: Shard) -> os.stat_result | None:
        """The copy's stat if it is a whole, undamaged copy we wrote of this shard, else None.

        It must be a regular file of ours at the name (a link is never followed out of the
        cache), and is made private (writable by no one else) before its checksum is
        checked; its record must name this file, with the listed size; its checksum is
        checked the first time this process uses the file.
        """
        try:
            st = os.lstat(data)
        except FileNotFoundError:
            return None
        if st.st_size != shard.size or not _ours(st):
            return None  # downloaded again: the rename replaces the link or file at the name
        record = self._recorded(key, st)
        if record is None:
            return None
        private = _private_copy(data, st)
        if private is None:
            return None
        st = private
        seen = _seen(data, st)
        with _verified_lock:
            if seen in _verified:
                return st
        try:
            if "xxh3" in record:
                ok = file_xxh3(data) == record["xxh3"]
            else:  # recorded by an earlier version
                ok = "crc32" in record and file_crc32(data) == record["crc32"]
        except OSError:
            return None
        if not ok:
            return None  # damaged: downloaded again under the exclusive lock
        with _verified_lock:
            _verified.add(seen)
        return st

    def write_error(self, shard: Shard, exc: OSError) -> SourceError:
        """The error for a shard's bytes that cannot be written into the cache (a full disk)."""
        return SourceError(
            f"cannot write shard {shard.path} into the shard cache {self.directory}: "
            f"{exc.strerror or first_line(exc)}; free space, lower cache_limit or pass "
            "another cache_dir",
            shard.path,
        )

    def _unusable(self, exc: OSError, name: str | None = None) -> SourceError:
        """The error for a cache directory that cannot be created or written.

        ``name``: the file of ours inside it that could not be opened (a lock or a copy;
        something planted at its name, such as a directory, can be removed).
        """
        where = "" if name is None else f" ({os.path.join(self.directory, name)}; remove it)"
        return SourceError(
            f"cannot use the shard cache directory {self.directory}: "
            f"{exc.strerror or first_line(exc)}{where}; pass cache_dir= or set ${ENV_DIR}",
            str(self.directory),
        )

    def _open(self, lock: str) -> int:
        try:
            # read-write: opening a FIFO planted at the name never blocks; never via a link
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                # not replaced here: another process may be replacing it too, and the name
                # may be a real lock by then
                named = os.path.join(self.directory, os.path.basename(lock))
                raise SourceError(
                    f"the shard cache's lock file {named} is a symbolic link, which this "
                    "library never makes: remove it (or pass another cache_dir=)",
                    named,
                ) from None
            raise self._unusable(exc, os.path.basename(lock)) from None
        with _held_lock:
            _held[fd] = threading.get_ident()
        return fd

    def _download(
        self, shard: Shard, key: str, data: str, fetch: Fetch, evict: bool = True
    ) -> None:
        """Download under the exclusive lock: to a part file, renamed once checked."""
        # under the exclusive lock no other download of this key runs: its parts are leftovers
        for leftover in self._io.glob(key + DATA_SUFFIX + PART_MARK + "*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        part = f"{data}{PART_MARK}{_part_suffix(shard.size)}"
        _log.info("downloading %s (%d bytes) into %s", redact_url(shard.path), shard.size,
                  self.directory)
        try:
            if not self._reserve(part, shard.size, key, evict):
                raise NoRoomError(shard.path)
            fetch(shard, part)
            fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchmod(fd, 0o600)  # a client that made a file of its own
            finally:
                os.close(fd)
            got = os.path.getsize(part)
            if got != shard.size:
                raise ShardChangedError(
                    f"shard {shard.path} downloaded as {got} bytes where the store listed "
                    f"{shard.size}; call refresh() to reopen the dataset as it is now",
                    shard.path,
                )
            digest = file_xxh3(part)
            with open(part, "rb") as fh:  # on disk before it is published
                os.fsync(fh.fileno())
            st = os.stat(part)
            # the record names the part's inode, which the rename keeps (a file at the key's
            # name without our record, in our own tagged directory, is a leftover: replaced)
            write_record(self.directory, key + DATA_SUFFIX, {
                "size": got, "inode": [st.st_dev, st.st_ino], "xxh3": digest,
                "url": redact_url(shard.path),
            })
            os.replace(part, data)
            st = os.lstat(data)  # the rename changed its ctime
            with _verified_lock:
                _verified.add(_seen(data, st))
        except OSError as exc:
            raise self.write_error(shard, exc) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
        self.stats.downloads += 1
        self.stats.downloaded_bytes += shard.size
        if evict:
            self.make_room(0, keep=key)

    def _reserve(self, part: str, size: int, key: str, evict: bool) -> bool:
        """Make room for a download and create its part file, in one step under the guard.

        The part file names its size, so from here every process counts it at that size:
        two downloads that each checked for room before either had a part file would both
        fit, and together overshoot the limit.

        Returns:
            False (and no part file) if ``evict`` is false and the download does not fit.
        """
        with self._guard():
            if evict:
                self._fit(size, key)
            elif self._held(None) + size > self.limit:
                return False
            # created private here: clients open the target by name, with the umask's mode
            os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600))
            return True

    # ------------------------------------------------------------------ eviction
    def make_room(self, incoming: int = 0, keep: str | None = None) -> int:
        """Evict least recently used shards not in use until ``incoming`` more bytes fit.

        Also deletes part files that no process is writing (left by a killed download).

        Args:
            incoming: Bytes about to be added.
            keep: A key never evicted (the shard being fetched).

        Returns:
            Bytes held after eviction (cached shards and downloads in flight).
        """
        with self._guard():
            return self._fit(incoming, keep)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Hold the cache's eviction lock: one process at a time counts, evicts, reserves."""
        self._ensure_directory()
        guard = self._open(str(self._io / EVICT_LOCK))
        with contextlib.closing(_Closing(guard)):
            acquire(guard, "exclusive")
            yield

    def _held(self, keep: str | None) -> int:
        """Bytes held (cached shards, footers, downloads in flight); under the guard."""
        return self._sweep_parts(keep) + sum(size for _, size, _ in self._entries())

    def _fit(self, incoming: int, keep: str | None, *, shards: bool = True) -> int:
        """Evict until ``incoming`` more bytes fit; return bytes held. Under the guard.

        Least recently used first; with ``shards`` false only footers are deleted.
        """
        total = self._sweep_parts(keep)
        entries = self._entries()
        total += sum(size for _, size, _ in entries)
        for key, size, _ in sorted(entries, key=lambda e: e[2]):
            if total + incoming <= self.limit:
                break
            if key.endswith(FOOTER_SUFFIX):  # immutable and read whole: no lock needed
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._io / key)
                total -= size
            elif shards and key != keep and self._evict(key):
                total -= size
        return total

    def _evict(self, key: str) -> bool:
        lock = self._lock_path(key)
        fd = self._open(lock)
        try:
            if not try_acquire(fd, "exclusive"):
                return False  # in use, or being downloaded
            if not _same_file(fd, lock):
                return False
            data = self._io / (key + DATA_SUFFIX)
            st = _stat(str(data))
            if st is not None and self._recorded(key, st) is None:
                return False  # not a copy we wrote: never deleted
            with contextlib.suppress(FileNotFoundError):
                os.unlink(data)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._io / (key + DATA_SUFFIX + RECORD_SUFFIX))
            os.unlink(lock)
            self.stats.evictions += 1
            _log.info("evicted cached shard %s from %s", key, self.directory)
            return True
        finally:
            _close(fd)

    def _sweep_parts(self, keep: str | None) -> int:
        """Delete parts and record temps no process writes (lock free); return bytes in flight."""
        flight = 0
        parts: list[os.DirEntry[str]] = []
        temps: list[tuple[str, str]] = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self._io) as it:
            for e in it:
                if OUR_FILES.fullmatch(e.name) and PART_MARK in e.name:
                    parts.append(e)
                elif (temp := RECORD_TEMP.fullmatch(e.name)) is not None:
                    temps.append((temp[1], e.path))
        for key, path in temps:  # written under the key's exclusive lock, by a download
            if key != keep and self._idle(key, "shared"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        for entry in parts:
            key = entry.name.split(DATA_SUFFIX + PART_MARK, 1)[0]
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            # a range read's part file is sparse: count the disk it takes, not its length; a
            # whole download counts at the size it will reach (else two downloads started
            # while both were short would each fit, and together overshoot the limit)
            declared = _declared(entry.name)
            size = max(min(st.st_size, st.st_blocks * 512), declared)
            if FOOTER_SUFFIX + PART_MARK in entry.name:
                # a footer's part has no lock to tell a writer from a leftover: it is written
                # in milliseconds, so one older than a minute was left by a killed process
                if time.time() - st.st_mtime < FOOTER_PART_AGE:
                    flight += size
                    continue
            elif key == keep:
                flight += size
                continue
            if not self._idle(key) and not (declared and self._idle(key, "shared")):
                # a reader's scratch part (readers hold the key shared), or a download in
                # flight (it holds the key exclusive); a whole download's part whose key
                # only readers hold was left by a killed download: never counted at the
                # size its name promises, nor kept
                flight += size
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
        return flight

    def _idle(self, key: str, mode: Literal["shared", "exclusive"] = "exclusive") -> bool:
        """Whether ``mode`` of the key's lock can be taken now.

        ``"exclusive"``: no process holds the lock (its part files are leftovers);
        ``"shared"``: none holds it exclusive (no download of the key runs).
        """
        lock = self._lock_path(key)
        if _stat(lock) is None:
            return True
        fd = self._open(lock)
        try:
            return try_acquire(fd, mode)
        finally:
            _close(fd)

    def usage(self) -> int:
        """Bytes of cached shards and footers in the directory (all processes)."""
        return sum(size for _, size, _ in self._entries())

    def clear(self) -> int:
        """Delete every cached shard not in use, and every footer; return the shards deleted."""
        self._ensure_directory()
        deleted = 0
        for key, _, _ in self._entries():
            if key.endswith(FOOTER_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._io / key)
            elif self._evict(key):
                deleted += 1
        return deleted


def _part_suffix(size: int | None = None) -> str:
    """A part file's unique end: process, thread, random (hex digits and dashes).

    A whole download's part also names the size it will reach (hex), so that every process
    counts it against the limit at that size while it is still being written.
    """
    end = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    return end if size is None else f"{end}-{size:x}"


def _declared(name: str) -> int:
    """The size a whole download's part file names (0 for other part files)."""
    fields = name.rsplit(PART_MARK, 1)[-1].split("-")
    return int(fields[3], 16) if len(fields) == 4 and fields[3] else 0


def local_shard(shard: Shard, path: str, st: os.stat_result) -> Shard:
    """The shard's footer for a local file of it (a plain :class:`Shard` DuckDB can read)."""
    base = {f.name: getattr(shard, f.name) for f in fields(Shard)}
    base.update(path=path, size=st.st_size, mtime_ns=st.st_mtime_ns, inode=(st.st_dev, st.st_ino),
                ctime_ns=st.st_ctime_ns)
    return Shard(**base)
