"""The one conversion of Arrow/Python values to JSON, used by every JSON output and report."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import numbers
import uuid
from typing import Any

import pyarrow as pa

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
        ISO 8601, durations and intervals as ISO 8601 durations (:func:`iso_duration`),
        other decimals and UUIDs as strings, non-finite floats as
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
    if isinstance(value, dt.timedelta | pa.MonthDayNano):  # before tuples: one is a tuple
        return iso_duration(value)
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


def iso_duration(value: dt.timedelta | pa.MonthDayNano) -> str:
    """A duration or interval as an ISO 8601 duration: ``P1DT30S``, ``P14M0DT0.5S``.

    A duration (Arrow's ``duration``, Python's ``timedelta``) is days and the seconds of a
    day: ``P0DT1S``, ``-P1DT3600S``. An interval (DuckDB's ``INTERVAL``, Arrow's
    ``month_day_nano_interval``) keeps its three fields as they are, since a month has no
    fixed number of days nor a day of seconds: ``INTERVAL 1 DAY`` is ``P1DT0S``, as a
    one-day duration is; months, when there are any, come first (``P14M0DT0S``). When every
    field is negative or zero the sign goes in front (``-P1DT0S``); fields of mixed signs
    carry their own (``P1M-2DT0S``, as PostgreSQL writes them).

    Args:
        value: A ``timedelta``, or an interval as pyarrow returns it (``MonthDayNano``).

    Returns:
        The duration's text.
    """
    if isinstance(value, dt.timedelta):  # -1 second: -P0DT1S, not P-1DT86399S
        sign = "-" if value < dt.timedelta(0) else ""
        days, rest = divmod(abs(value), dt.timedelta(days=1))
        return sign + _iso_fields(0, days, rest // dt.timedelta(microseconds=1) * 1000)
    months, days, nanoseconds = value.months, value.days, value.nanoseconds
    fields = (months, days, nanoseconds)
    if any(f < 0 for f in fields) and all(f <= 0 for f in fields):
        return "-" + _iso_fields(-months, -days, -nanoseconds)
    return _iso_fields(months, days, nanoseconds)


def _iso_fields(months: int, days: int, nanoseconds: int) -> str:
    whole, fraction = divmod(abs(nanoseconds), 10**9)
    seconds = f"{whole}.{fraction:09d}".rstrip("0").rstrip(".")
    sign = "-" if nanoseconds < 0 else ""
    return f"P{f'{months}M' if months else ''}{days}DT{sign}{seconds}S"
