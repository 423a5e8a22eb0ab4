"""Pages of fixed-length numeric lists decoded without walking their levels, or left to pyarrow.

A token column (``list<int32>`` of 512 values a row, none null) costs pyarrow's reader a
walk over two level streams per value. When a page's level bytes are exactly the encoding
of ``rows`` full lists of one length, the levels say nothing the page's header and the
length do not: the values are the page's values in order, ``length`` to a row. This module
checks that byte for byte and decodes the values with numpy: PLAIN values, dictionary
indices in the writer's full bit-packed runs, or in runs of repeats (an attention mask) run
by run where the runs take at most a bit a value (decision 0036); 8- and 16-bit integers
stored as INT32 each checked to fit. Anything else (another encoding of the levels, a null,
a ragged row, a page kind or encoding not handled, a checksum that does not match) gives
None, and the caller reads the chunk with pyarrow. Byte equality is the safety argument:
the same level bytes decode to the same levels, whichever writer wrote them. The read path
(``core/read/direct.py``) uses it for windows that are whole row groups.
"""

from __future__ import annotations

import io
import struct
import threading
import zlib
from typing import Any, BinaryIO, cast

import numpy as np
import pyarrow as pa

from .pages import CODEC_NAMES, page_headers
from .thrift import _varint as thrift_varint

#: Encodings of the values of a data page v1 (Parquet's ``Encoding``).
PLAIN, PLAIN_DICTIONARY, RLE, RLE_DICTIONARY = 0, 2, 3, 8
#: Page kinds (``PageType``).
DATA_PAGE, DICTIONARY_PAGE = 0, 2
#: Values per bit-packed run of the writers this path matches (63 groups of 8: the header
#: byte ``0x7f``).
RUN_VALUES = 504
#: The numpy dtype of each physical type's values.
PHYSICAL: dict[str, np.dtype[Any]] = {
    "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"), "FLOAT": np.dtype("<f4"),
    "DOUBLE": np.dtype("<f8"),
}
#: The numpy dtype of each Arrow value type this path may decode into (by type id).
VALUE_DTYPES: dict[int, np.dtype[Any]] = {typ.id: np.dtype(name) for typ, name in (
    (pa.int8(), "i1"), (pa.int16(), "<i2"), (pa.int32(), "<i4"), (pa.int64(), "<i8"),
    (pa.uint8(), "u1"), (pa.uint16(), "<u2"), (pa.uint32(), "<u4"), (pa.uint64(), "<u8"),
    (pa.float32(), "<f4"), (pa.float64(), "<f8"))}


