"""A bounded Thrift compact-protocol reader: Parquet footers and page headers as dicts."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

#: Deepest Thrift nesting :func:`Thrift.struct` follows (a real footer nests about 8 deep).
_MAX_DEPTH = 64


def _headers(*kinds: int) -> bytes:
    """A regex class of the one-byte field headers (field id delta 1..15) of these types."""
    heads = (re.escape(bytes([delta << 4 | k])) for delta in range(1, 16) for k in kinds)
    return b"[" + b"".join(heads) + b"]"


#: Binaries this short are skipped by :data:`_SCALARS` (statistics of fixed-width columns
#: are 1 to 12 bytes); longer ones are skipped by :meth:`Thrift.skip`.
_SHORT_BINARY = 16

_VARINT = rb"[\x80-\xff]{0,10}[\x00-\x7f]"  # at most 11 bytes, as Thrift.varint accepts
_SHORT = b"(?:" + b"|".join(
    re.escape(bytes([n])) + b".{%d}" % n for n in range(_SHORT_BINARY)
) + b")"

#: One field (header and value) whose value needs no Python to skip: a boolean, byte,
#: varint, double or short binary.
_SCALAR = (
    b"(?:" + _headers(1, 2)
    + b"|" + _headers(3) + b"."
    + b"|" + _headers(4, 5, 6) + _VARINT
    + b"|" + _headers(7) + b".{8}"
    + b"|" + _headers(8) + _SHORT
    + b")"
)
#: A struct of such fields (its body and end), and the element of a short list of them.
_FLAT = b"(?:" + _SCALAR + b"*\x00)"
_ELEMENTS = {3: b".", 4: _VARINT, 5: _VARINT, 6: _VARINT, 7: b".{8}", 8: _SHORT, 12: _FLAT}


def _short_lists() -> bytes:
    """Fields holding a list (or set) of under 15 scalars or flat structs.

    One alternative per size and element type: a regex cannot count otherwise.
    """
    elements = {**_ELEMENTS, 1: b".", 2: b"."}  # a boolean in a list: one byte, any byte
    return b"|".join(
        _headers(9, 10) + re.escape(bytes([size << 4 | kind])) + b"(?:" + element + b"){%d}" % size
        for size in range(15)
        for kind, element in elements.items()
    )


#: A run of fields whose values need no Python to skip: the scalars of :data:`_SCALAR`.
#: Matching it moves past most of a footer's fields in C.
_SCALARS = re.compile(b"(?:" + _SCALAR + b")*", re.DOTALL)
#: The same, with flat structs and short lists of scalars or flat structs (statistics,
#: encoding stats): for a struct at least two levels above the deepest one allowed.
_SHALLOW = re.compile(
    b"(?:" + _SCALAR + b"|" + _headers(12) + _FLAT + b"|" + _short_lists() + b")*", re.DOTALL
)


Fields = dict[int, object]


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos``: ``(position after it, value)``; at most 11 bytes."""
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return pos, result
        if shift > 70:
            raise ValueError("varint too long")


def field_of(fields: object, fid: int) -> object:
    """Field ``fid`` of a parsed struct, or None (absent, or not a struct)."""
    return fields.get(fid) if isinstance(fields, dict) else None


def list_of(value: object) -> Sequence[object]:
    """A parsed list, or empty if ``value`` is not one."""
    return value if isinstance(value, list) else []


