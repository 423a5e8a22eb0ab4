"""The shell's history file, read and written only where the output guard allows.

readline's own ``read_history_file``/``write_history_file`` follow symbolic links, write in
place and read whatever is there (a FIFO blocks, ``/dev/zero`` never ends). Here readline
only ever sees a private copy: the file is read with ``O_NOFOLLOW`` when it is a regular
file of sane size, and written through :class:`~undertale_duck.cli.guard.OutputFile`
(atomically, never through a link, never onto a special file, never inside the dataset or
a directory holding one of its shards).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..common.text import terminal_safe
from ..errors import ArgumentError
from .guard import OutputFile, Protected

#: Entries the shell's history keeps.
HISTORY_LENGTH = 1000

#: A history file larger than this is not read (the shell keeps 1000 lines).
MAX_HISTORY_BYTES = 8 << 20

#: How the history file is named in messages.
OPTION = "the shell history file"

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _refused(path: Path, protected: Protected) -> str | None:
    """Why the history may not live at ``path`` (inside the dataset), or None."""
    directory = path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent  # the nearest directory that exists: judge that one
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"{OPTION} {path} cannot be used: {exc.strerror}"
    try:
        inside = protected.enclosing(fd, os.fspath(directory))
    finally:
        os.close(fd)
    if inside is None:
        return None
    return (
        f"{OPTION} {path} lies inside the dataset directory {inside}; the dataset is "
        "read-only: set XDG_STATE_HOME to a directory outside it"
    )


def load(readline: Any, path: Path, protected: Protected) -> str | None:
    """Read the history into readline, if it is a regular file outside the dataset.

    Args:
        readline: The ``readline`` module.
        path: The history file.
        protected: The dataset the file must stay out of.

    Returns:
        A one-line warning when a history file exists but is not read, else None.
    """
    why = _refused(path, protected)
    if why is not None:
        return why
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{OPTION} {path} is not read: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return f"{OPTION} {path} is not a regular file; it is not read"
        if st.st_size > MAX_HISTORY_BYTES:
            return f"{OPTION} {path} is larger than {MAX_HISTORY_BYTES >> 20} MiB; not read"
        data = os.read(fd, MAX_HISTORY_BYTES + 1)
    except OSError as exc:
        return f"{OPTION} {path} is not read: {exc.strerror}"
    finally:
        os.close(fd)
    with tempfile.TemporaryDirectory(prefix="undertale-duck-") as private:
        copy = os.path.join(private, "history")
        with open(copy, "wb") as out:
            out.write(data[:MAX_HISTORY_BYTES])
        with contextlib.suppress(OSError):
            readline.read_history_file(copy)
    return None


def save(readline: Any, path: Path, protected: Protected) -> str | None:
    """Write readline's history to ``path`` through the output guard.

    Args:
        readline: The ``readline`` module.
        path: The history file (its directory is created, mode 0700, when missing).
        protected: The dataset the file must stay out of.

    Returns:
        A one-line warning when the history cannot be saved, else None.
    """
    why = _refused(path, protected)
    if why is not None:
        return why
    with tempfile.TemporaryDirectory(prefix="undertale-duck-") as private:
        copy = os.path.join(private, "history")
        try:
            readline.write_history_file(copy)
            data = Path(copy).read_bytes()
        except OSError as exc:
            return f"{OPTION} {path} is not saved: {exc.strerror}"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = OutputFile(os.fspath(path), protected=protected, force=True, option=OPTION)
        with target.open() as stream:
            os.fchmod(stream.fileno(), 0o600)  # what was typed stays private
            stream.write(data)
    except ArgumentError as exc:
        return str(exc)
    except OSError as exc:
        return f"{OPTION} {path} is not saved: {exc.strerror}"
    return None

def history_path() -> Path:
    """Return the shell's history file: under ``$XDG_STATE_HOME``, else ``~/.cache``.

    Returns:
        ``$XDG_STATE_HOME/undertale-duck/shell_history`` when that variable is set, else
        ``~/.cache/undertale-duck/shell_history``.
    """
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else Path.home() / ".cache"
    return base / "undertale-duck" / "shell_history"


@contextlib.contextmanager
def line_editing(enabled: bool, shards: list[str], source: str) -> Iterator[None]:
    """Turn on readline editing and the history file for the duration of the block.

    The history file is read and written through the output guard (cli/history.py): never
    inside the dataset, never through a link or onto a special file; a refused one is
    named in one warning line and left alone.

    Args:
        enabled: False for piped input (nothing is read or written then).
        shards: The dataset's shard paths (their directories are protected).
        source: The SOURCE argument.

    Yields:
        Nothing.
    """
    if not enabled:
        yield
        return
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows without pyreadline
        yield
        return
    path = history_path()
    protected = Protected.of(source, shards, caches=False)
    _warn(load(readline, path, protected))
    readline.set_history_length(HISTORY_LENGTH)
    try:
        yield
    finally:
        _warn(save(readline, path, protected))


def _warn(message: str | None) -> None:
    if message is not None:
        with contextlib.suppress(OSError, ValueError):
            print(f"undertale-duck: warning: {terminal_safe(message)}", file=sys.stderr,
                  flush=True)
