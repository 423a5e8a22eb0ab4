"""Reading what a child process writes to a pseudo-terminal, for tests of the interactive shell."""

from __future__ import annotations

import os
import select
import time


def read_until(fd: int, marker: bytes, timeout: float = 60.0) -> bytes:
    """Read ``fd`` until ``marker`` appears (or the child closes it); fail after ``timeout`` s."""
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{marker!r} not seen; got {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen
