"""The indices of a batch (``__getitems__``) as one row of numbers, or a clear TypeError."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def index_array(indices: object) -> np.ndarray[Any, Any]:
    """``indices`` (a list, a 1-d array or tensor) as a 1-d numpy array, of any dtype.

    The caller checks the values (integers, in range); this refuses what numpy or torch
    would fail on with their own words: a tensor on the ``meta`` device (no values), a 2-d
    or 0-d array or tensor (numpy would fail on each row, or iterating), nested lists of
    unequal lengths.

    Raises:
        TypeError: Naming the argument and the shape it has.
    """
    if isinstance(indices, torch.Tensor):
        if indices.device.type == "meta":  # tolist() would fail in torch: no values
            raise TypeError(
                "__getitems__: indices is a tensor on the meta device, which holds no "
                "values; pass a 1-d integer tensor on a real device, or a list of ints"
            )
        if indices.dim() != 1:
            raise TypeError(_shape_message(f"a tensor of shape {tuple(indices.shape)}"))
        indices = indices.tolist()
    try:
        array = np.asarray(indices)
    except (ValueError, TypeError, RuntimeError, NotImplementedError):
        # nested lists of unequal lengths, or elements numpy cannot read (meta tensors)
        raise TypeError(
            _shape_message(f"a {type(indices).__name__} numpy cannot read as 1-d")
        ) from None
    if array.ndim != 1:
        raise TypeError(_shape_message(f"a {type(indices).__name__} of shape {array.shape}"))
    return array


def _shape_message(got: str) -> str:
    """The error for indices that are not one row of integers."""
    return (
        "__getitems__: indices must be a 1-d sequence of integers (shape (batch,)), got "
        f"{got}; flatten it first (such as indices.reshape(-1))"
    )


__all__ = ["index_array"]
