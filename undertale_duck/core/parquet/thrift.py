"""A bounded Thrift compact-protocol reader: Parquet footers and page headers as dicts."""

from __future__ import annotations

from collections.abc import Sequence

#: Deepest Thrift nesting :func:`Thrift.struct` follows (a real footer nests about 8 deep).
_MAX_DEPTH = 64


Fields = dict[int, object]


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
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result
            if shift > 70:
                raise ValueError("varint too long")

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
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            if size > len(self.data) - self.pos + 1:
                raise ValueError("list longer than the footer")
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
        """The struct starting here, ``depth`` levels down, as ``{field id: value}``."""
        if depth > _MAX_DEPTH:
            raise ValueError("Thrift nesting too deep")
        fields: Fields = {}
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == 0:
                return fields
            delta = head >> 4
            if delta:
                fid = last + delta
            else:
                n = self.varint()
                fid = (n >> 1) ^ -(n & 1)
            last = fid
            fields[fid] = (kind == 1) if kind in (1, 2) else self.value(kind, depth)


__all__ = ["Fields", "Thrift", "field_of", "list_of"]
