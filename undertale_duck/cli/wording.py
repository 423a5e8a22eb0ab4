"""Library messages in the command line's words: its flags for the Python arguments named."""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable, Mapping
from functools import lru_cache

from ..common.text import terminal_safe

#: Where an argument's name may start: the message's start, after a space or "(" (never
#: inside a path or a quoted name, such as ``/data/memory=1``).
_AT = r"(?<![^\s(])"


def shell_word(text: str) -> str:
    r"""``text`` as one shell word to paste, and safe to print on a terminal.

    A key whose name holds a control character (ESC, a line break, U+202E) goes in
    bash's ``$'...'`` quoting with that character escaped (``\x1b``), so the condition
    neither rewrites the screen nor breaks the line, and pastes as the same text.
    """
    if text.isprintable():
        return shlex.quote(text)
    # terminal_safe's escapes (\x1b, \n, \u202e) are ones bash's $'...' reads back
    return "$'" + "".join("\\" + c if c in "\\'" else terminal_safe(c) for c in text) + "'"


#: Python argument forms in library messages, and the flag a command-line user typed.
_FLAGS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # tables['x']: ... -> --table x: ...
    (re.compile(_AT + r"tables\[(?P<q>['\"])(?P<name>.*?)(?P=q)\]"), r"--table \g<name>"),
    # memory=1 MiB is below ... -> --memory 1 is below ...; Raise memory -> Raise --memory
    (re.compile(_AT + r"memory=(?P<size>[0-9.]+(?:e[+-]?[0-9]+)?) Mi?B\b"), r"--memory \g<size>"),
    (re.compile(_AT + r"memory=(?=[\w.'\"])"), "--memory "),
    (re.compile(r"\b(?P<verb>[Rr]aise) memory\b"), r"\g<verb> --memory"),
    # the command line has no window_bytes: only the advice it can follow stays
    (re.compile(r",? or pass a smaller window_bytes"), ""),
    # (columns=[...]) -> (--columns A,B); columns must ... -> --columns must ...
    (re.compile(_AT + r"columns=\[\.\.\.\]"), "--columns A,B"),
    (re.compile(r"^columns(?=[ :(])"), "--columns"),
    (re.compile(_AT + r"columns=(?=[\w\['\"])"), "--columns "),
    (re.compile(_AT + r"columns="), "--columns"),
    (re.compile(r"^storage_options(?=[ :])"), "--storage-option"),
    # the sampler's drop_last is batch's --keep-last (drop_last=False); batch looks at a
    # past run, whose settings are not to be changed but told
    (re.compile(r"; use fewer workers, or drop_last=False$"),
     "; if the run kept every row, give --keep-last"),
    (re.compile(r"\bwith drop_last=True\b"), "without --keep-last"),
    (re.compile(r"\bdrop_last=False\b"), "--keep-last"),
    # where='x >' cannot be used -> --where 'x >' cannot be used (as a shell word)
    (re.compile(r"^where=(?P<text>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"),
     lambda m: "--where " + shell_word(ast.literal_eval(m["text"]))),
)


#: Where an argument's ``=VALUE`` starts (a name, number, list or quoted text).
_VALUE = r"(?=[\w\[('\"+.-])"


@lru_cache(maxsize=32)
def _command_patterns(
    flags: tuple[tuple[str, str], ...],
) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The patterns of a command's arguments (:attr:`Command.flags`), compiled once."""
    patterns: list[tuple[re.Pattern[str], str]] = []
    for name, flag in flags:
        shown = flag.replace("\\", "\\\\")
        if "." in name:
            # a field of a spec (pack.length, split.key) is no ordinary word: anywhere
            patterns.append((re.compile(_AT + re.escape(name) + "=" + _VALUE), shown + " "))
            patterns.append((re.compile(_AT + re.escape(name) + r"=?(?![\w.])"), shown))
        else:
            # a plain word (batch, rank, step) only where it is the argument: the message's
            # subject ("rank must be ...", "step 9 is ...") or NAME=VALUE
            patterns.append((re.compile(_AT + re.escape(name) + "=" + _VALUE), shown + " "))
            patterns.append((re.compile(_AT + re.escape(name) + r"=(?![\w=])"), shown))
            patterns.append((re.compile("^" + re.escape(name) + r"(?=[ :])"), shown))
    return tuple(patterns)


def for_the_command_line(message: str, flags: Mapping[str, str] | None = None) -> str:
    """``message`` with the Python arguments it names written as the command line's flags.

    The library's messages name its keyword arguments (``columns=[...]``,
    ``tables['x']``, ``memory=1 MB``); a command-line user typed ``--columns``,
    ``--table x`` and ``--memory 1``. Only these argument forms change; paths, columns and
    SQL quoted in the message are left as they are.

    Args:
        message: One line of an error or warning.
        flags: The running command's own arguments: the name a library message gives
            each (``pack.length``, ``rank``) and the flag typed for it (``--length``,
            ``--rank``); see :attr:`~undertale_duck.cli.command.Command.flags`.

    Returns:
        The line as the command line says it.
    """
    for pattern, flag in _FLAGS + _command_patterns(tuple((flags or {}).items())):
        message = pattern.sub(flag, message)
    return message