class Thrift:
    """A Thrift compact-protocol reader that builds ``{field id: value}`` dicts.

    Bounded by its input: every value consumes at least one byte, and nesting deeper than
    :data:`_MAX_DEPTH` is refused, so a hostile footer cannot make it loop or recurse
    without end. Raises IndexError or ValueError on malformed input.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        """The next byte."""
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        """The next unsigned varint."""
        self.pos, result = _varint(self.data, self.pos)
        return result

    def value(self, kind: int, depth: int) -> object:
        """The next value of compact type ``kind`` (structs as dicts; maps and doubles None)."""
        if kind in (1, 2):  # a boolean inside a list: one byte
            return self.byte() == 1
        if kind == 3:
            return self.byte()
        if kind in (4, 5, 6):
            n = self.varint()
            return (n >> 1) ^ -(n & 1)
        if kind == 7:
            self.pos += 8
            if self.pos > len(self.data):
                raise IndexError("double past the end")
            return None
        if kind == 8:
            n = self.varint()
            self.pos += n
            if self.pos > len(self.data):
                raise IndexError("binary past the end")
            return self.data[self.pos - n : self.pos]
        if kind in (9, 10):
            size, elem = self.list_head()
            return [self.value(elem, depth + 1) for _ in range(size)]
        if kind == 11:
            size = self.varint()
            if not size:
                return None
            types = self.byte()
            if 2 * size > len(self.data) - self.pos + 1:
                raise ValueError("map longer than the footer")
            for _ in range(size):
                self.value(types >> 4, depth + 1)
                self.value(types & 0x0F, depth + 1)
            return None
        if kind == 12:
            return self.struct(depth + 1)
        raise ValueError(f"unknown Thrift compact type {kind}")

    def struct(self, depth: int) -> Fields:
        """The struct starting here, ``depth`` levels down, as ``{field id: value}``.

        Reads as :meth:`fields` and :meth:`value` do, with the field headers, integers,
        binaries and nested structs read inline: a page header is parsed per page of every
        column read (7.1 against 4.0 us a header through those methods).
        """
        if depth > _MAX_DEPTH:
            raise ValueError("Thrift nesting too deep")
        data = self.data
        pos = self.pos
        fields: Fields = {}
        last = 0
        try:
            while True:
                head = data[pos]
                pos += 1
                kind = head & 0x0F
                if kind == 0:
                    return fields
                if head >> 4:
                    fid = last + (head >> 4)
                else:
                    pos, n = _varint(data, pos)
                    fid = (n >> 1) ^ -(n & 1)
                last = fid
                if kind in (4, 5, 6):
                    n = data[pos]
                    if n < 0x80:  # one byte: most page header fields but the sizes
                        pos += 1
                    else:
                        pos, n = _varint(data, pos)
                    fields[fid] = (n >> 1) ^ -(n & 1)
                elif kind in (1, 2):  # a boolean field's value is its type
                    fields[fid] = kind == 1
                elif kind == 8:
                    n = data[pos]
                    if n < 0x80:
                        pos += 1
                    else:
                        pos, n = _varint(data, pos)
                    if pos + n > len(data):
                        raise IndexError("binary past the end")
                    fields[fid] = data[pos : pos + n]
                    pos += n
                else:  # a byte, double, list, set, map or struct (a nested struct recurses)
                    self.pos = pos
                    fields[fid] = self.value(kind, depth)
                    pos = self.pos
        finally:
            self.pos = pos

    def fields(self, depth: int) -> Iterator[tuple[int, int]]:
        """The struct starting here, ``depth`` levels down, field by field, building nothing.

        Yields ``(field id, compact type)``; the caller consumes each field's value (with
        :meth:`value`, :meth:`skip` or by reading it) before asking for the next. A boolean
        field's value is its type (1 true, 2 false) and has no bytes to consume. Bounded and
        raising as :meth:`struct` does.
        """
        if depth > _MAX_DEPTH:
            raise ValueError("Thrift nesting too deep")
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == 0:
                return
            delta = head >> 4
            if delta:
                fid = last + delta
            else:
                n = self.varint()
                fid = (n >> 1) ^ -(n & 1)
            last = fid
            yield fid, kind

    def list_head(self) -> tuple[int, int]:
        """A list's ``(size, element type)``, bounded by the bytes left as :meth:`value` is."""
        head = self.byte()
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size = self.varint()
        if size > len(self.data) - self.pos + 1:
            raise ValueError("list longer than the footer")
        return size, elem

    def skip(self, kind: int, depth: int) -> None:
        """Move past the next value of compact type ``kind`` as :meth:`value` reads it.

        Builds no Python object per value (a footer of a million column chunks is walked
        in constant memory), and refuses what :meth:`value` refuses.
        """
        data = self.data
        if kind in (4, 5, 6):
            pos = end = self.pos
            while data[end] & 0x80:
                end += 1
                if end - pos > 10:
                    raise ValueError("varint too long")
            self.pos = end + 1
        elif kind == 8:
            n = self.varint()
            self.pos += n
            if self.pos > len(data):
                raise IndexError("binary past the end")
        elif kind == 12:
            self.skip_struct(depth + 1)
        elif kind in (9, 10):
            size, elem = self.list_head()
            if elem in (1, 2, 3, 7):  # fixed width: one byte (eight for a double) each
                self.pos += size * (8 if elem == 7 else 1)
                if self.pos > len(data):
                    raise IndexError("list past the end")
            else:
                for _ in range(size):
                    self.skip(elem, depth + 1)
        elif kind in (1, 2, 3):  # a boolean inside a list, or a byte: one byte
            self.byte()
        else:
            self.value(kind, depth)  # doubles, maps (builds nothing) and unknown types

    def skip_struct(self, depth: int) -> None:
        """Move past the struct starting here, ``depth`` levels down, as :meth:`struct` reads it."""
        if depth > _MAX_DEPTH:
            raise ValueError("Thrift nesting too deep")
        self.skip_rest(depth)

    def skip_rest(self, depth: int) -> bool:
        """Move past the rest of a struct ``depth`` levels down (its end included).

        Returns:
            False if one of those fields has a long header (an absolute field id, which
            may be lower than the ones before it); True if every one of them has an id
            above the last one read.
        """
        # nested structs matched by _SHALLOW are up to two levels below this one
        data, scalars = self.data, (_SHALLOW if depth + 2 <= _MAX_DEPTH else _SCALARS).match
        ascending = True
        while True:
            end = scalars(data, self.pos)
            if end is not None:  # it always matches (perhaps nothing)
                self.pos = end.end()
            head = self.byte()
            kind = head & 0x0F
            if kind == 0:
                return ascending
            if not head >> 4:
                self.varint()  # the field id, not needed to skip the value
                ascending = False
            if kind not in (1, 2):  # a boolean field's value is in its header
                self.skip(kind, depth)


__all__ = ["Fields", "Thrift", "field_of", "list_of"]
