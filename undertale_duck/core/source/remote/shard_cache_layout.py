"""Where the shard cache lives, how much it may hold, and the names of the files it keeps."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ....errors import ArgumentError

#: Environment variables giving the default cache directory and byte limit.
ENV_DIR = "UNDERTALE_DUCK_CACHE"
ENV_LIMIT = "UNDERTALE_DUCK_CACHE_LIMIT"
#: The default limit's ceiling; the default is also at most 80% of the disk the cache can use.
DEFAULT_LIMIT = 64 << 30
DATA_SUFFIX = ".parquet"
LOCK_SUFFIX = ".lock"
FOOTER_SUFFIX = ".footer"
PART_MARK = ".part-"
EVICT_LOCK = ".evict.lock"

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")

#: The names of our files (a key of :func:`key_of` and a suffix): eviction, clear() and the
#: sweep of part files never touch anything else in the directory (cache_dir= may name a
#: directory that holds the user's own files).
OUR_FILES = re.compile(
    r"[0-9a-f]{40}(?:" + re.escape(FOOTER_SUFFIX) + "|" + re.escape(DATA_SUFFIX) + ")"
    + "(?:" + re.escape(PART_MARK) + r"[0-9a-f-]+)?"
)


def parse_size(value: int | str, name: str = "cache_limit") -> int:
    """Read a byte count: an integer, or text such as ``"500MB"``, ``"20GiB"``, ``"1.5TB"``.

    Raises:
        ArgumentError: If the value is not a size >= 0.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match and match.group(2).lower() in _UNITS:
            return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    raise ArgumentError(
        f"{name} must be a number of bytes >= 0 or a size such as '500MB' or '20GiB', "
        f"got {value!r}"
    )


def default_directory() -> Path:
    """The default cache directory: ``$UNDERTALE_DUCK_CACHE``, else the user's cache directory.

    That is ``$XDG_CACHE_HOME/undertale_duck/shards``, by default
    ``~/.cache/undertale_duck/shards``: one per user and node, never inside a dataset.
    """
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "undertale_duck" / "shards"


def key_of(path: str, version: str | None, size: int) -> str:
    """The cache name of one version of an object: a hash of its URL, version and size."""
    text = f"{path}\0{version or ''}\0{size}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
