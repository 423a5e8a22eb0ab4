"""The indices of a batch (``__getitems__``) as one row of numbers, or a clear TypeError."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

import numpy as np
import torch

#: The types of booleans, which numpy reads as 0 and 1 among integers.
_BOOLS = frozenset({bool, np.bool_})

#: What a method taking many indices takes (the start of every refusal here).
_WANTED = "indices must be a 1-d sequence of integers (a list, a 1-d array or a tensor)"


def check_collection(indices: object, caller: str) -> None:
    """Refuse what is no ordered collection of indices, naming ``caller``'s argument.

    None and non-iterables would fail with Python's "not iterable"; a string or bytes would
    be read character by character (bytes as their byte values), a set in an order of its
    own and a dict as its keys, each said by no error.

    Args:
        indices: What was given.
        caller: The method, as the error names it (``"locate_many"``).

    Raises:
        TypeError: If ``indices`` is None, a string, bytes, a set, a mapping or not iterable.
    """
    why = ""
    if isinstance(indices, str | bytes | bytearray | memoryview):
        why = " (its characters or bytes are no indices)"
    elif isinstance(indices, Set):
        why = " (a set has no order to match the results to)"
    elif isinstance(indices, Mapping):
        why = " (pass list(d) for its keys, or list(d.values()))"
    elif indices is not None and hasattr(indices, "__iter__"):
        return
    raise TypeError(f"{caller}: {_WANTED}, got {type(indices).__name__}{why}")


def index_array(indices: object, caller: str = "__getitems__") -> np.ndarray[Any, Any]:
    """``indices`` (a list, a 1-d array or tensor) as a 1-d numpy array, of any dtype.

    The caller checks the values (integers, in range); this refuses what numpy or torch
    would fail on with their own words: a tensor on the ``meta`` device (no values), a 2-d
    or 0-d array or tensor (numpy would fail on each row, or iterating), nested lists of
    unequal lengths, and what is no ordered collection (:func:`check_collection`), or is
    an iterator (numpy would read a generator as one object).

    Args:
        indices: The indices given.
        caller: The method, as the errors name it.

    Raises:
        TypeError: Naming the argument and the shape it has.
    """
    if not isinstance(indices, torch.Tensor | np.ndarray):
        check_collection(indices, caller)
        if not hasattr(indices, "__len__"):
            raise TypeError(
                f"{caller}: {_WANTED}, got {type(indices).__name__} (an iterator): make it "
                "a list first"
            )
    if isinstance(indices, torch.Tensor):
        if indices.device.type == "meta":  # tolist() would fail in torch: no values
            raise TypeError(
                f"{caller}: indices is a tensor on the meta device, which holds no "
                "values; pass a 1-d integer tensor on a real device, or a list of ints"
            )
        if indices.dim() != 1:
            raise TypeError(_shape_message(caller, f"a tensor of shape {tuple(indices.shape)}"))
        indices = indices.tolist()
    try:
        array = np.asarray(indices)
    except (ValueError, TypeError, RuntimeError, NotImplementedError):
        # nested lists of unequal lengths, or elements numpy cannot read (meta tensors)
        raise TypeError(
            _shape_message(caller, f"a {type(indices).__name__} numpy cannot read as 1-d")
        ) from None
    if array.ndim != 1:
        raise TypeError(
            _shape_message(caller, f"a {type(indices).__name__} of shape {array.shape}")
        )
    if array.dtype.kind in "iu" and isinstance(indices, list | tuple) and any(
        t in _BOOLS or issubclass(t, torch.Tensor) for t in set(map(type, indices))
    ):
        # numpy reads [5, True] as [5, 1], and [5, torch.tensor(True)] too: as objects,
        # the caller checks each index and refuses the bool as it does alone (ds[True],
        # __getitems__([True]))
        array = np.asarray(indices, dtype=object)
    return array


def _shape_message(caller: str, got: str) -> str:
    """The error for indices that are not one row of integers."""
    return (
        f"{caller}: {_WANTED}, got {got}; flatten it first (such as indices.reshape(-1))"
    )


__all__ = ["check_collection", "index_array"]
