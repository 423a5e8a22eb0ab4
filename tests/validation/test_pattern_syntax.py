"""Patterns in Rust's class syntax (pydantic's engine): RE2 gives pydantic's verdict or refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model
from pydantic_core import SchemaError, SchemaValidator, core_schema
from support.pydantic_reference import refused_by_pydantic

from undertale_duck.validation.model import ValidationReport
from undertale_duck.validation.runner import report_for

#: Characters each class below could take or leave: the punctuation Rust and RE2 read apart,
#: letters, digits and spaces beyond ASCII, and two that case-fold into ASCII (K, ſ).
VALUES = ["a", "b", "c", "e", "A", "K", "_", "-", "]", "[", "^", "&", "~", ":", "\\", " ",
          "\u00e9", "\u0661", "\u00a0", "\u212a", "\u017f", "\u2003", "ab", "a]", "<a", "",
          "caf\u00e9", "\u00fcber", "\u65e5\u672c", "a\u0661", "a b", "a\nb", "\U0001f600"]

#: Classes that Rust and RE2 spell apart but RE2 can be given exactly: a leading ``]`` or
#: ``-`` is a literal in Rust, never a range's start, POSIX classes are ASCII in both, and a
#: class holding a shorthand and its negation (``[\s\S]``) is every character; Rust's
#: ``\u00e9``, ``\u{e9}``, ``\U0001F600`` are RE2's ``\x{...}``, and its ``(?<name>``
#: RE2's ``(?P<name>``.
TRANSLATED = [r"^[]-a]$", r"^[^]-a]$", r"^[--a]$", r"^[^--a]$", r"^[-a]$", r"^[a-c-e]$",
              r"^[]a]$", r"^[\--a]$", r"^[[:alpha:]]$", r"(?i)^[[:upper:]]$", r"^[[:^alpha:]]$",
              r"^[\P{L}]$", r"^[\d\s]+$", r"^[^\w]$", r"(?i)^[^k]$", r"^[\\\]]$", r"^[:a]$",
              r"^[\s\S]+$", r"^[\d\D]$", r"^[\w\W]$", r"^[\S\s]{1,3}$", r"(?i)^[a\D\d]$",
              r"^[^\s\S]", r"^a$|[^\W\w]", r"^[^\D\s\d]*$", r"^[\W\S\w]{2}$",
              r"^\u00e9$", r"^caf\u{e9}$", r"^[\u0041-\u005a\u0661]$", r"^\U0001F600$",
              r"^[\U{1f600}\x{e9}]$", r"(?i)^\u0041$", r"^\x61\U00000062$", r"^[\u002D]$",
              r"^(?<g>a)(?P<h>b)?$", r"^(?<g>[a-c]+)$", r"^(?<n>\u0061)|\(?<x>"]

#: Constructs RE2 would read differently, each with what its error names.
REFUSED = {
    r"^[a[bc]]$": "nested class",
    r"^[\w&&[^\d]]+$": "'&&'",
    r"^[\w--b]$": "'--'",
    r"^[a-c~~b]$": "'~~'",
    r"^[a&&b]$": "'&&'",
    r"\b{start}a": "word-boundary",
    r"\<a": "word-boundary",
    r"a\>": "word-boundary",
    r"\w+\b$": "Unicode word boundary",
    r"^\B": "Unicode word boundary",
    r"\bab\b": "Unicode word boundary",
    r"^[\W]$": "\\W inside [...]",
    r"^[^\D]$": "\\D inside [...]",
    r"^[^\S]$": "\\S inside [...]",
    r"^[\S\d]$": "\\S inside [...]",
    r"^[\W\D]$": "\\W inside [...]",
    r"^[\s\S&&a]$": "'&&'",
    r"^\p{C}$": "unassigned",
    r"^[\PC]$": "unassigned",
}


def _model(patterns: list[str]) -> type[BaseModel]:
    """A model with one str field ``s<i>`` per pattern."""
    fields: dict[str, Any] = {
        f"s{i}": (Annotated[str, Field(pattern=p)], ...) for i, p in enumerate(patterns)
    }
    return create_model("Patterns", **fields)


def _report(path: Path, patterns: list[str]) -> tuple[type[BaseModel], ValidationReport]:
    model = _model(patterns)
    table = pa.table({f"s{i}": VALUES for i in range(len(patterns))})
    pq.write_table(table, path / "a.parquet")
    return model, report_for(path, model, examples=len(VALUES))


def _column_verdicts(report: ValidationReport) -> dict[str, set[int] | str]:
    """Per column: the pattern check's offending rows, or its error."""
    out: dict[str, set[int] | str] = {}
    for check in report.checks:
        if check.check == "pattern" and check.column is not None:
            out[check.column] = check.error or {e.index for e in check.examples
                                                if e.index is not None}
    return out


