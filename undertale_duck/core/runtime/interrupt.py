"""Run DuckDB work so that Ctrl-C interrupts it at once, from the main thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import duckdb

T = TypeVar("T")

#: Seconds between the interrupts sent to DuckDB work after Ctrl-C, until it stops.
INTERRUPT_EVERY = 0.1

#: DuckDB connections running work in other threads (read-ahead), interrupted at exit.
_BACKGROUND: set[duckdb.DuckDBPyConnection] = set()
#: Cancels of the store requests other threads await (see :func:`cancelled_at_exit`).
_CANCELS: set[Callable[[], object]] = set()
_BACKGROUND_LOCK = threading.Lock()
#: Set by :func:`interrupt_background`: the process is exiting.
_EXITING = threading.Event()


def interrupt_background() -> None:
    """Stop the work other threads are running (at exit: it is then dropped).

    Their DuckDB work is interrupted and their store requests cancelled (from then on, new
    ones are cancelled as they begin). A read-ahead thread in the middle of a long window
    read or download would otherwise keep the process from exiting, after an error or
    Ctrl-C too, until that read ends (the exit hook waits for it): a download that fails
    and is retried can take minutes.
    """
    _EXITING.set()
    with _BACKGROUND_LOCK:
        running = list(_BACKGROUND)
        cancels = list(_CANCELS)
    for cursor in running:
        with contextlib.suppress(duckdb.Error, RuntimeError):
            cursor.interrupt()
    for cancel in cancels:
        cancel()


def exiting() -> bool:
    """Whether :func:`interrupt_background` ran: work on other threads is being stopped."""
    return _EXITING.is_set()


def sleep_unless_exiting(seconds: float) -> bool:
    """Sleep ``seconds`` (a retry's backoff) unless the process begins to exit; True if so."""
    return _EXITING.wait(seconds)


@contextlib.contextmanager
def cancelled_at_exit(cancel: Callable[[], object]) -> Iterator[None]:
    """Have :func:`interrupt_background` call ``cancel`` while the block runs.

    For a thread other than the main one awaiting a store request: ``cancel`` (a future's
    ``cancel``) ends the wait. Called at once if the exit has already begun.

    Args:
        cancel: Cancels the request; it must not block.
    """
    with _BACKGROUND_LOCK:
        _CANCELS.add(cancel)
    try:
        if _EXITING.is_set():
            cancel()
        yield
    finally:
        with _BACKGROUND_LOCK:
            _CANCELS.discard(cancel)


def interruptible(cursor: duckdb.DuckDBPyConnection, work: Callable[[], T]) -> T:
    """Run DuckDB work so that Ctrl-C stops it at once.

    DuckDB checks for Ctrl-C only now and then (an aggregate over many rows can ignore it for
    minutes), so in the main thread the work runs in a helper thread while the main thread
    waits; on ``KeyboardInterrupt`` the cursor's queries are interrupted until the helper
    ends (a query it starts after the first interrupt is stopped too), and
    ``KeyboardInterrupt`` is raised again. Other threads run the work directly,
    registered for :func:`interrupt_background`.

    Args:
        cursor: The DuckDB connection ``work`` uses (the one to interrupt).
        work: What to run.

    Returns:
        What ``work`` returns.

    Raises:
        KeyboardInterrupt: If Ctrl-C was pressed (the query is stopped first).
    """
    if threading.current_thread() is not threading.main_thread():
        with _BACKGROUND_LOCK:
            _BACKGROUND.add(cursor)
        try:
            return work()
        finally:
            with _BACKGROUND_LOCK:
                _BACKGROUND.discard(cursor)
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    helper = threading.Thread(target=run, name="undertale-duck-query", daemon=True)
    helper.start()
    try:
        while not done.wait(0.25):
            pass
    except KeyboardInterrupt:
        # Interrupted again at every wait until the work ends: DuckDB drops an interrupt
        # that finds no query running, so one sent before the helper began its query (a
        # loaded machine) or between two of its queries would let the next run to its end
        while not done.is_set():
            with contextlib.suppress(duckdb.Error):
                cursor.interrupt()
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: still stopping
                done.wait(INTERRUPT_EVERY)
        raise KeyboardInterrupt from None
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
