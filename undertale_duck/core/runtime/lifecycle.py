"""Per-process resources and their one fork/exit hook: read-ahead threads, connections, spill dir.

Order matters and is stated here, not left to import order. Before ``fork()`` and at exit:

1. every read-ahead thread is stopped and joined, so no thread is inside a DuckDB query;
2. then every query kept open between reads, and every DuckDB connection holder, is closed
   (a forked child that inherits a live DuckDB database crashes when it opens its own, and
   hangs when it drops a query that kept one alive; a query still running while the
   interpreter finalizes aborts the process);
3. at exit only, this process's private spill directory is removed.

After ``fork()`` the read-ahead threads stopped by step 1 are started again in the parent and
in the child (with fresh locks there); the child has no spill directory until its first
connection creates its own. Connections reopen lazily in each process.

Spill files: each process that opens a DuckDB connection gets a private directory for
DuckDB's ``temp_directory``, created by :func:`tempfile.mkdtemp` (mode 0700, unpredictable
name) under ``$UNDERTALE_DUCK_TMPDIR`` or else the system temporary directory. Its name
records the process id; a directory left by a killed process is removed when the next process
creates its own (only directories of this user whose process is gone and whose lock is free;
symlinks are never followed).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Protocol

from .locks import acquire, try_acquire

#: Environment variable naming the directory under which spill directories are created.
SPILL_ROOT_ENV = "UNDERTALE_DUCK_TMPDIR"
#: Prefix of every spill directory's name; the owner's process id follows.
SPILL_PREFIX = "undertale_duck-spill-"
#: The lock file each owner holds (``flock``) while alive, so a process in another pid
#: namespace sharing the directory is never taken for dead.
LOCK_NAME = ".owner.lock"

_SPILL_NAME = re.compile(re.escape(SPILL_PREFIX) + r"(\d+)-[A-Za-z0-9_]+")


class ReadAheadLike(Protocol):
    """What the hook needs of a read-ahead thread (see :class:`readahead.ReadAhead`)."""

    @property
    def running(self) -> bool:
        """Whether hints are accepted."""

    def start(self) -> None:
        """Accept hints (the thread starts on the next one)."""

    def stop(self, poke: Callable[[], None] | None = None) -> None:
        """Refuse hints, drop queued ones, and wait for the read in flight to end.

        ``poke`` is called while waiting, again and again, until the reads end.
        """

    def reset_in_child(self) -> None:
        """Forget the parent's thread and locks (called in a forked child)."""


class Closable(Protocol):
    """What the hook needs of a connection holder (it reopens lazily after a close)."""

    def close(self) -> None:
        """Close the database and its cursors."""


class QueryHolder(Protocol):
    """What the hook needs of a holder of queries kept open between reads."""

    def close_queries(self) -> None:
        """Close the queries it keeps open (a later read begins a new one)."""


_READ_AHEADS: weakref.WeakSet[ReadAheadLike] = weakref.WeakSet()
_CONNECTIONS: weakref.WeakSet[Closable] = weakref.WeakSet()
_QUERY_HOLDERS: weakref.WeakSet[QueryHolder] = weakref.WeakSet()


def track_read_ahead(obj: ReadAheadLike) -> None:
    """Register a read-ahead thread to stop before ``fork()`` and at exit (held weakly)."""
    _READ_AHEADS.add(obj)


def track_connection(obj: Closable) -> None:
    """Register a connection holder to close before ``fork()`` and at exit (held weakly)."""
    _CONNECTIONS.add(obj)


def track_queries(obj: QueryHolder) -> None:
    """Register a holder of open queries to close before ``fork()`` and at exit (weakly)."""
    _QUERY_HOLDERS.add(obj)


#: The read-ahead threads :func:`_before_fork` stopped, started again after the fork.
_paused: list[ReadAheadLike] = []


def quiesce(poke: Callable[[], None] | None = None) -> list[ReadAheadLike]:
    """Stop every read-ahead thread, then close every connection: steps 1 and 2 above.

    Args:
        poke: Called again and again while a thread's read is awaited (see :func:`shutdown`).

    Returns:
        The read-ahead threads that were running (and are now stopped).
    """
    running = [reader for reader in list(_READ_AHEADS) if reader.running]
    for reader in running:
        reader.stop(poke)
    # an open query's cursor keeps its database alive past the connection's close: dropped
    # in a forked child, the database's destructor waits for threads only the parent has
    for holder in list(_QUERY_HOLDERS):
        holder.close_queries()
    for con in list(_CONNECTIONS):
        con.close()
    return running


def _before_fork() -> None:
    _paused[:] = quiesce()


def _after_fork_in_parent() -> None:
    for reader in _paused:
        reader.start()
    _paused.clear()


def _after_fork_in_child() -> None:
    global _spill_lock, _spill_path, _spill_pid, _spill_fd
    _spill_lock = threading.Lock()  # another thread may have held it at fork()
    if _spill_fd is not None:  # the parent's lock stays the parent's alone
        with contextlib.suppress(OSError):
            os.close(_spill_fd)
    _spill_path, _spill_pid, _spill_fd = None, -1, None  # the child makes its own
    for reader in list(_READ_AHEADS):
        reader.reset_in_child()
    for reader in _paused:
        reader.start()
    _paused.clear()


