r"""pydantic's regular expressions (Rust's ``regex`` crate) spelled for DuckDB's RE2.

The two read much of the same syntax differently: inside ``[...]`` Rust nests classes and
has set operations (``&&``, ``--``, ``~~``), a leading ``]`` or ``-`` is a literal that RE2
would start a range with, and Rust's ``\d``, ``\s``, ``\w`` are Unicode. A class is parsed
as Rust parses it and written out with every literal as ``\x{...}``, so RE2 reads the same
set; what RE2 cannot express raises :class:`PatternRefused` instead of a wrong verdict.
"""

from __future__ import annotations

import re

#: RE2 spellings of the Unicode classes pydantic's regular expressions (Rust's ``regex``, like
#: Python's ``re``) give ``\d``, ``\s`` and ``\w``; RE2's own are ASCII only, so a digit such as
#: U+0663 or a letter such as ``é`` would fail a pattern that pydantic accepts. Each is the
#: inside of a character class.
_UNICODE_CLASSES = {
    "d": r"\p{Nd}",
    "s": r"\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}",
    "w": r"\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}"
    r"\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}",
}

#: ASCII classes ``[[:name:]]`` and ``[[:^name:]]``: Rust and RE2 both know these names and
#: give them the same ASCII sets. Any other ``[`` inside a class opens a nested class in Rust.
_POSIX_CLASS = re.compile(
    r"\[:\^?(alnum|alpha|ascii|blank|cntrl|digit|graph|lower|print|punct|space|upper|word|xdigit):\]"
)

#: Every character, the inside of a class: what a class holding a shorthand and its negation
#: (``[\s\S]``, ``[\w\Wa]``) matches in pydantic, whatever else it holds.
_ANY = r"\x{0}-\x{10FFFF}"

#: Escapes RE2 reads as the same single character (``\x`` is handled on its own).
_CHAR_ESCAPES = frozenset("aftnrv")

#: Hexadecimal digits, as Rust takes them in a code point's escape.
_HEX = frozenset("0123456789abcdefABCDEF")


class PatternRefused(ValueError):
    """A pattern whose meaning in pydantic RE2 cannot give; the message says why."""