def _refused_by_field(model: type[BaseModel], column: str) -> set[int]:
    one = create_model("One", **{column: (model.model_fields[column].rebuild_annotation(), ...)})
    return refused_by_pydantic(one, pa.table({column: VALUES}))


def test_translated_classes_give_pydantic_verdict(tmp_path: Path) -> None:
    """Leading ``]``/``-``, ``\\-`` as a range's start, POSIX and Unicode classes inside
    ``[...]``: each column's offending rows are the rows pydantic refuses."""
    model, report = _report(tmp_path, TRANSLATED)
    verdicts = _column_verdicts(report)
    for i, pattern in enumerate(TRANSLATED):
        column = f"s{i}"
        assert verdicts[column] == _refused_by_field(model, column), pattern


def test_constructs_re2_reads_apart_are_refused_per_check(tmp_path: Path) -> None:
    """Nested classes, set operations, ``\\b{start}``/``\\<``/``\\>``, negated shorthands
    inside ``[...]`` and ``\\p{C}``: the pattern's check has an error saying why, others run."""
    patterns = [*REFUSED, r"^a$"]
    _, report = _report(tmp_path, patterns)
    verdicts = _column_verdicts(report)
    for i, (pattern, why) in enumerate(REFUSED.items()):
        error = verdicts[f"s{i}"]
        assert isinstance(error, str), pattern
        assert "cannot be matched as pydantic matches it" in error and why in error, error
        assert repr(pattern) in error
    assert verdicts[f"s{len(REFUSED)}"] == {i for i, v in enumerate(VALUES) if v != "a"}


#: Class pieces: literals Rust and RE2 read apart, escapes, shorthands and ASCII classes.
_PIECES = ["a", "c", "-", "]", "[", "^", "&", "~", ":", "\u00e9", "\\]", "\\-", "\\[", "\\\\",
           "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "[:alpha:]", "[:^digit:]", "\\x{61}",
           "\\pL", "\\PL", "-a", "a-c", "&&", "--", "~~", " ", "\\s\\S", "\\D\\d", "\\W\\w",
           "\\u00e9", "\\u{661}", "\\U0001F600", "\\x41-\\u005A", "\\u00a0", "\u65e5"]

#: Where the class goes: alone, beside word boundaries (refused), in a named group.
_FRAMES = ["^[{}]+$", "^[{}]+", "\\b[{}]+\\b", "^\\B[{}]", "^(?<g>[{}])+$", "^\\u0061?[{}]+$"]


def _pydantic_compiles(pattern: str) -> bool:
    try:
        SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError:
        return False
    return True


@settings(max_examples=12, deadline=None)
@given(st.lists(
    st.tuples(st.sampled_from(["", "(?i)"]), st.sampled_from(_FRAMES), st.booleans(),
              st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5)),
    min_size=6, max_size=6,
))
def test_random_classes_never_differ_from_pydantic(
    tmp_path_factory: Any, specs: list[tuple[str, str, bool, list[str]]]
) -> None:
    """Any class of the risky pieces: the check errs, or its rows are pydantic's."""
    patterns = [flags + frame.format(("^" if negated else "") + "".join(pieces))
                for flags, frame, negated, pieces in specs]
    patterns = [p for p in patterns if _pydantic_compiles(p)]
    if not patterns:
        return
    model, report = _report(tmp_path_factory.mktemp("rx"), patterns)
    for column, verdict in _column_verdicts(report).items():
        if isinstance(verdict, str):
            assert "cannot be matched as pydantic" in verdict or "regular expression" in verdict
            continue
        assert verdict == _refused_by_field(model, column), model.model_fields[column]
