"""Place a batch's tensors in one shared-memory block in a DataLoader worker."""

from __future__ import annotations

import copy
from collections import Counter, UserDict
from typing import Any, TypeVar

import torch
from torch.utils.data import get_worker_info

T = TypeVar("T")

#: Byte boundary each tensor of a block starts at (any dtype's alignment, a cache line).
ALIGN = 64
#: Containers deeper than this are left as they are (a batch is a few levels at most).
_DEPTH = 8


def one_block(batch: T) -> T:
    """``batch`` with its tensors moved into one shared-memory block, in a DataLoader worker.

    A worker hands each batch to the main process through shared memory, and torch moves
    every tensor there by itself: a new shared-memory file, a file descriptor passed over a
    socket and mapped again on the other side, per tensor and per batch. With the tensors
    of a batch in one block torch passes one (measured on 2 cores, one and two workers:
    1.4-1.8x the rows a second, half the main process's CPU; docs/performance.md). The
    values, dtypes and shapes are the same and each tensor stays writable and apart from
    the others; they are contiguous. Outside a worker, ``batch`` is returned as it is.

    Only tensors in dicts, lists and tuples are moved (nested; their subclasses too, such as
    ``OrderedDict``, ``defaultdict``, a named tuple or Hugging Face's ``BatchEncoding``, a
    ``UserDict``): plain CPU tensors with values that need no gradient, not shared already,
    not nested, and not expanded views (``x.expand(...)`` would be written out whole). A
    container holding a moved tensor is rebuilt as its own type (a subclass as a shallow
    ``copy.copy`` with the moved items replaced, as torch's ``pin_memory`` does; one that
    cannot be copied so is left as it is, its tensors to torch); one holding none is passed
    on as it is. Tensors that share storage with another of the batch keep it (their
    aliasing is kept, with a tensor that cannot move too), and a lone tensor is left to
    torch, unless it is a conjugate or negative view (``x.conj()``, ``x.conj().imag``):
    torch 2.13 hands those to the main process without their bit, the values unconjugated.
    Those are moved, and arrive resolved, even beside another view of their storage (that
    aliasing is lost: the values are right).

    A tensor kept after its batch keeps the whole block alive (the batch's other tensors'
    memory too): ``.clone()`` what you keep, such as a label column gathered over an epoch.

    Args:
        batch: A collated batch (a dict of tensors, a tuple, ...).

    Returns:
        The batch in containers of the same types, or ``batch`` itself if nothing moved.
    """
    if get_worker_info() is None:
        return batch
    found: list[torch.Tensor] = []
    shared: Counter[int] = Counter()  # storages of every tensor reached, movable or not
    _collect(batch, found, shared, 0)
    # a conjugate or negative view moves even beside another view of its storage: torch
    # would hand it over without its bit (its values wrong); moved, it arrives resolved
    moved = [t for t in found if shared[_storage(t)] == 1 or t.is_conj() or t.is_neg()]
    if len(moved) < 2 and not any(t.is_conj() or t.is_neg() for t in moved):
        return batch
    offsets = []
    total = 0
    for tensor in moved:
        total = -(-total // ALIGN) * ALIGN
        offsets.append(total)
        total += tensor.numel() * tensor.element_size()
    try:
        block = torch.UntypedStorage._new_shared(total)  # type: ignore[no-untyped-call]
    except RuntimeError:
        # shared memory full (a small /dev/shm): torch moves each tensor and says so itself
        return batch
    views: dict[int, torch.Tensor] = {}
    for tensor, offset in zip(moved, offsets, strict=True):
        # no strides given (``()``): contiguous ones
        view = torch.empty(0, dtype=tensor.dtype).set_(
            block, offset // tensor.element_size(), tensor.shape, ()
        )
        view.copy_(tensor)
        views[id(tensor)] = view
    return _rebuild(batch, views, 0)  # type: ignore[no-any-return]


def _storage(tensor: torch.Tensor) -> int:
    """The address of ``tensor``'s storage, or 0 for a tensor without one of its own."""
    if tensor.layout is not torch.strided or tensor.is_nested or tensor.device.type == "meta":
        return 0
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # a subclass or layout without a storage
        return 0


def _movable(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is one ``one_block`` copies: its values alone say what it is."""
    return (
        tensor.device.type == "cpu"
        and tensor.layout is torch.strided
        and not tensor.is_nested
        and not tensor.requires_grad
        and not tensor.is_quantized
        and tensor.numel() > 0
        and not tensor.is_shared()  # type: ignore[no-untyped-call]
        # an expanded (stride 0) or overlapping view would be written out whole: a
        # broadcast mask of a few KiB as many MiB; torch sends its storage as it is
        and tensor.numel() * tensor.element_size() <= tensor.untyped_storage().nbytes()
    )


def _mapping(value: Any) -> bool:
    """Whether ``value`` is a container whose items ``one_block`` walks by key."""
    return isinstance(value, dict | UserDict)


def _sequence(value: Any) -> bool:
    """Whether ``value`` is a list, a tuple or a named tuple.

    Other tuple types are not walked: their constructors take what they like.
    """
    kind = type(value)
    return kind is tuple or isinstance(value, list) or (
        isinstance(value, tuple) and hasattr(kind, "_fields") and hasattr(kind, "_make"))


def _collect(value: Any, found: list[torch.Tensor], shared: Counter[int], depth: int) -> None:
    """Append the movable tensors of ``value``'s containers to ``found``.

    Every tensor's storage is counted in ``shared``: one that cannot move keeps its views.
    """
    if isinstance(value, torch.Tensor):
        shared[_storage(value)] += 1
        # not a Parameter or a subclass with its own pickling
        if type(value) is torch.Tensor and _movable(value):
            found.append(value)
    elif depth < _DEPTH and _mapping(value):
        for item in value.values():
            _collect(item, found, shared, depth + 1)
    elif depth < _DEPTH and _sequence(value):
        for item in value:
            _collect(item, found, shared, depth + 1)


def _rebuild(value: Any, views: dict[int, torch.Tensor], depth: int) -> Any:
    """``value`` with each moved tensor replaced by its view of the block."""
    if type(value) is torch.Tensor:
        return views.get(id(value), value)
    if depth >= _DEPTH:
        return value
    if _mapping(value):
        pairs = list(value.items())
    elif _sequence(value):
        pairs = list(enumerate(value))
    else:
        return value
    changed = {}
    for key, item in pairs:
        new = _rebuild(item, views, depth + 1)
        if new is not item:
            changed[key] = new
    if not changed:  # nothing moved inside: the very object (shared sub-structures stay so)
        return value
    kind = type(value)
    if kind is dict:
        return {key: changed.get(key, item) for key, item in pairs}
    if kind is list:
        return [changed.get(key, item) for key, item in pairs]
    if kind is tuple:
        return tuple(changed.get(key, item) for key, item in pairs)
    try:
        if isinstance(value, tuple):  # a named tuple
            return kind._make(changed.get(key, item) for key, item in pairs)
        clone = copy.copy(value)
        for key, new in changed.items():
            clone[key] = new
    except Exception:  # a user's container that will not copy: torch moves it as before
        return value
    return clone


__all__ = ["ALIGN", "one_block"]
