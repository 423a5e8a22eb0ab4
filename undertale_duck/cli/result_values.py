"""Query-result values as text: rows of record batches, CSV fields, JSON lines, table cells."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from ..common.jsonvalue import iso_duration, jsonable
from ..common.text import terminal_safe

#: Longest text shown in one table cell before it is cut with an ellipsis.
CELL_WIDTH = 40


def text_value(value: Any) -> str:
    """Render one value for CSV: strings as they are, everything else as JSON text.

    Args:
        value: A Python value as pyarrow returns it (not None).

    Returns:
        The field text.
    """
    converted = jsonable(value)
    if isinstance(converted, str):
        return converted
    if isinstance(converted, bool):
        return "true" if converted else "false"
    return json.dumps(converted, ensure_ascii=False, separators=(",", ":"))


def cell(value: Any, width: int = CELL_WIDTH) -> str:
    r"""Render one value for a terminal table: one line, at most ``width`` characters.

    Args:
        value: A Python value as pyarrow returns it.
        width: The longest text kept; longer text is cut and ends with ``…``.

    Returns:
        The cell text (``NULL`` for None; bytes as ``\xNN`` escapes; control characters
        escaped so that a row stays on one line).
    """
    if value is None:
        text = "NULL"
    elif isinstance(value, bytes | bytearray):
        text = repr(bytes(value))[2:-1]
    elif isinstance(value, str):
        # only the unprintable characters: escaping the whole value turned every letter
        # outside ASCII into \xNN as soon as one control character was in it
        text = terminal_safe(value)
    elif isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, float | int | bool | dt.date | dt.time | decimal.Decimal | uuid.UUID):
        text = str(value)
    elif isinstance(value, dt.timedelta | pa.MonthDayNano):  # MonthDayNano is a tuple
        text = iso_duration(value)  # as in CSV and JSON, without JSON's quotes
    else:
        text = json.dumps(jsonable(value), ensure_ascii=False, separators=(", ", ": "))
    if len(text) > width:
        text = text[: max(width - 1, 1)] + "…"
    return text


def result_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[list[Any]]:
    """Yield each row of a result as a list of Python values, in column order.

    Args:
        batches: The result's record batches.

    Yields:
        One list per row (a value Python cannot hold, such as a year past 9999, as Arrow's text).

    Raises:
        ValueError: If a column has values neither Python nor Arrow's text can give.
    """
    for batch in batches:
        names = batch.schema.names
        columns = [_values(n, c) for n, c in zip(names, batch.columns, strict=True)]
        yield from (list(r) for r in zip(*columns, strict=True))


#: How Arrow's cast to text writes a date or timestamp it cannot format ("<value out of
#: range: 106751991>").
_NO_TEXT = "<value out of range"


def _values(name: str, column: pa.Array) -> list[Any]:
    """A column's Python values; as Arrow's text where Python has none (a year past 9999)."""
    if pa.types.is_time64(column.type) and column.type.unit == "ns":
        # pyarrow's datetime.time drops the nanoseconds without a word (00:00:01.000000123
        # came out as 00:00:01): Arrow's ISO text keeps them
        return list(column.cast(pa.string()).to_pylist())
    try:
        values: list[Any] = column.to_pylist()
    except (ValueError, OverflowError) as exc:
        try:
            values = column.cast(pa.string()).to_pylist()
        except pa.ArrowException:
            raise ValueError(f"column {name!r}: {exc}") from None
        # Arrow's text for a value it cannot format either is a placeholder, not the value
        if any(isinstance(v, str) and v.startswith(_NO_TEXT) for v in values):
            raise ValueError(f"column {name!r}: {exc}, and Arrow has no text for it") from None
    return values


def csv_field(value: Any) -> str:
    """Render one value (or a column name) as a CSV field: NULL empty, quoted where needed."""
    if value is None:
        return ""
    text = text_value(value)
    if text == "" or any(c in text for c in ',"\r\n') or text != text.strip(" "):
        return '"' + text.replace('"', '""') + '"'
    return text


def json_line(names: Sequence[str], values: Sequence[Any]) -> str:
    """Render one row as a JSON object on one line, its values as ``jsonable`` gives them."""
    record = {name: jsonable(v) for name, v in zip(names, values, strict=True)}
    return json.dumps(record, ensure_ascii=False, allow_nan=False)