def _stored(physical: str, dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype ``physical`` values are stored as, if they decode to ``dtype``.

    Bit for bit, or (8- and 16-bit integers, which Parquet stores as ``INT32``) by a
    narrowing that :func:`_narrowed` checks value by value.
    """
    stored = PHYSICAL.get(physical)
    if stored is None or dtype.kind not in "iuf" or (dtype.kind == "f") != (stored.kind == "f"):
        return None
    if dtype.itemsize == stored.itemsize or (physical == "INT32" and dtype.itemsize < 4):
        return stored
    return None


def _narrowed(values: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
    """Stored ``values`` as ``dtype`` (a view when as wide), or None if one does not fit."""
    if values.dtype.itemsize == dtype.itemsize:
        return values.view(dtype)
    # an int8 column's values written as INT32: each must be in int8's range (what
    # pyarrow does with one that is not, this module leaves to pyarrow)
    limits = np.iinfo(dtype)
    if values.size and (int(values.min()) < limits.min or int(values.max()) > limits.max):
        return None
    return values.astype(dtype)


def value_dtype(typ: pa.DataType, physical: str) -> np.dtype[Any] | None:
    """The numpy dtype list values of Arrow type ``typ`` stored as ``physical`` decode to.

    None when this module does not decode them: not an integer or floating type, or
    stored otherwise than as values of its width (or, for 8- and 16-bit integers, as
    ``INT32``).
    """
    dtype = VALUE_DTYPES.get(typ.id)
    return dtype if dtype is not None and _stored(physical, dtype) is not None else None


#: Thrift compact types of the page header fields this path accepts, by struct: a header
#: with another field, or a field of another type, is left to pyarrow (whose reader
#: refuses some that ours would read).
I32, I64, BINARY, STRUCT, BOOL = 5, 6, 8, 12, 1
#: A struct's fields: id -> compact type, or (STRUCT, the nested struct's layout).
Layout = dict[int, "int | tuple[int, Layout]"]
_STATISTICS: Layout = {1: BINARY, 2: BINARY, 3: I64, 4: I64, 5: BINARY, 6: BINARY,
                       7: BOOL, 8: BOOL}
_DATA: Layout = {1: I32, 2: I32, 3: I32, 4: I32, 5: (STRUCT, _STATISTICS)}
_DICTIONARY: Layout = {1: I32, 2: I32, 3: BOOL}
_PAGE: Layout = {1: I32, 2: I32, 3: I32, 4: I32, 5: (STRUCT, _DATA), 7: (STRUCT, _DICTIONARY)}


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> int:
    return value << 1 if value >= 0 else (-value << 1) - 1


def canonical(fields: dict[int, object], layout: Layout | None = None) -> bytes | None:
    """The compact-protocol bytes of ``fields`` with the types of ``layout``, or None.

    A page header whose bytes are exactly these was written with the types pyarrow's
    reader expects (our reader takes any integer type for an integer, and more).
    """
    layout = _PAGE if layout is None else layout
    out = bytearray()
    last = 0
    for fid in sorted(fields):
        kind: int | tuple[int, Layout] | None = layout.get(fid)
        value = fields[fid]
        if kind is None or not 0 < fid < 32768:
            return None
        inner: Layout | None = None
        if isinstance(kind, tuple):
            kind, inner = kind
        code: int = kind
        if kind == BOOL:
            if not isinstance(value, bool):
                return None
            code = 1 if value else 2
        body = b""
        if kind in (I32, I64):
            if not isinstance(value, int) or isinstance(value, bool):
                return None
            bits = 32 if kind == I32 else 64
            if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                return None
            body = _varint(_zigzag(value))
        elif kind == BINARY:
            if not isinstance(value, bytes):
                return None
            body = _varint(len(value)) + value
        elif kind == STRUCT:
            if not isinstance(value, dict) or inner is None:
                return None
            nested = canonical(value, inner)
            if nested is None:
                return None
            body = nested
        delta = fid - last
        if 0 < delta <= 15:
            out.append(delta << 4 | code)
        else:
            out.append(code)
            out += _varint(_zigzag(fid))
        out += body
        last = fid
    out.append(0)
    return bytes(out)


def row_levels(length: int) -> bytes | None:
    """One row's repetition levels (a 0, then ``length - 1`` ones) as writers encode them.

    A bit-packed group of eight (``0,1,...,1``) and a run of the other ``length - 8`` ones:
    what Arrow's encoder writes for every row when ``length`` is a multiple of 8 (each row
    then starts a group). None for other lengths (their rows are encoded differently from
    one to the next).
    """
    if length < 16 or length % 8:
        return None
    return b"\x03\xfe" + _varint((length - 8) << 1) + b"\x01"


def full_levels(level: int, count: int) -> bytes:
    """``count`` definition levels all ``level`` (at most 255) as one run."""
    return _varint(count << 1) + bytes([level])


def decode_chunk(
    data: bytes | bytearray | memoryview, *, codec: str, physical: str,
    dtype: np.dtype[Any], max_definition: int, rows: int, values: int,
    out: np.ndarray[Any, Any] | None = None, pool: pa.MemoryPool | None = None,
) -> np.ndarray[Any, Any] | None:
    """A column chunk's lists from its bytes (:func:`decode_pages` on them)."""
    return decode_pages(
        io.BytesIO(data), 0, len(data), codec=codec, physical=physical, dtype=dtype,
        max_definition=max_definition, rows=rows, values=values, out=out, pool=pool,
    )


