"""Notice forked DataLoader workers that never start, and stop them so the loader can go on.

A worker forked from a process with other threads can deadlock before it runs any Python:
CPython before 3.11.10 takes the lock of its thread-state list in the child *before*
resetting it (python/cpython#112275), so if another thread was creating a thread state at
the moment of ``fork()`` (a native thread entering Python, such as one of torch's or
pyarrow's; ours are stopped before a fork) the child waits for that lock forever. torch's
DataLoader then waits forever for the worker's batches: the worker is alive, so nothing
reports it (3 times in about 250 runs of README's DDP example here, each at the start of
an epoch).

A :class:`StartWatch` gives each worker a byte in a shared page; the worker sets it first
thing (:func:`mark_started`, called by ``ChunkedLoader``'s ``worker_init_fn``), and a short
thread in the parent, ending once every worker has started, stops a worker that has not
within the deadline while the loop waits for a batch. torch then reports the stopped worker,
and ``ChunkedLoader`` starts the epoch's workers again at the next batch.
"""

from __future__ import annotations

import itertools
import mmap
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

#: How often the watch looks at the workers' bytes (seconds).
POLL = 0.05
#: How long the loop must have waited for a batch before a worker is stopped (seconds): a
#: stopped worker makes torch's SIGCHLD handler raise in the main thread wherever it is, and
#: only inside ``next()`` does the loader catch it.
BLOCKED = 1.0

_boards: dict[int, mmap.mmap] = {}
_keys = itertools.count(1)
_lock = threading.Lock()


def fork_deadlock_prone(version: Sequence[int] = tuple(sys.version_info[:3])) -> bool:
    """Whether this Python's forked children can deadlock on a lock held at ``fork()``.

    Args:
        version: A Python version (this one by default).

    Returns:
        True before 3.11.10 (python/cpython#112275, fixed in 3.11.10 and 3.12).
    """
    return tuple(version[:3]) < (3, 11, 10)


def mark_started(key: int | None, worker_id: int) -> None:
    """Record that worker ``worker_id`` started, on the board its parent watches (if any).

    Called first in a worker (the board, a shared anonymous page, came with ``fork()``); a
    worker whose parent watches nothing, or that was spawned, finds no board and does nothing.

    Args:
        key: The board's key (:attr:`StartWatch.key`), or None.
        worker_id: The worker's number.
    """
    board = _boards.get(key) if key is not None else None
    if board is not None and 0 <= worker_id < len(board):
        board[worker_id] = 1


class StartWatch:
    """Watch an epoch's forked workers until each has started; stop one that never does.

    Args:
        workers: The number of workers.
        deadline: Seconds a worker may take from its fork to :func:`mark_started`.
    """

    def __init__(self, workers: int, deadline: float) -> None:
        self.deadline = deadline
        self._board = mmap.mmap(-1, max(1, workers))  # shared with the children fork() makes
        with _lock:
            self.key = next(_keys)
            _boards[self.key] = self._board
        #: ``(worker id, pid)`` of the workers stopped for not starting.
        self.stuck: list[tuple[int, int]] = []
        #: When the loop began waiting for its current batch (``time.monotonic()``), or None
        #: while it is not waiting; set by the loader around each ``next()``.
        self.waiting_since: float | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pids: Sequence[int]) -> None:
        """Start watching the workers just forked (their pids, in worker order).

        Args:
            pids: The workers' process ids.
        """
        handles = [_handle(pid) for pid in pids]
        self._thread = threading.Thread(
            target=self._run, args=(list(pids), handles), name="undertale_duck-start-watch",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop watching (the epoch ended or its workers were shut down)."""
        self._done.set()
        thread = self._thread
        if thread is None:
            self._release()
        elif thread is not threading.current_thread():
            thread.join()

    def _run(self, pids: list[int], handles: list[int | None]) -> None:
        try:
            begun = time.monotonic()
            while not self._done.wait(POLL):
                pending = [i for i in range(len(pids)) if not self._board[i]]
                if not pending:
                    return
                now = time.monotonic()
                since = self.waiting_since
                if now - begun < self.deadline or since is None or now - since < BLOCKED:
                    continue
                for i in pending:
                    _kill(pids[i], handles[i])
                    self.stuck.append((i, pids[i]))
                return
        finally:
            for handle in handles:
                if handle is not None:
                    os.close(handle)
            self._release()

    def _release(self) -> None:
        with _lock:
            board = _boards.pop(self.key, None)
        if board is not None:
            board.close()


def _handle(pid: int) -> int | None:
    """A pidfd for ``pid`` (a signal through it never reaches a later process of that pid)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _kill(pid: int, handle: int | None) -> None:
    send = getattr(signal, "pidfd_send_signal", None)
    try:
        if handle is not None and send is not None:
            send(handle, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:  # it ended meanwhile
        pass


__all__ = ["BLOCKED", "POLL", "StartWatch", "fork_deadlock_prone", "mark_started"]
