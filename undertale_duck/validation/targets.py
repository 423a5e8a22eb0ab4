"""Schema class -> column targets, and whether a DuckDB column type satisfies a field's type."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import re
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import duckdb
from pydantic import (
    AliasChoices,
    AliasPath,
    AllowInfNan,
    AwareDatetime,
    BaseModel,
    NaiveDatetime,
    PydanticUserError,
    Strict,
    StringConstraints,
)
from pydantic.fields import FieldInfo

from ..common.text import first_line
from ..errors import ArgumentError
from .schemas import is_unique_marker

INTEGER_TYPES = frozenset(
    {
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "uhugeint",
    }
)
FLOAT_TYPES = frozenset({"float", "double", "decimal"}) | INTEGER_TYPES
TIMESTAMP_TYPES = frozenset(
    {
        "timestamp", "timestamp with time zone", "timestamp_ms", "timestamp_ns", "timestamp_s",
        "timestamptz_ns",  # DuckDB 2's nanosecond TIMESTAMP WITH TIME ZONE
    }
)
#: Timestamps with a time zone: UTC instants in DuckDB, whose zone (the Arrow field's, in
#: which a row holds the value) DuckDB does not keep.
ZONED_TIMESTAMP_TYPES = frozenset({"timestamp with time zone", "timestamptz_ns"})
#: Timestamps without a time zone: rows hold naive datetimes.
NAIVE_TIMESTAMP_TYPES = TIMESTAMP_TYPES - ZONED_TIMESTAMP_TYPES
LIST_TYPES = frozenset({"list", "array"})
_BINARY_FLOATS = frozenset({"float", "double"})
#: DuckDB types whose values lax pydantic compares with a ``Literal``'s ints (and bools, as 0
#: and 1) as Python does: ``1.0``, ``Decimal("1.00")`` and ``True`` are the ``1`` of
#: ``Literal[1, 2]``; a per-row ``literal`` check decides each row (``plan.py``).
LITERAL_NUMBER_TYPES = INTEGER_TYPES | _BINARY_FLOATS | {"decimal", "boolean"}

#: DuckDB types that lax pydantic takes for a scalar type beyond :data:`SCALAR_TYPES`, for
#: some values (an integral float for ``int``, 0 or 1 for ``bool``, ...): a per-row ``type``
#: check decides each row (``plan.py``). Strict pydantic takes none of them.
LAX_TYPES: dict[type, frozenset[str]] = {
    int: _BINARY_FLOATS | {"decimal", "boolean"},
    float: frozenset({"boolean"}),
    bool: INTEGER_TYPES | _BINARY_FLOATS | {"decimal", "varchar"},
    decimal.Decimal: INTEGER_TYPES | _BINARY_FLOATS,
    # every date (it is midnight), and a naive timestamp whose time of day is midnight; an
    # int is a Unix time (seconds, or milliseconds past 2e10), a UTC datetime
    dt.datetime: frozenset({"date"}) | INTEGER_TYPES,
    NaiveDatetime: frozenset({"date"}),  # AwareDatetime refuses a date: its midnight is naive
    AwareDatetime: INTEGER_TYPES,  # NaiveDatetime refuses an int: its datetime is in UTC
    dt.date: NAIVE_TIMESTAMP_TYPES | INTEGER_TYPES,
    str: frozenset({"blob"}),  # bytes that are UTF-8
    bytes: frozenset({"varchar"}),  # every str (encoded as UTF-8)
}

#: Scalar types lax pydantic parses from text by rules the checks do not reproduce.
_PARSED_FROM_TEXT = frozenset({int, float, decimal.Decimal})

#: Which DuckDB types (by ``DuckDBPyType.id``) satisfy each scalar Python type.
SCALAR_TYPES: dict[type, frozenset[str]] = {
    bool: frozenset({"boolean"}),
    int: INTEGER_TYPES,
    float: FLOAT_TYPES,
    str: frozenset({"varchar", "enum"}),
    bytes: frozenset({"blob"}),
    dt.datetime: TIMESTAMP_TYPES,
    # pydantic refuses every datetime of the other kind: the column's time zone decides
    AwareDatetime: ZONED_TIMESTAMP_TYPES,
    NaiveDatetime: NAIVE_TIMESTAMP_TYPES,
    dt.date: frozenset({"date"}),
    dt.time: frozenset({"time", "time with time zone", "time_ns"}),
    dt.timedelta: frozenset({"interval"}),
    decimal.Decimal: frozenset({"decimal"}),
    uuid.UUID: frozenset({"uuid"}),
}


@dataclasses.dataclass(frozen=True)
class Target:
    """A column, or a field of a struct column, that a schema field describes.

    Attributes:
        label: ``column`` or ``column.field`` for nested models.
        path: Column name then struct field names.
        annotation: The Python type with ``None`` removed from a union.
        nullable: Whether ``None`` is allowed.
        required: Whether the field has no default (a column with a default may be absent).
        metadata: Pydantic constraint objects of the field.
        strict: Whether pydantic validates the field's value in strict mode (its own
            ``strict`` setting, else its model's ``ConfigDict(strict=...)``).
        strict_inside: Whether items inside it (list elements, map keys and values) are
            validated in strict mode where they set none of their own: the model's config.
        model: The model the field belongs to (its config also covers the field's list
            items), or None.
        by_name: The column pydantic reads in a row without ``path``'s column: the field's
            name, with ``validate_by_name=True`` (or ``populate_by_name``) and an alias;
            else None. Top-level fields only.
    """

    label: str
    path: tuple[str, ...]
    annotation: Any
    nullable: bool
    required: bool
    metadata: tuple[Any, ...]
    strict: bool = False
    strict_inside: bool = False
    model: type[BaseModel] | None = None
    by_name: str | None = None


def strip_optional(annotation: Any) -> tuple[Any, bool]:
    """Remove ``None`` (and ``Annotated``) from a type annotation.

    Args:
        annotation: A field's annotation, e.g. ``int | None``.

    Returns:
        The annotation without ``None`` and whether ``None`` is allowed.
    """
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) != len(args)
        if len(rest) == 1:
            inner, inner_nullable = strip_optional(rest[0])
            return inner, nullable or inner_nullable
        return typing.Union[tuple(rest)], nullable  # noqa: UP007
    if origin is typing.Annotated:
        return strip_optional(typing.get_args(annotation)[0])
    if origin is Literal:  # Literal[None, "a"] allows None as Optional does
        return annotation, None in typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation, any(m.value is None for m in annotation)  # a member's value None
    return annotation, annotation is type(None) or annotation is Any or annotation is object


def column_name(name: str, info: FieldInfo, model: type[BaseModel] | None = None) -> str:
    """The column a field reads: its validation alias when one name, else its alias or name.

    ``AliasChoices`` and ``AliasPath`` naming one column are that column. With
    ``validate_by_alias=False`` in the model's config, pydantic reads only the name.

    Args:
        name: The field's name in the model.
        info: The field.
        model: The model it belongs to (its config), or None.

    Returns:
        The column (or struct field) name, as ``model_validate`` looks it up.

    Raises:
        ArgumentError: If the validation alias names several columns (a row's first present
            one is read, so the column differs between shards) or a value inside a column;
            the checks read one whole column per field and could not give pydantic's verdict.
    """
    alias = info.validation_alias
    if model is not None and model.model_config.get("validate_by_alias") is False:
        return name
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices | AliasPath):
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        paths = [[c] if isinstance(c, str) else c.path for c in choices]
        columns = list(dict.fromkeys(p[0] for p in paths if len(p) == 1 and isinstance(p[0], str)))
        owner = f"schema {model.__name__}: " if model is not None else ""
        if len(columns) != 1 or len(columns) != len(dict.fromkeys(map(repr, paths))):
            raise ArgumentError(
                f"{owner}field {name!r} has validation_alias={alias!r}, which reads "
                + ("the first of several columns that a row holds" if len(paths) > 1
                   else "a value inside a column")
                + "; validation checks one whole column per field and cannot give pydantic's "
                "verdict for it. Give the field one column name (validation_alias='column') "
                "for validation"
            )
        return columns[0]
    return info.alias or name


def _by_name(model: type[BaseModel]) -> bool:
    """Whether pydantic reads a field by its name where a row lacks its alias."""
    config = model.model_config
    return config.get("validate_by_name") is True or config.get("populate_by_name") is True


def inner_metadata(annotation: Any) -> tuple[Any, ...]:
    """Constraints written inside a field's optional type (pydantic applies them).

    ``FieldInfo.metadata`` lacks them: ``Annotated[int, Field(ge=0)] | None``,
    ``Optional[conint(ge=0)]``, ``Optional[Annotated[str, Unique]]``.

    Args:
        annotation: A field's annotation as pydantic keeps it (``FieldInfo.annotation``).

    Returns:
        The constraint objects, ``Field(...)`` unpacked into its own constraints.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return inner_metadata(rest[0]) if len(rest) == 1 else ()
    if origin is typing.Annotated:
        items: list[Any] = []
        for item in args[1:]:
            if isinstance(item, FieldInfo):
                items.extend(item.metadata)
            elif item is not None:
                items.append(item)
        return (*inner_metadata(args[0]), *items)
    return ()


