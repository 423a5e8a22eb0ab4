"""Runs of consecutive rows fetched for the next several batches at once and handed out in parts."""

from __future__ import annotations

import threading
from collections.abc import MutableSequence
from typing import Any

from torch.utils.data import get_worker_info

from .row_batch import Row, RowBatch

#: The most rows and bytes one fetch serves to several small batches: past about 1,024 rows
#: cutting a group costs more per batch than its fetch saves, and past 1 MiB its copies land
#: on fresh pages (a fault per page) and outgrow the CPU's cache, costing more per row than
#: they save per batch (``benchmarks/bench_small_batches.py``, decision 0024).
GROUP_ROWS = 1024
GROUP_BYTES = 1 << 20


def group_rows(rows: Any) -> int:
    """How many rows like ``rows`` one fetch may serve to several batches (0: none).

    Args:
        rows: A batch as ``__getitems__`` returned it.

    Returns:
        Rows within :data:`GROUP_ROWS` and :data:`GROUP_BYTES` at the batch's bytes per
        row; 0 for anything but an untouched, non-empty :class:`RowBatch`.
    """
    if not isinstance(rows, RowBatch) or rows.materialized or not len(rows):
        return 0
    row_bytes = max(1, -(-rows.nbytes() // len(rows)))
    return min(GROUP_ROWS, GROUP_BYTES // row_bytes)


class RunAhead:
    """The coming batches of a sequential pass, fetched as one run and cut apart.

    A map-style dataset is asked for one batch at a time (torch's ``DataLoader``), so each
    small batch pays a fetch's fixed cost (the run check, the window lookup, a copy and a
    tensor per column). When a run of consecutive indices starts where the previous one
    ended, the next ones usually follow it: the dataset then fetches as many batches of the
    same size as fit in :func:`group_rows` in one run (inside one window), hands out the
    first and keeps the others, each served only to a request for exactly its rows. A
    request for any other rows drops what is kept (at most a group's copy was spent).

    Only in the main process: a DataLoader worker's batches travel to the main process
    through shared memory, where a view would carry its whole group along. Kept parts
    belong to the window reader that read them (the ``owner`` of each call): a reopened
    dataset (a new reader) never serves rows kept before.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[tuple[int, int, RowBatch]] = []  # (start, rows, batch), next last
        self._owner: object = None
        self._end = -1  # where the last run served ended
        self._rows = -1  # rows one fetch may serve (-1: not yet judged, from the first run)

    def take(self, owner: object, start: int, length: int) -> RowBatch | None:
        """The kept batch of rows ``start:start + length``, or None (then fetch it).

        Args:
            owner: The dataset's current window reader.
            start: The run's first global row.
            length: Its number of rows.

        Returns:
            The batch, or None when none is kept for exactly these rows.
        """
        with self._lock:
            parts = self._parts
            if not parts:
                return None
            head, size, batch = parts[-1]
            if owner is not self._owner or head != start or size != length:
                parts.clear()
                return None
            parts.pop()
            self._end = start + length
            return batch

    def rows(self, start: int, length: int, room: int) -> int:
        """How many rows to fetch for a run of ``length`` rows from ``start``.

        Args:
            start: The run's first global row.
            length: Its number of rows.
            room: Rows from ``start`` to the end of its window.

        Returns:
            ``length``, or a multiple of it (two batches or more) when the run continues
            the last one and more batches of its size fit in the window.
        """
        group = min(self._rows, room) // length
        if start != self._end or group < 2 or get_worker_info() is not None:
            return length
        return group * length

    def keep(
        self, owner: object, start: int, length: int, rows: MutableSequence[Row]
    ) -> MutableSequence[Row] | None:
        """Serve a run fetched by :meth:`rows`: its first batch, the others kept.

        Args:
            owner: The dataset's current window reader.
            start: The run's first global row.
            length: The rows asked for.
            rows: The rows fetched (``length`` or a multiple of it).

        Returns:
            The batch of the first ``length`` rows, or None if more rows were fetched and
            they cannot be cut apart (then fetch the run alone).
        """
        if self._rows < 0:
            self._rows = group_rows(rows)
        fetched = len(rows)
        parts = None
        if fetched > length and isinstance(rows, RowBatch):
            parts = rows.split([length] * (fetched // length))
        with self._lock:
            self._end = start + length
            self._parts = []
            if parts is None:
                return rows if fetched == length else None
            self._owner = owner
            self._parts = [
                (start + k * length, length, parts[k]) for k in range(len(parts) - 1, 0, -1)
            ]
        return parts[0]


__all__ = ["GROUP_BYTES", "GROUP_ROWS", "RunAhead", "group_rows"]
