"""The packing spec: which list column is cut into fixed-length blocks, and what comes out."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from ...common.numbers import is_integer
from ...errors import ArgumentError

#: The longest block accepted (tokens): one block is built in memory per row served.
MAX_BLOCK = 1 << 24
#: Output column of each token's position in its document (when asked for).
POSITION_IDS = "position_ids"
#: Output column of each token's document number within the block (when asked for).
SEGMENT_IDS = "segment_ids"
#: Bytes of one output token per column, at most (int64 everywhere).
TOKEN_BYTES = 8


@dataclass(frozen=True)
class Pack:
    """How a dataset's token lists are packed into fixed-length blocks.

    Row ``k`` of a packed dataset is block ``k`` of the *stream*: every document's
    ``column`` list, in dataset (or view) order, each followed by ``eod`` when it is set.

    Attributes:
        column: The list-of-integers column holding each document's tokens.
        length: Tokens per block (1 to 2**24).
        eod: A token appended after every document (end of document), or None.
        last: What to do with a last block shorter than ``length``: ``"drop"`` it, or
            ``"pad"`` it with ``pad`` (segment id 0, position 0, ``fill`` alongside).
        pad: The padding token of ``last="pad"``.
        position_ids: Emit ``position_ids``: each token's position in its document
            (restarting at 0 where a document starts; the ``eod`` token continues it).
        segment_ids: Emit ``segment_ids``: each token's document number within the block,
            from 1 (0 for padding), as T5X/seqio packing does.
        alongside: Other list columns packed in step with ``column`` (a loss mask,
            per-token labels); each document's lists must be as long as its tokens.
        fill: The value of an ``alongside`` column at ``eod`` and padding positions.
    """

    column: str
    length: int
    eod: int | None = None
    last: Literal["drop", "pad"] = "drop"
    pad: int = 0
    position_ids: bool = True
    segment_ids: bool = True
    alongside: tuple[str, ...] = ()
    fill: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ArgumentError(f"pack.column must be a column name, got {self.column!r}")
        _integer("pack.length", self.length, 1, MAX_BLOCK)
        if self.eod is not None:
            _integer("pack.eod", self.eod, -(1 << 63), (1 << 64) - 1)
        if self.last not in ("drop", "pad"):
            raise ArgumentError(f"pack.last must be 'drop' or 'pad', got {self.last!r}")
        _integer("pack.pad", self.pad, -(1 << 63), (1 << 64) - 1)
        _integer("pack.fill", self.fill, -(1 << 63), (1 << 64) - 1)
        for name in ("position_ids", "segment_ids"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentError(
                    f"pack.{name} must be True or False, got {getattr(self, name)!r}"
                )
        alongside = self.alongside
        if isinstance(alongside, str) or not isinstance(alongside, tuple | list):
            raise ArgumentError(
                f"pack.alongside must be a list of column names, got {alongside!r}"
            )
        if not all(isinstance(c, str) and c for c in alongside):
            raise ArgumentError(f"pack.alongside must hold column names, got {alongside!r}")
        object.__setattr__(self, "alongside", tuple(alongside))
        for name in ("length", "pad", "fill", "eod"):  # numpy integers become ints
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int(value))
        names = self.outputs
        if len(set(names)) != len(names):
            raise ArgumentError(
                f"pack: output columns {names} repeat a name; pack.alongside must not name "
                f"pack.column, {POSITION_IDS!r} or {SEGMENT_IDS!r}"
            )

    @property
    def outputs(self) -> list[str]:
        """The columns of a block, in order."""
        names = [self.column]
        if self.position_ids:
            names.append(POSITION_IDS)
        if self.segment_ids:
            names.append(SEGMENT_IDS)
        return [*names, *self.alongside]

    @property
    def inputs(self) -> list[str]:
        """The dataset columns packing reads."""
        return [self.column, *self.alongside]

    @property
    def block_bytes(self) -> int:
        """The most bytes one block's arrays take."""
        return self.length * TOKEN_BYTES * len(self.outputs)

    def key(self) -> dict[str, Any]:
        """The spec as plain JSON values (part of the packed dataset's fingerprint)."""
        return {**dataclasses.asdict(self), "alongside": list(self.alongside)}

    def check_schema(self, schema: pa.Schema) -> None:
        """Check that the packed columns exist and hold lists of integers the tokens fit.

        Args:
            schema: The Arrow schema of the rows packed (a view's rows for a view).

        Raises:
            ArgumentError: Naming ``pack.column`` or ``pack.alongside`` and the column.
        """
        for name, argument in [(self.column, "pack.column")] + [
            (c, "pack.alongside") for c in self.alongside
        ]:
            if name not in schema.names:
                raise ArgumentError(
                    f"{argument}: the dataset has no column {name!r}; its columns are "
                    f"{schema.names}"
                )
            kind = schema.field(name).type
            if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not (
                pa.types.is_integer(kind.value_type)
            ):
                raise ArgumentError(
                    f"{argument}: column {name!r} is {kind}, not a list of integers; packing "
                    "cuts lists of integer tokens"
                )
        dtype = np.dtype(schema.field(self.column).type.value_type.to_pandas_dtype())
        for argument, value in (("pack.eod", self.eod), ("pack.pad", self.pad)):
            if value is not None and not _fits(value, dtype):
                raise ArgumentError(
                    f"{argument}={value} does not fit the {dtype} tokens of column "
                    f"{self.column!r}; give a value that {dtype} holds"
                )
        for name in self.alongside:
            kind = np.dtype(schema.field(name).type.value_type.to_pandas_dtype())
            if not _fits(self.fill, kind):
                raise ArgumentError(
                    f"pack.fill={self.fill} does not fit the {kind} values of column {name!r}; "
                    f"give a value that {kind} holds"
                )


def check_pack(value: object) -> Pack:
    """A :class:`Pack` from a ``Pack`` or a mapping of its fields.

    Raises:
        ArgumentError: If ``value`` is neither, names an unknown field, or a field is bad.
    """
    if isinstance(value, Pack):
        return value
    if isinstance(value, Mapping):
        known = {f.name for f in dataclasses.fields(Pack)}
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ArgumentError(
                f"pack: unknown field(s) {unknown}; a pack spec has {sorted(known)}"
            )
        if "column" not in value or "length" not in value:
            raise ArgumentError("pack needs at least 'column' and 'length'")
        return Pack(**{str(k): v for k, v in value.items()})
    raise ArgumentError(
        f"pack must be a Pack(column=..., length=...) or a dict of its fields, got {value!r}"
    )


def _integer(name: str, value: object, low: int, high: int) -> None:
    if not is_integer(value):
        raise ArgumentError(f"{name} must be an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise ArgumentError(f"{name} must be between {low} and {high}, got {value}")


def _fits(value: int, dtype: np.dtype[Any]) -> bool:
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)
