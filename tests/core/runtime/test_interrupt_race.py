"""Ctrl-C and exit stop DuckDB work even when the interrupt comes before its query begins.

DuckDB drops an interrupt that finds no query running. Work that begins a query just after
the interrupt (a helper thread scheduled late on a loaded machine, or the next query of a
read) used to run to its end: a Ctrl-C then waited for a query of hours
(``tests/cli/test_cli_interrupt.py`` timed out in CI). Each case runs in a fresh process
whose query would take hours uninterrupted; the process must end well within the timeout.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: A query DuckDB takes hours over on these machines (it stops only when interrupted).
ENDLESS = "SELECT sum(hash(i)) FROM range(1000000000000) t(i)"

#: Seconds the process is given: without the fix it runs for hours.
TIMEOUT = 120


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, timeout=TIMEOUT,
    )


def test_ctrl_c_before_the_helper_begins_its_query_stops_it() -> None:
    done = _run(f"""
        import os, signal, threading, time
        import duckdb
        from undertale_duck.core.runtime.interrupt import interruptible

        delivered = threading.Event()

        def on_sigint(signum, frame):
            delivered.set()
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, on_sigint)
        con = duckdb.connect()

        def work():
            delivered.wait()  # the query begins only after Ctrl-C was handled
            time.sleep(1.0)
            return con.sql({ENDLESS!r}).fetchall()

        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            interruptible(con, work)
        except KeyboardInterrupt:
            print("interrupted")
        else:
            print("finished")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["interrupted"]


def test_exit_stops_a_read_ahead_query_begun_after_the_first_interrupt() -> None:
    done = _run(f"""
        import threading, time
        import duckdb
        from undertale_duck.core.read.readahead import ReadAhead
        from undertale_duck.core.runtime import lifecycle
        from undertale_duck.core.runtime.interrupt import interruptible

        con = duckdb.connect()
        started = threading.Event()
        outcome = []

        def fetch(position, keep):
            started.set()
            time.sleep(1.0)  # shutdown's first interrupt comes now, before the query
            try:
                interruptible(con, lambda: con.sql({ENDLESS!r}).fetchall())
                outcome.append("finished")
            except duckdb.InterruptException:
                outcome.append("interrupted")
            return True

        ahead = ReadAhead(fetch, depth=1)
        ahead.schedule([0], None)
        started.wait()
        lifecycle.shutdown()  # interrupts the reads in flight and waits for them
        print(*outcome)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["interrupted"]
