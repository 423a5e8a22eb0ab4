"""Serving packed blocks: block ``k`` cut from the windows of a documents dataset, in a format."""

from __future__ import annotations

import os
from collections.abc import MutableSequence, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from ...common.sizes import format_size
from ...errors import ArgumentError, OutOfRangeError
from ..dataset import ShardDataset
from ..rows import Format, Row, RowBatch, TensorRangeError, index_array, to_tensor
from ..source import windows as win
from .blocks import Array, gather, stream_starts
from .plan import BlockPlan, BlockRun, count_tokens, index_key, load_tokens, save_tokens
from .spec import Pack


class PackedBlocks:
    """The blocks of a documents dataset (a plain dataset or a view) under a packing spec.

    Opening runs the indexing pass (the stream length of each of the documents' windows),
    or reads it back from the cache directory (``views/pack-<key>.json``, keyed by the
    documents' fingerprint, their window plan and the spec). A block is then cut from the
    windows it spans, read through the documents' reader (its cache and memory budget).

    Args:
        documents: The dataset whose rows are the documents.
        spec: The packing spec.

    Raises:
        ArgumentError: If the spec does not fit the documents' columns, or one block would
            not fit in a quarter of the memory budget.
        OutOfRangeError: If a token is null or an ``alongside`` list has another length.
    """

    def __init__(self, documents: ShardDataset, spec: Pack) -> None:
        schema = documents.schema
        spec.check_schema(schema)
        budget = documents.memory_bytes
        if budget and spec.block_bytes > budget // 4:
            raise ArgumentError(
                f"pack.length={spec.length}: one block of {len(spec.outputs)} columns takes "
                f"{format_size(spec.block_bytes)}, more than a quarter of memory="
                f"{format_size(budget)}; use shorter blocks or a larger memory budget"
            )
        self.documents = documents
        self.spec = spec
        self.dtypes = [
            np.dtype(schema.field(c).type.value_type.to_pandas_dtype()) for c in spec.inputs
        ]
        #: Stream starts of windows the cache holds: ``{window: (table, starts)}``.
        self._memo: dict[int, tuple[pa.Table, np.ndarray[Any, np.dtype[np.int64]]]] = {}
        self.plan = BlockPlan(self._tokens(), spec)

    def _tokens(self) -> list[int]:
        documents = self.documents
        windows = documents.windows
        shards = documents.source.shards
        protected = sorted({os.path.dirname(s.path) for s in shards})
        key = index_key(documents.fingerprint, windows, self.spec)
        tokens = load_tokens(key, len(windows), protected)
        if tokens is None:
            tokens = count_tokens(
                documents.reader.read,
                windows,
                self.spec,
                lambda j: shards[windows[j].shard].path,
                documents.locate,
            )
            save_tokens(key, tokens, protected)
        return tokens

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_memo"] = {}
        return state

    # ------------------------------------------------------------------ layout
    def __len__(self) -> int:
        return self.plan.blocks

    @property
    def runs(self) -> list[BlockRun]:
        """The blocks starting in each window (the sampler's shuffle units)."""
        return self.plan.runs

    def source_windows(self, runs: Sequence[int]) -> list[int]:
        """The documents' windows read for the given runs, in order, without repeats."""
        out: list[int] = []
        for position in runs:
            run = self.plan.runs[position]
            last = self.plan.spans(run.end - 1)[-1][0] if run.rows else run.window
            for j in range(run.window, last + 1):
                if not out or out[-1] != j:
                    out.append(j)
        return out

    def documents_of(self, block: int) -> range:
        """The row indices (in the documents) from the first to the last document in a block.

        The first and last documents with a token in the block, and every row between them
        (empty ones included; :meth:`document_rows` names only those with a token).
        """
        k = win.normalize_index(block, len(self))
        spans = self.plan.spans(k)
        (j, a, _), (last, _, b) = spans[0], spans[-1]
        first = int(np.searchsorted(self._starts(j)[1], a, side="right")) - 1
        end = int(np.searchsorted(self._starts(last)[1], b - 1, side="right")) - 1
        windows = self.documents.windows
        return range(windows[j].offset + first, windows[last].offset + end + 1)

    def document_rows(self, block: int) -> list[int]:
        """The row indices (in the documents) of every document with a token in a block.

        In stream order, one per segment of the block: entry ``i`` is the document of
        ``segment_ids == i + 1``. A document without tokens (empty, no ``eod``) has no
        segment and is not named.
        """
        k = win.normalize_index(block, len(self))
        windows = self.documents.windows
        out: list[int] = []
        for j, a, b in self.plan.spans(k):
            starts = self._starts(j)[1]
            first = int(np.searchsorted(starts, a, side="right")) - 1
            last = int(np.searchsorted(starts, b - 1, side="right")) - 1
            rows = np.arange(first, last + 1, dtype=np.int64)
            rows = rows[starts[rows + 1] > starts[rows]]
            out.extend((rows + windows[j].offset).tolist())
        return out

    # ------------------------------------------------------------------ blocks
    def block(self, index: int, fmt: Format) -> Row:
        """Block ``index`` as ``{column: value}`` in a format."""
        k = win.normalize_index(index, len(self))
        arrays = self._gather(np.asarray([k], dtype=np.int64))
        return self._row([a[0] for a in arrays], fmt)

    def blocks(self, indices: Sequence[int], fmt: Format) -> MutableSequence[Row]:
        """Many blocks, each window they span read once (in ascending order), in a format.

        A ``RowBatch`` (column-wise, ``[n, length]`` arrays) in the ``numpy``/``torch``
        formats, as the documents' ``__getitems__`` returns.
        """
        index = self._normalize(indices)
        out = self._gather(index)
        names = self.spec.outputs
        if fmt == "python":
            lists = [column.tolist() for column in out]
            return [dict(zip(names, values, strict=True)) for values in zip(*lists, strict=True)]
        whole: dict[str, Any] = dict(zip(names, out, strict=True))
        if fmt == "torch":
            whole = {name: self._tensor(name, value) for name, value in whole.items()}
        return RowBatch(list(names), len(index), whole, {})

    def _normalize(self, indices: Sequence[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Check and normalize many block indices at once (negative ones from the end)."""
        n = len(self)
        array = index_array(indices)  # a 2-d, 0-d or meta tensor: our TypeError
        if array.dtype.kind not in "iu" or not len(array):
            return np.fromiter(
                (win.normalize_index(i, n) for i in array.tolist()), dtype=np.int64,
                count=len(array),
            )
        if array.dtype.kind == "u" and int(array.max()) >= n:
            # checked before the int64 cast: 2**64 - 1 would wrap to -1, the last block
            bad = next(int(i) for i in array if i >= n)
            raise IndexError(f"block index {bad} out of range for {n} blocks")
        index = array.astype(np.int64, copy=False)
        if index.min() < -n or index.max() >= n:
            bad = next(int(i) for i in index if not -n <= i < n)
            raise IndexError(f"block index {bad} out of range for {n} blocks")
        return np.where(index < 0, index + n, index)

    def out_dtypes(self) -> list[np.dtype[Any]]:
        """The value type of each output column, in ``spec.outputs`` order."""
        extra = [np.dtype(np.int64)] * (int(self.spec.position_ids) + int(self.spec.segment_ids))
        return [self.dtypes[0], *extra, *self.dtypes[1:]]

    def _gather(self, index: np.ndarray[Any, np.dtype[np.int64]]) -> list[Array]:
        offsets = [w.offset for w in self.documents.windows]
        return gather(self.plan, index, self._starts, offsets, self.dtypes)

    def _starts(self, j: int) -> tuple[pa.Table, np.ndarray[Any, np.dtype[np.int64]]]:
        """Window ``j``'s table and its stream starts (kept while the cache keeps the window)."""
        reader = self.documents.reader
        # blocks take rows across the window: one buffer per column (a window kept in its
        # decoded batches is copied once, and the cache holds the copy)
        table = reader.joined(j, reader.window(j))
        memo = self._memo
        known = memo.get(j)
        if known is not None and known[0] is table:
            return table, known[1]
        starts = stream_starts(table, self.spec)
        cache = reader.cache
        for k in [k for k in memo if k not in cache]:  # never hold a window the cache let go
            del memo[k]
        memo[j] = (table, starts)
        return table, starts

    def _row(self, arrays: list[Array], fmt: Format) -> Row:
        names = self.spec.outputs
        if fmt == "python":
            return {name: a.tolist() for name, a in zip(names, arrays, strict=True)}
        if fmt == "numpy":
            return dict(zip(names, arrays, strict=True))
        return {name: self._tensor(name, a) for name, a in zip(names, arrays, strict=True)}

    def _tensor(self, name: str, array: Array) -> torch.Tensor:
        try:
            return to_tensor(array)
        except TensorRangeError:
            raise OutOfRangeError(
                f"column {name!r} holds unsigned 64-bit tokens of 2**63 or more, which no "
                "torch integer type holds; use format='numpy'",
                None,
                None,
                name,
            ) from None