def item_annotations(annotation: Any) -> list[tuple[int | None, Any]]:
    """The item types of a list-like type, each with its position (None: every item).

    ``[(None, X)]`` for ``list[X]`` (also ``set``, ``frozenset``, ``Sequence``,
    ``tuple[X, ...]``), ``[(1, X), (2, Y)]`` for a fixed ``tuple[X, Y]`` (positions from 1),
    ``[]`` for any other type.

    Args:
        annotation: A type with ``None`` removed.

    Returns:
        (position or None for every item, the item's annotation as written).
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return [(None, args[0])]
        return [(k + 1, a) for k, a in enumerate(args) if a is not Ellipsis]
    if origin in (list, set, frozenset) or is_sequence(origin):
        return [(None, args[0])] if args else []
    return []


def item_metadata(annotation: Any) -> tuple[Any, ...]:
    """Every constraint object written inside a type's list items, at any depth."""
    out: list[Any] = []
    for _, item in item_annotations(strip_optional(annotation)[0]):
        out.extend(inner_metadata(item))
        out.extend(item_metadata(item))
    return tuple(out)


def strict_setting(items: Sequence[Any]) -> bool | None:
    """The last ``strict`` setting among a field's constraint objects (pydantic keeps the last).

    Args:
        items: Constraint objects (``Strict``, ``StringConstraints``, ``Field(...)``, ...).

    Returns:
        True or False when one sets it, else None.
    """
    found = None
    for item in items:
        value = strict_setting(item.metadata) if isinstance(item, FieldInfo) else getattr(
            item, "strict", None
        )
        if isinstance(value, bool):
            found = value
    return found