def re2_pattern(pattern: str) -> str:
    r"""A pydantic ``pattern`` as DuckDB's RE2 reads it with the same meaning.

    ``\d``, ``\s``, ``\w`` and (outside ``[...]``) ``\D``, ``\S``, ``\W`` become their Unicode
    classes (:data:`_UNICODE_CLASSES`); each ``[...]`` is rewritten as Rust reads it
    (:func:`_class`); ``\uHHHH``, ``\u{...}``, ``\UHHHHHHHH`` and ``\U{...}`` become
    ``\x{...}`` and ``(?<name>`` becomes ``(?P<name>``, RE2's spellings. Everything else is
    passed through: what RE2 cannot parse fails when DuckDB compiles it.

    Args:
        pattern: The field's pattern.

    Returns:
        The pattern for ``regexp_matches``.

    Raises:
        PatternRefused: The pattern uses a construct that RE2 would read differently: a
            nested class, a class set operation, ``\D``/``\S``/``\W`` inside ``[...]``
            without its ``\d``/``\s``/``\w`` (with it the class is every character),
            ``\b`` and ``\B`` (Unicode in Rust, ASCII in RE2), ``\b{...}``, ``\<``, ``\>``
            or ``\p{C}``.
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "[":
            text, i = _class(pattern, i + 1)
            out.append(text)
            continue
        group = _named_group(pattern, i) if ch == "(" else None
        if group is not None:
            text, i = group
            out.append(text)
            continue
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in "<>" or pattern[i + 1 : i + 3] == "b{":
                raise PatternRefused(
                    f"{pattern[i : i + 3]!r} is a word-boundary assertion in pydantic's regex "
                    "that RE2 lacks; write the pattern without it"
                )
            if nxt in "bB":
                raise PatternRefused(
                    f"\\{nxt} is a Unicode word boundary in pydantic's regex but an ASCII one "
                    "in RE2 (a letter such as 'é' is no word character there); write the "
                    "pattern without it"
                )
            if nxt.lower() in _UNICODE_CLASSES:
                out.append(f"[{'^' if nxt.isupper() else ''}{_UNICODE_CLASSES[nxt.lower()]}]")
                i += 2
                continue
            end = _escape_end(pattern, i)
            out.append(_hex_escape(pattern[i:end]) or _checked_escape(pattern[i:end]))
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _class(pattern: str, i: int) -> tuple[str, int]:
    r"""The class whose ``[`` is at ``i - 1``, in RE2's spelling, and the index after it.

    This follows regex-syntax's class parser: after ``[`` and ``^``, any ``-`` and then a
    first ``]`` are literals; an item is a primitive, or a range of two when a ``-`` follows
    that is not before ``]`` or ``-``. A class holding a shorthand and its negation
    (``[\s\S]``) is every character; another ``\D``/``\S``/``\W`` is refused.
    """
    items: list[str] = []
    shorthands: dict[str, None] = {}  # the letters of the class's \d \D \s \S \w \W, in order
    negated = pattern[i : i + 1] == "^"
    i += negated
    while pattern[i : i + 1] == "-":
        items.append(_literal("-"))
        i += 1
    if not items and pattern[i : i + 1] == "]":
        items.append(_literal("]"))
        i += 1
    while True:
        if i >= len(pattern):  # unclosed: pydantic refuses the schema before it gets here
            raise PatternRefused("a '[' is not closed")
        if pattern[i] == "]":
            break
        if pattern[i] == "[":
            posix = _POSIX_CLASS.match(pattern, i)
            if posix is None:
                raise PatternRefused(
                    "a '[' inside [...] opens a nested class in pydantic's regex but is a "
                    "literal in RE2; escape it as \\[ or write the union as one class"
                )
            items.append(posix.group())
            i = posix.end()
            continue
        if pattern[i : i + 2] in ("&&", "--", "~~"):
            raise PatternRefused(
                f"{pattern[i : i + 2]!r} inside [...] is a class set operation in pydantic's "
                "regex but literals in RE2; escape them or write the set as one class"
            )
        if pattern[i : i + 1] == "\\" and pattern[i + 1 : i + 2].lower() in _UNICODE_CLASSES:
            shorthands[pattern[i + 1]] = None
            if pattern[i + 1].isupper():  # kept out of _class_item: RE2's is ASCII
                if pattern[i + 2 : i + 3] == "-" and pattern[i + 3 : i + 4] not in ("", "]", "-"):
                    raise PatternRefused("a range inside [...] has a class as an end")
                i += 2
                continue
        low, low_char, i = _class_item(pattern, i)
        if pattern[i : i + 1] == "-" and pattern[i + 1 : i + 2] not in ("", "]", "-"):
            high, high_char, i = _class_item(pattern, i + 1)
            if not (low_char and high_char):  # pydantic refuses such a range itself
                raise PatternRefused("a range inside [...] has a class as an end")
            items.append(f"{low}-{high}")
        else:
            items.append(low)
    caret = "^" if negated else ""
    negations = [c for c in shorthands if c.isupper()]
    if any(c.lower() in shorthands for c in negations):  # a shorthand and its negation
        return f"[{caret}{_ANY}]", i + 1
    if negations:
        upper = negations[0]
        raise PatternRefused(
            f"\\{upper} inside [...] is Unicode in pydantic's regex but ASCII in RE2; use it "
            f"outside [...], or [^\\{upper.lower()}] for a class of it alone"
        )
    return f"[{caret}{''.join(items)}]", i + 1


def _class_item(pattern: str, i: int) -> tuple[str, bool, int]:
    """One class item at ``i``: its RE2 text, whether it is one character, the index after."""
    if pattern[i] != "\\" or i + 1 >= len(pattern):
        return _literal(pattern[i]), True, i + 1
    nxt = pattern[i + 1]
    if nxt in _UNICODE_CLASSES:
        return _UNICODE_CLASSES[nxt], False, i + 2
    if nxt.lower() in _UNICODE_CLASSES:  # \D, \S, \W as a range's end: pydantic refuses it
        raise PatternRefused("a range inside [...] has a class as an end")
    end = _escape_end(pattern, i)
    if nxt in "pP":
        return _checked_escape(pattern[i:end]), False, end
    if nxt in "xuU" or nxt in _CHAR_ESCAPES or nxt.isalnum() or not nxt.isascii():
        return _hex_escape(pattern[i:end]) or pattern[i:end], True, end  # or RE2 refuses it
    return _literal(nxt), True, end  # an escaped punctuation character is itself


def _named_group(pattern: str, i: int) -> tuple[str, int] | None:
    """A named group's ``(?P<name>`` or ``(?<name>`` at ``i`` in RE2's spelling, and the end.

    RE2 takes only ``(?P<name>``. The name is copied as it is (no class is read in it): one
    that RE2 does not take fails when DuckDB compiles the pattern. None for anything else.
    """
    for opener in ("(?P<", "(?<"):
        start = i + len(opener)
        if pattern.startswith(opener, i) and pattern[start : start + 1] not in ("=", "!"):
            close = pattern.find(">", start)
            end = len(pattern) if close == -1 else close + 1
            return "(?P<" + pattern[start:end], end
    return None


def _hex_escape(escape: str) -> str | None:
    r"""A code point's escape in Rust's spellings as ``\x{...}``, which RE2 reads alike.

    Rust takes ``\xHH``, ``\uHHHH``, ``\UHHHHHHHH`` and ``\x{...}``, ``\u{...}``,
    ``\U{...}``; RE2 only the ``\x`` ones. None for any other escape.
    """
    width = {"x": 2, "u": 4, "U": 8}.get(escape[1:2])
    braced = escape[2:3] == "{" and escape.endswith("}")
    digits = escape[3:-1] if braced else escape[2:]
    if width is None or not digits or any(c not in _HEX for c in digits):
        return None
    if not braced and len(digits) != width:
        return None
    return f"\\x{{{digits}}}"


def _checked_escape(escape: str) -> str:
    r"""An escape RE2 reads as pydantic does; ``\p{C}`` (and ``\P{C}``) is refused."""
    if escape in (r"\pC", r"\p{C}", r"\PC", r"\P{C}"):
        raise PatternRefused(
            f"{escape} holds unassigned code points in pydantic's regex but not in RE2; "
            "name the categories, such as [\\p{Cc}\\p{Cf}\\p{Co}]"
        )
    return escape


def _escape_end(pattern: str, i: int) -> int:
    r"""The index after the escape at ``i``.

    ``\x{...}``, ``\u{...}``, ``\U{...}`` and ``\p{...}`` end at the ``}``; ``\pL`` is 3
    characters, ``\xHH`` 4, ``\uHHHH`` 6, ``\UHHHHHHHH`` 10, any other escape 2.
    """
    kind = pattern[i + 1 : i + 2]
    if kind in ("x", "u", "U", "p", "P") and pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i + 3)
        return len(pattern) if close == -1 else close + 1
    return i + {"p": 3, "P": 3, "x": 4, "u": 6, "U": 10}.get(kind, 2)


def _literal(ch: str) -> str:
    """A character as RE2 reads it anywhere in a class: never a range's ``-`` or the end."""
    return f"\\x{{{ord(ch):X}}}"


__all__ = ["PatternRefused", "re2_pattern"]
