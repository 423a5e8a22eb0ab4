"""Train/validation splits as views: a row's part is a seeded md5 hash of its key column."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

import duckdb
import pyarrow as pa

from ...common.numbers import check_int, is_number
from ...errors import ArgumentError
from ..runtime import sqlfiles
from .check import check

#: The parts of a split.
PARTS = ("train", "validation")
#: Hex digits of the md5 digest a row's part is decided by.
HASH_DIGITS = 16


@dataclass(frozen=True)
class Split:
    """One part of a split of a dataset into train and validation rows, by a key column.

    A row is in the validation part when the first 16 hex digits of
    ``md5(f"{seed}:{key}")`` (the key as text: an integer's decimal digits, a string
    itself, UTF-8), read as a 64-bit number, are below ``round(fraction * 2**64)``; else
    in the train part. A row's part depends on its key and the seed alone, so adding shards
    never moves a row to the other part; both parts of one ``(key, fraction, seed)`` are
    disjoint and together hold every row. A row whose key is null is in the train part.

    Attributes:
        key: The key column (integers or strings).
        fraction: The share of keys in the validation part, strictly between 0 and 1.
        part: ``"train"`` or ``"validation"``.
        seed: The hash seed (an integer >= 0).
    """

    key: str
    fraction: float
    part: Literal["train", "validation"] = "train"
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ArgumentError(f"split.key must be a column name, got {self.key!r}")
        fraction = self.fraction
        if not is_number(fraction) or not (0 < fraction < 1):
            raise ArgumentError(
                f"split.fraction must be a number strictly between 0 and 1, got {fraction!r}"
            )
        if self.part not in PARTS:
            raise ArgumentError(f"split.part must be 'train' or 'validation', got {self.part!r}")
        check_int("split.seed", self.seed, 0, say_range=False)
        # numpy values (a seed from a numpy config) as Python numbers: the hash prefix,
        # fingerprints and saved states then read the same as for the equal Python value
        object.__setattr__(self, "fraction", float(fraction))
        object.__setattr__(self, "seed", int(self.seed))

    @property
    def threshold(self) -> int:
        """The 64-bit hash value at and above which a key is in the train part."""
        return min(max(round(self.fraction * 2**64), 1), 2**64 - 1)

    def other(self) -> Split:
        """The other part of the same split."""
        if self.part == "validation":
            return Split(self.key, self.fraction, "train", self.seed)
        return Split(self.key, self.fraction, "validation", self.seed)

    def condition(self) -> str:
        """The SQL condition keeping this part's rows (a ``where=`` filter)."""
        return sqlfiles.render(
            f"split_{self.part}",
            prefix=sqlfiles.quote_literal(f"{self.seed}:"),
            key=sqlfiles.quote_identifier(self.key),
            threshold=sqlfiles.quote_literal(f"{self.threshold:0{HASH_DIGITS}x}"),
        )

    def where(self, where: str | None) -> str:
        """``where=`` for this part: the condition, and-ed with the user's own filter.

        Args:
            where: The user's filter, or None.

        Returns:
            The filter with comment lines removed.

        Raises:
            ArgumentError: If ``where`` is not SQL text.
            QueryError: If ``where`` is not one whole condition on its own (``"a) OR (b"``
                would otherwise take the split's condition apart and serve every row).
        """
        # the template's comments go by DuckDB's tokens, not by lines: a key named "a\nb"
        # (or "a\n-- b") keeps its line break inside its quotes, where lines were joined
        # with a space (naming no column) and a line starting "--" inside them dropped
        text = self.condition()
        mine = "".join(
            text[start:end]
            for start, end, kind in sqlfiles.tokens(text)
            if kind != duckdb.token_type.comment
        ).strip()
        if where is None:
            return mine
        if not isinstance(where, str) or not where.strip():
            raise ArgumentError(f"where must be an SQL condition, got {where!r}")
        # parsed alone first: its parentheses then nest, so "(where)" holds all of it
        check(f"SELECT * FROM dataset WHERE {where}")
        # a comment ending the filter ("x > 0 -- why") ends at the line break
        end = "\n" if _has_comment(where) else ""
        return f"({where}{end}) AND ({mine})"

    def part_of(self, key: int | str | None) -> str:
        """The part a key belongs to, computed in Python (the rule the SQL implements)."""
        if key is None:
            return "train"
        digest = hashlib.md5(f"{self.seed}:{key}".encode(), usedforsecurity=False)
        value = int(digest.hexdigest()[:HASH_DIGITS], 16)
        return "validation" if value < self.threshold else "train"

    def check_key(self, schema: pa.Schema) -> None:
        """Refuse a key column that is missing or whose text form is not stable.

        Raises:
            ArgumentError: Naming ``split.key``.
        """
        if self.key not in schema.names:
            raise ArgumentError(
                f"split.key: the dataset has no column {self.key!r}; its columns are "
                f"{schema.names}"
            )
        kind = schema.field(self.key).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not (pa.types.is_integer(kind) or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)):
            raise ArgumentError(
                f"split.key: column {self.key!r} is {kind}; a split key must be integers or "
                "strings (their text form, which the hash reads, is the same in every DuckDB "
                "version)"
            )


def _has_comment(text: str) -> bool:
    """Whether SQL text holds a comment (DuckDB's tokenizer decides)."""
    return any(kind == duckdb.token_type.comment for _, _, kind in sqlfiles.tokens(text))


def check_split(value: object) -> Split | None:
    """``split=`` as a :class:`Split` (None stays None).

    Raises:
        ArgumentError: If it is something else.
    """
    if value is None or isinstance(value, Split):
        return value
    raise ArgumentError(
        f"split must be a Split(key=..., fraction=..., part=..., seed=...), got {value!r}"
    )
