"""Pure window arithmetic: global index <-> (shard, local row) and row-group-aligned windows."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Bytes per row assumed when a footer records no uncompressed size for a row group.
FALLBACK_ROW_BYTES = 256

#: File bytes each window beyond one per row group must be backed by: a footer can claim
#: any row count or size, but a shard of ``n`` bytes is never cut into more than
#: ``row groups + n // SPLIT_FILE_BYTES`` windows, so planning stays bounded by the file.
SPLIT_FILE_BYTES = 8


def group_bytes(rows: int, nbytes: int) -> int:
    """Return the bytes a row group counts for: its footer size, else a per-row estimate.

    Args:
        rows: Rows in the group.
        nbytes: Uncompressed bytes the footer records (0 or less when unknown).

    Returns:
        ``nbytes`` if positive, else ``rows * FALLBACK_ROW_BYTES``.
    """
    return nbytes if nbytes > 0 else rows * FALLBACK_ROW_BYTES


def planned(groups: Sequence[tuple[int, int]], decoded: Sequence[int]) -> list[tuple[int, int]]:
    """``(rows, bytes)`` of each row group for :func:`plan`: the larger of both sizes."""
    if len(decoded) != len(groups):
        return list(groups)
    return [(rows, max(nbytes, size)) for (rows, nbytes), size in zip(groups, decoded, strict=True)]


@dataclass(frozen=True)
class Window:
    """A contiguous row range of one shard, read by one query.

    Attributes:
        shard: Index of the shard in the dataset.
        start: First local row (inclusive) in the shard.
        stop: Last local row (exclusive) in the shard.
        offset: Global index of the window's first row.
        kept: For a view (a query over the dataset), how many of the source rows
            ``[start, stop)`` the query keeps; None for a plain dataset (all of them).
    """

    shard: int
    start: int
    stop: int
    offset: int
    kept: int | None = None

    @property
    def rows(self) -> int:
        """Number of rows the window serves (the rows a view keeps, for a view)."""
        return self.stop - self.start if self.kept is None else self.kept

    @property
    def span(self) -> int:
        """Number of source rows the window covers in its shard."""
        return self.stop - self.start

    @property
    def end(self) -> int:
        """Global index one past the window's last row."""
        return self.offset + self.rows