def _annotated_strict(annotation: Any) -> bool | None:
    """The ``strict`` setting written in an annotation's own ``Annotated`` (inside ``| None``)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return _annotated_strict(rest[0]) if len(rest) == 1 else None
    if origin is typing.Annotated:
        own = strict_setting(args[1:])
        return own if own is not None else _annotated_strict(args[0])
    return None


def _strict_refusal(annotation: Any) -> str | None:
    """Why strict pydantic refuses every value a compatible Parquet column gives, or None.

    Rows are Python values as Arrow gives them: a list column gives lists and an enum is
    stored as its values, and strict mode takes only a tuple, a set or an enum member.
    """
    origin = typing.get_origin(annotation) or annotation  # bare `tuple` too
    if origin in (tuple, set, frozenset):
        return (
            f"strict mode takes only a Python {origin.__name__}, and a list column gives lists"
        )
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return (
            f"strict mode takes only members of {annotation.__name__}, and a column holds "
            "their values"
        )
    return None


def model_class(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model class an annotation names (a nested struct), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def config_metadata(
    model: type[BaseModel], annotation: Any, own: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The constraints a model's config gives a field (the field's own come after and win).

    ``allow_inf_nan=False`` applies to every float field; ``str_strip_whitespace``,
    ``str_min_length`` and ``str_max_length`` to every ``str`` field, a length only where
    the field sets none of its own, as pydantic applies them (to list items too).

    Args:
        model: The model the field belongs to (its ``model_config``).
        annotation: The field's type with ``None`` removed.
        own: The field's own constraints (``FieldInfo.metadata`` and those inside an
            optional type).

    Returns:
        Constraint objects of the kinds ``FieldInfo.metadata`` holds.
    """
    config = model.model_config
    out: list[Any] = []
    if annotation is float and config.get("allow_inf_nan") is False:
        out.append(AllowInfNan(False))
    if annotation is str:

        def length(attr: str) -> int | None:
            if any(getattr(item, attr, None) is not None for item in own):
                return None  # the field's own length wins
            value = config.get(f"str_{attr}")
            return value if isinstance(value, int) else None

        shortest, longest = length("min_length"), length("max_length")
        strip = config.get("str_strip_whitespace") is True or None
        if strip or shortest is not None or longest is not None:
            out.append(
                StringConstraints(strip_whitespace=strip, min_length=shortest, max_length=longest)
            )
    return tuple(out)


