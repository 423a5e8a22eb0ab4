"""Rows of a batch held column-wise: a list of row dicts built only when rows are accessed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSequence, Sequence
from typing import Any, overload

import numpy as np
import torch

from ...common.parts import consecutive_parts
from .ragged import Ragged

Row = dict[str, Any]


class RowBatch(MutableSequence[Row]):
    """The rows ``__getitems__`` returns in the ``numpy`` and ``torch`` formats.

    A mutable sequence of row dicts (it behaves like a list and compares equal to one) that
    holds the batch column-wise: numeric columns as one array or tensor each (rows along
    the first axis), lists of numbers of unequal lengths as one :class:`~.ragged.Ragged`
    each (their values end to end). The row dicts are only built when the rows are first
    accessed, so :func:`undertale_duck.collate` turns an untouched batch into tensors without
    any per-row work; once rows are accessed, each row's numeric values are views of the
    batched ones.

    Args:
        names: Column names, in order.
        length: Number of rows.
        whole: Batched numeric columns (numpy arrays or tensors).
        values: Per-row values of the other columns (a list, or a ``Ragged``).
    """

    def __init__(
        self,
        names: list[str],
        length: int,
        whole: dict[str, Any],
        values: dict[str, list[Any] | Ragged],
    ) -> None:
        self._names = names
        self._length = length
        self._whole = whole
        self._values = values
        self._rows: list[Row] | None = None
        self._built: dict[str, list[Any]] = {}

    # -------------------------------------------------------------- columnar access
    def keys(self) -> list[str]:
        """Column names of the rows."""
        return list(self._names)

    @property
    def materialized(self) -> bool:
        """Whether the row dicts have been built (rows were accessed)."""
        return self._rows is not None

    def batched(self, key: str) -> Any | None:
        """Return column ``key`` as one array or tensor, or None if it has none.

        None also when the rows were changed since: a row's value for ``key`` is no longer
        the view of the batched column it was built as.

        Args:
            key: A column name.

        Returns:
            A numpy array or tensor with one row per row of the batch, or None.
        """
        whole = self._whole.get(key)
        if whole is None or self._rows is None:
            return whole
        built = self._built.get(key)
        if built is None or len(built) != len(self._rows):
            return None
        for row, value in zip(self._rows, built, strict=True):
            if row.get(key, None) is not value:
                return None
        return whole

    def ragged(self, key: str) -> Ragged | None:
        """Return column ``key``'s lists of unequal lengths held end to end, or None.

        None also once its rows' values were built (a row's value may have been replaced
        since): :meth:`column` then has them.

        Args:
            key: A column name.

        Returns:
            The column's :class:`~.ragged.Ragged`, or None.
        """
        column = self._values.get(key)
        if isinstance(column, Ragged) and self._rows is None and not column.built:
            return column
        return None

    def split(self, sizes: Sequence[int]) -> list[RowBatch] | None:
        """Cut the batch into consecutive batches of ``sizes`` rows each.

        Each part holds what a batch of its rows alone would hold; its batched columns are
        views of this batch's (writable, sharing no rows with another part).

        Args:
            sizes: Rows of each part, in order; they add up to the batch's length.

        Returns:
            The parts, or None once rows were accessed (they may have been changed).
        """
        if self._rows is not None or sum(sizes) != self._length:
            return None
        sizes = list(sizes)
        # a tensor is cut by one call (a view per part), where a slice each costs as much
        # as the call: about 3 us per view on these cores, several views per batch
        cuts = {
            key: column.split_with_sizes(sizes) if isinstance(column, torch.Tensor)
            else consecutive_parts(column, sizes)
            for key, column in self._whole.items()
        }
        values = {key: consecutive_parts(column, sizes) for key, column in self._values.items()}
        return [
            RowBatch(
                self._names, size,
                {key: parts[k] for key, parts in cuts.items()},
                {key: parts[k] for key, parts in values.items()},
            )
            for k, size in enumerate(sizes)
        ]

    def nbytes(self) -> int:
        """Bytes of the batch's values, roughly.

        Arrays' and tensors' buffers, strings' and bytes' lengths, 8 for any other value
        (lists and structs: their values' and 8).
        """
        total = sum(_size(column) for column in self._whole.values())
        for column in self._values.values():
            if isinstance(column, Ragged):
                total += column.nbytes()
            else:
                total += sum(_size(value) for value in column)
        return total

    def column(self, key: str) -> list[Any]:
        """Return the rows' values of column ``key`` (without building the row dicts).

        Args:
            key: A column name.

        Returns:
            One value per row.

        Raises:
            KeyError: If a row has no such column.
        """
        if self._rows is not None:
            return [row[key] for row in self._rows]
        if key in self._values:
            column = self._values[key]
            return column.rows() if isinstance(column, Ragged) else column
        return self._split(key)

    def _split(self, key: str) -> list[Any]:
        whole = self._whole[key]
        return list(whole.unbind(0)) if isinstance(whole, torch.Tensor) else list(whole)

    @property
    def rows(self) -> list[Row]:
        """The row dicts (built on first access)."""
        if self._rows is None:
            columns = []
            for key in self._names:
                if key in self._values:
                    columns.append(self.column(key))
                else:
                    self._built[key] = self._split(key)
                    columns.append(self._built[key])
            names = self._names
            rows = [dict(zip(names, vals, strict=True)) for vals in zip(*columns, strict=True)]
            self._rows = rows if columns else [{} for _ in range(self._length)]
        return self._rows

    # -------------------------------------------------------------- list behaviour
    def __len__(self) -> int:
        return self._length if self._rows is None else len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        return self.rows[index]

    @overload
    def __setitem__(self, index: int, value: Row) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Row]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        self.rows[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self.rows[index]

    def insert(self, index: int, value: Row) -> None:
        """Insert a row before ``index`` (as ``list.insert``)."""
        self.rows.insert(index, value)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowBatch):
            return self.rows == other.rows
        if isinstance(other, list):
            return self.rows == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RowBatch({self.rows!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_row_batch, (self.rows,))


def _size(value: Any) -> int:
    """Bytes of one value or batched column (see :meth:`RowBatch.nbytes`)."""
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, list | tuple):
        return 8 + sum(_size(v) for v in value)
    if isinstance(value, dict):
        return 8 + sum(_size(v) for v in value.values())
    return 8


def _row_batch(rows: list[Row]) -> list[Row]:
    return rows
