"""Read-ahead: background threads that read the windows hinted next, with start/stop."""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence

from ..runtime import lifecycle

#: Seconds an idle read-ahead thread waits for a hint before it ends (a hint restarts it).
IDLE_SECONDS = 5.0
#: Seconds between the calls of ``stop``'s ``poke`` while a read is awaited.
POKE_SECONDS = 0.1

#: ``fetch(position, keep)`` reads window ``position`` into the cache, sparing window
#: ``keep`` when making room; it returns whether it read (False: already cached).
Fetch = Callable[[int, int | None], bool]


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def in_loader_worker() -> bool:
    """Whether this process is a torch DataLoader worker (torch is never imported here)."""
    data = sys.modules.get("torch.utils.data")
    info = getattr(data, "get_worker_info", None)
    try:
        return info is not None and info() is not None
    except Exception:  # a torch too old or too new to ask: assume not
        return False


class ReadAhead:
    """Background readers of the next windows, with an explicit lifecycle.

    :meth:`start` makes it accept hints (:meth:`schedule`); threads start on a hint, up to
    :attr:`depth` of them (one window each), and end after :data:`IDLE_SECONDS` without one.
    :meth:`stop` refuses new hints, drops queued ones and waits for the reads in flight. Only
    the newest hint is kept: the consumer has moved on from older ones. Every instance is
    registered with :mod:`lifecycle`, which stops it before ``fork()`` and at exit (before
    connections close) and starts it again after a fork; in a forked child (a DataLoader
    worker, where the workers are the parallelism) an automatic depth becomes 1.

    A read that fails is dropped: the consumer reads the window itself and gets the error.

    Args:
        fetch: Reads one window into the cache (see :data:`Fetch`); run on the threads.
        running: Whether to start accepting hints now.
        depth: Most windows read at once; None: two where the process may use two cores or
            more, else one (and one in a forked child).
    """

    def __init__(self, fetch: Fetch, *, running: bool = True, depth: int | None = None) -> None:
        self._fetch = fetch
        self._running = running
        self._auto = depth is None
        self._depth = max(1, depth or 1)
        self.reset_in_child()
        if self._auto:
            self._depth = 2 if usable_cores() >= 2 and not in_loader_worker() else 1
        lifecycle.track_read_ahead(self)

    def reset_in_child(self) -> None:
        """Forget any thread, lock, queue and counters (a forked child inherits none alive)."""
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[int] = deque()
        self._in_flight: set[int] = set()
        #: Windows a queued or running read of a whole row group will write (by its key),
        #: and those of them not written yet: the consumer waits for these rather than
        #: decoding the group a second time.
        self._covers: dict[int, set[int]] = {}
        self._pending: set[int] = set()
        #: Most reads taken from the queue at once (the depth, or less for group reads).
        self._at_once = self._depth
        self._keep: int | None = None
        self._threads: list[threading.Thread] = []
        self._pid = os.getpid()
        if self._auto:
            self._depth = 1
        #: The window the consumer moved to last (set by the reader; what hints follow).
        self.last: int | None = None
        self.stats = {"scheduled": 0, "read": 0, "skipped": 0, "waited": 0}

    @property
    def running(self) -> bool:
        """Whether hints are accepted."""
        return self._running

    @property
    def depth(self) -> int:
        """Most windows read at once."""
        return self._depth

    def reading(self, position: int) -> bool:
        """Whether window ``position`` is being read now (or by a group's read, queued)."""
        return position in self._in_flight or position in self._pending

    def start(self) -> None:
        """Accept hints; threads start on the next one."""
        with self._cond:
            self._running = True

    def stop(self, poke: Callable[[], None] | None = None) -> None:
        """Refuse hints, drop queued ones, and wait for the reads in flight to end.

        Args:
            poke: Called every :data:`POKE_SECONDS` while a read is awaited (at exit: the
                interrupt of the DuckDB work in flight, sent until the reads end).
        """
        with self._cond:
            threads = list(self._threads)
            self._running = False
            self._drop_queued()
            self._cond.notify_all()
        for thread in threads:
            if thread is threading.current_thread():
                continue
            if poke is None:
                thread.join()
                continue
            while thread.is_alive():
                poke()
                thread.join(POKE_SECONDS)
        with self._cond:
            self._threads = [t for t in self._threads if t not in threads]

    def skipped(self) -> None:
        """Count a hint the caller dropped (the window would not fit beside the current one)."""
        self.stats["skipped"] += 1

    def schedule_groups(
        self, covers: dict[int, list[int]], keep: int | None, *, at_once: int
    ) -> None:
        """Read whole row groups in the background, replacing any older hint.

        Args:
            covers: For each read (by the key passed to ``fetch``), the windows it writes,
                in order; the reader reports each with :meth:`finished` as it is done.
            keep: The window being consumed.
            at_once: Most of these reads run at once (at most :attr:`depth`).
        """
        with self._cond:
            if not self._running or os.getpid() != self._pid:
                return
            keys = [k for k in covers if k not in self._in_flight and k not in self._covers]
            self._drop_queued()
            for key in keys:
                self._covers[key] = set(covers[key])
                self._pending.update(covers[key])
            self._queue.extend(keys)
            self._keep = keep
            self._at_once = max(1, min(at_once, self._depth))
            self.stats["scheduled"] += len(keys)
            self._start_threads()
            self._cond.notify_all()

    def finished(self, position: int) -> None:
        """Note that a group's read has written window ``position`` (waiters may go on)."""
        with self._cond:
            self._pending.discard(position)
            self._cond.notify_all()

    def _drop_queued(self) -> None:
        """Forget the queued reads (called with the lock held): only the newest hint counts."""
        for key in self._queue:
            for p in self._covers.pop(key, ()):
                self._pending.discard(p)
        self._queue.clear()

    def _start_threads(self) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        wanted = min(self._at_once, len(self._queue) + len(self._in_flight))
        while len(self._threads) < wanted:
            thread = threading.Thread(
                target=self._run, name="undertale-duck-read-ahead", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def schedule(self, positions: Sequence[int], keep: int | None) -> None:
        """Read ``positions`` in the background next, replacing any older hint.

        Args:
            positions: The windows to read, soonest needed first (at most :attr:`depth`
                are read at once).
            keep: The window being consumed (never evicted to make room for the reads).
        """
        with self._cond:
            if not self._running or os.getpid() != self._pid:
                return
            fresh = [p for p in positions if p not in self._in_flight]
            if list(self._queue) == fresh:
                return
            self._drop_queued()  # only the newest hint matters
            self._queue.extend(fresh)
            self._keep = keep
            self._at_once = self._depth  # the caller hints no more than it may read at once
            self.stats["scheduled"] += len(fresh)
            self._start_threads()
            self._cond.notify_all()

    def wait(self, position: int) -> bool:
        """Wait if ``position`` is being read (True); drop it from the queue otherwise.

        Args:
            position: The window the consumer needs now.

        Returns:
            True if it was being read ahead (it is in the cache now, unless that read failed).
        """
        with self._cond:
            if position in self._pending:  # a group's read writes it: first in line
                key = next((k for k, c in self._covers.items() if position in c), None)
                if key is not None and key in self._queue and self._running:
                    self._queue.remove(key)
                    self._queue.appendleft(key)
                    self.stats["waited"] += 1
                    while position in self._pending:
                        self._cond.wait()
                    return True
                if key is not None and key in self._in_flight:
                    self.stats["waited"] += 1
                    while position in self._pending:
                        self._cond.wait()
                    return True
                self._pending.discard(position)
            if position in self._queue:
                self._queue.remove(position)
            if position not in self._in_flight:
                return False
            self.stats["waited"] += 1
            while position in self._in_flight:
                self._cond.wait()
            return True

    def settle(self) -> None:
        """Wait until every hinted window is read (or dropped): a point where nothing races.

        For tests and benchmarks that check what was read ahead without depending on whether
        the threads got the CPU before the consumer did.
        """
        with self._cond:
            while (self._queue and self._running) or self._in_flight:
                self._cond.wait()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while (
                    not self._queue or len(self._in_flight) >= self._at_once
                ) and self._running:
                    if not self._cond.wait(timeout=IDLE_SECONDS) and not self._queue:
                        if me in self._threads:  # idle: end; restarted on the next hint
                            self._threads.remove(me)
                        return
                if not self._running:
                    return
                position = self._queue.popleft()
                self._in_flight.add(position)
                keep = self._keep
            try:
                if self._fetch(position, keep):
                    self.stats["read"] += 1
            except (Exception, KeyboardInterrupt):
                # the consumer reads it again and gets the error itself. KeyboardInterrupt:
                # DuckDB's interrupt of the read, which stop()'s poke sends (at exit, before a
                # fork): the read is dropped, not a traceback printed from this thread
                pass
            finally:
                with self._cond:
                    self._in_flight.discard(position)
                    for p in self._covers.pop(position, ()):  # written, or failed: read anew
                        self._pending.discard(p)
                    self._cond.notify_all()