def _refuse_python_patterns(model: type[BaseModel], name: str, items: Sequence[Any]) -> None:
    r"""Refuse patterns pydantic matches with Python's ``re``: RE2 cannot give its verdict.

    pydantic uses Python's ``re`` for a compiled ``re.Pattern`` and for every pattern of a
    model with ``regex_engine='python-re'``; its meaning differs from RE2's (``$`` also
    matches before a final newline, ``\w`` is Unicode, flags, lookarounds), so a check would
    refuse rows pydantic takes or take rows it refuses.
    """
    python_re = model.model_config.get("regex_engine") == "python-re"
    for item in items:
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, re.Pattern) or (isinstance(pattern, str) and python_re):
            why = (
                "a compiled re.Pattern" if isinstance(pattern, re.Pattern)
                else "regex_engine='python-re' in its model's config"
            )
            raise ArgumentError(
                f"schema {model.__name__}: field {name!r} has pattern {pattern!r} matched with "
                f"Python's re ({why}); validation matches patterns as pydantic's default "
                "engine (rust-regex) does and cannot give that verdict. Give the pattern as a "
                "string, without regex_engine='python-re'"
            )


def _unique_in_items(annotation: Any) -> str | None:
    """Where a type's list items hold a ``Unique`` marker, as the refusal names it, or None.

    An item's own marker, or a field of an item's model, at any depth (a model holding
    itself is refused before, by :func:`_refuse_recursive`).
    """
    for _, item in item_annotations(strip_optional(annotation)[0]):
        if any(is_unique_marker(m) for m in inner_metadata(item)):
            return f"its items are {repr(item).replace('typing.', '')}"
        inner = strip_optional(item)[0]
        found = _unique_in_items(inner)
        if found is not None:
            return found
        nested = model_class(inner)
        if nested is not None:
            found = _unique_in_model(nested)
            if found is not None:
                return f"its items are {nested.__name__}, whose {found}"
    return None


def _unique_in_model(model: type[BaseModel]) -> str | None:
    """Which field of a model (at any depth) is marked ``Unique``, or None."""
    for name, info in model.model_fields.items():
        annotation = strip_optional(info.annotation)[0]
        if any(is_unique_marker(m) for m in (*info.metadata, *inner_metadata(info.annotation))):
            return f"field {name!r} is Unique"
        nested = model_class(annotation)
        found = None if nested is None else _unique_in_model(nested)
        found = found or _unique_in_items(annotation)
        if found is not None:
            return f"field {name!r}: {found}"
    return None


def _refuse_unique_items(model: type[BaseModel], name: str, annotation: Any) -> None:
    """Refuse a ``Unique`` marker inside a field's list items (``list[Annotated[int, Unique]]``).

    Uniqueness is checked on a whole column or struct field; inside list items its meaning
    (within a row, or across rows) is not defined, and it would pass silently unchecked.
    """
    where = _unique_in_items(annotation)
    if where is not None:
        raise ArgumentError(
            f"schema {model.__name__}: field {name!r} marks values inside its list items "
            f"Unique ({where}); validation checks Unique on a whole column or struct field, "
            "and uniqueness inside lists is not defined (within a row, or across rows). Mark "
            "the whole field Unique (Annotated[list[int], Unique]: no two rows hold the same "
            "list), or remove the marker from the items"
        )