def decode_pages(
    fh: io.BufferedIOBase, start: int, end: int, *, codec: str, physical: str,
    dtype: np.dtype[Any], max_definition: int, rows: int, values: int,
    out: np.ndarray[Any, Any] | None = None, pool: pa.MemoryPool | None = None,
) -> np.ndarray[Any, Any] | None:
    """A column chunk's lists as a ``(rows, length)`` array, or None (pyarrow reads it).

    The pages are read one at a time into a buffer this thread reuses (a page, not the
    chunk, is in memory besides ``out``).

    Args:
        fh: The file, open for reading.
        start: Where the chunk's first page starts, dictionary page first
            (``pages.chunk_range``).
        end: Where its pages end.
        codec: Its compression, as the footer names it.
        physical: Its physical type, as the footer names it.
        dtype: The numpy dtype of the column's Arrow value type.
        max_definition: The leaf's maximum definition level (a value present).
        rows: The row group's rows.
        values: The chunk's values (levels), from the footer.
        out: Where to decode (``rows`` x length of ``dtype``, C-contiguous); a new array if
            None. Its contents are undefined when None is returned.
        pool: The Arrow memory pool pages are decompressed into (None: the default).
    """
    stream = ChunkStream(
        fh, start, end, codec=codec, physical=physical, dtype=dtype,
        max_definition=max_definition, rows=rows, values=values, pool=pool,
    )
    if stream.length is None:
        return None
    length = stream.length
    if out is None:
        out = np.empty((rows, length), dtype=dtype)
    elif out.shape != (rows, length) or out.dtype != dtype or not out.flags.c_contiguous:
        return None
    if stream.fill(out.reshape(-1)) != rows or not stream.ended():
        return None
    return out


