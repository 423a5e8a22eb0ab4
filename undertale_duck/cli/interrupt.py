"""Ctrl-C stops a running DuckDB query at once: a watcher thread interrupts the connection."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Iterator

import duckdb


@contextlib.contextmanager
def interruptible(connection: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Make Ctrl-C (SIGINT) interrupt what runs on ``connection`` promptly.

    Python runs its signal handlers only between bytecodes of the main thread, so while the
    main thread waits inside DuckDB (a long aggregate, a selective filter that has not yet
    filled a batch) Ctrl-C would wait for the query to end. Python's C-level handler still
    writes the signal number to the wakeup file descriptor at once: a thread reading it calls
    ``connection.interrupt()``. Whatever the interrupted query then raises (DuckDB's
    ``InterruptException``, a ``RuntimeError`` "Query interrupted", or our error wrapping
    either) leaves the block as ``KeyboardInterrupt``.

    Outside the main thread, or when SIGINT is not handled by Python (ignored, or left to
    the default action), the block runs unchanged.

    Args:
        connection: The DuckDB connection (cursor) the block's queries run on.

    Yields:
        Nothing.
    """
    handler = signal.getsignal(signal.SIGINT)
    # a handler written in Python (the default one raises KeyboardInterrupt); not SIG_IGN,
    # SIG_DFL or None, with which Python never sees the signal
    usable = threading.current_thread() is threading.main_thread() and callable(handler)
    if not usable:
        yield
        return
    receiver, sender = socket.socketpair()
    sender.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - checked above: only the main thread may set it
        receiver.close()
        sender.close()
        yield
        return
    fired = threading.Event()

    def watch() -> None:
        while True:
            try:
                data = receiver.recv(64)
            except OSError:
                return
            if not data:  # the block ended: the sending end was closed
                return
            if signal.SIGINT in data:
                fired.set()
                with contextlib.suppress(duckdb.Error, RuntimeError):
                    connection.interrupt()

    watcher = threading.Thread(target=watch, name="undertale-duck-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    except Exception as exc:
        if fired.is_set() or caused_by_interrupt(exc):
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.set_wakeup_fd(previous)
        sender.close()
        watcher.join(timeout=5)
        receiver.close()


def caused_by_interrupt(exc: BaseException | None) -> bool:
    """Whether an error is, or wraps, DuckDB's report of an interrupted query.

    DuckDB checks for signals itself while a query runs and may turn the KeyboardInterrupt
    into its own error before the watcher thread has read the signal.
    """
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, duckdb.InterruptException | KeyboardInterrupt):
            return True
        if isinstance(exc, RuntimeError) and str(exc).strip() == "Query interrupted":
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
