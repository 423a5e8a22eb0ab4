"""What a shard's string and binary leaves decode to at most, read from their page headers.

Shared by the bounds on nested values in window reads (:mod:`nested`) and on ad hoc SQL's
result vectors (:mod:`vectors`): which leaves a column is stored as, and each data page's
values and most decoded bytes, without decoding them.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from ...common.sizes import MIB
from .pages import chunk_range, header_int, page_headers

#: Parquet codecs (footer names) whose pages pyarrow decompresses here.
CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "ZSTD": "zstd", "LZ4_RAW": "lz4_raw",
          "BROTLI": "brotli"}
#: Most bytes of a dictionary page decompressed to measure its entries.
MAX_DICTIONARY = 64 * MIB

def column_leaves(meta: pq.FileMetaData) -> dict[str, list[int]]:
    """The leaf indices of each top-level column, by lowercased name.

    Found from the columns' types in order, never by splitting dotted leaf paths (a column
    may be named ``"a.b"``).

    Args:
        meta: A shard's footer.

    Returns:
        ``{name: [leaf index, ...]}``.

    When the types do not account for the footer's leaves, a leaf counts for every column
    whose name its dotted path equals or starts with (more leaves, never fewer).
    """
    out: dict[str, list[int]] = {}
    index = 0
    arrow = meta.schema.to_arrow_schema()
    for field in arrow:
        count = _leaf_count(field.type)
        out.setdefault(field.name.lower(), []).extend(range(index, index + count))
        index += count
    if index == len(meta.schema):
        return out
    out = {}
    for i in range(len(meta.schema)):
        path = meta.schema.column(i).path.lower()
        for name in {f.name.lower() for f in arrow}:
            if path == name or path.startswith(name + "."):
                out.setdefault(name, []).append(i)
    return out


def _leaf_count(typ: pa.DataType) -> int:
    """Parquet leaf columns an Arrow type is stored as."""
    if pa.types.is_dictionary(typ):
        return _leaf_count(typ.value_type)
    children = child_types(typ)
    return sum(_leaf_count(child) for child in children) if children else 1


def child_types(typ: pa.DataType) -> list[pa.DataType]:
    """The types a nested Arrow type holds: a struct's fields, a map's keys and items.

    A list's values too; other types (a dictionary's values included) have none.

    Args:
        typ: An Arrow type.

    Returns:
        The child types, in order.
    """
    if pa.types.is_struct(typ):
        return [typ.field(i).type for i in range(typ.num_fields)]
    if pa.types.is_map(typ):
        return [typ.key_type, typ.item_type]
    if (
        pa.types.is_list(typ)
        or pa.types.is_large_list(typ)
        or pa.types.is_fixed_size_list(typ)
        or pa.types.is_list_view(typ)
        or pa.types.is_large_list_view(typ)
    ):
        return [typ.value_type]
    return []


class Page(NamedTuple):
    """One data page of a byte-array column chunk, as its header records it.

    Attributes:
        values: The page's values (nulls included).
        bound: The most bytes its values decode to.
        each: The most bytes one of its values decodes to.
        dictionary: Whether its values are indices into the dictionary page.
    """

    values: int
    bound: int
    each: int
    dictionary: bool = False


def chunk_pages(
    fh: BinaryIO, size: int, chunk: pq.ColumnChunkMetaData, *, scan: bool = True
) -> list[Page] | None:
    """Walk a byte-array column chunk's page headers: what each data page decodes to at most.

    A dictionary-encoded page decodes to at most its values times the longest entry of the
    chunk's dictionary page (read and scanned here); a plain page to its own size; a
    DELTA_BYTE_ARRAY page to its values times its size.

    Args:
        fh: The shard file, open for reading.
        size: The file's size.
        chunk: The column chunk's footer entry.
        scan: Whether to decompress and scan the dictionary page for its longest entry;
            else the longest counts as the whole page.

    Returns:
        The data pages in file order, or None when they cannot be followed here (an unknown
        codec or encoding, a header that does not parse, too many pages, a chunk past the
        file).
    """
    start, end = chunk_range(chunk)
    codec = chunk.compression
    if start < 4 or end > size or end <= start or (codec != "UNCOMPRESSED" and codec not in CODECS):
        return None
    longest = -1
    out: list[Page] = []
    try:
        for page in page_headers(fh, start, end):
            if page.kind == 2:  # dictionary page
                # unscanned, no entry is longer than the page (its entry count is not trusted)
                found = _longest(fh, page.body, page.packed, page.raw, codec) if scan else page.raw
                if found is None:
                    return None
                longest = found
                continue
            if page.kind == 0:
                fields = page.fields.get(5)
                values, encoding = header_int(fields, 1), header_int(fields, 2)
            elif page.kind == 3:
                fields = page.fields.get(8)
                values, encoding = header_int(fields, 1), header_int(fields, 4)
            else:
                continue  # an index page: no values
            if encoding in (2, 8):  # PLAIN_DICTIONARY, RLE_DICTIONARY
                if longest < 0:
                    return None
                out.append(Page(values, values * longest, longest, True))
            elif encoding in (0, 6):  # PLAIN, DELTA_LENGTH_BYTE_ARRAY: values are in the page
                out.append(Page(values, page.raw, page.raw))
            elif encoding == 7:  # DELTA_BYTE_ARRAY: a value is at most the page long
                out.append(Page(values, values * page.raw, page.raw))
            else:
                return None
    except ValueError:  # headers that cannot be followed, or pages past the chunk's end
        return None
    # values as the pages record them: what pyarrow and DuckDB decode (a footer that
    # disagrees is reported by DuckDB's read)
    return out


def _longest(fh: BinaryIO, body: int, packed: int, raw: int, codec: str) -> int | None:
    """The longest entry of a PLAIN byte-array dictionary page, or None."""
    if raw > MAX_DICTIONARY or packed > MAX_DICTIONARY:
        return None
    fh.seek(body)
    data = fh.read(packed)
    if len(data) != packed:
        return None
    if codec != "UNCOMPRESSED":
        data = pa.decompress(data, decompressed_size=raw, codec=CODECS[codec], asbytes=True)
    if len(data) != raw:
        return None
    view = memoryview(data)
    pos, longest, end = 0, 0, len(view)
    while pos < end:
        (n,) = struct.unpack_from("<I", view, pos)
        pos += 4 + n
        longest = max(longest, n)
    return longest if pos == end else None


__all__ = ["CODECS", "Page", "child_types", "chunk_pages", "column_leaves"]
