"""Where the disk tier's window files go (private, outside the dataset), and each window's key."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from ..runtime import CACHE_ENV, CacheUnwritableError, kind_directory, private_directory
from ..source import Source, Window, is_remote

#: Bumped whenever what a window file holds changes, so older files are never read.
FILE_VERSION = 1


def default_directory() -> Path:
    """Return where window files go by default: the ``windows`` folder of the cache root.

    ``$UNDERTALE_DUCK_CACHE/windows`` if that variable is set, else
    ``$XDG_CACHE_HOME/undertale_duck/windows``, else ``~/.cache/undertale_duck/windows``
    (see :func:`cachedir.cache_root`).

    Returns:
        The directory (not created).
    """
    return kind_directory("windows")


def prepare_directory(
    directory: str | os.PathLike[str] | None, shards: Sequence[str]
) -> str | None:
    """Check and create a disk-tier directory; return its real path.

    Window files must never become part of a dataset (a directory source would list them)
    nor sit among the user's files, and no one else may plant files at their (predictable)
    names: the directory passes :func:`cachedir.private_directory` (not a shard's directory,
    inside one or containing one; owned by us and writable by no one else).

    Args:
        directory: The disk tier's directory; None for :func:`default_directory`, which,
            when it cannot be created or written, turns the disk tier off with a warning.
        shards: The dataset's shard paths.

    Returns:
        The directory's absolute real path, or None (the disk tier is off).

    Raises:
        ArgumentError: If the directory overlaps a shard's directory, is not private or
            (when given) cannot be created.
    """
    homes = sorted({os.path.dirname(os.path.realpath(s)) for s in shards if not is_remote(s)})
    hint = f"choose a directory of your own outside the dataset (or set ${CACHE_ENV})"
    try:
        real = private_directory(directory or default_directory(), homes, what="disk_dir",
                                 hint=hint)
    except CacheUnwritableError as exc:
        if directory is not None:
            raise
        warnings.warn(f"{exc}; the disk tier is off", RuntimeWarning, stacklevel=3)
        return None
    return str(real)


def window_keys(
    source: Source, windows: Sequence[Window], schema: pa.Schema, view: object = None
) -> list[str]:
    """Return the file key of each window: a hash of what its rows depend on.

    The shard's path, size, modification time and inode (so a changed or replaced shard
    gets new keys and its old files are never read), the window's rows, the columns and
    their Arrow types, and for a view its query and side tables.

    Args:
        source: The dataset's shards.
        windows: The window plan.
        schema: The schema of a row.
        view: What else defines the rows (a view's query and side-table fingerprints),
            as JSON-serialisable data.

    Returns:
        One 64-hex-digit key per window.
    """
    columns = [[f.name, str(f.type)] for f in schema]
    keys = []
    for w in windows:
        shard = source.shards[w.shard]
        text = json.dumps([FILE_VERSION, shard.path, shard.size, shard.mtime_ns,
                           list(shard.inode), w.start, w.stop, w.rows, columns, view])
        keys.append(hashlib.sha256(text.encode()).hexdigest())
    return keys