def shutdown() -> None:
    """Stop read-ahead, close connections, remove this process's spill directory (idempotent).

    Reads in flight on read-ahead threads are interrupted first: nothing will consume them,
    and a long one would hold up the exit (after Ctrl-C, too) until it ends.
    """
    running = sys.modules.get(f"{__package__}.interrupt")  # loaded if any read ran
    poke = None
    if running is not None:
        # interrupted again while awaited: a read may begin a query after the first
        # interrupt, which DuckDB drops when it finds no query running
        poke = running.interrupt_background
        poke()
    quiesce(poke)
    remove_spill_directory()


# --------------------------------------------------------------------------- spill directory

_spill_lock = threading.Lock()
_spill_path: str | None = None
_spill_pid = -1
_spill_fd: int | None = None
#: Real paths of the directories of datasets opened in this process (see :func:`protect`).
_protected: set[str] = set()


def spill_root() -> str:
    """Return the directory under which spill directories are created.

    Returns:
        ``$UNDERTALE_DUCK_TMPDIR`` if set and not empty, else :func:`tempfile.gettempdir`
        (or, when no temporary directory can be written, as on a full disk, the first it
        would try: creating a spill directory there then fails, and is warned about).
    """
    configured = os.environ.get(SPILL_ROOT_ENV)
    if configured:
        return configured
    try:
        return tempfile.gettempdir()
    except OSError:  # it probes each candidate by writing a file
        return os.environ.get("TMPDIR") or "/tmp"


def protect(directories: Iterable[str]) -> None:
    """Never put spill files inside these directories (a dataset's, opened in this process).

    Args:
        directories: Directories holding shards (their real paths are kept).
    """
    with _spill_lock:
        _protected.update(os.path.realpath(d) for d in directories)


def protected_directories() -> list[str]:
    """The directories of the datasets opened in this process (see :func:`protect`)."""
    with _spill_lock:
        return sorted(_protected)


def _inside_dataset(path: str) -> OSError | None:
    real = os.path.realpath(path)
    for directory in _protected:
        if real == directory or real.startswith(directory.rstrip(os.sep) + os.sep):
            return OSError(
                errno.EPERM,
                f"it lies inside the dataset directory {directory}, and spill files never "
                "go into a dataset",
            )
    return None


def spill_directory() -> str:
    """Return this process's private spill directory, creating it on first use.

    Directories left by processes that are gone are removed first (see the module docstring).

    Returns:
        The directory's absolute path (mode 0700).

    Raises:
        OSError: If the directory cannot be created under :func:`spill_root`, or it would
            lie inside a dataset opened in this process (:func:`protect`).
    """
    global _spill_path, _spill_pid, _spill_fd
    pid = os.getpid()
    with _spill_lock:
        if _spill_path is not None and _spill_pid == pid:
            refused = _inside_dataset(_spill_path)  # made before that dataset was opened
            if refused is not None:
                raise refused
            return _spill_path
        root = os.path.abspath(spill_root())
        refused = _inside_dataset(root)
        if refused is not None:
            raise refused
        remove_stale_spill_directories(root)
        path = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{pid}-", dir=root)
        fd = os.open(
            os.path.join(path, LOCK_NAME),
            os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        acquire(fd, "exclusive")
        _spill_path, _spill_pid, _spill_fd = path, pid, fd
        _register_child_exit()
        return path


def remove_spill_directory() -> None:
    """Remove this process's spill directory, if this process created one (idempotent)."""
    global _spill_path, _spill_fd
    with _spill_lock:
        path, fd = _spill_path, _spill_fd
        if path is None or _spill_pid != os.getpid():
            return
        _spill_path, _spill_fd = None, None
        shutil.rmtree(path, ignore_errors=True)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _locked(path: str) -> bool:
    """Whether the owner of a spill directory still holds its lock (it is alive somewhere)."""
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: killed between creating the directory and the lock
    try:
        return not try_acquire(fd, "shared")
    except OSError:
        return True
    finally:
        os.close(fd)


def remove_stale_spill_directories(root: str) -> list[str]:
    """Remove spill directories under ``root`` whose owning process is gone.

    Only real directories (never symlinks) owned by this user, named like ours, whose
    process id is not alive and whose lock is free are removed.

    Args:
        root: The directory to sweep.

    Returns:
        The paths removed.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    me = os.getpid()
    for entry in entries:
        match = _SPILL_NAME.fullmatch(entry.name)
        if match is None or int(match[1]) == me or _alive(int(match[1])):
            continue
        try:
            st = os.lstat(entry.path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or _locked(entry.path):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # fd-based: never follows symlinks
        removed.append(entry.path)
    return removed


def _register_child_exit() -> None:
    # A forked multiprocessing child (a DataLoader worker) leaves through os._exit, which
    # skips atexit; multiprocessing runs its finalizers first, so clean up there as well.
    from multiprocessing import util

    util.Finalize(None, shutdown, exitpriority=0)


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)
atexit.register(shutdown)
