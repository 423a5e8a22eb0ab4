"""Read-ahead: one background thread that reads the window hinted next, with start/stop."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable

from . import lifecycle

#: Seconds an idle read-ahead thread waits for a hint before it ends (a hint restarts it).
IDLE_SECONDS = 5.0

#: ``fetch(position, keep)`` reads window ``position`` into the cache, sparing window
#: ``keep`` when making room; it returns whether it read (False: already cached).
Fetch = Callable[[int, int | None], bool]


class ReadAhead:
    """A background reader of the next window, with an explicit lifecycle.

    :meth:`start` makes it accept hints (:meth:`schedule`); the thread itself starts on the
    first hint and ends after :data:`IDLE_SECONDS` without one. :meth:`stop` refuses new
    hints, drops queued ones and waits for the read in flight. Only the newest hint is kept:
    the consumer has moved on from older ones. Every instance is registered with
    :mod:`lifecycle`, which stops it before ``fork()`` and at exit (before connections close)
    and starts it again after a fork.

    A read that fails is dropped: the consumer reads the window itself and gets the error.

    Args:
        fetch: Reads one window into the cache (see :data:`Fetch`); run on the thread.
        running: Whether to start accepting hints now.
    """

    def __init__(self, fetch: Fetch, *, running: bool = True) -> None:
        self._fetch = fetch
        self._running = running
        self.reset_in_child()
        lifecycle.track_read_ahead(self)

    def reset_in_child(self) -> None:
        """Forget any thread, lock, queue and counters (a forked child inherits none alive)."""
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[int] = deque()
        self._in_flight: int | None = None
        self._keep: int | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        #: The window the consumer moved to last (set by the reader; what hints follow).
        self.last: int | None = None
        self.stats = {"scheduled": 0, "read": 0, "skipped": 0, "waited": 0}

    @property
    def running(self) -> bool:
        """Whether hints are accepted."""
        return self._running

    @property
    def in_flight(self) -> int | None:
        """The window being read now, if any."""
        return self._in_flight

    def start(self) -> None:
        """Accept hints; the thread starts on the next one."""
        with self._cond:
            self._running = True

    def stop(self) -> None:
        """Refuse hints, drop queued ones, and wait for the read in flight to end."""
        with self._cond:
            thread = self._thread
            self._running = False
            self._queue.clear()
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            if self._thread is thread:
                self._thread = None

    def skipped(self) -> None:
        """Count a hint the caller dropped (the window would not fit beside the current one)."""
        self.stats["skipped"] += 1

    def schedule(self, position: int, keep: int | None) -> None:
        """Read ``position`` in the background next, replacing any older hint.

        Args:
            position: The window to read.
            keep: The window being consumed (never evicted to make room for the read).
        """
        with self._cond:
            if not self._running or os.getpid() != self._pid:
                return
            if position == self._in_flight or position in self._queue:
                return
            self._queue.clear()  # only the newest hint matters
            self._queue.append(position)
            self._keep = keep
            self.stats["scheduled"] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="undertale-duck-read-ahead", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def wait(self, position: int) -> bool:
        """Wait if ``position`` is being read (True); drop it from the queue otherwise.

        Args:
            position: The window the consumer needs now.

        Returns:
            True if it was being read ahead (it is in the cache now, unless that read failed).
        """
        with self._cond:
            if position in self._queue:
                self._queue.remove(position)
            if self._in_flight != position:
                return False
            self.stats["waited"] += 1
            while self._in_flight == position:
                self._cond.wait()
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and self._running:
                    if not self._cond.wait(timeout=IDLE_SECONDS) and not self._queue:
                        self._thread = None  # idle: end; restarted on the next hint
                        return
                if not self._running:
                    return
                position = self._queue.popleft()
                self._in_flight = position
                keep = self._keep
            try:
                if self._fetch(position, keep):
                    self.stats["read"] += 1
            except Exception:  # the consumer reads it again and gets the error itself
                pass
            finally:
                with self._cond:
                    self._in_flight = None
                    self._cond.notify_all()
