"""The one conversion of Arrow/Python values to JSON, used by every JSON output and report."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import uuid
from typing import Any


def jsonable(value: Any) -> Any:
    """Convert a value from pyarrow's ``as_py()`` into something ``json.dumps`` writes losslessly.

    Args:
        value: A Python value as pyarrow returns it.

    Returns:
        The value with bytes as base64, dates/times as ISO 8601, decimals and UUIDs as strings,
        non-finite floats as ``"NaN"``/``"Infinity"``/``"-Infinity"``, and containers converted
        recursively (maps, which pyarrow returns as lists of pairs, become lists of pairs).
    """
    if value is None or isinstance(value, bool | int | str):
        return value
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
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def _iso_duration(value: dt.timedelta) -> str:
    seconds = value.total_seconds()
    sign = "-" if seconds < 0 else ""
    days, rest = divmod(abs(value), dt.timedelta(days=1))
    text = f"{rest.total_seconds():.6f}".rstrip("0").rstrip(".")
    return f"{sign}P{days}DT{text}S"
