"""Decide from a shard's footer and page headers whether pyarrow may decode its row groups.

pyarrow decodes plain row groups with less CPU than DuckDB's read plus its Arrow export, but
the two readers do not accept the same files (pyarrow reads BYTE_STREAM_SPLIT on any type,
legacy list layouts differently, and has no memory limit). A row group is handed to pyarrow
only when everything about the columns read is on an explicit allow-list where both readers
are known to agree, and its page headers (read here, not trusted from the footer) prove that
decoding it stays within the read limit; anything else, or any doubt, goes to DuckDB.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from typing import BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .footers import chunks_known
from .thrift import Thrift

#: Data page encodings both readers decode alike (Parquet's Encoding enum), for any of the
#: physical types below, and BYTE_STREAM_SPLIT (9), only for FLOAT and DOUBLE.
ENCODINGS = frozenset({0, 2, 3, 4, 5, 6, 7, 8})  # PLAIN .. RLE_DICTIONARY
DICTIONARY_ENCODINGS = frozenset({2, 8})
BYTE_STREAM_SPLIT = 9
LEVEL_ENCODINGS = frozenset({3, 4})  # RLE, BIT_PACKED
FOOTER_ENCODINGS = frozenset({
    "PLAIN", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
    "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY",
})
CODECS = frozenset({"UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD", "LZ4_RAW"})
#: Bytes per value of the physical types read (0: variable, BYTE_ARRAY). No INT96, no
#: FIXED_LEN_BYTE_ARRAY.
WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 0}
LOGICAL = frozenset({"NONE", "STRING", "INT", "DATE"})
CONVERTED = frozenset({
    "NONE", "UTF8", "DATE", "INT_8", "INT_16", "INT_32", "INT_64",
    "UINT_8", "UINT_16", "UINT_32", "UINT_64",
})
#: File metadata keys known to change nothing in either reader (DuckDB gives meaning to
#: others, such as GeoParquet's ``geo``).
METADATA_KEYS = frozenset({
    b"ARROW:schema", b"pandas", b"huggingface",
    # parquet-mr's and Spark's (its schema as JSON, its version, how it rebased old dates)
    b"writer.model.name", b"org.apache.spark.version",
    b"org.apache.spark.sql.parquet.row.metadata", b"org.apache.spark.legacyDateTime",
    b"org.apache.spark.legacyINT96",
})
#: Per value besides its data: validity bit, list or string offsets (rounded up).
VALUE_OVERHEAD = 9
#: Per value of a list's element column besides its data: its validity bit (rounded up to
#: a byte) and its two decoded levels (16 bits each); the list's offsets are counted per
#: row, :data:`VALUE_OVERHEAD` each.
ELEMENT_OVERHEAD = 5
#: Most pages per column chunk followed (more: DuckDB reads the group, or the bounds on
#: string values weigh it exactly).
MAX_PAGES = 20_000
HEADER_READ = 1024
HEADER_MAX = 1 << 16
#: Largest dictionary page of strings read to weigh its longest value (larger ones count
#: as long as the whole page).
DICTIONARY_SCAN_BYTES = 8 << 20
#: pyarrow's names of the codecs of :data:`CODECS` (None: stored as is).
CODEC_NAMES = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "ZSTD": "zstd",
               "LZ4_RAW": "lz4_raw"}


def plain_type(typ: pa.DataType) -> bool:
    """Whether an Arrow type is one both readers give alike (after ``readable.conform``)."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
        return bool(pa.types.is_string(typ) or pa.types.is_binary(typ))
    return bool(
        pa.types.is_integer(typ)
        or pa.types.is_float32(typ)
        or pa.types.is_float64(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_date32(typ)
    )


def allowed_type(typ: pa.DataType) -> bool:
    """Whether an Arrow column type is on the allow-list: plain types and lists of them."""
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        value = typ.value_type
        return plain_type(value) and not pa.types.is_dictionary(value)
    return plain_type(typ)


class ShardPages:
    """The pyarrow verdicts of one shard: which leaf columns, and each row group's bound.

    Args:
        path: The local shard file.
        meta: Its footer.
        columns: The dataset's columns, in order.
        schema: The dataset's Arrow schema (the types every shard must have).
    """

    def __init__(
        self, path: str, meta: pq.FileMetaData, columns: Sequence[str], schema: pa.Schema,
        *, verdicts: LeafVerdicts | None = None,
    ) -> None:
        self.path = path
        self.meta = meta
        self.leaves = (
            verdicts.of(meta) if verdicts is not None else _leaves(meta, columns, schema)
        )
        self._bounds: dict[int, int | None] = {}
        self._chunks: dict[int, list[_ChunkBound] | None] = {}

    def bound(self, group: int, *, weigh: bool = True) -> int | None:
        """Most bytes decoding the columns of one row group can take, or None (DuckDB reads it).

        The bound counts each page's values as its header records them, the decoded values'
        offsets and validity, and the largest page held compressed and decompressed at once.
        A dictionary-encoded string counts as long as the longest value of its dictionary
        page, read to weigh it (:func:`_longest_value`); with ``weigh`` False, as long as
        the whole page, without reading it (a looser bound, never below the other).
        """
        if group not in self._chunks:
            self._chunks[group] = self._chunk_bounds(group)
        chunks = self._chunks[group]
        if chunks is None:
            return None
        if not weigh:
            return sum(c.base + c.indexed * c.dictionary_bytes for c in chunks)
        if group not in self._bounds:
            self._bounds[group] = self._weighed(chunks)
        return self._bounds[group]

    def _weighed(self, chunks: list[_ChunkBound]) -> int | None:
        total = 0
        try:
            with open(self.path, "rb") as fh:
                for c in chunks:
                    value = c.dictionary_bytes
                    if c.indexed and c.dictionary is not None:
                        value = _longest_value(fh, c.dictionary, c.codec, c.entries) or value
                    total += c.base + c.indexed * value
        except (OSError, ValueError, IndexError, pa.ArrowException):
            return None
        return total

    def _chunk_bounds(self, group: int) -> list[_ChunkBound] | None:
        if self.leaves is None or not 0 <= group < self.meta.num_row_groups:
            return None
        try:
            rg = self.meta.row_group(group)
            out = []
            with open(self.path, "rb") as fh:
                size = fh.seek(0, 2)
                for index, width in self.leaves:
                    chunk = rg.column(index)
                    if chunk.compression not in CODECS or chunk.physical_type not in WIDTHS:
                        return None
                    names = set(chunk.encodings)
                    if chunk.physical_type in ("FLOAT", "DOUBLE"):
                        names.discard("BYTE_STREAM_SPLIT")
                    if not names <= FOOTER_ENCODINGS:
                        return None
                    nested = self.meta.schema.column(index).max_repetition_level > 0
                    bound = _chunk_bound(fh, size, chunk, width, rg.num_rows, nested=nested)
                    if bound is None:
                        return None
                    out.append(bound)
        except (OSError, ValueError, IndexError, pa.ArrowException):
            return None
        return out


#: Physical types DuckDB decodes BYTE_STREAM_SPLIT pages of; pyarrow also writes (and
#: reads) them for FIXED_LEN_BYTE_ARRAY: float16, decimals, fixed-size binary.
DUCKDB_SPLIT_TYPES = frozenset({"FLOAT", "DOUBLE", "INT32", "INT64"})
#: Row groups :func:`split_columns` looks at (writers encode a column alike in each).
SPLIT_SCAN_GROUPS = 256


def split_columns(error: BaseException, path: str, columns: Sequence[str]) -> list[str]:
    """The columns of ``columns`` with BYTE_STREAM_SPLIT pages DuckDB cannot decode.

    DuckDB's error for them (``error``) names no column; this names them for ours, and
    nothing when ``error`` is about something else. Only the first
    :data:`SPLIT_SCAN_GROUPS` row groups are looked at, and only once the footer's chunks
    are known to hold no value pyarrow's chunk accessors abort the process on.

    Args:
        error: DuckDB's error reading the file.
        path: A local Parquet file.
        columns: The top-level columns read.

    Returns:
        Those columns, in ``columns`` order ([] if none, or the footer cannot be read).
    """
    if "byte_stream_split" not in str(error).lower():
        return []
    wanted = set(columns)
    found: set[str] = set()
    try:
        if not chunks_known(path, os.path.getsize(path)):
            return []
        meta = pq.read_metadata(path)
        for group in range(min(meta.num_row_groups, SPLIT_SCAN_GROUPS)):
            rg = meta.row_group(group)
            for index in range(rg.num_columns):
                chunk = rg.column(index)
                name = chunk.path_in_schema.split(".")[0]
                if (
                    name in wanted
                    and chunk.physical_type not in DUCKDB_SPLIT_TYPES
                    and "BYTE_STREAM_SPLIT" in chunk.encodings
                ):
                    found.add(name)
    except (OSError, ValueError, IndexError, pa.ArrowException):
        return []
    return [name for name in columns if name in found]


def read_chunks(
    meta: pq.FileMetaData, group: int, columns: Sequence[str]
) -> list[pq.ColumnChunkMetaData]:
    """The column chunks of a row group that a read of the top-level ``columns`` decodes.

    A chunk's dotted path names its top-level column by its first part; where a name read
    holds a dot that cannot be told apart, so every chunk of the group is given.

    Args:
        meta: The file's footer.
        group: The row group.
        columns: The top-level columns read.

    Returns:
        The chunks, in file order.
    """
    wanted = set(columns)
    rg = meta.row_group(group)
    chunks = [rg.column(index) for index in range(rg.num_columns)]
    if any("." in name for name in wanted):
        return chunks
    return [c for c in chunks if c.path_in_schema.split(".")[0] in wanted]


#: Bytes of a page's body read at once while its checksum is computed.
CHECKSUM_READ = 1 << 20


class ChecksumMismatch(NamedTuple):
    """A page whose CRC-32 (from its header) does not match its bytes in the file.

    Attributes:
        column: The leaf column's dotted path.
        group: The row group.
        page: The page's index in its column chunk (0: the first, a dictionary page or not).
    """

    column: str
    group: int
    page: int
    #: Whether it is a GZIP page whose gzip stream does not check (it records no CRC-32).
    gzip: bool = False


#: Parquet's page types (PageHeader.type).
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3


def checksum_mismatch(
    path: str, meta: pq.FileMetaData, group: int, columns: Sequence[str]
) -> tuple[ChecksumMismatch | None, bool]:
    """The first page of a row group whose recorded CRC-32 its bytes do not match, if any.

    Parquet writers may record each page's CRC-32 (parquet-mr and Spark do by default,
    pyarrow with ``write_page_checksum=True``); DuckDB never checks it, so a byte flipped in
    a page that still decompresses would be served as a wrong value. A column chunk whose
    first page records none is taken to record none (writers decide per file), and a chunk
    whose headers cannot be followed is left to the reader's own errors. A GZIP page that
    records none is decompressed instead (:func:`_gzip_fails`): DuckDB does not check gzip's
    own CRC-32 either.

    Args:
        path: A local Parquet file.
        meta: Its footer.
        group: The row group.
        columns: The top-level columns read (their leaves are checked).

    Returns:
        ``(mismatch, recorded)``: the first mismatch (None: all match, or nothing records
        a checksum), and whether any page read records one or is a GZIP page.

    Raises:
        OSError: If the file cannot be read.
    """
    recorded = False
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        for chunk in read_chunks(meta, group, columns):
            start, end = chunk_range(chunk)
            if start < 4 or end > size - 8 or end <= start:
                continue
            gzip = chunk.compression == "GZIP"
            try:
                for number, page in enumerate(page_headers(fh, start, end)):
                    crc = page.fields.get(4)
                    if isinstance(crc, int) and not isinstance(crc, bool):
                        recorded = True
                        if _crc32(fh, page.body, page.packed) != crc & 0xFFFFFFFF:
                            return ChecksumMismatch(chunk.path_in_schema, group, number), True
                    elif gzip:  # bytes that match their CRC-32 need no second check
                        recorded = True
                        if _gzip_fails(fh, page):
                            return ChecksumMismatch(chunk.path_in_schema, group, number,
                                                    gzip=True), True
                    elif number == 0:
                        break  # this chunk records no checksums
            except ValueError:
                continue  # headers not followed: the reader reports the damage
    return None, recorded


def _gzip_fails(fh: BinaryIO, page: PageHeader) -> bool:
    """Whether a GZIP page's compressed bytes fail to decompress to its uncompressed size.

    zlib checks what DuckDB's inflate skips: gzip's CRC-32 and length of the data, besides
    a deflate stream that does not decode. The output is counted, not kept (a page that
    decompresses to more than its header records fails once past it). Pages whose header
    cannot say where their compressed bytes lie are left to the reader's own errors.
    """
    start, length, expect = page.body, page.packed, page.raw
    if page.kind == DATA_PAGE_V2:  # its levels lie uncompressed before its values
        v2 = page.fields.get(8)
        if not isinstance(v2, dict) or v2.get(7) is False:  # is_compressed false
            return False
        levels = header_int(v2, 5) + header_int(v2, 6)
        start, length, expect = start + levels, length - levels, expect - levels
    elif page.kind not in (DATA_PAGE, DICTIONARY_PAGE):
        return False
    if length <= 0 or expect < 0:
        return False
    stream = zlib.decompressobj(47)  # a gzip or zlib stream, as pyarrow's codec takes
    out = 0
    fh.seek(start)
    try:
        while length > 0 and not stream.eof:
            data = fh.read(min(length, CHECKSUM_READ))
            if not data:
                return False  # the file ends first: the reader reports it
            length -= len(data)
            while data and not stream.eof:
                out += len(stream.decompress(data, CHECKSUM_READ))
                if out > expect:
                    return True
                data = stream.unconsumed_tail
    except zlib.error:
        return True
    return not stream.eof or out != expect


def _crc32(fh: BinaryIO, start: int, length: int) -> int | None:
    """CRC-32 of ``length`` bytes of a file from ``start`` (None if the file ends first)."""
    fh.seek(start)
    crc = 0
    while length > 0:
        data = fh.read(min(length, CHECKSUM_READ))
        if not data:
            return None
        crc = zlib.crc32(data, crc)
        length -= len(data)
    return crc


def _leaves(
    meta: pq.FileMetaData, columns: Sequence[str], schema: pa.Schema
) -> list[tuple[int, int]] | None:
    """``(leaf index, value width)`` of each column read, or None if any is not allowed."""
    try:
        arrow = meta.schema.to_arrow_schema()
        parquet = meta.schema
        leaves = [parquet.column(i) for i in range(len(parquet))]
    except (pa.ArrowException, ValueError, NotImplementedError):
        return None
    if not set(meta.metadata or {}) <= METADATA_KEYS:
        return None
    lowered = [name.lower() for name in arrow.names]
    if len(set(lowered)) != len(lowered):
        return None  # DuckDB may bind such names differently
    # Leaves by top-level column, and the dataset's names, found once: a lookup per column
    # over every leaf (or ``schema.names``, a fresh list per call) is quadratic, minutes
    # on a shard of 5,000 columns
    by_column: dict[str, list[int]] = {}
    for i, leaf in enumerate(leaves):
        by_column.setdefault(leaf.path.split(".")[0], []).append(i)
    wanted = set(schema.names)
    out = []
    for name in columns:
        if "." in name or arrow.get_all_field_indices(name) != [arrow.get_field_index(name)]:
            return None
        field = arrow.field(name)
        want = schema.field(name) if name in wanted else None
        if want is None or field.type != want.type or not allowed_type(field.type):
            return None
        mine = by_column.get(name, [])
        if len(mine) != 1:
            return None
        index, leaf = mine[0], leaves[mine[0]]
        parts = leaf.path.split(".")
        listed = pa.types.is_list(field.type) or pa.types.is_large_list(field.type)
        shape = (
            len(parts) == 3 and parts[1] == "list" and parts[2] in ("element", "item")
            and leaf.max_repetition_level == 1 and leaf.max_definition_level <= 3
            if listed
            else len(parts) == 1 and leaf.max_repetition_level == 0
            and leaf.max_definition_level <= 1
        )
        if (
            not shape
            or leaf.physical_type not in WIDTHS
            or leaf.logical_type.type not in LOGICAL
            or leaf.converted_type not in CONVERTED
        ):
            return None
        out.append((index, WIDTHS[leaf.physical_type]))
    return out


#: Parquet schemas a :class:`LeafVerdicts` keeps verdicts for, and the largest footer
#: (serialized bytes) whose schema it keeps: a kept schema holds its whole footer alive
#: (pyarrow's objects take about ten times the serialized size).
SCHEMAS_KEPT = 8
SCHEMA_FOOTER_BYTES = 64 << 10


class LeafVerdicts:
    """The allow-list's verdict on a shard's leaves, found once per Parquet schema.

    The shards of a dataset mostly share one schema: :class:`ShardPages` of a shard whose
    Parquet schema and key-value metadata (from which pyarrow makes the Arrow schema)
    equal one seen before takes that verdict rather than walking the schema again (40 us
    a shard, about 110 us between the decodes of a first epoch over small shards).
    Thread-safe.

    Args:
        columns: The dataset's columns, in order.
        schema: The dataset's Arrow schema.
    """

    def __init__(self, columns: Sequence[str], schema: pa.Schema) -> None:
        self.columns = list(columns)
        self.schema = schema
        # (Parquet schema, key-value metadata, verdict), the last seen first
        self._seen: list[tuple[pq.ParquetSchema, object, list[tuple[int, int]] | None]] = []
        self._lock = threading.Lock()

    def of(self, meta: pq.FileMetaData) -> list[tuple[int, int]] | None:
        """``(leaf index, value width)`` of each column read from ``meta``'s file, or None."""
        try:
            parquet, metadata = meta.schema, meta.metadata
        except (pa.ArrowException, ValueError):
            return _leaves(meta, self.columns, self.schema)
        with self._lock:
            seen = list(self._seen)
        for known, known_metadata, verdict in seen:
            if known_metadata == metadata and known.equals(parquet):
                return None if verdict is None else list(verdict)
        verdict = _leaves(meta, self.columns, self.schema)
        if int(meta.serialized_size) <= SCHEMA_FOOTER_BYTES:
            with self._lock:
                kept = verdict if verdict is None else list(verdict)
                self._seen = [(parquet, metadata, kept), *self._seen][:SCHEMAS_KEPT]
        return verdict


def read_page_header(fh: BinaryIO, pos: int, end: int) -> tuple[dict[int, object], int] | None:
    """Parse the page header at ``pos``: ``(fields, header length)``, or None."""
    size = HEADER_READ
    while True:
        fh.seek(pos)
        data = fh.read(min(size, end - pos))
        parser = Thrift(data)
        try:
            return parser.struct(0), parser.pos
        except IndexError:
            if size >= HEADER_MAX or len(data) < size:
                return None
            size = HEADER_MAX
        except (ValueError, struct.error):
            return None


def header_int(fields: object, fid: int) -> int:
    """Field ``fid`` of a parsed page header (struct), a non-negative int; else ValueError."""
    value = fields.get(fid) if isinstance(fields, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"page header field {fid} missing or negative")
    return value


class PageHeader(NamedTuple):
    """One page header of a column chunk.

    Attributes:
        fields: The parsed header (Thrift field id -> value).
        kind: The page type (0 data, 2 dictionary, 3 data v2; others carry no values).
        raw: The page's uncompressed size.
        packed: Its size in the file.
        body: Where its body starts in the file.
    """

    fields: dict[int, object]
    kind: int
    raw: int
    packed: int
    body: int


def chunk_range(chunk: pq.ColumnChunkMetaData) -> tuple[int, int]:
    """Where a column chunk's pages lie in its file, dictionary page first: ``(start, end)``."""
    start = int(chunk.data_page_offset)
    dictionary = int(chunk.dictionary_page_offset or 0)
    if chunk.has_dictionary_page and 0 < dictionary < start:
        start = dictionary
    return start, start + int(chunk.total_compressed_size)


def page_headers(fh: BinaryIO, start: int, end: int) -> Iterator[PageHeader]:
    """Each page header of the pages in ``[start, end)`` of a file, in order.

    Args:
        fh: The file, open for reading.
        start: Where the first page starts (:func:`chunk_range`).
        end: Where the pages must end.

    Yields:
        Each header.

    Raises:
        ValueError: If a header does not parse or misses a size, there are more than
            :data:`MAX_PAGES` pages, or the pages do not end at ``end``.
    """
    pos, count = start, 0
    while pos < end:
        count += 1
        parsed = read_page_header(fh, pos, end)
        if parsed is None or count > MAX_PAGES:
            raise ValueError("the page headers cannot be followed")
        header, length = parsed
        kind, raw, packed = header_int(header, 1), header_int(header, 2), header_int(header, 3)
        body = pos + length
        pos = body + packed
        yield PageHeader(header, kind, raw, packed, body)
    if pos != end:
        raise ValueError("the pages do not end where the chunk does")


class _ChunkBound(NamedTuple):
    """One column chunk's bound (:func:`_chunk_bound`), its dictionary's strings not weighed.

    The chunk's bound is ``base + indexed * w``, ``w`` the longest value of its dictionary
    page: at most ``dictionary_bytes``, found by reading the page.

    Attributes:
        base: The bound without the data of dictionary-indexed strings.
        indexed: How many values are dictionary-indexed strings.
        dictionary_bytes: The dictionary page's decompressed size.
        dictionary: The dictionary page of strings to weigh (None: none, or not weighed).
        codec: The chunk's codec.
        entries: The dictionary's entries.
    """

    base: int
    indexed: int
    dictionary_bytes: int
    dictionary: PageHeader | None
    codec: str
    entries: int


def _chunk_bound(
    fh: BinaryIO, size: int, chunk: pq.ColumnChunkMetaData, width: int, rows: int,
    *, nested: bool = False,
) -> _ChunkBound | None:
    """Walk one column chunk's page headers; return its decode bound, or None.

    ``nested``: the chunk is a list's element column (its values have no offsets of their
    own, the list's offsets are counted per row).

    Raises:
        ValueError: If the page headers cannot be followed (:func:`page_headers`).
    """
    start, end = chunk_range(chunk)
    if start < 4 or end > size - 8 or end <= start:
        return None
    fp = chunk.physical_type in ("FLOAT", "DOUBLE")
    boolean = chunk.physical_type == "BOOLEAN"
    plain = chunk.compression == "UNCOMPRESSED"
    v2_rows: int | None = 0
    has_dict = False
    bound, peak, dict_bytes, count, indexed, entries = 0, 0, 0, 0, 0, 0
    dictionary: PageHeader | None = None
    for index, page in enumerate(page_headers(fh, start, end)):
        header, kind, raw, packed = page.fields, page.kind, page.raw, page.packed
        if plain and raw != packed:  # DuckDB refuses such a page
            return None
        peak = max(peak, raw + packed)
        if kind == 2:  # dictionary page: before every data page, once
            if index != 0 or header_int(header.get(7), 2) not in (0, 2):
                return None
            entries = header_int(header.get(7), 1)
            dict_bytes, has_dict = raw, True
            if not width:  # a string is at most the page long, or as long as weighed
                dictionary = page
            bound += raw + entries * VALUE_OVERHEAD
            continue
        if kind == 0:
            fields = header.get(5)
            values, encoding = header_int(fields, 1), header_int(fields, 2)
            levels = (header_int(fields, 3), header_int(fields, 4))
            if any(level not in LEVEL_ENCODINGS for level in levels):
                return None
            v2_rows = None
        elif kind == 3:
            fields = header.get(8)
            values, encoding = header_int(fields, 1), header_int(fields, 4)
            if v2_rows is not None:
                v2_rows += header_int(fields, 3)
        else:
            return None
        if not (encoding in ENCODINGS or (fp and encoding == BYTE_STREAM_SPLIT)):
            return None
        if boolean and encoding == 3:  # RLE booleans: DuckDB checks each run's value
            return None
        if encoding in DICTIONARY_ENCODINGS:
            if not has_dict:  # dictionary indices without a dictionary page
                return None
            data = values * width
            if not width:
                indexed += values  # each as long as the dictionary's longest value
        elif width:
            data = values * width
        elif encoding == 7:  # DELTA_BYTE_ARRAY: a value is at most a page long
            data = values * raw
        else:
            data = raw
        overhead = ELEMENT_OVERHEAD if nested and width else VALUE_OVERHEAD
        bound += data + values * overhead
        count += values
    if count != chunk.num_values or (v2_rows is not None and v2_rows != rows):
        # the pages' values must be the footer's (readers differ on which to believe), and
        # v2 pages record their rows: DuckDB checks them against the group's
        return None
    if nested:
        bound += rows * VALUE_OVERHEAD  # the list's offsets and validity
    return _ChunkBound(bound + peak, indexed, dict_bytes, dictionary, chunk.compression, entries)


def _longest_value(fh: BinaryIO, page: PageHeader, codec: str, entries: int) -> int | None:
    """The longest value of a PLAIN dictionary page of strings, or None if not weighed.

    A dictionary-encoded string decodes to copies of its dictionary's values, so a value
    is at most the longest of them, often far below the page's size (a column of distinct
    ids). The page is read only when it is small (:data:`DICTIONARY_SCAN_BYTES`) and its
    values must fill it exactly; anything else leaves the whole page as the bound.
    """
    if page.raw > DICTIONARY_SCAN_BYTES or page.packed > DICTIONARY_SCAN_BYTES:
        return None
    fh.seek(page.body)
    packed = fh.read(page.packed)
    if len(packed) != page.packed:
        return None
    name = CODEC_NAMES.get(codec, "")
    if name == "":
        return None
    try:
        data = packed if name is None else pa.decompress(
            packed, decompressed_size=page.raw, codec=name, asbytes=True
        )
    except (pa.ArrowException, ValueError, OSError):
        return None
    if len(data) != page.raw:
        return None
    return longest_plain_value(data, entries)


def longest_plain_value(data: bytes, entries: int) -> int | None:
    """The longest of ``entries`` PLAIN byte-array values that fill ``data`` exactly.

    Each value is a 4-byte little-endian length and its bytes. None when the values do not
    fill ``data`` exactly (too few bytes, or bytes left over).

    Args:
        data: The values, as a PLAIN page stores them (decompressed).
        entries: How many values the page header says it holds.

    Returns:
        The longest value's length in bytes, or None.
    """
    end = len(data)
    if entries > 0 and end >= 4:
        width = int.from_bytes(data[:4], "little")
        step = width + 4
        if entries * step == end:
            # Values of one length (ids, digests): the walk below would visit exactly the
            # prefixes one step apart, so one numpy pass over them gives its answer (a
            # dictionary page of 10,000 ids took 3 ms of Python per row group).
            prefixes = np.ndarray((entries,), dtype="<u4", buffer=data, strides=(step,))
            if bool((prefixes == width).all()):
                return width
    view = memoryview(data)
    pos, longest = 0, 0
    unpack = struct.Struct("<I").unpack_from
    for _ in range(entries):
        if pos + 4 > end:
            return None
        (length,) = unpack(view, pos)
        pos += 4 + length
        if length > longest:
            longest = length
    return longest if pos == end else None


__all__ = [
    "CODEC_NAMES",
    "ChecksumMismatch",
    "LeafVerdicts",
    "PageHeader",
    "ShardPages",
    "allowed_type",
    "checksum_mismatch",
    "chunk_range",
    "longest_plain_value",
    "page_headers",
    "plain_type",
    "read_chunks",
    "split_columns",
]