def _checked_alone(arm: Any, model: type[BaseModel]) -> bool:
    """Whether a union's arm carries checks of its own (constraints, literals, a model, ...).

    Such checks are translated only where the arm is the field's one type; inside a union of
    several types validation would drop them.
    """
    inner = strip_optional(arm)[0]
    origin = typing.get_origin(inner)
    # strictness alone is judged by the union's type check (StrictInt | StrictStr)
    own = [m for m in (*inner_metadata(arm), *item_metadata(inner)) if not isinstance(m, Strict)]
    if own or config_metadata(model, inner, ()):
        return True
    if origin is Literal or model_class(inner) is not None:
        return True
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_checked_alone(a, model) for a in typing.get_args(inner))
    return any(_checked_alone(item, model) for _, item in item_annotations(inner))


def _refuse_checked_unions(model: type[BaseModel], name: str, annotation: Any) -> None:
    """Refuse a union of several types when one of them carries its own checks.

    pydantic validates a value against each type of a union with that type's constraints
    (``Annotated[int, Field(ge=0)] | str``, ``Literal["a"] | int``, ``A | B`` of models,
    ``list[Annotated[int, Field(ge=0)] | str]``); the checks give each column one set of
    constraints, so they would pass rows pydantic refuses.
    """
    inner = strip_optional(annotation)[0]
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(inner) if a is not type(None)]
        if any(_checked_alone(a, model) for a in arms):
            raise ArgumentError(
                f"schema {model.__name__}: field {name!r} is a union of several types, one of "
                "which carries its own constraints (a Field, Literal, Enum, nested model or "
                "constrained items); validation checks one type per column and cannot give "
                "pydantic's verdict for it. Put the constraints on the whole field "
                "(x: int | str = Field(ge=0)), or give the field one type, cast in a view "
                "(query=) if needed"
            )
        for arm in arms:
            _refuse_checked_unions(model, name, arm)
        return
    for _, item in item_annotations(inner):
        _refuse_checked_unions(model, name, item)


def _refuse_unusable(model: type[BaseModel]) -> None:
    """Refuse a model whose verdict on a row is not given by its fields' checks.

    pydantic validates nothing with a model that is not fully defined (an annotation names a
    type it cannot find): ``model_validate`` raises ``PydanticUserError`` for every row, and
    the checks would otherwise take such a field as "not checked". A ``RootModel`` validates
    its one value, not a row's columns.
    """
    if getattr(model, "__pydantic_root_model__", False) is True:  # a RootModel subclass
        raise ArgumentError(
            f"schema {model.__name__} is a RootModel, which validates one value rather than "
            "a row's columns; give a BaseModel with one field per column"
        )
    if model is BaseModel or model.__pydantic_complete__:  # BaseModel: no fields, no checks
        return
    try:  # pydantic itself retries the build when a model is first used
        model.model_rebuild()
    except (PydanticUserError, NameError) as exc:  # PydanticUndefinedAnnotation is both
        raise ArgumentError(
            f"schema {model.__name__} is not fully defined ({_reason(exc)}), so pydantic "
            "validates no row with it; define or import the missing type where the schema "
            f"is defined, then call {model.__name__}.model_rebuild()"
        ) from None


