"""One parser for every size argument: a number in the argument's unit, or a string with one."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Literal

from ..errors import ArgumentError

__all__ = ["DEFAULT_MEMORY", "MIB", "DefaultMemory", "SizeUnit", "format_size", "parse_size"]

#: Bytes in a mebibyte (the unit of ``memory=`` and ``disk=``).
MIB = 1 << 20


class DefaultMemory(float):
    """The default ``memory=`` (MiB), told apart from the same number given by the user.

    Left at its default, a dataset's budget is shared between the DataLoader workers of a
    process (a number given is each process's own).
    """

    def __repr__(self) -> str:
        return f"{float(self):g}"


#: The default memory budget in MiB.
DEFAULT_MEMORY = DefaultMemory(4096)
#: The largest size accepted, in bytes (2^62: beyond any machine, within int64).
_MOST = 1 << 62
#: A number of MiB this large (an exbibyte) is surely a byte count given by mistake.
_SUSPECT_MIB = 1 << 30

#: Unit suffixes, case-insensitive: SI units are powers of 1000, IEC units powers of 1024.
_UNITS = {
    "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12, "p": 10**15, "pb": 10**15,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")

#: The unit a plain number is read in: MiB (``memory=``, ``disk=``) or bytes.
SizeUnit = Literal["MiB", "bytes"]


def parse_size(value: object, name: str, unit: SizeUnit) -> int:
    """Read a size argument as a number of bytes.

    A number is read in the argument's own unit (``unit``); a string may carry a unit of its
    own: ``"4GiB"`` (IEC, powers of 1024), ``"4GB"`` (SI, powers of 1000), ``"512MiB"``,
    ``"20KB"``, ``"100B"``, or no unit (the argument's). A number of MiB of 2^30 or more (an
    exbibyte) is refused: it is surely a byte count passed by mistake.

    Args:
        value: The argument as given.
        name: The argument's name, for the error message (``"memory"``, ``"--memory"``).
        unit: The unit of a plain number.

    Returns:
        The size in bytes (a whole number, rounded down).

    Raises:
        ArgumentError: Naming the argument, the unit expected and an example, if the value is
            not a size >= 0 or is too large.
    """
    example = "'4GiB' or '4GB'"
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match is None or (match.group(2) and match.group(2).lower() not in _UNITS):
            raise ArgumentError(
                f"{name} must be a size such as {example} (a plain number is in {unit}), "
                f"got {value!r}"
            )
        number = Decimal(match.group(1))  # exact: a byte count of any length stays exact
        if not match.group(2):  # a number typed as text (the CLI): read as a number
            whole = number == number.to_integral_value()
            return parse_size(int(number) if whole else float(number), name, unit)
        size = number * _UNITS[match.group(2).lower()]
        if size >= _MOST:
            raise ArgumentError(f"{name} is too large: {value!r} (at most 4 EiB)")
        return int(size)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentError(
            f"{name} must be a number of {unit} or a size such as {example}, got {value!r}"
        )
    # too large even as a byte count; checked before any float (no float holds 10**400)
    if isinstance(value, int) and value >= _MOST:
        raise ArgumentError(f"{name} is too large: {_shown(value)} {unit} (at most 4 EiB)")
    if not math.isfinite(value) or value < 0:
        raise ArgumentError(f"{name} must be a finite size >= 0 (in {unit}), got {value!r}")
    if value >= _MOST:
        raise ArgumentError(f"{name} is too large: {value!r} {unit} (at most 4 EiB)")
    if unit == "bytes" and not float(value).is_integer():
        raise ArgumentError(f"{name} is a whole number of bytes, got {value!r}")
    if unit == "MiB" and value >= _SUSPECT_MIB:
        raise ArgumentError(
            f"{name}={value!r} is read in MiB ({format_size(min(value, 1e30) * MIB)}), surely "
            f"a byte count by mistake: pass a number of MiB, or a string such as "
            f"'{format_size(value)}'"
        )
    scaled = value * _scale(unit)
    if scaled >= _MOST:
        raise ArgumentError(f"{name} is too large: {value!r} {unit} (at most 4 EiB)")
    return int(scaled)


def _shown(value: int) -> str:
    """A whole number for a message, its digits cut short when there are many."""
    digits = str(value)
    return digits if len(digits) <= 24 else f"{digits[:8]}... ({len(digits)} digits)"


def format_size(size: float) -> str:
    """A byte count as a short IEC size for messages: ``"3.7 GiB"``, ``"12 bytes"``."""
    for suffix, scale in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40),
                          ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {suffix}"
    return f"{int(size):,} bytes"


def _scale(unit: SizeUnit) -> int:
    return MIB if unit == "MiB" else 1
