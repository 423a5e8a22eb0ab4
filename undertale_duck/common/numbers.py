"""Number arguments: Python or numpy numbers, never bools, checked the same way everywhere."""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from ..errors import ArgumentError

__all__ = ["check_int", "is_integer", "is_number"]


def is_integer(value: object) -> TypeGuard[int | np.integer[Any]]:
    """Whether ``value`` is an ``int`` or a numpy integer, and not a bool.

    numpy integers count (a seed or a size from a config computed with numpy); bools do not
    (``True`` would silently count as 1).
    """
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float | np.integer[Any] | np.floating[Any]]:
    """Whether ``value`` is a Python or numpy integer or float, and not a bool."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def check_int(name: str, value: object, low: int, *, say_range: bool = True) -> int:
    """``value`` as a Python int, if it is an integer (:func:`is_integer`) of at least ``low``.

    Args:
        name: The argument, as the error names it (``"batch"``, ``"stream 2: choose"``).
        value: What was given.
        low: The least value allowed.
        say_range: Say ``"must be >= low"`` for an integer below ``low``; False: the same
            ``"must be an integer >= low"`` as for a value that is no integer.

    Returns:
        ``int(value)``.

    Raises:
        ArgumentError: If ``value`` is not an integer, or is below ``low``.
    """
    if not is_integer(value):
        raise ArgumentError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        if not say_range:
            raise ArgumentError(f"{name} must be an integer >= {low}, got {value!r}")
        raise ArgumentError(f"{name} must be >= {low}, got {value}")
    return int(value)
