"""Collate dataset rows into a batch: stack fixed-length lists, pad ragged ones with a mask."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from ..common.numbers import is_number
from ..common.parts import consecutive_parts
from ..core.rows import Ragged, RowBatch, TensorRangeError, to_tensor
from ..errors import ArgumentError, OutOfRangeError
from .one_block import one_block as to_one_block

_NUMBER = (bool, int, float, np.bool_, np.integer, np.floating)

#: Suffix of the mask key added next to a padded column.
MASK_SUFFIX = "_mask"


def collate(
    rows: Sequence[Mapping[str, Any]],
    *,
    padding_value: float = 0,
    mask_suffix: str = MASK_SUFFIX,
    schema: pa.Schema | None = None,
    one_block: bool = True,
) -> dict[str, Any]:
    """Turn a list of rows (``{column: value}``) into one batch ``{column: tensor or list}``.

    Works on rows of every ``format`` of :class:`~undertale_duck.ParquetDataset`:

    - numbers (Python, numpy or 0-d tensors) become a 1-d tensor (Python floats as float64,
      ints as int64, as torch's ``default_collate`` makes them);
    - lists, numpy arrays or tensors of numbers of one length become a stacked tensor
      ``[batch, length, ...]``;
    - lists, arrays or 1-d tensors of numbers of different lengths are padded at the end
      with ``padding_value`` to ``[batch, longest]``, and a boolean tensor
      ``{column}{mask_suffix}`` (True on real values) is added; nested lists are stacked
      only where every level has one length, else kept as lists;
    - nested mappings (structs) are collated recursively;
    - rows from ``ParquetDataset(format="numpy" | "torch")`` (a ``RowBatch``) already carry
      their numeric columns batched: those are returned without stacking again;
    - everything else (strings, bytes, dates, lists of strings, values with ``None``) is kept
      as a Python list of the rows' values.

    A batch whose lists are all empty is a ``[batch, 0]`` tensor of the dtype the values
    would have: rows of the ``numpy``/``torch`` formats carry it; Python rows (the default
    ``format="python"``) do not, so pass ``schema=dataset.schema`` for an integer (int64)
    or boolean tensor there: without it such a batch is float64, as ``torch.tensor([[]])``.

    In a ``DataLoader`` worker the batch's tensors are placed in one shared-memory block
    (:func:`~undertale_duck.one_block`), so torch passes the main process one block per
    batch instead of one per tensor: a tensor kept after its batch then keeps the whole
    block alive (``.clone()`` what you keep), or pass ``one_block=False``.

    Use ``functools.partial(collate, padding_value=-1)`` to change the options in a
    ``DataLoader``.

    Args:
        rows: The rows of a batch; all must have the same keys.
        padding_value: Value used to pad ragged lists.
        mask_suffix: Suffix of the mask key added for each padded column.
        schema: The rows' Arrow schema (``dataset.schema``), for the dtype of columns whose
            lists are all empty in a batch of Python rows.
        one_block: In a DataLoader worker, place the batch's tensors in one shared-memory
            block (no effect elsewhere).

    Returns:
        The batch, with the rows' keys in order (each mask right after its column).

    Raises:
        ArgumentError: If the rows' keys differ, a mask key would overwrite a column,
            ``padding_value`` is not a number (a bool is not: pad a boolean column with 0),
            or does not fit a padded column's dtype (-1 for uint8, 0.5 for integers: torch
            would wrap or truncate it).
        OutOfRangeError: If a column holds numpy or Arrow uint64 values of 2**63 or more
            (Python ints beyond int64 stay a list, exact).
    """
    # the defaults (every batch of a loop) skip the checks' isinstance calls
    if type(padding_value) is not int or type(mask_suffix) is not str or not mask_suffix or (
        one_block is not True and one_block is not False
    ):
        _check_options(padding_value, mask_suffix, one_block)
    types = _types_of(schema)
    if type(rows) is not RowBatch and (
        isinstance(rows, Mapping) or not isinstance(rows, Sequence) or isinstance(rows, str)
    ):
        raise ArgumentError(
            f"collate takes a list of rows, got {type(rows).__name__}: a DataLoader with "
            "batch_size=None hands its collate_fn one row at a time; give it a batch_size"
        )
    if not rows:
        return {}
    columnar = rows if isinstance(rows, RowBatch) else None
    if columnar is not None and not columnar.materialized:
        keys = columnar.keys()
    else:
        for k, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise ArgumentError(
                    f"collate: row {k} is {type(row).__name__}, not a mapping of column to "
                    "value; collate takes the rows of a ParquetDataset"
                )
        first = rows[0].keys()
        for k, row in enumerate(rows):
            if row.keys() != first:
                raise ArgumentError(
                    f"collate: row {k} has keys {sorted(row)} but row 0 has {sorted(first)}; "
                    "every row of a batch needs the same columns"
                )
        keys = list(first)
    out: dict[str, Any] = {}
    for key in keys:
        try:
            whole = columnar.batched(key) if columnar is not None else None
            if whole is not None:
                out[key] = whole if isinstance(whole, torch.Tensor) else _from_numpy(whole)
                continue
            ragged = columnar.ragged(key) if columnar is not None else None
            if ragged is not None:
                batch, mask = _ragged(ragged, padding_value)
            else:
                batch, mask = _column(
                    columnar.column(key) if columnar is not None else [row[key] for row in rows],
                    padding_value,
                    mask_suffix,
                    types.get(key),
                )
        except TensorRangeError:
            raise OutOfRangeError(
                f"collate: column {key!r} holds unsigned 64-bit integers of 2**63 or more, "
                "which no torch integer type holds (they would wrap to negative numbers)"
            ) from None
        except _PaddingError as exc:
            raise ArgumentError(
                f"collate: padding_value {padding_value!r} does not fit column {key!r}, whose "
                f"values are {exc.dtype}: padding with it would change it; pass a padding "
                "value that type holds (for example 0), or convert the column in a transform"
            ) from None
        out[key] = batch
        if mask is not None:
            mask_key = f"{key}{mask_suffix}"
            if mask_key in keys:
                raise ArgumentError(
                    f"collate: column {key!r} is ragged and needs a padding mask, but its mask "
                    f"key {mask_key!r} is already a column; pass another mask_suffix"
                )
            out[mask_key] = mask
    return to_one_block(out) if one_block else out


def split_batch(
    batch: Mapping[str, Any], rows: RowBatch, sizes: Sequence[int]
) -> list[dict[str, Any]] | None:
    """Cut :func:`collate`'s batch of ``rows`` into the batches it makes of their parts.

    The parts are consecutive runs of ``sizes`` rows. Each batch is what ``collate`` returns
    for its part alone, as long as no column's value depends on which rows share a batch:
    every column is one of ``rows``' batched columns (its tensor is cut into views) or a
    list whose every part starts with a string, bytes or None (``collate`` keeps such a
    part's values as a list whatever follows; cut into slices). Anything else (padded
    lists, Python numbers, structs) returns None: collate each part alone then.

    Args:
        batch: ``collate(rows)`` (with any of its options).
        rows: The rows ``batch`` was collated from, unchanged since.
        sizes: Rows of each part (at least one), in order; they add up to ``len(rows)``.

    Returns:
        One batch per part, or None.
    """
    sizes = list(sizes)
    if rows.materialized or list(batch) != rows.keys() or sum(sizes) != len(rows) or (
        not sizes or 0 in sizes
    ):
        return None  # a padding mask was added, rows were touched, or an empty part
    cuts: list[tuple[str, Sequence[Any]]] = []
    for key, value in batch.items():
        if type(value) is torch.Tensor and rows.batched(key) is not None:
            # one call cuts every part (a view each): a slice per part costs as much as it
            cuts.append((key, value.split_with_sizes(sizes)))
            continue
        parts = consecutive_parts(value, sizes) if type(value) is list else None
        if parts is None or not all(type(part[0]) in _KEPT for part in parts):
            return None
        cuts.append((key, parts))
    return [{key: parts[k] for key, parts in cuts} for k in range(len(sizes))]


#: Types of a first value that make ``_column`` keep a batch's values as a list, whatever
#: the other values are.
_KEPT = frozenset((str, bytes, type(None)))


def _column(
    values: list[Any], padding_value: float, mask_suffix: str, typ: pa.DataType | None = None
) -> tuple[Any, torch.Tensor | None]:
    first = values[0]
    if type(first) is str or type(first) is bytes:  # kept as a list, as below (the usual id)
        return values, None
    if isinstance(first, torch.Tensor):
        if all(isinstance(v, torch.Tensor) for v in values):
            return _tensors(values, padding_value)
        return values, None
    if isinstance(first, np.ndarray):
        if all(isinstance(v, np.ndarray) and v.dtype.kind in "biuf" for v in values):
            return _arrays(values, padding_value)
        return values, None
    if isinstance(first, _NUMBER):
        if all(isinstance(v, _NUMBER) for v in values):
            return _numbers(values), None
        return values, None
    if isinstance(first, list | tuple):
        if all(isinstance(v, list | tuple) for v in values):
            return _lists(values, padding_value, typ)
        return values, None
    if isinstance(first, Mapping):
        if all(isinstance(v, Mapping) for v in values):
            try:
                inner = None
                if typ is not None and pa.types.is_struct(typ):
                    inner = pa.schema([typ.field(k) for k in range(typ.num_fields)])
                return collate(
                    values, padding_value=padding_value, mask_suffix=mask_suffix, schema=inner,
                    one_block=False,  # the outer batch places the whole in one block
                ), None
            except ArgumentError:
                return values, None
        return values, None
    return values, None


#: The last schema's column types: a loader passes one schema object with every batch, and
#: walking its fields cost more than the rest of a batch's set-up (read only, never changed).
_last_types: tuple[pa.Schema | None, dict[str, pa.DataType]] = (None, {})


def _types_of(schema: object) -> dict[str, pa.DataType]:
    """The column types of a ``schema=`` argument (none for None); do not change the dict."""
    global _last_types
    if schema is None:
        return {}
    last = _last_types
    if last[0] is schema:
        return last[1]
    if not isinstance(schema, pa.Schema):
        raise ArgumentError(
            f"collate: schema must be a pyarrow Schema (such as dataset.schema), got "
            f"{type(schema).__name__}"
        )
    types = {field.name: field.type for field in schema}
    _last_types = (schema, types)
    return types


def _empty_dtype(typ: pa.DataType | None) -> torch.dtype | None:
    """The dtype Python values of a list column of type ``typ`` collate to, if a number's.

    Python rows' ints become int64 and floats float64 (as ``_numeric`` makes them), so a
    batch of empty lists gets the dtype a batch with values gets.
    """
    while typ is not None and (
        pa.types.is_list(typ) or pa.types.is_large_list(typ)
        or pa.types.is_fixed_size_list(typ) or pa.types.is_list_view(typ)
        or pa.types.is_large_list_view(typ)
    ):
        typ = typ.value_type
    if typ is None:
        return None
    if pa.types.is_boolean(typ):
        return torch.bool
    if pa.types.is_integer(typ):
        return torch.int64
    if pa.types.is_floating(typ):
        return torch.float64
    return None


def _check_options(padding_value: object, mask_suffix: object, one_block: object) -> None:
    """Refuse options torch would fail on mid-batch (or turn into a surprising key)."""
    # not a bool: True would pad with 1, said by no error
    if not is_number(padding_value):
        raise ArgumentError(
            f"collate: padding_value must be a number (such as 0 or -100; 0 pads a boolean "
            f"column with False), got {type(padding_value).__name__} {padding_value!r}"
        )
    if not isinstance(mask_suffix, str) or not mask_suffix:
        raise ArgumentError(
            f"collate: mask_suffix must be a non-empty string (such as '_mask'), got "
            f"{mask_suffix!r}"
        )
    if not isinstance(one_block, bool):
        raise ArgumentError(f"collate: one_block must be True or False, got {one_block!r}")


class _PaddingError(Exception):
    """The padding value does not fit a padded column's dtype (collate names the column)."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__(str(dtype))
        self.dtype = dtype


