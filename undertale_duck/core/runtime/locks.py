"""Advisory file locks (``flock``) on open descriptors: shared, exclusive, or a try.

``fcntl`` is imported where a lock is taken, not at import time, so ``import
undertale_duck`` works where it is missing (the caches that lock are POSIX-only). The
``filelock`` package is not used here: the shard cache needs shared locks and converts them
to exclusive ones, and a spill directory's owner is probed with a non-blocking shared lock;
``filelock`` offers exclusive locks on a path only.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["acquire", "release", "try_acquire"]

Mode = Literal["shared", "exclusive"]


def acquire(fd: int, mode: Mode) -> None:
    """Wait for a lock on an open file.

    Args:
        fd: The file's descriptor.
        mode: ``"shared"`` (many holders) or ``"exclusive"`` (one holder).
    """
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX)


def try_acquire(fd: int, mode: Mode) -> bool:
    """Take a lock on an open file if no one holds a conflicting one, without waiting.

    Args:
        fd: The file's descriptor.
        mode: ``"shared"`` or ``"exclusive"``.

    Returns:
        Whether the lock was taken.
    """
    import fcntl

    flag = fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX
    try:
        fcntl.flock(fd, flag | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def release(fd: int) -> None:
    """Release this descriptor's lock."""
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)
