"""Where the shard cache lives, how much it may hold, and the names of the files it keeps."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ...runtime import kind_directory

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

#: The names of our files (a key of :func:`key_of` and a suffix): eviction, clear() and the
#: sweep of part files never touch anything else in the directory (cache_dir= may name a
#: directory that holds the user's own files).
OUR_FILES = re.compile(
    r"[0-9a-f]{40}(?:" + re.escape(FOOTER_SUFFIX) + "|" + re.escape(DATA_SUFFIX) + ")"
    + "(?:" + re.escape(PART_MARK) + r"[0-9a-f-]+)?"
)


def default_directory() -> Path:
    """The shard cache's default directory: the ``shards`` folder of the cache root.

    ``$UNDERTALE_DUCK_CACHE/shards``, else the user's cache directory's (by default
    ``~/.cache/undertale_duck/shards``): one per user and node, never inside a dataset
    (:func:`undertale_duck.core.runtime.kind_directory`).
    """
    return kind_directory("shards")


def key_of(path: str, version: str | None, size: int) -> str:
    """The cache name of one version of an object: a hash of its URL, version and size."""
    text = f"{path}\0{version or ''}\0{size}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