def _models_within(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds at any depth (in lists, unions, dicts, ``Annotated``)."""
    nested = model_class(annotation)
    if nested is not None:
        return [nested]
    return [m for arg in typing.get_args(annotation) for m in _models_within(arg)]


def _refuse_recursive(model: type[BaseModel], within: tuple[type[BaseModel], ...] = (),
                      fields: tuple[str, ...] = ()) -> None:
    """Refuse a schema whose model holds itself (``child: Node | None``, ``list[Node]``).

    Every field is checked as a column, or a struct field, of a fixed depth; a model that
    holds itself describes values of any depth (and walking it never ends).
    """
    for name, info in model.model_fields.items():
        for nested in _models_within(info.annotation):
            path = (*fields, name)
            if nested in (*within, model):
                raise ArgumentError(
                    f"schema {(within or (model,))[0].__name__}: field {'.'.join(path)!r} "
                    f"holds {nested.__name__} within itself (a recursive model), which no "
                    "Parquet column of fixed depth matches; validation cannot check it. "
                    "Validate with a model that stops at the depth the data has (or types the "
                    "field Any)"
                )
            _refuse_recursive(nested, (*within, model), path)


def _reason(exc: BaseException) -> str:
    """The message pydantic gives, without its documentation link."""
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else first_line(exc)


def targets(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[Target]:
    """List the columns (and nested struct fields) a schema describes, in field order.

    Args:
        model: A pydantic model class.
        prefix: The struct path above this model (for nested models).

    Returns:
        One target per field, depth first.

    Raises:
        ArgumentError: If the model is not fully defined, is a ``RootModel`` or holds
            itself.
    """
    _refuse_unusable(model)
    if not prefix:
        _refuse_recursive(model)
    out: list[Target] = []
    for name, info in model.model_fields.items():
        column = column_name(name, info, model)
        if "\x00" in column:
            raise ArgumentError(
                f"schema {model.__name__}: field {name!r} reads the column {column!r}, whose "
                "name holds a NUL character, which no SQL query can name; rename the column "
                "(validation checks it through DuckDB)"
            )
        annotation, nullable = strip_optional(info.annotation)
        path = (*prefix, column)
        own = (*info.metadata, *inner_metadata(info.annotation))
        _refuse_python_patterns(model, name, (*own, *item_metadata(annotation)))
        _refuse_checked_unions(model, name, info.annotation)
        _refuse_unique_items(model, name, annotation)
        config_strict = model.model_config.get("strict") is True  # a nested model has its own
        own_strict = strict_setting(own)
        out.append(
            Target(
                label=".".join(path),
                path=path,
                annotation=annotation,
                nullable=nullable,
                required=info.is_required(),
                metadata=(*config_metadata(model, annotation, own), *own),
                strict=config_strict if own_strict is None else own_strict,
                strict_inside=config_strict,
                model=model,
                by_name=name if column != name and not prefix and _by_name(model) else None,
            )
        )
        nested = model_class(annotation)
        if nested is not None:
            out.extend(targets(nested, path))
    return out


# =========================================================================== type compatibility


def describe_type(annotation: Any) -> str:
    """Describe which DuckDB types satisfy a Python type.

    Args:
        annotation: A Python type annotation (``None`` already stripped).

    Returns:
        Text such as ``"any integer type"`` or ``"list of any integer type"``.
    """
    annotation, _ = strip_optional(annotation)
    if annotation is Any or annotation is object:
        return "any type"
    if annotation in SCALAR_TYPES:
        names = {
            bool: "BOOLEAN",
            int: "any integer type",
            float: "any float, decimal or integer type",
            str: "VARCHAR",
            bytes: "BLOB",
            dt.datetime: "TIMESTAMP",
            AwareDatetime: "TIMESTAMP WITH TIME ZONE",
            NaiveDatetime: "TIMESTAMP without time zone",
            dt.date: "DATE",
            dt.time: "TIME",
            dt.timedelta: "INTERVAL",
            decimal.Decimal: "DECIMAL",
            uuid.UUID: "UUID",
        }
        return names[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, set, frozenset, tuple) or is_sequence(origin):
        inner = args[0] if args else Any
        return f"list of {describe_type(inner)}"
    if origin in (dict,) or _is_mapping(origin):
        key, value = (*args, Any, Any)[:2]
        return f"MAP of {describe_type(key)} to {describe_type(value)}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    model = model_class(annotation)
    if model is not None:
        return f"STRUCT with the fields of {model.__name__}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in annotation)
    return f"any type ({annotation!r} is not checked)"


def is_sequence(origin: Any) -> bool:
    """Whether a generic origin is a sequence type other than ``str`` (a list column)."""
    return isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str


def _is_mapping(origin: Any) -> bool:
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _children(dtype: Any) -> list[tuple[str, Any]]:
    try:
        return list(dtype.children)
    except duckdb.Error:
        return []


def mismatch(
    annotation: Any,
    dtype: Any,
    strict: bool = False,
    strict_inside: bool = False,
    by_row: bool = False,
) -> str | None:
    """Tell why a DuckDB type does not satisfy a Python type.

    Args:
        annotation: The Python type (``X | None`` allowed).
        dtype: A ``duckdb.DuckDBPyType``.
        strict: Whether pydantic validates this value in strict mode (an ``Annotated``
            ``Strict`` in ``annotation`` wins).
        strict_inside: Whether it validates the items inside in strict mode (the model's
            config), where they set none of their own.
        by_row: Whether a per-row ``type`` check judges the values of :data:`LAX_TYPES`
            (a column and its list items; not struct fields, map keys and values, unions).

    Returns:
        None when compatible, else a short reason.
    """
    own = _annotated_strict(annotation)
    strict = strict if own is None else own
    annotation, _ = strip_optional(annotation)
    kind = str(dtype.id)
    if kind == "null" or annotation is Any or annotation is object:
        return None  # an all-NULL column is compatible with anything (not_null decides)
    found = str(dtype)
    refusal = _strict_refusal(annotation) if strict else None
    if refusal is not None:
        return f"found {found}, expected {describe_type(annotation)}: {refusal}"
    if annotation in SCALAR_TYPES:
        if kind in SCALAR_TYPES[annotation]:
            return None
        if by_row and not strict and kind in LAX_TYPES.get(annotation, ()):
            return None  # lax pydantic takes some of these values: judged row by row
        if not strict and kind == "varchar" and annotation in _PARSED_FROM_TEXT:
            return (
                f"found {found}, expected {describe_type(annotation)}: lax pydantic parses "
                f"text as {annotation.__name__} by rules validation does not reproduce "
                "(whitespace, underscores, signs), so it cannot give pydantic's verdict; cast "
                "the column in a view (query=) or make the field strict"
            )
        if not strict and annotation is dt.date and kind in ZONED_TIMESTAMP_TYPES:
            return (
                f"found {found}, expected DATE: lax pydantic takes a datetime at midnight in "
                "the time zone a row holds it in (the Arrow field's), which DuckDB does not "
                "keep, so validation cannot give pydantic's verdict; cast the column in a "
                "view (query=), or write it without a time zone"
            )
        if annotation is AwareDatetime and kind in NAIVE_TIMESTAMP_TYPES | {"date"}:
            return (
                f"found {found}, expected {describe_type(annotation)}: AwareDatetime refuses "
                "every value of this column, a datetime without a time zone"
            )
        if annotation is NaiveDatetime and kind in ZONED_TIMESTAMP_TYPES:
            return (
                f"found {found}, expected {describe_type(annotation)}: NaiveDatetime refuses "
                "every value of this column, a datetime with a time zone"
            )
        return f"found {found}, expected {describe_type(annotation)}"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        values = [a.value if isinstance(a, enum.Enum) else a for a in args]
        kinds = {type(v) for v in values}
        if any(kind in SCALAR_TYPES.get(k, frozenset()) for k in kinds):
            return None
        if by_row and not strict and kind in LITERAL_NUMBER_TYPES and literal_ints(values):
            return None  # lax pydantic takes 1.0 or True for 1: judged row by row
        return f"found {found}, expected a type holding {describe_type(annotation)}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        members = tuple(m.value for m in annotation)
        if by_row and not strict and kind == "blob" and issubclass(annotation, str):
            return None  # lax pydantic decodes UTF-8 bytes for a str enum: judged row by row
        if not strict and kind == "varchar" and issubclass(annotation, int):
            return (
                f"found {found}, expected {describe_type(annotation)}: lax pydantic parses "
                f"text as an int for {annotation.__name__} by rules validation does not "
                "reproduce (whitespace, signs, '1.0'), so it cannot give pydantic's verdict; "
                "cast the column in a view (query=) or make the field strict"
            )
        return mismatch(Literal[members], dtype, strict, strict_inside, by_row)
    if origin in (list, set, frozenset, tuple) or is_sequence(origin):
        if kind not in LIST_TYPES:
            return f"found {found}, expected {describe_type(annotation)}"
        # every item of tuple[X, Y] must satisfy the one element type of the list
        items = [a for a in args if a is not Ellipsis] if origin is tuple else args[:1]
        child = dict(_children(dtype)).get("child")
        for inner in items or [Any]:
            reason = None if child is None else mismatch(
                inner, child, strict_inside, strict_inside, by_row
            )
            if reason is not None:
                return f"list element: {reason}"
        return None
    if origin is dict or _is_mapping(origin):
        if kind != "map":
            return f"found {found}, expected {describe_type(annotation)}"
        # rows hold what pyarrow's as_py() gives (the dataset serves the same): a MAP value is
        # a list of (key, value) pairs, and pydantic takes no list for a dict, lax or strict
        return (
            f"found {found}, expected {describe_type(annotation)}: a MAP value reaches "
            "pydantic as a list of (key, value) pairs (as the dataset serves it), which it "
            "refuses for a dict; declare the field Any, or cast the column in a view (query=)"
        )
    if origin in (typing.Union, types.UnionType):
        reasons = [mismatch(a, dtype, strict, strict_inside) for a in args]
        if any(r is None for r in reasons):
            return None
        return f"found {found}, expected {describe_type(annotation)}"
    model = model_class(annotation)
    if model is not None:
        if kind != "struct":
            return f"found {found}, expected {describe_type(annotation)}"
        fields = dict(_children(dtype))
        inner_strict = model.model_config.get("strict") is True  # its own config, not ours
        for name, info in model.model_fields.items():
            column = column_name(name, info, model)
            if column not in fields:
                if info.is_required():
                    return f"STRUCT {found} has no field {column!r}"
                continue
            field_strict = strict_setting(info.metadata)
            reason = mismatch(
                info.annotation,
                fields[column],
                inner_strict if field_strict is None else field_strict,
                inner_strict,
            )
            if reason is not None:
                return f"field {column!r}: {reason}"
        beyond = forbidden_fields(model, dtype)
        # lax, row by row: pydantic refuses each non-NULL struct (an empty list holds none)
        if beyond and (strict or not by_row):
            return f"STRUCT {found} has fields {model.__name__} forbids: {', '.join(beyond)}"
        return None
    return None  # types we cannot judge are accepted (described as "not checked")


def forbidden_fields(model: type[BaseModel], dtype: Any) -> list[str]:
    """The fields of a STRUCT type that a model with ``extra="forbid"`` does not name.

    pydantic refuses a dict holding a key the model does not name, so each non-NULL value of
    such a struct is refused.

    Args:
        model: The nested model.
        dtype: The struct's ``duckdb.DuckDBPyType``.

    Returns:
        The field names, empty where the model allows extra keys.
    """
    if model.model_config.get("extra") != "forbid":
        return []
    named = {column_name(n, i, model) for n, i in model.model_fields.items()}
    return [name for name, _ in _children(dtype) if name not in named]


def literal_ints(values: Sequence[Any]) -> list[int] | None:
    """The ints a ``Literal``'s values compare with a number of another type, or None.

    Python compares ``1.0``, ``Decimal("1.00")`` and ``True`` equal to ``1`` and ``True`` to
    ``1.0``, as pydantic's literal check does; a bool counts as 0 or 1. None where a value is
    a float (its exact comparison with an integral float is not reproduced) or none is an int.

    Args:
        values: The allowed values (an ``Enum``'s member values).

    Returns:
        The ints, or None.
    """
    if any(isinstance(v, float) for v in values):
        return None
    ints = [int(v) for v in values if isinstance(v, int)]  # bool is an int: True is 1
    return ints or None


def field_type(dtype: Any, path: Sequence[str]) -> Any | None:
    """The DuckDB type of a struct field path inside a column type, or None when absent.

    Args:
        dtype: The column's ``duckdb.DuckDBPyType``.
        path: Struct field names below the column (empty for the column itself).

    Returns:
        The field's type, or None when a step is not a struct or has no such field.
    """
    for name in path:
        if str(dtype.id) != "struct":
            return None
        dtype = dict(_children(dtype)).get(name)
        if dtype is None:
            return None
    return dtype


__all__ = [
    "FLOAT_TYPES",
    "INTEGER_TYPES",
    "LAX_TYPES",
    "LIST_TYPES",
    "LITERAL_NUMBER_TYPES",
    "SCALAR_TYPES",
    "TIMESTAMP_TYPES",
    "Target",
    "column_name",
    "config_metadata",
    "describe_type",
    "field_type",
    "forbidden_fields",
    "inner_metadata",
    "is_sequence",
    "item_annotations",
    "item_metadata",
    "literal_ints",
    "mismatch",
    "model_class",
    "strict_setting",
    "strip_optional",
    "targets",
]
