"""Check building: pydantic constraints -> per-row checks -> SQL conditions (sql/checks/)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import typing
from collections.abc import Sequence
from typing import Any, Literal

import duckdb
from pydantic import AwareDatetime

from ..core.runtime import sqlfiles
from .model import CheckKind
from .regex import re2_pattern
from .targets import (
    INTEGER_TYPES,
    LAX_TYPES,
    LIST_TYPES,
    LITERAL_NUMBER_TYPES,
    SCALAR_TYPES,
    TIMESTAMP_TYPES,
    ZONED_TIMESTAMP_TYPES,
    Target,
    config_metadata,
    describe_type,
    forbidden_fields,
    inner_metadata,
    is_sequence,
    item_annotations,
    literal_ints,
    model_class,
    strict_setting,
    strip_optional,
    targets,
)

#: DuckDB type ids on which comparisons (ranges, multiples) do not apply.
_NESTED_TYPES = frozenset({"list", "array", "struct", "map", "union"})

#: DuckDB type ids of binary floating-point numbers (NaN and infinities; pydantic's float rules).
_FLOAT_KINDS = frozenset({"float", "double"})
#: Types lax pydantic makes of an int taken as a Unix time (``NaiveDatetime`` refuses one).
_FROM_UNIX_TIME = (dt.datetime, AwareDatetime, dt.date)

#: DuckDB type ids of the numbers a float field takes and compares as a float (a DOUBLE).
_AS_FLOAT_KINDS = frozenset({*INTEGER_TYPES, "decimal", "float", "boolean"})

#: Templates of null checks (the footers' statistics can prove these without a scan).
NULL_TEMPLATES = frozenset({"not_null", "not_null_elements"})

#: Templates of ``max_digits``/``decimal_places`` (DECIMAL columns only).
_DIGIT_TEMPLATES = frozenset({"max_digits", "decimal_places", "whole_digits"})

#: Templates pydantic applies to the stripped string when ``strip_whitespace`` is set.
_STRIPPED_TEMPLATES = frozenset({"min_length", "max_length", "pattern", "ascii_only"})


#: DuckDB's text type: a BLOB under a lax str field is checked as the text pydantic decodes.
_VARCHAR = duckdb.sqltype("VARCHAR")

#: One step inside a column's value (:attr:`RowCheck.steps`).
Step = int | str | None


@dataclasses.dataclass(frozen=True)
class RowCheck:
    """One per-row check: a violation condition built from a ``sql/checks`` fragment.

    Attributes:
        kind: The report's check kind.
        target: The column or struct field checked.
        template: The fragment under ``sql/checks/`` (``not_null``, ``ge``, ...).
        bound: The bound value (bound as a parameter), or None.
        description: What the check requires.
        steps: Where inside the column's lists the checked value is: one step per level,
            None for every item of a list, a position (from 1) for one item of a fixed
            tuple, a name for a field of a nested model's struct inside a list; empty for
            the column (or struct field) itself. ``target`` then describes the item (its
            annotation and constraints), still at the column's path.
    """

    kind: CheckKind
    target: Target
    template: str
    bound: Any
    description: str
    steps: tuple[Step, ...] = ()

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
        expr = value_sql_of(expr, name)
    return expr


def _fragment(name: str, **parts: str) -> str:
    """A ``sql/checks`` template on one line, without comments (:func:`sqlfiles.fragment`)."""
    return sqlfiles.fragment(f"checks/{name}", **parts)


def holds_nan(value: str, dtype: Any, depth: int = 0) -> str | None:
    """SQL true for a value that holds a float NaN, itself or in a list, array, map or struct.

    Python finds such a value equal to no other (``float('nan') != float('nan')``, and lists,
    dicts and tuples compare their items), so a uniqueness check must never count it as a
    duplicate, although DuckDB groups NaN with NaN.

    Args:
        value: SQL of the value.
        dtype: Its DuckDB type.
        depth: Nesting level (names the lambda's item).

    Returns:
        The condition, or None when the type can hold no NaN.
    """
    kind = str(dtype.id)
    if kind in _FLOAT_KINDS:
        return _fragment("holds_nan", value=value)
    children = _type_children(dtype)
    item = sqlfiles.quote_identifier(f"item{depth}")
    if kind in LIST_TYPES:
        inner = holds_nan(item, children["child"], depth + 1)
        if inner is None:
            return None
        return _fragment("holds_nan_list", value=value, item=item, test=inner)
    if kind == "map":
        key = holds_nan(item, children["key"], depth + 1)
        inner = holds_nan(item, children["value"], depth + 1)
        if key is None and inner is None:
            return None
        return _fragment(
            "holds_nan_map", value=value, item=item, key_test=key or "false", test=inner or "false"
        )
    if kind == "struct":
        tests = [
            found
            for name, child in children.items()
            if (found := holds_nan(value_sql_of(value, name), child, depth)) is not None
        ]
        if not tests:
            return None
        return _fragment("holds_nan_struct", test=" OR ".join(f"({t})" for t in tests))
    return None


def value_sql_of(parent: str, name: str) -> str:
    """The SQL expression of a struct's field ``name`` (``parent`` already SQL)."""
    return f"struct_extract({parent}, {sqlfiles.quote_literal(name)})"


def _type_children(dtype: Any) -> dict[str, Any]:
    try:
        return dict(dtype.children)
    except (duckdb.Error, AttributeError):
        return {}


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
    if check.template == "not_null" and not check.steps:
        parent = check.target.path[:-1]
        guard = f"{value_sql(parent)} IS NOT NULL AND " if parent else ""
        return _fragment("not_null", value=value, guard=guard)
    return _inside(check, value, dtype, bound, check.steps)


def _inside(
    check: RowCheck, value: str, dtype: Any, bound: str, steps: tuple[Step, ...]
) -> str | None:
    """A check's condition on the items ``steps`` reach inside ``value`` (a list's items)."""
    if not steps:
        return _condition_on(check, value, dtype, bound)
    if str(dtype.id) == "null":  # only NULLs here: nothing inside to violate a check
        return _fragment("never", value=value)
    step, rest = steps[0], steps[1:]
    if isinstance(step, str):  # a field of a nested model's struct, inside a list
        if str(dtype.id) != "struct":
            return None
        field = _type_children(dtype).get(step)
        if field is None:  # a field with a default, absent from the struct (the type allows it)
            return _fragment("never", value=value)
        inner = value_sql_of(value, step)
        if not rest and check.template == "not_null":  # a NULL struct is its own field's
            return _fragment("not_null", value=inner, guard=f"{value} IS NOT NULL AND ")
        return _inside(check, inner, field, bound, rest)
    child = _type_children(dtype).get("child") if str(dtype.id) in LIST_TYPES else None
    if child is None:
        return None
    if step is not None:  # one position of a fixed tuple: NULL when the list is NULL or short
        return _inside(check, f"{value}[{step}]", child, bound, rest)
    # the lambda's name tells nested levels apart
    item = sqlfiles.quote_identifier(f"each{sum(s is None for s in check.steps[:-len(steps)])}")
    test = _inside(check, item, child, bound, rest)
    if test is None:
        return None
    return _fragment("any_item", value=value, item=item, test=test)


def _condition_on(check: RowCheck, value: str, dtype: Any, bound: str) -> str | None:
    """A check's condition on one value (the column, a struct field or a list item)."""
    kind = str(dtype.id)
    if kind == "null" and check.template != "not_null":  # only NULLs: not_null decides
        return _fragment("never", value=value)
    if check.template == "lax_type":
        nested = model_class(check.target.annotation)
        if nested is not None:  # a struct holding a field the model forbids: each non-NULL one
            forbids = kind == "struct" and forbidden_fields(nested, dtype)
            return _fragment("struct_present", value=value) if forbids else None
        name = _lax_template(check.target.annotation, kind)
        return None if name is None else _fragment(name, value=value)
    if kind == "blob" and check.target.annotation is str and check.template in _STRIPPED_TEMPLATES:
        # lax pydantic checks the text it decodes (characters, not octets)
        value, dtype, kind = _fragment("text_from_blob", value=value), _VARCHAR, "varchar"
    if check.template == "literal" and _decodes_text(check, kind):
        return _fragment("literal_from_blob", value=value, bound=bound)
    if check.template == "literal" and _lax_literal_ints(check, kind) is not None:
        if kind in _FLOAT_KINDS:
            return _fragment("literal_int_from_float", value=value, bound=bound)
        if kind == "decimal":
            return _fragment("literal_int_from_decimal", value=value, bound=bound)
        if kind == "boolean":
            value = _fragment("as_integer", value=value)  # True is the 1 of Literal[1, 2]
    if check.template == "not_null_items":
        item = sqlfiles.quote_identifier("item0")
        return _fragment("not_null_items", value=value, bound=bound, item=item)
    if check.template in ("ge", "gt", "le", "lt", "multiple_of") and kind in _NESTED_TYPES:
        return None
    if check.template in ("ge", "gt", "le", "lt", "multiple_of") and kind == "boolean":
        value = _fragment("as_integer", value=value)  # lax int or float field: True is 1
    if check.template in ("pattern", "ascii_only") and kind not in ("varchar", "enum"):
        return None
    if check.template == "finite":  # integers and DECIMAL hold no NaN or infinity
        return _fragment("finite" if kind in _FLOAT_KINDS else "never", value=value)
    if check.target.annotation is decimal.Decimal and kind in _FLOAT_KINDS and (
        check.template in _DIGIT_TEMPLATES or check.template == "multiple_of"
    ):
        return None  # pydantic judges Decimal(str(float)), whose digits DuckDB cannot write
    if check.template in _DIGIT_TEMPLATES:
        if kind != "decimal" and kind not in INTEGER_TYPES:  # an int is a Decimal to pydantic
            return None
        return _fragment(
            check.template,
            digits=_fragment("digits_of", value=value),
            places=_fragment("decimal_places_of", value=value),
            bound=bound,
        )
    if check.template in _STRIPPED_TEMPLATES and _strips(check.target) and kind == "varchar":
        value = _fragment("stripped", value=value)  # pydantic strips before these checks
    if check.template in ("min_length", "max_length", "tuple_length"):
        length = _length_function(dtype)
        if length == "len" and typing.get_origin(check.target.annotation) in (set, frozenset):
            length = "list_unique"  # pydantic counts a set's distinct items
        if length == "length" and check.target.annotation is bytes:
            length = "strlen"  # lax pydantic encodes a str as UTF-8 and counts its octets
        if length is None:
            return None
        return _fragment(check.template, value=value, bound=bound, length=length)
    if check.template in ("ge", "gt", "le", "lt") and kind in INTEGER_TYPES and (
        check.target.annotation in _FROM_UNIX_TIME
    ):  # lax pydantic compares the datetime (or date) it made of the int
        of = "date_of_int" if check.target.annotation is dt.date else "datetime_of_int"
        return _fragment(check.template, value=_fragment(of, value=value), bound=bound, nan="")
    if check.template in ("ge", "gt", "le", "lt"):
        # pydantic refuses NaN against any bound; DuckDB sorts NaN above every number
        nan = f"isnan({value}) OR " if kind in _FLOAT_KINDS else ""
        if check.target.annotation is float and kind in _AS_FLOAT_KINDS:
            value = _fragment("as_double", value=value)  # pydantic compares the float
        return _fragment(check.template, value=value, bound=bound, nan=nan)
    # an int field takes only integral floats and compares them as ints: an exact remainder
    floating = check.target.annotation is float or (
        kind in _FLOAT_KINDS and check.target.annotation is not int
    )
    if check.template == "multiple_of" and floating:  # pydantic's float rule, not a remainder
        return _fragment("multiple_of_float", value=value, bound=bound)
    return _fragment(check.template, value=value, bound=bound)


def _lax_template(annotation: Any, kind: str) -> str | None:
    """The ``sql/checks`` fragment true for a value lax pydantic refuses for a scalar type.

    For a column of another kind than the type's own (:data:`LAX_TYPES`); None when pydantic
    takes every value of that kind.
    """
    if annotation is int and kind in _FLOAT_KINDS:
        return "int_from_float"
    if annotation is int and kind == "decimal":
        return "int_from_decimal"
    if annotation is bool and (kind in _FLOAT_KINDS or kind in INTEGER_TYPES or kind == "decimal"):
        return "bool_from_number"
    if annotation is bool and kind == "varchar":
        return "bool_from_text"
    if annotation is decimal.Decimal and kind in _FLOAT_KINDS:
        return "finite"
    if annotation is dt.date and kind in TIMESTAMP_TYPES - ZONED_TIMESTAMP_TYPES:
        return "date_from_timestamp"
    if annotation in _FROM_UNIX_TIME and kind in INTEGER_TYPES:
        return "date_from_int" if annotation is dt.date else "datetime_from_int"
    if annotation is str and kind == "blob":
        return "str_from_blob"
    return None


def _lax_literal_ints(check: RowCheck, kind: str) -> list[int] | None:
    """The ints a lax ``literal`` check compares a number column's values with, or None.

    Lax pydantic takes ``1.0``, ``Decimal("1.00")`` and ``True`` for the ``1`` of
    ``Literal[1, 2]`` (and ``1`` for ``True``); None under strict (unchanged: its type check
    refuses these columns) or where the plain ``literal`` check applies.
    """
    if check.target.strict or kind not in LITERAL_NUMBER_TYPES:
        return None
    return literal_ints(check.bound)


def _decodes_text(check: RowCheck, kind: str) -> bool:
    """Whether lax pydantic decodes a BLOB value as UTF-8 text for a check's str ``Enum``."""
    annotation = check.target.annotation
    return (kind == "blob" and not check.target.strict and isinstance(annotation, type)
            and issubclass(annotation, enum.Enum) and issubclass(annotation, str))


def row_checks(target: Target) -> list[RowCheck]:
    """Translate one field's nullability and ``Field``/``Literal`` constraints into checks.

    Args:
        target: The column or struct field.

    Returns:
        The per-row checks (``not_null`` first, then constraints in metadata order).
    """
    # a column's per-row type checks add to its `type` check (layout.py's, same description)
    typed = describe_type(target.annotation) if len(target.path) == 1 else None
    return _checks_of(target, (), target.label, typed)


def _checks_of(
    target: Target, steps: tuple[Step, ...], label: str, typed: str | None
) -> list[RowCheck]:
    """The checks of a value and of the items inside it (``label`` names it in descriptions)."""
    # a list item's own NULL is its list's not_null_elements; a struct field's is its own
    own = _own_checks(target, label, not steps or isinstance(steps[-1], str))
    out = [dataclasses.replace(c, steps=steps) for c in own]
    nested = model_class(target.annotation)
    forbids = nested is not None and nested.model_config.get("extra") == "forbid"
    if typed is not None and not target.strict and (target.annotation in LAX_TYPES or forbids):
        out.append(RowCheck("type", target, "lax_type", None, typed, steps))
    for position, annotation in item_annotations(target.annotation):
        where = f"{label}[{'*' if position is None else position}]"
        item = _item_target(target, annotation)
        out.extend(_checks_of(item, (*steps, position), where, typed))
    if nested is not None and steps:  # a model inside a list: targets() stops at the list
        for field in targets(nested):
            if len(field.path) == 1:  # deeper fields: through their own model, below
                inner = dataclasses.replace(field, label=target.label, path=target.path)
                name = field.path[0]
                out.extend(_checks_of(inner, (*steps, name), f"{label}.{name}", None))
    return out


def _item_target(target: Target, annotation: Any) -> Target:
    """A list item as a target: its own type and constraints, its model's config for items.

    It keeps the column's label and path: its checks are the column's, reached by steps.
    """
    inner, nullable = strip_optional(annotation)
    own = inner_metadata(annotation)
    config = config_metadata(target.model, inner, own) if target.model is not None else ()
    strict = strict_setting(own)
    return dataclasses.replace(
        target,
        annotation=inner,
        nullable=nullable,
        metadata=(*config, *own),
        strict=target.strict_inside if strict is None else strict,
    )


def _own_checks(target: Target, label: str, top: bool) -> list[RowCheck]:
    """The checks of one value; an item's own NULL is its list's ``not_null_elements``."""
    out: list[RowCheck] = []
    if not target.nullable and top:
        out.append(RowCheck("not_null", target, "not_null", None, f"{label} is not null"))
    element = _list_element(target.annotation)
    if element is not None and not strip_optional(element)[1]:
        out.append(
            RowCheck("not_null", target, "not_null_elements", None, f"{label} has no null elements")
        )
    items = _tuple_items(target.annotation)
    if items is not None:  # pydantic refuses a tuple[X, Y] of another length
        out.append(RowCheck("length", target, "tuple_length", items,
                            f"length({label}) == {items} (a tuple of {items} items)"))
        positions = [k + 1 for k, a in enumerate(typing.get_args(target.annotation))
                     if not strip_optional(a)[1]]
        if element is None and positions:  # tuple[X, Y | None]: per position
            out.append(RowCheck("not_null", target, "not_null_items", positions,
                                f"{label} has no null items at positions {positions}"))
    operators = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    stripped = " (whitespace stripped)" if _strips(target) else ""
    for item in target.metadata:
        for attr, op in operators.items():
            bound = getattr(item, attr, None)
            if bound is not None:
                out.append(RowCheck("range", target, attr, bound, f"{label} {op} {bound!r}"))
        for attr, op in (("min_length", ">="), ("max_length", "<=")):
            bound = getattr(item, attr, None)
            if bound is not None:
                what = f"length({label}){stripped} {op} {bound}"
                out.append(RowCheck("length", target, attr, bound, what))
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            what = f"{label}{stripped} matches {pattern!r}"
            out.append(RowCheck("pattern", target, "pattern", pattern, what))
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
    if _last(target, "ascii_only") is True:
        what = f"{label}{stripped} is ASCII"
        out.append(RowCheck("ascii", target, "ascii_only", None, what))
    if _last(target, "allow_inf_nan") is False:
        out.append(RowCheck("finite", target, "finite", None, f"{label} is finite"))
    out.extend(_digit_checks(target, label))
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


def _last(target: Target, attr: str) -> Any:
    """The last setting of ``attr`` among a field's constraints (pydantic keeps the last)."""
    found = None
    for item in target.metadata:
        value = getattr(item, attr, None)
        if value is not None:
            found = value
    return found


def _strips(target: Target) -> bool:
    """Whether pydantic strips the field's string before its length and pattern checks."""
    return _last(target, "strip_whitespace") is True


def _digit_checks(target: Target, label: str) -> list[RowCheck]:
    """``max_digits``/``decimal_places`` as pydantic counts a normalized ``Decimal``."""
    digits = _last(target, "max_digits")
    places = _last(target, "decimal_places")
    out: list[RowCheck] = []
    if digits is not None:
        out.append(RowCheck("digits", target, "max_digits", int(digits),
                            f"{label} has at most {digits} digits"))
    if places is not None:
        out.append(RowCheck("digits", target, "decimal_places", int(places),
                            f"{label} has at most {places} decimal places"))
    if digits is not None and places is not None:
        whole = max(int(digits) - int(places), 0)
        out.append(RowCheck("digits", target, "whole_digits", whole,
                            f"{label} has at most {whole} digits before the point"))
    return out


def _tuple_items(annotation: Any) -> int | None:
    """How many items a fixed-length ``tuple[X, Y, ...]`` holds, or None for other types."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and args and Ellipsis not in args:
        return len(args)
    return None


def _list_element(annotation: Any) -> Any | None:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple:  # tuple[X, ...] or tuple[X, X]: every element is an X
        items = [a for a in args if a is not Ellipsis]
        return items[0] if items and all(a == items[0] for a in items) else None
    if origin in (list, set, frozenset) or is_sequence(origin):
        return args[0] if args else Any
    return None


def _literal_values(annotation: Any) -> list[Any] | None:
    if typing.get_origin(annotation) is Literal:
        return [a.value if isinstance(a, enum.Enum) else a for a in typing.get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    return None


def bound_value(check: RowCheck, dtype: Any) -> Any:
    """A check's bound as a query parameter for a value of DuckDB type ``dtype``.

    A ``Decimal`` stays one (DuckDB binds it as an exact ``DECIMAL``; as a float it would be
    rounded). A literal keeps only the allowed values of the column's kind: pydantic never
    takes the text ``'1'`` for the int ``1`` of ``Literal[1, "a"]``, and DuckDB cannot hold
    both kinds in one list. A pattern is given RE2's spelling of pydantic's meaning
    (:func:`re2_pattern`), a float field's number bound the float pydantic makes of it, and
    a datetime the column's awareness (:func:`_same_awareness`).

    Args:
        check: The check (its ``bound``).
        dtype: The DuckDB type of the checked value in this group of shards.

    Returns:
        The parameter's value.
    """
    value = check.bound
    dtype = _item_type(check, dtype)
    if check.template == "literal":
        kind = str(dtype.id)
        ints = _lax_literal_ints(check, kind)
        if ints is not None:
            return ints
        if _decodes_text(check, kind):
            return [v for v in value if isinstance(v, str)]
        fitting = [v for v in value if kind in SCALAR_TYPES.get(type(v), frozenset())]
        return fitting or value  # none fits: the type check fails these shards anyway
    if check.template == "pattern":
        return re2_pattern(value)
    if (check.template in ("ge", "gt", "le", "lt", "multiple_of")
            and check.target.annotation is float
            and isinstance(value, int | float | decimal.Decimal)):
        return float(value)  # pydantic keeps a float field's bound as a float
    if isinstance(value, dt.datetime):
        kind = str(dtype.id)
        if kind in INTEGER_TYPES:  # lax pydantic makes a UTC datetime of an int
            kind = "timestamp with time zone"
        return _same_awareness(value, kind)
    return value


def _item_type(check: RowCheck, dtype: Any) -> Any:
    """The DuckDB type of the value a check judges: the column's, or its items' (``steps``)."""
    for step in check.steps:
        dtype = _type_children(dtype).get("child" if not isinstance(step, str) else step, dtype)
    return dtype


def naive_bound_on_zoned(check: RowCheck, dtype: Any) -> bool:
    """Whether a range check compares a naive datetime bound with zoned timestamps.

    DuckDB holds those as UTC instants, while pydantic compares the bound with each value's
    wall-clock time in the zone the Arrow field names: the same only for UTC.
    """
    bound = check.bound
    if check.template not in ("ge", "gt", "le", "lt") or not isinstance(bound, dt.datetime):
        return False
    if bound.tzinfo is not None and bound.utcoffset() is not None:
        return False
    return str(_item_type(check, dtype).id) in ZONED_TIMESTAMP_TYPES


def _same_awareness(bound: dt.datetime, kind: str) -> dt.datetime:
    """A datetime bound as aware or naive as the column, compared as pydantic compares them.

    pydantic compares a naive datetime with an aware one by their wall-clock times; DuckDB
    would convert one to the other in the session's time zone (the machine's), so the verdict
    would change with the machine. A naive column takes the aware bound's wall-clock time; an
    aware column (UTC instants) takes a naive bound as UTC.
    """
    aware = bound.tzinfo is not None and bound.utcoffset() is not None
    if kind in ZONED_TIMESTAMP_TYPES and not aware:
        return bound.replace(tzinfo=dt.UTC)
    if kind not in ZONED_TIMESTAMP_TYPES and aware:
        return bound.replace(tzinfo=None)
    return bound


__all__ = [
    "NULL_TEMPLATES",
    "RowCheck",
    "bound_value",
    "condition",
    "holds_nan",
    "naive_bound_on_zoned",
    "re2_pattern",
    "row_checks",
    "value_sql",
]
