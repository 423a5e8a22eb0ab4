"""Check building: pydantic constraints -> per-row checks -> SQL conditions (sql/checks/)."""

from __future__ import annotations

import dataclasses
import decimal
import enum
import typing
from collections.abc import Sequence
from typing import Any, Literal

from ..core.runtime import sqlfiles
from .model import CheckKind
from .targets import LIST_TYPES, Target, is_sequence, strip_optional

#: DuckDB type ids on which comparisons (ranges, multiples) do not apply.
_NESTED_TYPES = frozenset({"list", "array", "struct", "map", "union"})

#: Templates of null checks (the footers' statistics can prove these without a scan).
NULL_TEMPLATES = frozenset({"not_null", "not_null_elements"})


@dataclasses.dataclass(frozen=True)
class RowCheck:
    """One per-row check: a violation condition built from a ``sql/checks`` fragment.

    Attributes:
        kind: The report's check kind.
        target: The column or struct field checked.
        template: The fragment under ``sql/checks/`` (``not_null``, ``ge``, ...).
        bound: The bound value (bound as a parameter), or None.
        description: What the check requires.
    """

    kind: CheckKind
    target: Target
    template: str
    bound: Any
    description: str

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity of the check across shard groups."""
        return (self.kind, self.target.label, self.description)


def value_sql(path: Sequence[str]) -> str:
    """The SQL expression of a column or struct field path (quoted, ``struct_extract`` below).

    Args:
        path: Column name then struct field names.

    Returns:
        The expression, e.g. ``struct_extract("point", 'x')``.
    """
    expr = sqlfiles.quote_identifier(path[0])
    for name in path[1:]:
        expr = f"struct_extract({expr}, {sqlfiles.quote_literal(name)})"
    return expr


def _fragment(name: str, **parts: str) -> str:
    text = sqlfiles.render(f"checks/{name}", **parts)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("--")]
    return " ".join(line.strip() for line in lines)


def _length_function(dtype: Any) -> str | None:
    kind = str(dtype.id)
    if kind in ("varchar", "enum"):
        return "length"
    if kind == "blob":
        return "octet_length"
    if kind in LIST_TYPES:
        return "len"
    if kind == "map":
        return "cardinality"
    return None


def condition(check: RowCheck, dtype: Any, bound_name: str | None) -> str | None:
    """Build the SQL condition that is true for a row violating a check.

    Args:
        check: The check.
        dtype: The DuckDB type of the checked value in this group of shards.
        bound_name: The ``$name`` placeholder holding the check's bound.

    Returns:
        The condition, or None when the check does not apply to this type (e.g. a length
        constraint on a number).
    """
    value = value_sql(check.target.path)
    bound = f"${bound_name}" if bound_name else ""
    if check.template == "not_null":
        parent = check.target.path[:-1]
        guard = f"{value_sql(parent)} IS NOT NULL AND " if parent else ""
        return _fragment("not_null", value=value, guard=guard)
    kind = str(dtype.id)
    if check.template in ("ge", "gt", "le", "lt", "multiple_of") and kind in _NESTED_TYPES:
        return None
    if check.template == "pattern" and kind not in ("varchar", "enum"):
        return None
    if check.template in ("min_length", "max_length"):
        length = _length_function(dtype)
        if length is None:
            return None
        return _fragment(check.template, value=value, bound=bound, length=length)
    return _fragment(check.template, value=value, bound=bound)


def row_checks(target: Target) -> list[RowCheck]:
    """Translate one field's nullability and ``Field``/``Literal`` constraints into checks.

    Args:
        target: The column or struct field.

    Returns:
        The per-row checks (``not_null`` first, then constraints in metadata order).
    """
    label = target.label
    out: list[RowCheck] = []
    if not target.nullable:
        out.append(RowCheck("not_null", target, "not_null", None, f"{label} is not null"))
    element = _list_element(target.annotation)
    if element is not None and not strip_optional(element)[1]:
        out.append(
            RowCheck("not_null", target, "not_null_elements", None, f"{label} has no null elements")
        )
    operators = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    for item in target.metadata:
        for attr, op in operators.items():
            bound = getattr(item, attr, None)
            if bound is not None:
                out.append(RowCheck("range", target, attr, bound, f"{label} {op} {bound!r}"))
        for attr, op in (("min_length", ">="), ("max_length", "<=")):
            bound = getattr(item, attr, None)
            if bound is not None:
                out.append(RowCheck("length", target, attr, bound, f"length({label}) {op} {bound}"))
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            out.append(
                RowCheck("pattern", target, "pattern", pattern, f"{label} matches {pattern!r}")
            )
        multiple = getattr(item, "multiple_of", None)
        if multiple is not None:
            out.append(
                RowCheck(
                    "multiple_of",
                    target,
                    "multiple_of",
                    multiple,
                    f"{label} is a multiple of {multiple!r}",
                )
            )
    values = _literal_values(target.annotation)
    if values is not None:
        out.append(
            RowCheck(
                "literal",
                target,
                "literal",
                values,
                f"{label} in {{{', '.join(repr(v) for v in values)}}}",
            )
        )
    return out


def _list_element(annotation: Any) -> Any | None:
    origin = typing.get_origin(annotation)
    if origin in (list, set, frozenset) or (is_sequence(origin) and origin is not tuple):
        args = typing.get_args(annotation)
        return args[0] if args else Any
    return None


def _literal_values(annotation: Any) -> list[Any] | None:
    if typing.get_origin(annotation) is Literal:
        return [a.value if isinstance(a, enum.Enum) else a for a in typing.get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    return None


def bound_value(value: Any) -> Any:
    """A constraint's bound as a query parameter (decimals as floats, which DuckDB compares)."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


__all__ = ["NULL_TEMPLATES", "RowCheck", "bound_value", "condition", "row_checks", "value_sql"]
