"""Running the command line inside the test process: its exit status, stdout and stderr."""

from __future__ import annotations

import contextlib
import io

from undertale_duck.cli import app


def invoke(*args: str) -> tuple[int, str, str]:
    """Run ``undertale-duck ARGS`` in this process; a usage error's exit counts as its status."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = app.main(list(args))
        except SystemExit as exc:
            status = int(exc.code or 0)
    return status, out.getvalue(), err.getvalue()
