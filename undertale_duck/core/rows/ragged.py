"""A batch's lists of numbers of unequal lengths, held end to end until a row is asked for."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import torch


class Ragged(Sequence[Any]):
    """One column's per-row 1-d arrays (or tensors), held as one flat buffer and offsets.

    What a :class:`~.row_batch.RowBatch` keeps for a list column whose rows differ in
    length: :func:`undertale_duck.collate` pads it from :attr:`flat` and :attr:`lengths` in
    one step, and the per-row values (views of :attr:`flat`, as ``torch.split`` and
    ``np.split`` make them) are built only when a row is asked for.

    Args:
        flat: The rows' values end to end: a 1-d numpy array or tensor the batch owns.
        offsets: Row ``k`` is ``flat[offsets[k]:offsets[k + 1]]``; int64, from 0.
    """

    __slots__ = ("_rows", "flat", "offsets")

    def __init__(self, flat: Any, offsets: np.ndarray[Any, np.dtype[np.int64]]) -> None:
        self.flat = flat
        self.offsets = offsets
        self._rows: list[Any] | None = None

    @property
    def lengths(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Values in each row."""
        return np.diff(self.offsets)

    @property
    def built(self) -> bool:
        """Whether the per-row values were built (a caller may have replaced one since)."""
        return self._rows is not None

    def rows(self) -> list[Any]:
        """The per-row values (views of :attr:`flat`), built once; the same list each call."""
        if self._rows is None:
            if isinstance(self.flat, torch.Tensor):
                self._rows = list(torch.split(self.flat, self.lengths.tolist()))
            else:
                self._rows = list(np.split(self.flat, self.offsets[1:-1]))
        return self._rows

    def nbytes(self) -> int:
        """Bytes of the values (what the per-row arrays' buffers add up to)."""
        flat = self.flat
        if isinstance(flat, torch.Tensor):
            return int(flat.element_size() * flat.nelement())
        return int(flat.nbytes)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if not isinstance(index, slice):
            return self.rows()[index]
        start, stop, step = index.indices(len(self))
        if step != 1 or self._rows is not None:
            return self.rows()[index]
        # consecutive rows (a group of batches cut apart): a view of their values, unsplit;
        # an empty slice is an empty Ragged (building the rows for it would mark them built)
        stop = max(start, stop)
        first = int(self.offsets[start])
        return Ragged(self.flat[first:int(self.offsets[stop])],
                      self.offsets[start:stop + 1] - first)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows())

    def __repr__(self) -> str:
        return f"Ragged({self.rows()!r})"


__all__ = ["Ragged"]