def default_window_bytes(memory_bytes: int) -> int:
    """Choose the target window size for a cache of ``memory_bytes``.

    A window is a sixteenth of the budget, between 1 MiB and 64 MiB, so the cache holds
    many windows while each query still spans whole row groups; under a 2 MiB budget it is
    half the budget (a 1 MiB window could never be kept). Row groups stay the floor.

    Args:
        memory_bytes: The memory budget in bytes (0: nothing is cached).

    Returns:
        Target uncompressed bytes per window.
    """
    if memory_bytes <= 0:
        return 1 << 20
    return max(min(1 << 20, max(1, memory_bytes // 2)), min(64 << 20, memory_bytes // 16))


def plan(
    shards: Sequence[Sequence[tuple[int, int]]],
    target_bytes: int,
    *,
    file_bytes: Sequence[int] | None = None,
) -> list[Window]:
    """Cut every shard into windows aligned to its row groups.

    Consecutive row groups of one shard are merged while the window stays within
    ``target_bytes``; a row group larger than ``target_bytes`` is split into equal pieces.
    Empty row groups and shards produce no windows.

    Args:
        shards: For each shard, ``(rows, uncompressed bytes)`` of each row group.
        target_bytes: Target uncompressed size of a window.
        file_bytes: Each shard's file size: splitting stops once a shard has
            ``row groups + size // SPLIT_FILE_BYTES`` windows (the rest of its large row
            groups are read whole), so a footer claiming huge row counts or sizes cannot
            make the plan grow beyond what the file backs. None: no bound.

    Returns:
        Windows in global order; together they cover every row exactly once.

    Raises:
        ValueError: If ``target_bytes`` is not positive or a row count is negative.
    """
    if target_bytes <= 0:
        raise ValueError(f"target_bytes must be positive, got {target_bytes}")
    windows: list[Window] = []
    offset = 0
    for shard_index, groups in enumerate(shards):
        most = None
        if file_bytes is not None:
            most = len(groups) + max(0, file_bytes[shard_index]) // SPLIT_FILE_BYTES
        for start, stop in shard_ranges(groups, target_bytes, most):
            windows.append(Window(shard_index, start, stop, offset))
            offset += stop - start
    return windows


def shard_ranges(
    groups: Sequence[tuple[int, int]], target_bytes: int, most: int | None = None
) -> list[tuple[int, int]]:
    """Cut one shard's row groups into local ``(start, stop)`` row ranges.

    Args:
        groups: ``(rows, uncompressed bytes)`` of each row group.
        target_bytes: Target uncompressed size of a range.
        most: Most ranges to return, at least one per row group (None: no bound); large
            row groups are split only while the bound allows.

    Returns:
        Non-empty ranges in order, covering every row of the shard once.

    Raises:
        ValueError: If a row count is negative.
    """
    ranges: list[tuple[int, int]] = []
    local = 0  # first row of the current row group
    start = 0  # first row of the range being accumulated
    pending = 0  # bytes accumulated since ``start``
    spare = None if most is None else max(0, most - len(groups))  # splits still allowed
    for rows, nbytes in groups:
        if rows < 0:
            raise ValueError(f"negative row count {rows} in a row group")
        if rows == 0:
            continue
        size = group_bytes(rows, nbytes)
        if size > target_bytes or pending + size > target_bytes:
            if local > start:
                ranges.append((start, local))
            start, pending = local, 0
        if size > target_bytes:
            pieces = min(rows, math.ceil(size / target_bytes))
            if spare is not None:
                pieces = max(1, min(pieces, spare + 1))
                spare -= pieces - 1
            for p in range(pieces):
                ranges.append((local + rows * p // pieces, local + rows * (p + 1) // pieces))
            start = local + rows
        else:
            pending += size
        local += rows
    if local > start:
        ranges.append((start, local))
    return ranges


def touched_bytes(window: Window, groups: Sequence[tuple[int, int]]) -> int:
    """Return the footer bytes of the row groups a window overlaps (what a read must decode).

    DuckDB reads and decodes a window's row groups from their first page, so a window inside
    a large row group costs that whole group's encoded size, not only its own rows.

    Args:
        window: A window of the shard described by ``groups``.
        groups: ``(rows, uncompressed bytes)`` of each row group of that shard.

    Returns:
        Sum of the (uncompressed, still encoded) sizes of the overlapped row groups; a group
        without a recorded size counts ``FALLBACK_ROW_BYTES`` per row.
    """
    total = 0
    local = 0
    for rows, nbytes in groups:
        if local >= window.stop:
            break
        if rows > 0 and local + rows > window.start:
            total += group_bytes(rows, nbytes)
        local += rows
    return total


def max_touched_bytes(
    windows: Sequence[Window], shards: Sequence[Sequence[tuple[int, int]]]
) -> int:
    """Return the largest :func:`touched_bytes` over a plan, in ``O(W log G)``.

    Args:
        windows: The window plan.
        shards: For each shard, ``(rows, uncompressed bytes)`` of each row group.

    Returns:
        The most encoded bytes any one window's read decodes (0 for no windows).
    """
    prefix: dict[int, tuple[list[int], list[int]]] = {}
    best = 0
    for w in windows:
        if w.shard not in prefix:
            ends, sizes, local, total = [], [0], 0, 0
            for rows, nbytes in shards[w.shard]:
                local += max(rows, 0)
                if rows > 0:
                    total += group_bytes(rows, nbytes)
                ends.append(local)
                sizes.append(total)
            prefix[w.shard] = (ends, sizes)
        ends, sizes = prefix[w.shard]
        first = bisect.bisect_right(ends, w.start)  # first group ending after ``start``
        last = bisect.bisect_left(ends, w.stop)  # group holding row ``stop - 1``
        best = max(best, sizes[min(last, len(ends) - 1) + 1] - sizes[first])
    return best


def read_reserve(window_rows: int, row_bytes: float, touched: int, overhead: int) -> int:
    """Return the transient memory one window read needs beside the window it produces.

    Measured (DuckDB 2.0.1, see DESIGN.md): a read holds the row groups it decodes (their
    compressed pages and the decompressed ones: counted as twice their encoded size from the
    footer) and, while DuckDB builds the Arrow result, its vectors and batches besides the
    window the cache then counts (counted as twice the window; room for the window itself
    is made separately).

    Args:
        window_rows: Rows in the window.
        row_bytes: Arrow bytes per row (measured on windows read so far, or estimated).
        touched: Encoded bytes of the row groups the window overlaps (:func:`touched_bytes`).
        overhead: Fixed bytes per read (DuckDB's vectors and per-query state).

    Returns:
        ``2 * window_rows * row_bytes + 2 * touched + overhead``: bytes to keep free for the
        read, on top of the cached windows.
    """
    return int(2 * window_rows * row_bytes) + 2 * touched + overhead


def starts(windows: Sequence[Window]) -> list[int]:
    """Return the global start index of each window, for :func:`locate`.

    Args:
        windows: Windows in global order.

    Returns:
        ``[w.offset for w in windows]``.
    """
    return [w.offset for w in windows]


def locate(window_starts: Sequence[int], index: int) -> int:
    """Return the position of the window holding a global row index.

    Args:
        window_starts: Global start of each window, ascending (from :func:`starts`).
        index: A global row index, already known to be in range.

    Returns:
        The window's position in the plan.
    """
    return bisect.bisect_right(window_starts, index) - 1


#: How numpy and torch name a boolean dtype (a bool is never an index).
_BOOLS = frozenset({"bool", "torch.bool"})


def normalize_index(
    index: object, length: int, *, noun: str = "dataset", valid_range: bool = False
) -> int:
    """Turn a user's index into a non-negative in-range integer, as Python sequences do.

    Args:
        index: Any integer-like value (``int``, numpy integer, 0-d integer tensor).
        length: Length of the sequence.
        noun: What is indexed, as the errors name it (``"dataset"``, ``"mixture"``).
        valid_range: Whether an out-of-range error also names the valid range.

    Returns:
        The index in ``[0, length)``.

    Raises:
        TypeError: If ``index`` is not an integer.
        IndexError: If ``index`` is out of range.
    """
    try:
        if isinstance(index, bool) or not hasattr(index, "__index__"):
            raise TypeError
        # torch gives __index__ to a bool tensor and to any one-element tensor ([7],
        # [[7]]): only a 0-d integer is an index, as for numpy
        if tuple(getattr(index, "shape", ())) or str(getattr(index, "dtype", "")) in _BOOLS:
            raise TypeError
        # an array or a float tensor has __index__ too, and raises numpy's or torch's error
        i = int(index.__index__())
    except (TypeError, RuntimeError):  # torch: a float or a meta tensor (no value)
        shape = getattr(index, "shape", None)
        kind = type(index).__name__
        if shape is not None:
            kind += f" of shape {tuple(shape)}, dtype {getattr(index, 'dtype', '?')}"
            if getattr(getattr(index, "device", None), "type", "") == "meta":
                kind += " on the meta device (no values)"
        raise TypeError(f"{noun} indices must be integers, not {kind}") from None
    if i < 0:
        i += length
    if not 0 <= i < length:
        valid = f" (valid: {-length} to {length - 1})" if valid_range else ""
        raise IndexError(f"{noun} index {index} out of range for {length} rows{valid}")
    return i


def view_plan(windows: Sequence[Window], kept: Sequence[int]) -> list[Window]:
    """Turn a dataset's window plan into a view's: each window serves the rows it keeps.

    Windows keeping no row are dropped, so every window of a view serves at least one row
    and global indices stay dense.

    Args:
        windows: The dataset's windows (``kept`` None).
        kept: For each window, how many of its source rows the view keeps.

    Returns:
        The view's windows, with ``offset`` counting only kept rows.

    Raises:
        ValueError: If the lengths differ or a count is outside ``[0, window rows]``.
    """
    if len(windows) != len(kept):
        raise ValueError(f"{len(kept)} counts for {len(windows)} windows")
    out: list[Window] = []
    offset = 0
    for w, n in zip(windows, kept, strict=True):
        if not 0 <= n <= w.span:
            raise ValueError(f"window {w} cannot keep {n} rows")
        if n:
            out.append(Window(w.shard, w.start, w.stop, offset, n))
            offset += n
    return out


def window_row_groups(
    row_groups: Sequence[tuple[int, int]], window: Window
) -> tuple[list[int], int]:
    """Return the row groups a window overlaps and the window's first row inside them.

    Args:
        row_groups: ``(rows, bytes)`` of each row group of the window's shard.
        window: A window of that shard.

    Returns:
        ``(row group indices, offset of window.start from the first group's first row)``;
        groups without rows are left out.
    """
    ends = list(itertools.accumulate(rows for rows, _ in row_groups))
    first = bisect.bisect_right(ends, window.start)
    last = bisect.bisect_left(ends, window.stop)
    start = ends[first - 1] if first else 0
    groups = [g for g in range(first, min(last, len(ends) - 1) + 1) if row_groups[g][0]]
    return groups, window.start - start