def _numeric(values: list[Any]) -> np.ndarray[Any, Any] | None:
    """Numbers (or equal-shaped nested lists of them) as one numpy array, else None.

    numpy keeps what torch's ``default_collate`` keeps: Python floats as float64 (where
    ``torch.tensor`` would round them to float32), ints as int64, bools as bool; nested lists
    of unequal lengths are refused (``torch.tensor`` returns an empty tensor for some).
    Python ints beyond int64 are refused too (kept as lists, as before): numpy would make
    them uint64, or float64 beside other ints, rounding them.
    """
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        return None
    kind = array.dtype.kind
    if kind not in "biuf":
        return None
    if kind == "u" and not _holds(values, np.generic):
        return None
    # only ints, yet float: some beyond int64 made numpy round them all
    beyond = kind == "f" and array.size and np.max(np.abs(array)) >= 2.0**63
    if beyond and not _holds(values, (float, np.floating)):
        return None
    return array


def _holds(values: Any, kind: type | tuple[type, ...]) -> bool:
    """Whether ``values`` (nested lists) hold a value of ``kind``."""
    if isinstance(values, list | tuple):
        return any(_holds(v, kind) for v in values)
    return isinstance(values, kind)


def _numbers(values: list[Any]) -> Any:
    array = _numeric(values)
    return values if array is None else _from_numpy(array)


