"""Which source rows a view keeps: one bit per source row, written by the indexing pass."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..runtime import open_cached


@dataclass(frozen=True)
class KeptRows:
    """The rows a view keeps, as a bitmap file in the views cache (one bit per source row).

    Serving a window then reads only these rows, through the query without its filter, so
    the columns only the filter needs are never read. The file is mapped lazily in each
    process and checked against its digest first; a missing or damaged file makes
    :meth:`rows` return None and the window is read through the whole query instead.

    Attributes:
        path: The bitmap file.
        offsets: Byte offset of each shard's bitmap in the file.
        size: The file's size in bytes.
        digest: sha256 of the file.
    """

    path: str
    offsets: tuple[int, ...]
    size: int
    digest: str

    def rows(self, shard: int, start: int, stop: int) -> np.ndarray | None:
        """Local row numbers the view keeps in rows ``[start, stop)`` of shard ``shard``.

        Returns:
            The sorted row numbers (int64), or None when the bitmap file is unusable.
        """
        bits = _mapped(self)
        if bits is None or not 0 <= shard < len(self.offsets) or not 0 <= start <= stop:
            return None
        lo, hi = start // 8, (stop + 7) // 8
        base = self.offsets[shard]
        limit = self.offsets[shard + 1] if shard + 1 < len(self.offsets) else self.size
        if base + hi > limit:
            return None
        flags = np.unpackbits(bits[base + lo : base + hi])[start - 8 * lo : stop - 8 * lo]
        return np.flatnonzero(flags).astype(np.int64) + start

    def to_json(self) -> dict[str, Any]:
        """What the view's index records of the bitmap (its file name, not its directory)."""
        return {
            "file": os.path.basename(self.path),
            "offsets": list(self.offsets),
            "size": self.size,
            "sha256": self.digest,
        }

    @staticmethod
    def from_json(directory: Path, data: object) -> KeptRows | None:
        """The bitmap an index records, or None when the record is malformed."""
        if not isinstance(data, Mapping):
            return None
        name, offsets = data.get("file"), data.get("offsets")
        size, digest = data.get("size"), data.get("sha256")
        if not (isinstance(name, str) and name and os.sep not in name and name[0] != "."):
            return None
        if not (isinstance(offsets, list) and all(isinstance(o, int) for o in offsets)):
            return None
        if not isinstance(size, int) or not isinstance(digest, str):
            return None
        return KeptRows(str(directory / name), tuple(offsets), size, digest)


class BitmapWriter:
    """Write the bitmaps of a view's shards, one after another, into an open file."""

    def __init__(self, out: BinaryIO, path: Path) -> None:
        self._out = out
        self._path = path
        self._hash = hashlib.sha256()
        self._offsets: list[int] = []
        self._size = 0
        #: Why the file could not be written (a full disk), or None.
        self.failed: OSError | None = None

    def add(self, kept: np.ndarray) -> None:
        """Append one shard's bitmap (``kept``: one bool per source row, in row order).

        A write that fails (a full disk) is remembered in :attr:`failed`, not raised: the
        indexing pass goes on, and the view is then served without the bitmap.
        """
        data = np.packbits(kept.astype(bool, copy=False)).tobytes()
        self._offsets.append(self._size)
        if self.failed is None:
            try:
                self._out.write(data)
            except OSError as exc:
                self.failed = exc
        self._hash.update(data)
        self._size += len(data)

    def finish(self) -> KeptRows | None:
        """The :class:`KeptRows` for what was written (published by the caller), or None."""
        if self.failed is not None:
            return None
        return KeptRows(str(self._path), tuple(self._offsets), self._size, self._hash.hexdigest())


_lock = threading.Lock()
_maps: dict[tuple[str, str], tuple[tuple[int, int, int, int], np.ndarray | None]] = {}


def _mapped(kept: KeptRows) -> np.ndarray | None:
    # a file changed in place (never by us: we publish by rename) is checked again, since a
    # mapping would show its new bits; by its ctime too, which putting the mtime back changes
    try:
        st = os.stat(kept.path)
    except OSError:
        return None
    identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    key = (kept.path, kept.digest)
    with _lock:
        known = _maps.get(key)
        if known is None or known[0] != identity:
            known = (identity, _open(kept))
            _maps[key] = known
        return known[1]


def _open(kept: KeptRows) -> np.ndarray | None:
    fd = open_cached(kept.path)  # never a FIFO, a link or a file planted by someone else
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size != kept.size:
                return None
            if kept.size == 0:
                return np.zeros(0, dtype=np.uint8) if kept.digest == _EMPTY else None
            # hash what is mapped, so the bits checked are the bits served
            bits = np.memmap(f, dtype=np.uint8, mode="r", shape=(kept.size,))
    except (OSError, ValueError):
        return None
    if hashlib.sha256(bits.data).hexdigest() != kept.digest:
        return None
    return bits


_EMPTY = hashlib.sha256(b"").hexdigest()


__all__ = ["BitmapWriter", "KeptRows"]
