"""Render a dataset description (core/describe.py) as aligned plain text for ``describe``."""

from __future__ import annotations

import os
from typing import Any

from ..common.sizes import format_size
from ..common.text import aligned, redact_url, terminal_safe
from ..core.describe import ColumnInfo, Description, ViewDescription
from .writers import cell


def to_text(description: Description) -> str:
    """Return the description as aligned plain text for a terminal or a pipe.

    Args:
        description: What :func:`undertale_duck.core.describe.describe` returned.

    Returns:
        The text, ending with a newline.
    """
    d = description
    shown = redact_url  # shard URLs without their secrets (a pre-signed query, a password)
    base = _common_dir([shown(s.path) for s in d.shards])
    out = [
        f"dataset {shown(d.source)}",
        f"  {len(d.shards)} shard{_s(len(d.shards))}, {d.rows:,} row{_s(d.rows)}, "
        f"{d.row_groups:,} row group{_s(d.row_groups)}, {format_size(d.bytes)}",
        "",
        f"shards (in {base})" if base else "shards",
    ]
    rows = [
        [
            os.path.relpath(shown(s.path), base) if base else shown(s.path),
            f"{s.rows:,}" if s.error is None else "-",
            str(s.row_groups) if s.error is None else "-",
            format_size(s.bytes),
            s.created_by if s.error is None else f"UNREADABLE: {shown(s.error)}",
        ]
        for s in d.shards
    ]
    out += aligned(["path", "rows", "row groups", "size", "writer"], rows).splitlines()
    kind = "full scan" if d.scanned else "footer statistics; exact values: --scan"
    out += ["", f"columns ({kind})"]
    readable = len(d.shards) - len(d.errors)
    crows = []
    for c in d.columns:
        nulls = "?" if c.null_count is None else f"{c.null_count:,}"
        row = [c.name, c.type, nulls, _stat(c.min, c), _stat(c.max, c)]
        if c.min_length is not None:
            row[3] = f"len {c.min_length}"
            row[4] = f"len {c.max_length}"
        elif d.scanned and c.null_count is not None and _is_list(c.type):
            row[3] = row[4] = "-"  # scanned, one type: no lengths means no values
        if c.shards != readable:
            row[1] += f" (in {c.shards} of {readable} shards)"
        crows.append(row)
    out += aligned(["name", "type", "nulls", "min", "max"], crows).splitlines()
    if not d.scanned and any("?" in row[2:] for row in crows):
        out.append(
            "  (? = unknown: a nested column, no statistics written, a type that differs "
            "between shards, or a date or time outside Python's range)"
        )
    out.append("")
    if not d.drift:
        out.append("schema drift: none (every readable shard has the same columns and types)")
    else:
        out.append(
            f"schema drift: {len(d.drift)} shard{_s(len(d.drift))} "
            f"{'differs' if len(d.drift) == 1 else 'differ'} "
            "from the layout most shards share"
        )
        for drift in d.drift:
            name = os.path.relpath(shown(drift.path), base) if base else shown(drift.path)
            parts = []
            if drift.missing:
                parts.append("missing " + ", ".join(drift.missing))
            if drift.extra:
                parts.append("extra " + ", ".join(drift.extra))
            parts += [f"{n} is {mine} (expected {ref})" for n, ref, mine in drift.changed]
            out.append(f"  {name}: " + "; ".join(parts))
    if d.errors:
        out += ["", f"unreadable shards: {len(d.errors)}"]
        out += [f"  {shown(s.path)}: {shown(s.error or '')}" for s in d.errors]
    return "\n".join(terminal_safe(line) for line in out) + "\n"


def view_to_text(view: ViewDescription) -> str:
    """Return a view's description (``describe --query/--where``) as aligned plain text.

    Args:
        view: What :func:`undertale_duck.core.describe_view.describe_view` returned.

    Returns:
        The text, ending with a newline: the query, its exact row count, its columns.
    """
    query = " ".join(view.query.split())
    out = ["", f"view {query}", f"  {view.rows:,} rows (exact, from the view's index)"]
    kind = "full scan of the view's rows" if view.scanned else "types; statistics: --scan"
    out += ["", f"view columns ({kind})"]
    if not view.scanned:
        rows = [[c.name, c.type] for c in view.columns]
        out += aligned(["name", "type"], rows).splitlines()
        return "\n".join(terminal_safe(line) for line in out) + "\n"
    crows = []
    for c in view.columns:
        row = [c.name, c.type, f"{c.null_count:,}", _stat(c.min, c), _stat(c.max, c)]
        if c.min_length is not None:
            row[3], row[4] = f"len {c.min_length}", f"len {c.max_length}"
        elif _is_list(c.type):
            row[3] = row[4] = "-"  # scanned: no lengths means no values
        crows.append(row)
    out += aligned(["name", "type", "nulls", "min", "max"], crows).splitlines()
    return "\n".join(terminal_safe(line) for line in out) + "\n"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _is_list(duck_type: str) -> bool:
    """Whether a DuckDB type is a list or array (``BIGINT[]``), which a scan measures."""
    return duck_type.endswith("]")




def _stat(value: Any, column: ColumnInfo) -> str:
    if not column.min_max_known:
        return "?"
    if value is None:
        return "-"
    return cell(value, 32)


def _common_dir(paths: list[str]) -> str:
    if not paths:
        return ""
    try:
        return os.path.commonpath([os.path.dirname(p) for p in paths])
    except ValueError:
        return ""
