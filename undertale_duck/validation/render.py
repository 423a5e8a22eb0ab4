"""Render a ValidationReport as a text table, JSON, Markdown or a self-contained HTML page."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from ..common.text import aligned, counted, terminal_safe
from ..errors import ArgumentError
from .model import CheckResult, Example, ValidationReport

#: The report formats :func:`render` accepts (``"md"`` is accepted for ``"markdown"`` too).
REPORT_FORMATS = ("text", "json", "markdown", "html")


def render(report: ValidationReport, fmt: str = "text") -> str:
    """Render a report in one of :data:`REPORT_FORMATS`.

    Args:
        report: The validation report.
        fmt: ``"text"``, ``"json"``, ``"markdown"`` (or ``"md"``) or ``"html"``.

    Returns:
        The rendered report, ending with a newline.

    Raises:
        ArgumentError: If the format is unknown.
    """
    renderers: dict[str, Callable[[ValidationReport], str]] = {
        "text": to_text,
        "json": to_json,
        "markdown": to_markdown,
        "md": to_markdown,
        "html": to_html,
    }
    if fmt not in renderers:
        choices = ", ".join(REPORT_FORMATS)
        raise ArgumentError(f"unknown report format {fmt!r}: choose one of {choices}")
    return renderers[fmt](report)


def _status(check: CheckResult) -> str:
    return "PASS" if check.passed else "FAIL"


def _count(check: CheckResult) -> str:
    if check.error:
        return "error"
    return str(check.violations)


def _value(example: Example) -> str:
    value = example.value
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _where(example: Example) -> str:
    if example.index is None:
        return example.shard
    return f"#{example.index} ({example.shard} row {example.row})"


def _headline(report: ValidationReport) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    failed = len(report.failed)
    return (
        f"{verdict}: {len(report.checks) - failed} of {len(report.checks)} checks passed, "
        f"{failed} failed"
    )


# ------------------------------------------------------------------------------------ text


def to_text(report: ValidationReport) -> str:
    """Render a report as aligned plain-text tables for a terminal.

    Args:
        report: The validation report.

    Returns:
        The text.
    """
    out = [
        f"source: {report.source}",
        *([] if report.query is None else [f"view:   {' '.join(report.query.split())}"]),
        f"schema: {report.schema_name}",
        f"rows:   {report.rows} in {counted(report.shards, 'shard')} ({report.seconds:.2f} s)",
        _headline(report),
        "",
    ]
    rows = [[_status(c), c.check, c.column or "-", _count(c), c.description] for c in report.checks]
    headers = ["status", "check", "column", "violations", "requirement"]
    out += aligned(headers, rows, indent="", right={3}).splitlines()
    for check in report.failed:
        out += ["", f"{check.check} {check.column or ''}".rstrip() + f": {check.description}"]
        if check.error:
            out.append(f"  error: {check.error}")
        for example in check.examples:
            out.append(f"  {_where(example)}: {_value(example)}")
    bad = [s for s in report.shard_summaries if s.violations or not s.readable]
    if bad:
        out += ["", "shards with problems:"]
        shard_rows = [
            [s.path, "-" if s.rows is None else str(s.rows), str(s.violations), s.error or ""]
            for s in bad
        ]
        headers = ["shard", "rows", "violations", "error"]
        out += aligned(headers, shard_rows, indent="", right={1, 2}).splitlines()
    # paths, names and values come from the data: no control character reaches a terminal
    return "\n".join(terminal_safe(line) for line in out) + "\n"


# ------------------------------------------------------------------------------------ json


def to_json(report: ValidationReport) -> str:
    """Render a report as JSON (pydantic's ``model_dump_json``).

    Args:
        report: The validation report.

    Returns:
        Indented JSON; ``ValidationReport.model_validate_json`` reads it back.
    """
    return report.model_dump_json(indent=2) + "\n"


# ------------------------------------------------------------------------------------ markdown


def _md(text: str) -> str:
    return (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("`", "\\`")
        .replace("\n", " ")
        .replace("<", "&lt;")
    )


def to_markdown(report: ValidationReport) -> str:
    """Render a report as GitHub-flavoured Markdown (tables, one section per failed check).

    Args:
        report: The validation report.

    Returns:
        The Markdown text.
    """
    out = [
        "# Validation report",
        "",
        f"**{_headline(report)}**",
        "",
        f"- source: {_md(report.source)}",
        *([] if report.query is None else [f"- view: {_md(report.query)}"]),
        f"- schema: {_md(report.schema_name)}",
        f"- rows: {report.rows} in {counted(report.shards, 'shard')}",
        "",
        "| status | check | column | violations | requirement |",
        "|---|---|---|---:|---|",
    ]
    for c in report.checks:
        out.append(
            f"| {_status(c)} | {c.check} | {_md(c.column or '-')} | {_count(c)} "
            f"| {_md(c.description)} |"
        )
    for check in report.failed:
        title = f"{check.check} {check.column or ''}".rstrip()
        out += ["", f"## {_md(title)}: {_md(check.description)}", ""]
        if check.error:
            out += [f"Error: {_md(check.error)}", ""]
        if check.examples:
            out += ["| index | shard | row | value |", "|---:|---|---:|---|"]
            for e in check.examples:
                index = "" if e.index is None else str(e.index)
                row = "" if e.row is None else str(e.row)
                out.append(f"| {index} | {_md(e.shard)} | {row} | {_md(_value(e))} |")
    out += [
        "",
        "## Shards",
        "",
        "| shard | rows | violations | error |",
        "|---|---:|---:|---|",
    ]
    for s in report.shard_summaries:
        rows = "-" if s.rows is None else str(s.rows)
        out.append(f"| {_md(s.path)} | {rows} | {s.violations} | {_md(s.error or '')} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ html

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1f2328}
h1{font-size:1.5rem;margin:0 0 .5rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
.verdict{display:inline-block;padding:.35rem .8rem;border-radius:6px;font-weight:600}
.ok{background:#dafbe1;color:#116329}.bad{background:#ffebe9;color:#a40e26}
table{border-collapse:collapse;margin:.5rem 0 1rem;min-width:40%}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.fail td{background:#fff8f7}code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#f6f8fa;padding:.5rem;overflow:auto;white-space:pre-wrap}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:600}
.value{max-width:48rem;word-break:break-all}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def to_html(report: ValidationReport) -> str:
    """Render a report as one self-contained HTML page (inline CSS, no external assets).

    The page holds a summary, one row per check, the offending examples of each failed check
    with the SQL that ran, and per-shard counts.

    Args:
        report: The validation report.

    Returns:
        The HTML document.
    """
    verdict = "ok" if report.passed else "bad"
    view = _e(report.query or "")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>Validation report: {_e(report.source)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<h1>Validation report</h1>",
        f'<p class="verdict {verdict}">{_e(_headline(report))}</p>',
        "<dl>",
        f"<dt>source</dt><dd><code>{_e(report.source)}</code></dd>",
        *([] if report.query is None else [f"<dt>view</dt><dd><code>{view}</code></dd>"]),
        f"<dt>schema</dt><dd><code>{_e(report.schema_name)}</code></dd>",
        f"<dt>rows</dt><dd>{report.rows}</dd>",
        f"<dt>shards</dt><dd>{report.shards}</dd>",
        f"<dt>time</dt><dd>{report.seconds:.2f} s</dd>",
        "</dl>",
        "<h2>Checks</h2>",
        "<table>",
        "<thead><tr><th>status</th><th>check</th><th>column</th><th>violations</th>"
        "<th>requirement</th></tr></thead>",
        "<tbody>",
    ]
    for k, c in enumerate(report.checks):
        cls = "" if c.passed else ' class="fail"'
        status = "&#10004; pass" if c.passed else "&#10008; fail"
        anchor = f'<a href="#check-{k}">{_e(c.check)}</a>' if not c.passed else _e(c.check)
        out.append(
            f"<tr{cls}><td>{status}</td><td>{anchor}</td><td><code>{_e(c.column or '-')}"
            f'</code></td><td class="n">{_e(_count(c))}</td><td>{_e(c.description)}</td></tr>'
        )
    out += ["</tbody>", "</table>"]
    failed = [(k, c) for k, c in enumerate(report.checks) if not c.passed]
    if failed:
        out.append("<h2>Failed checks</h2>")
    for k, check in failed:
        title = f"{check.check} {check.column or ''}".rstrip()
        out.append(f'<h3 id="check-{k}">{_e(title)}: {_e(check.description)}</h3>')
        if check.error:
            out.append(f"<p><strong>error:</strong> {_e(check.error)}</p>")
        if check.examples:
            out += [
                "<table>",
                "<thead><tr><th>index</th><th>shard</th><th>row</th><th>value</th></tr></thead>",
                "<tbody>",
            ]
            for e in check.examples:
                index = "" if e.index is None else str(e.index)
                row = "" if e.row is None else str(e.row)
                out.append(
                    f'<tr><td class="n">{index}</td><td><code>{_e(e.shard)}</code></td>'
                    f'<td class="n">{row}</td><td class="value"><code>{_e(_value(e))}</code>'
                    "</td></tr>"
                )
            out += ["</tbody>", "</table>"]
        if check.per_shard:
            out.append(
                "<p>per shard: "
                + ", ".join(
                    f"<code>{_e(path)}</code>: {count}" for path, count in check.per_shard.items()
                )
                + "</p>"
            )
        if check.condition:
            out.append(f"<p>offending rows: <code>{_e(check.condition)}</code></p>")
        if check.sql:
            out.append(f"<details><summary>SQL</summary><pre>{_e(check.sql)}</pre></details>")
    out += [
        "<h2>Shards</h2>",
        "<table>",
        "<thead><tr><th>shard</th><th>rows</th><th>violations</th><th>error</th></tr></thead>",
        "<tbody>",
    ]
    for s in report.shard_summaries:
        cls = "" if s.readable and not s.violations else ' class="fail"'
        rows = "-" if s.rows is None else str(s.rows)
        out.append(
            f'<tr{cls}><td><code>{_e(s.path)}</code></td><td class="n">{rows}</td>'
            f'<td class="n">{s.violations}</td><td>{_e(s.error or "")}</td></tr>'
        )
    out += ["</tbody>", "</table>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


__all__ = ["REPORT_FORMATS", "render", "to_html", "to_json", "to_markdown", "to_text"]
