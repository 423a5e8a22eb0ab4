"""The one conversion of Arrow/Python values to JSON, used by every JSON output and report."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import numbers
import uuid
from typing import Any

#: Integers in ``[INT_MIN, UINT_MAX]`` (the 64-bit integer types, signed and unsigned) are
#: JSON numbers; wider ones (DuckDB's HUGEINT/UHUGEINT beyond 64 bits) are decimal strings,
#: since many JSON readers parse integers into 64-bit types (Go, Rust's serde_json) and round
#: or refuse wider ones.
INT_MIN = -(1 << 63)
UINT_MAX = (1 << 64) - 1


def jsonable(value: Any) -> Any:
    """Convert a value from pyarrow's ``as_py()`` into something ``json.dumps`` writes losslessly.

    Args:
        value: A Python value as pyarrow returns it.

    Returns:
        The value with integers as JSON numbers (also decimals of scale 0, which is how
        DuckDB's HUGEINT results such as ``sum()`` arrive) unless they fall outside
        ``[INT_MIN, UINT_MAX]`` (then decimal strings), bytes as base64, dates/times as
        ISO 8601, other decimals and UUIDs as strings, non-finite floats as
        ``"NaN"``/``"Infinity"``/``"-Infinity"``, and containers converted recursively
        (maps, which pyarrow returns as lists of pairs, become lists of pairs).
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):  # int, and numpy's integer scalars
        return _integer(int(value))
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if math.isnan(value):
            return "NaN"
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _iso_duration(value)
    if isinstance(value, decimal.Decimal):
        if value.is_finite() and _exponent(value) >= 0:
            return _integer(int(value))
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def _integer(value: int) -> int | str:
    """An integer as a JSON number when readers keep it exactly, else as a decimal string."""
    return int(value) if INT_MIN <= value <= UINT_MAX else str(value)


def _exponent(value: decimal.Decimal) -> int:
    exponent = value.as_tuple().exponent
    return exponent if isinstance(exponent, int) else -1


def _iso_duration(value: dt.timedelta) -> str:
    seconds = value.total_seconds()
    sign = "-" if seconds < 0 else ""
    days, rest = divmod(abs(value), dt.timedelta(days=1))
    text = f"{rest.total_seconds():.6f}".rstrip("0").rstrip(".")
    return f"{sign}P{days}DT{text}S"