class ChunkStream:
    """A column chunk's fixed-length lists decoded page by page, as many rows as asked for.

    :func:`decode_pages` decodes a chunk whole through it; a window cut from a row group
    asks for its rows alone (:meth:`fill`), and the rows of a page it cuts are kept for the
    next call. Every page is checked as :func:`decode_pages` checks it (its header written
    as Thrift writes it, its CRC-32 where recorded, its sizes, levels and indices) before its
    values are handed out; a page it cannot decode ends the stream (:attr:`declined`), and
    the rows before it stay as handed out.

    The arguments are :func:`decode_pages`'s (without ``out``); the stream seeks ``fh``, so
    a handle serves one stream at a time.
    """

    def __init__(
        self, fh: io.BufferedIOBase, start: int, end: int, *, codec: str, physical: str,
        dtype: np.dtype[Any], max_definition: int, rows: int, values: int,
        pool: pa.MemoryPool | None = None,
    ) -> None:
        #: Values per row, or None when the chunk is not one this module decodes.
        self.length: int | None = None
        #: Whether a page could not be decoded (pyarrow must read the rest).
        self.declined = False
        self._ended: bool | None = None  # ended()'s verdict, once it has read past the values
        self._fh = fh
        self._end = end
        self._dtype = dtype
        self._pool = pool
        self._values = values
        self._at = 0  # values decoded from the chunk's pages
        self._pos = start  # where the next page header starts
        self._rest: np.ndarray[Any, Any] | None = None  # a cut page's values not handed out
        self._dictionary: np.ndarray[Any, Any] | None = None
        stored = _stored(physical, dtype)
        if (
            stored is None or codec not in CODEC_NAMES or rows <= 0 or values % rows
            or not 0 < max_definition < 128
        ):
            return
        length = values // rows
        pattern = row_levels(length)
        if pattern is None:
            return
        self._stored = stored
        self._pattern = pattern
        self._max_definition = max_definition
        self._name = CODEC_NAMES[codec]
        self._pages = page_headers(cast(BinaryIO, fh), start, end)
        self.length = length

    def fill(self, flat: np.ndarray[Any, Any]) -> int:
        """Decode the next rows into ``flat`` (whole rows, C-contiguous); the rows filled.

        Fewer than asked when the chunk ends or a page is declined (:attr:`declined`).
        """
        if self.length is None or self.declined:
            return 0
        want, done = len(flat), 0
        rest = self._rest
        if rest is not None:
            n = min(len(rest), want)
            flat[:n] = rest[:n]
            self._rest = rest[n:] if n < len(rest) else None
            done = n
        while done < want and self._at < self._values:
            count = self._page(flat[done:])
            if count is None:
                self.declined = True
                self._rest = None
                break
            done += count
        return done // self.length

    def ended(self) -> bool:
        """Whether every value was handed out and the pages end where the chunk does.

        Asked again, the same answer: the first asking reads the page after the last value.
        """
        if self._ended is not None:
            return self._ended
        if self.length is None or self.declined or self._rest is not None:
            return False
        if self._at != self._values:
            return False
        try:
            self._ended = next(self._pages, None) is None
        except ValueError:
            self._ended = False
        return self._ended

    def _page(self, target: np.ndarray[Any, Any]) -> int | None:
        """Decode the next data page (and the dictionary page before it); None if declined.

        Its values go to ``target``; those past ``target``'s end are kept for the next call.
        Returns how many values ``target`` got.
        """
        fh, stored, dtype, length = self._fh, self._stored, self._dtype, cast(int, self.length)
        try:
            while True:
                page = next(self._pages, None)
                if page is None:
                    return None
                pos = self._pos
                fh.seek(pos)
                if canonical(page.fields) != fh.read(page.body - pos):
                    return None
                pos = page.body + page.packed
                if pos > self._end:  # checked before the page is read (and its buffer allocated)
                    return None
                self._pos = pos
                body = _read(fh, page.body, page.packed)
                crc = page.fields.get(4)
                if isinstance(crc, int) and zlib.crc32(body) != crc & 0xFFFFFFFF:
                    return None
                # the header's counts, checked before the page is decompressed into page.raw
                # bytes: a dictionary is exactly its entries, a data page at most its values
                # and a byte of levels each (five bytes a row of at least 16 values, and two
                # runs)
                count = 0
                if page.kind == DICTIONARY_PAGE:
                    header = page.fields.get(7)
                    if self._dictionary is not None or self._at or not isinstance(header, dict):
                        return None
                    entries = header.get(1)
                    if (not isinstance(entries, int)
                            or header.get(2) not in (PLAIN, PLAIN_DICTIONARY)
                            or page.raw != entries * stored.itemsize):
                        return None
                elif page.kind == DATA_PAGE:
                    header = page.fields.get(5)
                    if not isinstance(header, dict):
                        return None
                    claimed = header.get(1)
                    if (not isinstance(claimed, int) or claimed <= 0 or claimed % length
                            or self._at + claimed > self._values or header.get(3) != RLE
                            or header.get(4) != RLE
                            or page.raw > claimed * (stored.itemsize + 1) + 64):
                        return None
                    count = claimed
                else:
                    return None
                raw = body if self._name is None else pa.decompress(
                    body, page.raw, codec=self._name, memory_pool=self._pool)
                if len(raw) != page.raw:
                    return None
                view = memoryview(raw).cast("B")
                if page.kind == DICTIONARY_PAGE:
                    dictionary = _narrowed(np.frombuffer(view, dtype=stored), dtype)
                    if dictionary is None:
                        return None
                    # a copy: the page may lie in the buffer the next page is read into
                    self._dictionary = dictionary.copy()
                    continue
                # a page cut by the rows asked for is decoded whole, its last rows kept
                whole = count <= len(target)
                into = target[:count] if whole else np.empty(count, dtype=dtype)
                if not self._decode(view, count, header.get(2), into):
                    return None
                self._at += count
                if whole:
                    return count
                target[:] = into[:len(target)]
                self._rest = into[len(target):]
                return len(target)
        except (OSError, ValueError, IndexError, TypeError, struct.error, pa.ArrowException):
            return None

    def _decode(
        self, view: memoryview, count: int, encoding: object, target: np.ndarray[Any, Any]
    ) -> bool:
        """A data page's ``count`` values (its levels checked) into ``target``."""
        length = cast(int, self.length)
        level_end = _expect(view, 0, self._pattern * (count // length))
        level_end = _expect(view, level_end, full_levels(self._max_definition, count))
        if level_end is None:
            return False
        stored, dictionary = self._stored, self._dictionary
        if encoding == PLAIN:
            if len(view) - level_end != count * stored.itemsize:
                return False
            plain = _narrowed(np.frombuffer(view, dtype=stored, offset=level_end), self._dtype)
            if plain is None:
                return False
            target[:] = plain
            return True
        if encoding not in (PLAIN_DICTIONARY, RLE_DICTIONARY) or dictionary is None:
            return False
        segments = _indices(view, level_end, count)
        if segments is None:
            # not the writer's full bit-packed runs: runs of repeated values too (a mask,
            # padding), or runs cut short
            return _runs(view, level_end, count, dictionary, target)
        done = 0
        for indices in segments:
            n = indices.size
            if n and int(indices.max()) >= len(dictionary):
                return False  # an index past the dictionary: pyarrow refuses it
            # bounds checked above: "clip" writes straight into out, where "raise"
            # (numpy's default) decodes into a temporary of its size first
            np.take(dictionary, indices, mode="clip",
                    out=target[done:done + n].reshape(indices.shape))
            done += n
        return True


#: Per thread, the scratch arrays of :func:`_scratch` (pages read, indices unpacked).
_buffers = threading.local()
#: The largest scratch array kept between pages (pyarrow writes pages of 1 MiB by default).
READ_BUFFER_KEPT = 8 << 20


def _read(fh: io.BufferedIOBase, start: int, size: int) -> memoryview:
    """``size`` bytes of ``fh`` from ``start``, in this thread's scratch array ``page``."""
    view = _scratch("page", size, np.uint8).data
    fh.seek(start)
    if fh.readinto(view) != size:
        raise ValueError("the file ends inside a column chunk")
    return view


def _expect(view: memoryview, pos: int | None, levels: bytes) -> int | None:
    """The position after a level section of ``view`` at ``pos`` equal to ``levels``."""
    if pos is None or len(view) < pos + 4:
        return None
    size = int.from_bytes(view[pos:pos + 4], "little")
    if size != len(levels) or view[pos + 4:pos + 4 + size] != levels:
        return None
    return pos + 4 + size


def _indices(
    view: memoryview, pos: int, count: int
) -> list[np.ndarray[Any, Any]] | None:
    """``count`` dictionary indices at ``pos``, in full bit-packed runs and a last shorter one.

    Each run is a header byte (``0x7f``: 63 groups of 8 values, the last one
    ``(groups << 1) | 1``) and its values packed ``width`` bits each, least significant bit
    first: 8 values take ``width`` bytes. A run of repeated values (an RLE run) anywhere
    gives None. Returns the indices in order, in pieces: for whole-byte widths, views of
    the page (no copy: a fresh megabyte per page is faulted in anew each time).
    """
    if len(view) <= pos:
        return None
    width = view[pos]
    if not 1 <= width <= 32:
        return None
    step = 1 + RUN_VALUES // 8 * width  # a run: its header byte, then its values
    full, rest = divmod(count, RUN_VALUES)
    groups = -(-rest // 8)
    tail = (1 + groups * width) if rest else 0
    data = np.frombuffer(view, dtype=np.uint8, offset=pos + 1)
    if len(data) != full * step + tail:
        return None
    runs = data[:full * step].reshape(full, step)
    if full and not (runs[:, 0] == 0x7F).all():
        return None
    if rest and data[full * step] != (groups << 1 | 1):
        return None
    last = data[full * step + 1:]
    if width in (8, 16, 32):
        index = np.dtype(f"<u{width // 8}")
        pieces = [runs[:, 1:].view(index)] if full else []
        if rest:
            pieces.append(last[:rest * (width // 8)].view(index))
        return pieces
    # the runs' values then the last run's, in one buffer with 8 bytes to spare (the
    # last value's 8-byte read ends there)
    body = runs[:, 1:].reshape(-1)
    size = len(body) + len(last)
    packed = _scratch("packed", size + 8, np.uint8)
    packed[:len(body)] = body
    packed[len(body):size] = last
    packed[size:] = 0
    return [_unpack(packed, width, size // width)[:count]]


#: Most bits of runs a value for :func:`_runs` to decode a page (a mask takes 0.1): where
#: values bit-packed between runs of repeats fill the page (tokens padded with zeros take
#: 8 bits a value), numpy's passes over them cost what pyarrow's decoding does, and hold
#: the GIL it releases (an epoch of padded tokens measured at the same CPU as without this
#: path, 15% slower).
RUN_BITS = 1

#: Fewest values a run of Arrow's writer holds (a bit-packed group of 8, or 8 repeats): a
#: page of more runs than its values allow so is pyarrow's (a run costs a Python step,
#: about 50 ns; a mask has two runs a row of 512 values, tokens runs of 504).
RUN_MIN_VALUES = 8


def _runs(
    view: memoryview, pos: int, count: int, dictionary: np.ndarray[Any, Any],
    target: np.ndarray[Any, Any],
) -> bool:
    """Decode ``count`` dictionary indices in runs of any kind at ``pos`` into ``target``.

    Parquet's hybrid encoding: after the width byte, runs to the page's end, each a
    ULEB128 header (``count << 1`` then the repeated value in whole bytes, or
    ``groups << 1 | 1`` then ``groups * 8`` values bit-packed). A header's position
    depends on the run before it: the runs are found one by one in Python (:func:`_parse`,
    :func:`_chain`), then decoded with numpy. The runs must end exactly at the page's end
    and hold ``count`` values (the last bit-packed run padded to 8); every index used, and
    the padding, must lie within the dictionary. False (nothing promised of ``target``)
    otherwise.
    """
    if len(view) <= pos + 1 or not len(dictionary):
        return False
    width = view[pos]
    if width > 32:
        return False
    data = np.frombuffer(view, dtype=np.uint8, offset=pos + 1)
    n = len(data)
    if n * 8 > count * RUN_BITS:  # mostly values bit-packed between the runs: pyarrow's
        return False
    if (n + 2) * 33 >= 1 << 31:  # positions in int32 (a page of 64 MiB of indices: pyarrow's)
        return False
    padded = np.zeros(n + 4, dtype=np.uint8)  # a header's 4 bytes read anywhere
    padded[:n] = data
    limit = count // RUN_MIN_VALUES + 1
    starts: list[int] = []
    body = view[pos + 1:]
    # the first runs header by header; then, if they were short (a mask: 3 bytes a run),
    # the rest by a table of every position, else (tokens: hundreds of bytes a run, which
    # a table would cost 10 ns each) header by header still
    at = _parse(body, 0, n, width, min(limit, RUN_PROBE), starts)
    if at < n and len(starts) < limit:
        if at < RUN_SHORT_BYTES * len(starts):
            at = _chain(padded, at, n, width, limit - len(starts), starts)
        else:
            at = _parse(body, at, n, width, limit - len(starts), starts)
    if at != n:
        return False
    first = np.array(starts, dtype=np.int64)
    header, size, _ = _headers([padded[first + k] for k in range(4)])
    bitpacked = (header & 1).astype(bool)
    args = (header >> 1).astype(np.int64)
    counts = np.where(bitpacked, args * 8, args)
    total = int(counts.sum())
    # as the writer ends: the last run holds the last values, bit-packed ones padded to 8
    if total != count and not (bitpacked[-1] and count < total < count + 8):
        return False
    where = first + size  # each run's value or values
    value = np.zeros(len(first), dtype=np.int64)
    for k in range((width + 7) // 8):  # (padded: a bit-packed run's "value" may end the page)
        value |= padded[where + k].astype(np.int64) << (8 * k)
    value[bitpacked] = 0
    if int(value.max()) >= len(dictionary):
        return False
    out = np.repeat(dictionary[value], counts)
    if bitpacked.any():
        groups = args[bitpacked]
        lengths = groups * width
        length = int(lengths.sum())
        gathered = _scratch("packed", length + 8, np.uint8)
        gathered[length:] = 0
        if length:
            # the bit-packed runs' bytes, by a mask of the page's bytes (one byte each)
            begins = where[bitpacked]
            between = begins - np.concatenate([[0], (begins + lengths)[:-1]])
            spans = np.column_stack([between, lengths]).reshape(-1)
            chosen = np.repeat(np.tile(np.array([False, True]), len(begins)), spans)
            gathered[:length] = data[:len(chosen)][chosen]
        indices = (_unpack(gathered, width, int(groups.sum())) if width
                   else np.zeros(int(groups.sum()) * 8, dtype=np.uint32))
        if int(indices.max()) >= len(dictionary):
            return False
        if len(indices) * 8 < total:  # a few: their positions (8 bytes each)
            begins = (np.cumsum(counts) - counts)[bitpacked]
            sizes = groups * 8
            out[np.repeat(begins - (np.cumsum(sizes) - sizes), sizes)
                + np.arange(len(indices))] = dictionary[indices]
        else:  # many: a mask of the values (a byte each)
            out[np.repeat(bitpacked, counts)] = dictionary[indices]
    target[:] = out[:count]
    return True


#: Positions of a page whose next-run table :func:`_chain` computes at once (its
#: temporaries take about 40 bytes a position).
RUN_BLOCK = 1 << 16
#: Runs :func:`_runs` reads header by header before choosing how to find the others.
RUN_PROBE = 64
#: Bytes a run, at most, for which the runs are found by a table of every position (about
#: 10 ns a byte and 50 ns a run, where reading header after header takes about 200 ns a run).
RUN_SHORT_BYTES = 16


def _parse(
    body: memoryview, at: int, n: int, width: int, limit: int, starts: list[int],
) -> int:
    """Follow runs header by header from ``at``, at most ``limit``, appending their starts.

    Returns where the next run would start: ``n`` at the page's end, past ``n`` when a
    run goes past it or a header is not a run's (more than 4 bytes, an empty run).
    """
    value_bytes = (width + 7) // 8
    append = starts.append
    for _ in range(limit):
        append(at)
        header = body[at]
        cursor = at + 1
        if header & 0x80:  # (most headers are one byte: read here, without a call)
            try:
                cursor, header = thrift_varint(body, at)
            except (IndexError, ValueError):  # the page ends inside it, or 11 bytes and more
                return n + 1
            if cursor - at > 4:  # a run of 2**27 values or more
                return n + 1
        arg = header >> 1
        if not arg:
            return n + 1
        at = cursor + (arg * width if header & 1 else value_bytes)
        if at >= n:
            break
    return at


def _chain(
    padded: np.ndarray[Any, Any], at: int, n: int, width: int, limit: int, starts: list[int],
) -> int:
    """:func:`_parse`'s answer from a table of where the next run starts after each position.

    The table is computed with numpy as if a run started at every position from ``at``
    (in blocks: the temporaries are a block's), then followed in Python, a step a run.
    """
    table = np.empty(n, dtype=np.int32)
    for block in range(at, n, RUN_BLOCK):
        stop = min(n, block + RUN_BLOCK)
        header, size, bad = _headers([padded[block + k:stop + k] for k in range(4)])
        arg = header >> 1
        # (a run longer than the page is past its end either way: clipped, no overflow)
        step = np.where(header & 1, np.minimum(arg, n + 1) * width, (width + 7) // 8)
        following = table[block:stop]
        following[:] = np.arange(block, stop, dtype=np.int32)
        following += size
        following += step
        following[bad | (arg == 0)] = n + 1
    # a memoryview: indexed from Python, it hands out ints without converting the table
    chain = table.data
    append = starts.append
    for _ in range(limit):
        append(at)
        at = chain[at]
        if at >= n:
            break
    return at


def _headers(
    byte: list[np.ndarray[Any, Any]],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """ULEB128 run headers of up to 4 bytes, ``byte[k]`` holding each one's ``k``-th byte.

    Returns the headers' values, their sizes in bytes, and whether one goes on past its
    fourth byte (a run of 2**27 values or more: refused).
    """
    low = [part.astype(np.int32) for part in byte]
    more = [part >> 7 for part in low]
    two = more[0]
    three = two & more[1]
    four = three & more[2]
    header = ((low[0] & 0x7F) | ((low[1] & 0x7F) << 7) * two
              | ((low[2] & 0x7F) << 14) * three | ((low[3] & 0x7F) << 21) * four)
    return header, 1 + two + three + four, (four & more[3]).astype(bool)


def _unpack(packed: np.ndarray[Any, Any], width: int, groups: int) -> np.ndarray[Any, Any]:
    """``groups`` groups of 8 values of ``width`` bits, least significant bit first.

    The ``j``-th value of every group starts at bit ``j * width`` of its group, a group
    being ``width`` bytes: so it is read, for all groups at once, as the little-endian
    64-bit words at a fixed stride, shifted and masked (8 strided passes, about 1.3 ns a
    value here, where unpacking the bits one by one took 15-70). ``packed`` ends with 8
    spare bytes. The result lies in this thread's scratch memory (valid until its next
    call).
    """
    out = _scratch("indices", groups * 8, np.uint32).reshape(groups, 8)
    word = _scratch("word", groups, np.uint64)
    mask = np.uint64((1 << width) - 1)
    for j in range(8):
        bit = j * width
        words = np.ndarray((groups,), dtype="<u8", buffer=packed, offset=bit >> 3,
                           strides=(width,))
        np.right_shift(words, np.uint64(bit & 7), out=word)
        np.bitwise_and(word, mask, out=word)
        out[:, j] = word
    return out.reshape(-1)


def _scratch(name: str, size: int, dtype: type[np.generic]) -> np.ndarray[Any, Any]:
    """``size`` items of this thread's scratch array ``name`` (valid until its next call).

    Reused: fresh memory for every page is faulted in anew, which cost as much as the
    unpacking (and, for the pages read, as much as decoding them).
    """
    kept: dict[str, np.ndarray[Any, Any]] = getattr(_buffers, "scratch", None) or {}
    _buffers.scratch = kept
    array = kept.get(name)
    if array is None or len(array) < size:
        array = np.empty(size, dtype=dtype)
        if array.nbytes <= READ_BUFFER_KEPT:
            kept[name] = array
    return array[:size]


__all__ = ["decode_chunk", "decode_pages", "full_levels", "row_levels", "value_dtype"]