def _from_numpy(array: np.ndarray[Any, Any]) -> torch.Tensor:
    # unsigned 16/32/64-bit widened to int64; uint64 values >= 2**63 refused, never wrapped
    return to_tensor(np.ascontiguousarray(array))


def _tensors(values: list[torch.Tensor], padding_value: float) -> tuple[Any, torch.Tensor | None]:
    shape = values[0].shape
    if all(v.shape == shape for v in values):
        return torch.stack(values), None
    if all(v.dim() == 1 for v in values):
        return _pad(values, padding_value)
    return values, None


def _arrays(
    values: list[np.ndarray[Any, Any]], padding_value: float
) -> tuple[Any, torch.Tensor | None]:
    shape = values[0].shape
    if all(v.shape == shape for v in values):
        return _from_numpy(np.stack(values)), None
    if all(v.ndim == 1 for v in values):
        return _pad([_from_numpy(v) for v in values], padding_value)
    return values, None


def _pad(values: list[torch.Tensor], padding_value: float) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
    dtype = values[0].dtype
    for v in values[1:]:
        dtype = torch.promote_types(dtype, v.dtype)
    data = torch.cat([v.to(dtype) for v in values]) if lengths.any() else None
    return _padded(data, lengths, padding_value, dtype)


def _padded(
    data: torch.Tensor | None,
    lengths: np.ndarray[Any, np.dtype[np.int64]],
    padding_value: float,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``lengths`` values taken in turn from ``data``, padded to the longest, and the mask.

    Filled by numpy where the dtype has a numpy twin and ``data`` is a plain CPU tensor:
    numpy's masked assignment runs several times faster than torch's, and on one thread
    (torch's pool of threads slows to a crawl on a loaded machine).
    """
    fill = _fits(padding_value, dtype)
    width = int(lengths.max()) if len(lengths) else 0
    mask = np.arange(width) < lengths[:, None]
    twin = _NUMPY_OF.get(dtype)
    plain = data is None or (data.device.type == "cpu" and not data.requires_grad)
    if twin is not None and plain:
        out = np.full((len(lengths), width), fill, dtype=twin)
        if data is not None:
            out[mask] = data.numpy()
        return torch.from_numpy(out), torch.from_numpy(mask)
    padded = torch.full((len(lengths), width), fill, dtype=dtype)
    where = torch.from_numpy(mask)
    if data is not None:
        padded[where] = data
    return padded, where


#: numpy's twin of each torch dtype that has one (bfloat16 and the complex halves have none).
_NUMPY_OF: dict[torch.dtype, type[np.generic]] = {
    torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
    torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16,
    torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
    torch.complex128: np.complex128,
}


def _ragged(column: Ragged, padding_value: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What ``_tensors``/``_arrays`` make of a ragged column's rows, from their flat values.

    Stacked where the rows are all as long (a part of a batch can be), else padded with a
    mask in one step, with no per-row view made.
    """
    flat = column.flat
    # the numpy format's unsigned ints widened as each row's would be (uint64 range checked)
    tensor = flat if isinstance(flat, torch.Tensor) else _from_numpy(flat)
    lengths = column.lengths
    if bool((lengths == lengths[0]).all()):
        return tensor.reshape(len(lengths), int(lengths[0])).clone(), None
    return _padded(tensor, lengths, padding_value, tensor.dtype)


def _lists(
    values: list[Any], padding_value: float, typ: pa.DataType | None = None
) -> tuple[Any, torch.Tensor | None]:
    lengths = [len(v) for v in values]
    if all(n == lengths[0] for n in lengths):
        if lengths[0] and not isinstance(values[0][0], (*_NUMBER, list, tuple)):
            return values, None
        array = _numeric(values)
        if array is None:
            return values, None
        tensor = _from_numpy(array)
        dtype = _empty_dtype(typ) if array.size == 0 else None
        # no value to tell the type by (numpy made the empty lists float64): the schema's
        return (tensor if dtype is None else tensor.to(dtype)), None
    flat = list(itertools.chain.from_iterable(values))
    # one type lookup per value (in C), then one check per distinct type: isinstance per
    # value took half of collating a batch of Python rows
    kinds = set(map(type, flat))
    if not all(issubclass(kind, _NUMBER) for kind in kinds):
        return values, None
    # Python ints alone (the python format's token lists): read as int64 without numpy
    # inferring a dtype over every value first (half the time); one beyond int64 refuses
    numbers = _int64s(flat) if kinds == {int} else None
    if numbers is None:
        numbers = _numeric(flat)
    if numbers is None:
        return values, None
    data = _from_numpy(numbers)
    return _padded(data, np.array(lengths, dtype=np.int64), padding_value, data.dtype)


def _int64s(flat: list[int]) -> np.ndarray[Any, np.dtype[np.int64]] | None:
    """Python ints as one int64 array, or None if one is beyond int64's range."""
    try:
        return np.fromiter(flat, np.int64, len(flat))
    except OverflowError:
        return None


def _fits(padding_value: float, dtype: torch.dtype) -> float:
    """``padding_value`` if ``dtype`` holds it exactly (torch would wrap or truncate it)."""
    value = float(padding_value)
    if dtype == torch.bool:
        ok = value in (0.0, 1.0)
    elif dtype.is_floating_point:
        ok = not np.isfinite(value) or abs(value) <= torch.finfo(dtype).max
    elif dtype.is_complex:
        ok = True
    else:
        info = torch.iinfo(dtype)
        ok = value.is_integer() and info.min <= int(padding_value) <= info.max
    if not ok:
        raise _PaddingError(dtype)
    return padding_value


__all__ = ["MASK_SUFFIX", "collate"]
