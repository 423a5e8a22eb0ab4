"""A bounded disk tier of decoded windows: memory-mapped Arrow IPC files shared by processes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import secrets
import stat
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import xxhash

from ..runtime import (
    CACHE_ENV,
    CacheUnwritableError,
    held_path,
    kind_directory,
    open_cached,
    private_directory,
)
from ..source import Source, Window, is_remote
from .cache import WindowCache, table_bytes

SUFFIX = ".arrow"
#: A temporary file older than this was left by a killed writer and may be removed.
STALE_TEMP_SECONDS = 3600
#: Mapped windows kept open per process (no file descriptor each; only address space).
OPEN_WINDOWS = 4096
_HEX = frozenset("0123456789abcdef")
_WRITE_OPTIONS = ipc.IpcWriteOptions(allow_64bit=True)

#: A window file ends with this trailer: the magic, then the XXH3-64 of the file's key and
#: the bytes before it (8 bytes, big end; see :func:`digest`), checked when a process first
#: maps the file. XXH3 rather than the
#: standard library's CRC-32: 2.6x its speed here, and a pass that fills the tier spent
#: 10-14% of its time in the CRC (docs/performance.md).
TRAILER_MAGIC = b"UDWIN4\0\0"
#: Bytes of the digest after the magic.
DIGEST_BYTES = 8
_TRAILER = len(TRAILER_MAGIC) + DIGEST_BYTES
#: ``(magic, digest bytes)`` of the trailers earlier versions wrote: their files are never
#: read (their names hold an older :data:`FILE_VERSION`), but they count against the bound
#: and are removed by it like ours.
OLD_TRAILERS = ((b"UDWIN3\0\0", 8), (b"UDWIN2\0\0", 4))

#: Bumped whenever what a window file holds changes, so older files are never read.
FILE_VERSION = 4


def default_directory() -> Path:
    """Return where window files go by default: the ``windows`` folder of the cache root.

    ``$UNDERTALE_DUCK_CACHE/windows`` if that variable is set, else
    ``$XDG_CACHE_HOME/undertale_duck/windows``, else ``~/.cache/undertale_duck/windows``
    (see :func:`cachedir.cache_root`).

    Returns:
        The directory (not created).
    """
    return kind_directory("windows")


def prepare_directory(
    directory: str | os.PathLike[str] | None, shards: Sequence[str]
) -> str | None:
    """Check and create a disk-tier directory; return its real path.

    Window files must never become part of a dataset (a directory source would list them)
    nor sit among the user's files, and no one else may plant files at their (predictable)
    names: the directory passes :func:`cachedir.private_directory` (not a shard's directory,
    inside one or containing one; owned by us and writable by no one else).

    Args:
        directory: The disk tier's directory; None for :func:`default_directory`, which,
            when it cannot be created or written, turns the disk tier off with a warning.
        shards: The dataset's shard paths.

    Returns:
        The directory's absolute real path, or None (the disk tier is off).

    Raises:
        ArgumentError: If the directory overlaps a shard's directory, is not private or
            (when given) cannot be created.
    """
    homes = sorted({os.path.dirname(os.path.realpath(s)) for s in shards if not is_remote(s)})
    hint = f"choose a directory of your own outside the dataset (or set ${CACHE_ENV})"
    try:
        real = private_directory(directory or default_directory(), homes, what="disk_dir",
                                 hint=hint)
    except CacheUnwritableError as exc:
        if directory is not None:
            raise
        warnings.warn(f"{exc}; the disk tier is off", RuntimeWarning, stacklevel=3)
        return None
    return str(real)


def window_keys(
    source: Source, windows: Sequence[Window], schema: pa.Schema, view: object = None
) -> list[str]:
    """Return the file key of each window: a hash of what its rows depend on.

    The shard's identity (path, size, modification and status-change times, inode; so a
    changed or replaced shard
    gets new keys and its old files are never read), the window's rows, the columns and
    their Arrow types, and for a view its query and side tables.

    Args:
        source: The dataset's shards.
        windows: The window plan.
        schema: The schema of a row.
        view: What else defines the rows (a view's query and side-table fingerprints),
            as JSON-serialisable data.

    Returns:
        One 64-hex-digit key per window.
    """
    columns = [[f.name, str(f.type)] for f in schema]
    keys = []
    for w in windows:
        shard = source.shards[w.shard]
        text = json.dumps([FILE_VERSION, shard.identity, w.start, w.stop, w.rows, columns,
                           view])
        keys.append(hashlib.sha256(text.encode()).hexdigest())
    return keys


@dataclass(frozen=True)
class DiskStats:
    """Counters of a :class:`DiskTier` in this process.

    Attributes:
        hits: Windows served from a file (opened now or kept mapped).
        writes: Windows written.
        removed: Files this process removed to stay within the bound.
        skipped: Windows not written (larger than the bound, or the write failed).
    """

    hits: int
    writes: int
    removed: int
    skipped: int


class DiskTier:
    """Decoded windows as Arrow IPC files in a directory, read back memory-mapped.

    A file is written once under a temporary name opened with ``O_EXCL`` and renamed into
    place, so no process ever opens a half-written file; processes that write the same
    window race harmlessly (the files are equal; a mapped file that is replaced or removed
    stays valid for whoever mapped it). The directory's window files stay within ``limit``
    bytes: before a write, the least recently used files (by modification time, which a
    read refreshes) are removed; processes writing at the same moment may each add one
    window beyond it until the next write.

    Args:
        directory: Where the files go (see :func:`prepare_directory`).
        limit: Bytes the directory's window files may hold.
        keys: The file key of each window position (:func:`window_keys`).
        source: The dataset's shards; a local one is checked unchanged before a file of it
            is opened (a remote one's files are keyed by the version listed at open).
        windows: The window plan (the rows a file must hold).
        columns: The columns a file must hold.
        check: Checks the other inputs of the rows (a view's side tables) unchanged before
            a file is opened; raises ShardChangedError if not.
    """

    def __init__(
        self, directory: str, limit: int, keys: Sequence[str], source: Source,
        windows: Sequence[Window], columns: Sequence[str],
        check: Callable[[], None] | None = None,
    ) -> None:
        self._check = check
        self.directory = directory
        self.limit = int(limit)
        self._keys = list(keys)
        self._source = source
        self._windows = windows
        self._columns = list(columns)
        self._mapped: OrderedDict[int, pa.Table] = OrderedDict()
        #: The stamp (:func:`_stamp`: inode, size, modification and status-change times) of
        #: each file this process wrote or checked, as it left it: mapping that file again
        #: while its stamp is the same needs no second pass over it. A file changed since
        #: (copied over, rewritten in place even with its mtime restored: the status-change
        #: time cannot be set back) is checked again.
        self._verified: dict[int, tuple[int, int, int, int]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._held = -1  # bytes in the directory at the last scan plus what we wrote since
        self._since = 0  # bytes we wrote since the last scan
        # Other processes write too: rescan after writing a 64th of the bound, so that
        # together they exceed it by at most that much each between scans.
        self._slack = self.limit // 64
        self._hits = self._writes = self._removed = self._skipped = 0
        with contextlib.suppress(OSError):  # checked by prepare_directory; a write that
            os.makedirs(directory, mode=0o700, exist_ok=True)  # fails keeps it in memory

    @property
    def _through(self) -> str:
        """Where the directory's files are reached: through its held descriptor.

        Held open since it was resolved (:func:`held_path`), so a link or directory swapped
        at its path can neither receive our files nor serve a planted one.
        """
        return os.fspath(held_path(self.directory))

    def path(self, position: int) -> str:
        """Return the file of window ``position`` (reached through the held directory)."""
        return os.path.join(self._through, self._keys[position] + SUFFIX)

    @property
    def stats(self) -> DiskStats:
        """This process's counters."""
        return DiskStats(self._hits, self._writes, self._removed, self._skipped)

    def __contains__(self, position: object) -> bool:
        if not isinstance(position, int):
            return False
        with self._lock:
            if position in self._mapped:
                return True
        return _is_file(self.path(position))

    def get(self, position: int) -> pa.Table | None:
        """Return window ``position`` mapped from its file, or None if it has none.

        Raises:
            ShardChangedError: If the window's shard changed on disk since it was opened.
        """
        with self._lock:
            table: pa.Table | None = self._mapped.get(position)
            if table is not None:
                self._mapped.move_to_end(position)
                self._hits += 1
                return table
        table = self._map(position)
        if table is not None:
            with self._lock:
                self._hits += 1
        return table

    def opened(self, position: int) -> bool:
        """Whether window ``position``'s file is mapped in this process already."""
        with self._lock:
            return position in self._mapped

    def map_ahead(self, position: int) -> bool:
        """Map (and check) window ``position``'s file before it is asked for.

        What :meth:`get` does for a window not yet mapped, without counting a hit: the
        read-ahead thread calls it for the coming window, so the file's pages are read
        from disk, and its checksum taken, while the consumer is still on the window before.

        Returns:
            Whether the file is mapped now (False: it has none, or it was damaged and
            removed; the window is then decoded and written again when asked for).

        Raises:
            ShardChangedError: If the window's shard changed on disk since it was opened
                (the read-ahead drops the error; :meth:`get` raises it to the consumer).
        """
        return self.opened(position) or self._map(position) is not None

    def _map(self, position: int) -> pa.Table | None:
        """Open window ``position``'s file and keep it mapped (the most recent of them).

        If another thread mapped it meanwhile (the read-ahead and the consumer), its table
        is kept and returned: one mapping per window.
        """
        table = self._open(position)
        if table is None:
            return None
        with self._lock:
            kept: pa.Table = self._mapped.setdefault(position, table)
            if len(self._mapped) > OPEN_WINDOWS:
                self._mapped.popitem(last=False)
        return kept

    def _open(self, position: int) -> pa.Table | None:
        path = self.path(position)
        window = self._windows[position]
        if not os.path.lexists(path):
            return None
        # only a regular file of ours, never through a link, never blocking on a FIFO
        fd = open_cached(path)
        if fd is None:
            self._discard(path)
            return None
        try:
            table = self._read(fd, position)
            if table is None:  # damaged (a flipped byte, a torn write): write it anew
                self._discard(path)
                return None
            if table.num_rows != window.rows or table.column_names != self._columns:
                self._discard(path)
                return None
            # A file is only as good as the shard it was decoded from: refuse, as a read
            # would. A remote shard's files are keyed by the version listed at open and
            # a read of its cached copy asks the store nothing: neither does this (no
            # request per window file, and files are served while the store is down).
            shard = self._source.shards[window.shard]
            if not is_remote(shard.path):
                shard.check_unchanged()
            if self._check is not None:
                self._check()
            with contextlib.suppress(OSError):
                os.utime(fd if os.utime in os.supports_fd else path)  # most recently used
            with contextlib.suppress(OSError), self._lock:
                self._verified[position] = _stamp(os.fstat(fd))
        finally:
            os.close(fd)
        return table

    def _read(self, fd: int, position: int) -> pa.Table | None:
        """The table of a window file open at ``fd`` if it checks out, else None.

        Its checksum is taken unless this process wrote or checked this very file and it
        has not changed since (the same :func:`_stamp`).
        """
        try:
            st = os.fstat(fd)
            with self._lock:
                known = self._verified.pop(position, None) == _stamp(st)
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)  # lives as long as the table
            body = _checked(mapped, self._keys[position], verify=not known)
            if body is None:
                return None
            return ipc.open_file(pa.BufferReader(body)).read_all()
        except (OSError, ValueError, pa.ArrowException):
            return None  # not a whole window file (a crash mid-rename): write it anew

    def _discard(self, path: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)

    def put(self, position: int, table: pa.Table) -> bool:
        """Write window ``position`` to its file (unless one is there) within the bound.

        Returns:
            True if the window now has a file; False if it is larger than the bound or
            cannot be written (the caller then keeps it in memory).
        """
        path = self.path(position)
        if table_bytes(table) > self.limit:
            self._skipped += 1
            return False
        # a file is there (another process wrote it); anything else (a directory, a FIFO, a
        # link) is no window: replaced by the rename, or, a directory, kept in memory instead
        if _is_file(path):
            return True
        tmp = os.path.join(
            self._through, f".{self._keys[position]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        )
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as raw:
                sink = _SealingSink(raw, self._keys[position])
                with pa.PythonFile(sink, mode="w") as stream, ipc.new_file(
                    stream, table.schema, options=_WRITE_OPTIONS
                ) as writer:
                    writer.write_table(table)
                sink.seal()
                st = os.fstat(raw.fileno())
            size = st.st_size
            if size > self.limit:
                self._discard(tmp)
                self._skipped += 1
                return False
            with self._write_lock:  # one writer of this process at a time keeps the count
                self._make_room(size)
                os.rename(tmp, path)
                self._writes += 1
                self._held += size
                self._since += size
                # as the rename left it (it may change the status-change time)
                stamp = _stamp(os.stat(path, follow_symlinks=False))
            if stamp[0] == st.st_ino and stamp[1] == size:  # not replaced meanwhile
                with self._lock:
                    self._verified[position] = stamp
        except (OSError, ValueError, pa.ArrowException):
            self._discard(tmp)
            self._skipped += 1
            return False
        return True

    def _make_room(self, incoming: int) -> None:
        """Remove least recently used window files until ``incoming`` more bytes fit.

        Called with ``_write_lock`` held.
        """
        if (
            self._held >= 0 and self._held + incoming <= self.limit
            and self._since + incoming <= self._slack
        ):
            return
        held, files = self.scan()
        for _, nbytes, path in files:
            if held + incoming <= self.limit:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass  # another process removed it first
            except OSError:
                continue
            held -= nbytes
            self._removed += 1
        self._held = held
        self._since = 0

    def scan(self) -> tuple[int, list[tuple[int, int, str]]]:
        """List the directory's window files, least recently used first.

        Only files we wrote count (named by a key, ending with our checksum trailer): the
        bound never removes anything else.

        Removes temporary files that a killed writer left (older than an hour).

        Returns:
            ``(total bytes, [(mtime_ns, bytes, path), ...])``.
        """
        files: list[tuple[int, int, str]] = []
        total = 0
        now = time.time()
        try:
            entries = list(os.scandir(self._through))
        except OSError:
            return 0, []
        for entry in entries:
            name = entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if _is_window_file(name) and _sealed(entry.path, st.st_size):
                files.append((st.st_mtime_ns, st.st_size, entry.path))
                total += st.st_size
            elif _is_temp_file(name) and now - st.st_mtime > STALE_TEMP_SECONDS:
                self._discard(entry.path)
        files.sort()
        return total, files

    def forget(self) -> None:
        """Unmap every window this process holds open (their files stay)."""
        with self._lock:
            self._mapped.clear()


def digest(key: str, data: Any) -> int:
    """The checksum a window file's trailer records: the XXH3-64 of its key, then ``data``.

    The key (the file's name) is part of it, so a sound file of another window at this name
    (two files swapped or copied over each other) fails the check like a damaged one.
    """
    hasher = _hasher(key)
    hasher.update(data)
    return int(hasher.intdigest())


def _hasher(key: str) -> Any:
    """An XXH3-64 that has taken in ``key``: the start of every window file's checksum."""
    return xxhash.xxh3_64(key.encode())


class _SealingSink:
    """A file that computes the XXH3-64 of what is written to it, then appends the trailer.

    The checksum is taken as the bytes pass, so a window is never read back to seal it.
    The file is not flushed to disk (``fsync``): the disk tier is a cache that the shards
    rebuild, and a file a crash left torn or zeroed fails its checksum and is written anew.
    """

    def __init__(self, raw: Any, key: str) -> None:
        self._raw = raw
        self._hash = _hasher(key)
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self._hash.update(view)
        self._raw.write(view)
        return view.nbytes

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        self.closed = True  # pyarrow closes its stream; the trailer still follows

    def seal(self) -> None:
        """Append the checksum trailer and flush to the operating system."""
        self._raw.write(TRAILER_MAGIC + self._hash.intdigest().to_bytes(DIGEST_BYTES, "big"))
        self._raw.flush()


def _sealed(path: str, size: int) -> bool:
    """Whether a file ends with our trailer or an older version's: only those are removed."""
    fd = open_cached(path)
    if fd is None:
        return False
    try:
        return any(
            size >= len(magic) + digest_bytes
            and os.pread(fd, len(magic), size - len(magic) - digest_bytes) == magic
            for magic, digest_bytes in ((TRAILER_MAGIC, DIGEST_BYTES), *OLD_TRAILERS)
        )
    except OSError:
        return False
    finally:
        os.close(fd)


def _checked(mapped: mmap.mmap, key: str, *, verify: bool = True) -> pa.Buffer | None:
    """The Arrow IPC bytes of a mapped window file if its trailer checks out, else None.

    ``key``: the file's key, which the checksum covers. ``verify=False``: only the
    trailer's magic is checked (a file this process wrote or checked, unchanged since).
    """
    size = len(mapped)
    if size < _TRAILER or mapped[size - _TRAILER : size - DIGEST_BYTES] != TRAILER_MAGIC:
        return None
    if not verify:
        return pa.py_buffer(mapped).slice(0, size - _TRAILER)
    body = memoryview(mapped)[: size - _TRAILER]
    try:
        ok = digest(key, body) == int.from_bytes(mapped[size - DIGEST_BYTES :], "big")
    finally:
        body.release()
    return pa.py_buffer(mapped).slice(0, size - _TRAILER) if ok else None


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells one state of a window file from another: inode, size, mtime and ctime.

    A file copied over in place keeps its inode and may keep its size, and its mtime can be
    set back; its status-change time cannot (short of changing the clock). A change within
    the same tick of the file system's clock as this process's last use of the file keeps
    all four on kernels without fine-grained timestamps.
    """
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _is_file(path: str) -> bool:
    """Whether a regular file (not a link, a directory or a FIFO) is at ``path``."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_window_file(name: str) -> bool:
    stem = name[: -len(SUFFIX)]
    return name.endswith(SUFFIX) and len(stem) == 64 and set(stem) <= _HEX


def _is_temp_file(name: str) -> bool:
    parts = name.split(".")
    return (
        len(parts) == 5 and parts[0] == "" and parts[4] == "tmp" and len(parts[1]) == 64
        and set(parts[1]) <= _HEX
    )


class TieredCache(WindowCache):
    """A :class:`WindowCache` whose windows go to a :class:`DiskTier` and are read mapped.

    A decoded window is written to the disk tier and not kept in memory: later accesses map
    its file (its pages live in the operating system's page cache, shared by every process
    and reclaimable), so the memory budget only pays for the read in flight. A window the
    disk tier cannot take is kept in memory as usual. Misses count the windows decoded.

    Args:
        limit: The memory budget in bytes (as :class:`WindowCache`).
        tier: Where decoded windows go.
    """

    def __init__(self, limit: int, tier: DiskTier) -> None:
        super().__init__(limit)
        self.tier = tier

    def get(self, key: Hashable) -> pa.Table | None:
        """Return the window from memory or its file (marking it recently used), or None."""
        if len(self._tables):  # windows the disk tier could not take
            with self._lock:
                entry = self._tables.get(key)
                if entry is not None:
                    self._tables.move_to_end(key)
                    self._hits += 1
                    return entry[0]
        table = self.tier.get(key) if isinstance(key, int) else None
        with self._lock:
            if table is None:
                self._misses += 1
            else:
                self._hits += 1
        return table

    def put(self, key: Hashable, table: pa.Table) -> bool:
        """Write the window to the disk tier; keep it in memory only if that fails."""
        if isinstance(key, int) and self.tier.put(key, table):
            return True
        return super().put(key, table)

    maps_windows = True

    def unopened(self, key: Hashable) -> bool:
        """Whether the window has a file this process has not mapped yet."""
        return (
            isinstance(key, int) and not super().__contains__(key)
            and not self.tier.opened(key) and key in self.tier
        )

    def open_ahead(self, key: Hashable) -> bool:
        """Map and check the window's file now, not as a hit (:meth:`DiskTier.map_ahead`)."""
        return isinstance(key, int) and self.tier.map_ahead(key)

    def handed(self, key: Hashable, table: pa.Table) -> pa.Table:
        """The window's mapped file once it was written, else ``table``.

        The decoded copy's memory is then freed at once, not when the batch that read it is
        done.
        """
        if isinstance(key, int) and not super().__contains__(key):
            mapped = self.tier.get(key)
            if mapped is not None:
                return mapped
        return table

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or key in self.tier

    def clear(self) -> None:
        """Drop the windows held in memory and unmap the mapped ones (files stay)."""
        super().clear()
        self.tier.forget()


__all__ = [
    "FILE_VERSION", "DiskStats", "DiskTier", "TieredCache", "default_directory",
    "prepare_directory", "window_keys"
]
