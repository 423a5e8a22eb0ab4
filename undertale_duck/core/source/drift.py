"""Schema drift between shards: one definition, used by ``describe`` and by validation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShardDrift:
    """How one shard's columns differ from the reference columns.

    Attributes:
        path: The shard.
        missing: Reference columns the shard lacks, in reference order.
        extra: Columns of the shard the reference lacks, in shard order.
        changed: ``(column, reference type, shard type)`` for columns whose type differs.
    """

    path: str
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)

    def summary(self) -> str:
        """One line naming what differs, e.g. ``missing a; extra b; types c int -> str``."""
        parts = []
        if self.missing:
            parts.append(f"missing {', '.join(self.missing)}")
        if self.extra:
            parts.append(f"extra {', '.join(self.extra)}")
        if self.changed:
            parts.append(f"types {'; '.join(f'{n} {a} -> {b}' for n, a, b in self.changed)}")
        return ", ".join(parts)


def reference_columns(shards: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The reference schema: the column layout most shards share (ties go to the earliest).

    Using the most common layout rather than the first shard's means one odd shard is named
    as the drifting one wherever it sits in the directory. Layouts are compared by column
    names and types, not column order (drift ignores order, so the vote does too).

    Args:
        shards: Each shard's ``{column: type}`` in column order (types as text).

    Returns:
        The reference ``{column: type}``, in the column order of the earliest shard with that
        layout; empty when there are no shards.
    """
    if not shards:
        return {}
    keys = [frozenset(s.items()) for s in shards]
    counts = Counter(keys)
    best = max(counts.values())
    for key, columns in zip(keys, shards, strict=True):  # first layout reaching the top count
        if counts[key] == best:
            return dict(columns)
    raise AssertionError("unreachable")


def schema_drift(
    shards: Sequence[tuple[str, Mapping[str, str]]], null_type: str | None = None
) -> list[ShardDrift]:
    """List the shards whose columns or types differ from :func:`reference_columns`.

    Args:
        shards: ``(path, {column: type})`` for every readable shard, in shard order.
        null_type: The type text of a column that holds only NULLs (DuckDB's ``"NULL"``),
            which then differs from no type: its rows read as NULLs of any type. None: an
            all-NULL column's type is a type like any other.

    Returns:
        One :class:`ShardDrift` per differing shard, in shard order.
    """
    reference = reference_columns([columns for _, columns in shards])
    out = []
    for path, columns in shards:
        missing = [n for n in reference if n not in columns]
        extra = [n for n in columns if n not in reference]
        changed = [
            (n, t, columns[n]) for n, t in reference.items()
            if n in columns and columns[n] != t and null_type not in (t, columns[n])
        ]
        if missing or extra or changed:
            out.append(ShardDrift(path, missing, extra, changed))
    return out
