"""The packing index: tokens per window from one pass over lengths, and where each block lies."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...common.arrays import numpy_of
from ...common.progress import progress_bar
from ...errors import OutOfRangeError
from ..runtime import process_cache_dir, read_cached, write_atomic
from ..source import Window
from .spec import Pack

#: Bumped whenever the meaning of a stored count changes.
PACK_INDEX_VERSION = 1
#: The cache kind the packing index is kept in (beside the views' indexes it extends).
CACHE_KIND: Final = "views"

Int64Array = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True)
class BlockRun:
    """The blocks starting in one window of the documents: a shuffle unit of the sampler.

    Attributes:
        offset: The first block's index.
        rows: How many blocks start in the window.
        window: The documents' window they start in (a position in its plan).
    """

    offset: int
    rows: int
    window: int

    @property
    def end(self) -> int:
        """One past the last block's index."""
        return self.offset + self.rows


class BlockPlan:
    """Where each block lies in the documents' windows, from the tokens of each window.

    Args:
        tokens: For each window of the documents, the length of its stream (its documents'
            tokens plus one ``eod`` per document when set).
        spec: The packing spec.
    """

    def __init__(self, tokens: Sequence[int], spec: Pack) -> None:
        counts = np.asarray(tokens, dtype=np.int64)
        self.spec = spec
        #: Stream position of each window's first token, and the total at the end.
        self.starts: Int64Array = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.total = int(self.starts[-1])
        size = spec.length
        whole, rest = divmod(self.total, size)
        #: Blocks in the dataset.
        self.blocks = whole + (1 if rest and spec.last == "pad" else 0)
        first = -(-self.starts[:-1] // size)  # first block starting at or after each window
        end = np.minimum(-(-self.starts[1:] // size), self.blocks)
        self.runs = [
            BlockRun(int(a), int(b - a), j)
            for j, (a, b) in enumerate(zip(first.tolist(), end.tolist(), strict=True))
            if b > a
        ]

    def spans(self, block: int) -> list[tuple[int, int, int]]:
        """The pieces of one block: ``(window, start, stop)`` stream positions in each window.

        Args:
            block: A block index in ``[0, blocks)``.

        Returns:
            One entry per window the block spans (windows with no tokens skipped), in order;
            their lengths add up to the block's real tokens (``length``, less at a padded end).
        """
        size = self.spec.length
        a = block * size
        b = min(a + size, self.total)
        first = int(np.searchsorted(self.starts, a, side="right")) - 1
        last = int(np.searchsorted(self.starts, b - 1, side="right")) - 1
        out = []
        for j in range(first, last + 1):
            lo, hi = int(self.starts[j]), int(self.starts[j + 1])
            if hi > lo:
                out.append((j, max(a, lo) - lo, min(b, hi) - lo))
        return out

    def first_window(self, blocks: Int64Array) -> Int64Array:
        """The window holding each block's first token."""
        return np.searchsorted(self.starts, blocks * self.spec.length, side="right") - 1


def index_key(fingerprint: str, windows: Sequence[Window], spec: Pack) -> str:
    """A stable hash of everything the tokens per window depend on.

    Args:
        fingerprint: The documents' fingerprint (query, columns, every shard's identity).
        windows: The documents' window plan.
        spec: The packing spec.

    Returns:
        A hex digest; equal keys mean equal counts.
    """
    payload = {
        "version": PACK_INDEX_VERSION,
        "data": fingerprint,
        "windows": [[w.shard, w.start, w.stop, w.rows] for w in windows],
        "spec": spec.key(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def load_tokens(key: str, windows: int, protected: list[str]) -> list[int] | None:
    """The tokens per window stored for ``key``, or None (absent, untrusted or malformed)."""
    raw = read_cached(process_cache_dir(CACHE_KIND, protected) / f"pack-{key}.json")
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    tokens = data.get("tokens")
    if not isinstance(tokens, list) or len(tokens) != windows:
        return None
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens):
        return None
    return tokens


def save_tokens(key: str, tokens: Sequence[int], protected: list[str]) -> None:
    """Store the tokens per window for ``key``, atomically."""
    record = {"key": key, "tokens": [int(t) for t in tokens]}
    directory = process_cache_dir(CACHE_KIND, protected)
    write_atomic(directory, f"pack-{key}.json", json.dumps(record).encode())


def count_tokens(
    read: Callable[[int], pa.Table],
    windows: Sequence[Window],
    spec: Pack,
    where: Callable[[int], str],
    locate: Callable[[int], tuple[str, int]],
) -> list[int]:
    """The indexing pass: the stream length of each window, checking what packing needs.

    Args:
        read: Reads one window of the documents (bypassing the cache).
        windows: The documents' window plan.
        spec: The packing spec.
        where: The shard path of a window (for errors).
        locate: The shard and local row of a document (for errors: a view's window holds
            only the rows it keeps).

    Returns:
        One count per window.

    Raises:
        OutOfRangeError: If a token is null, or an ``alongside`` list's length differs
            from its document's tokens (naming the shard and the row).
    """
    eod = 0 if spec.eod is None else 1
    counts = []
    with progress_bar("indexing blocks", unit=" windows") as progress:
        for j, window in enumerate(windows):
            table = read(j)
            lengths = list_lengths(table.column(spec.column))
            for name in spec.inputs:
                check_values(table.column(name), name, window, where(j), locate)
            for name in spec.alongside:
                other = list_lengths(table.column(name))
                bad = np.flatnonzero(other != lengths)
                if bad.size:
                    row = window.offset + int(bad[0])
                    raise OutOfRangeError(
                        f"shard {where(j)}, row {row} (local row {locate(row)[1]}): column "
                        f"{name!r} (pack.alongside) holds "
                        f"{int(other[bad[0]])} values where {spec.column!r} holds "
                        f"{int(lengths[bad[0]])} tokens; packed columns must be as long as "
                        "the tokens",
                        where(j),
                        (row, row + 1),
                        name,
                    )
            counts.append(int(lengths.sum()) + eod * table.num_rows)
            progress(str(j))
    return counts


def list_lengths(column: pa.ChunkedArray | pa.Array) -> Int64Array:
    """Each list's length, 0 for a null list."""
    lengths = pc.list_value_length(column)
    if isinstance(lengths, pa.ChunkedArray):
        lengths = lengths.combine_chunks()
    return np.asarray(numpy_of(lengths, zero_nulls=True), dtype=np.int64)


def check_values(
    column: pa.ChunkedArray,
    name: str,
    window: Window,
    path: str,
    locate: Callable[[int], tuple[str, int]],
) -> None:
    """Refuse a null token: a block has no place for it (``locate`` names its source row)."""
    for chunk, base in zip(column.chunks, _chunk_starts(column), strict=True):
        values = pc.list_flatten(chunk)
        if values.null_count:
            parents = numpy_of(pc.list_parent_indices(chunk))
            nulls = np.flatnonzero(~numpy_of(values.is_valid()))
            row = window.offset + base + int(parents[nulls[0]])
            raise OutOfRangeError(
                f"shard {os.path.basename(path)} ({path}), row {row} (local row "
                f"{locate(row)[1]}): column {name!r} holds a null token; packing needs every "
                "token to be a number (filter the rows out with where=, or fill the nulls)",
                path,
                (row, row + 1),
                name,
            )


def _chunk_starts(column: pa.ChunkedArray) -> list[int]:
    sizes = [len(c) for c in column.chunks]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() if sizes else []
