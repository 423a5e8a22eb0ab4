"""Check a Parquet footer against its file before trusting it: encryption, row counts, sizes."""

from __future__ import annotations

import os
import re
import struct
import threading
from collections import OrderedDict
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ...common.text import first_line
from ...errors import CorruptShardError, EncryptedShardError, UnsupportedShardError
from .thrift import Thrift, field_of, list_of

#: The magic bytes of a Parquet file whose footer is encrypted.
ENCRYPTED_MAGIC = b"PARE"

#: Fewest bytes one data page takes in a file (its Thrift header alone is longer): with at
#: most 2**31 - 1 values per page (an i32 in the page header), a file of ``n`` bytes holds
#: at most ``n // MIN_PAGE_BYTES * (2**31 - 1)`` rows however its pages are encoded.
MIN_PAGE_BYTES = 8
MAX_PAGE_VALUES = (1 << 31) - 1

#: A file version as the footer gate saw it: path, size, mtime, ctime, device and inode
#: (:func:`file_key`). The ctime and inode tell a file rewritten with its size and mtime
#: restored, or renamed over the old one, from the one walked.
FileKey = tuple[str, int, int, int, int, int]

#: Footer walks kept (:func:`scan_footer`'s verdict, two booleans each), by file version.
SCANS_KEPT = 4096
#: Footers kept as pyarrow parsed them, by file version: at most this many checked by the
#: read path, and at most :data:`META_BYTES_KEPT` serialized footer bytes together besides
#: the one used last (pyarrow's objects take about ten times their serialized size: 198 MiB
#: for a footer of 21 MB holding 100,000 row groups).
METAS_KEPT = 64
META_BYTES_KEPT = 32 << 20
#: Parses kept from open for the read path beyond :data:`METAS_KEPT` while they are small:
#: at most this many, of at most :data:`OPENED_BYTES_KEPT` serialized bytes together (about
#: 10 MiB as pyarrow's objects). A first epoch over 200 shards of 1.4 KB footers parsed
#: every footer twice (the read path's parse cost 225-260 us a shard between decodes).
OPENED_KEPT = 1024
OPENED_BYTES_KEPT = 1 << 20

# A footer of 100,000 row groups took 5 s to walk and 198 MiB once parsed, and was walked
# and parsed at open and again at the first read: both are kept by file version, the
# parse from open handed to the read path. Bounded (least recently used first out).
_scans: OrderedDict[FileKey, FooterScan | None] = OrderedDict()
# file version -> (footer, serialized size, whether checked_metadata passed it)
_metas: OrderedDict[FileKey, tuple[pq.FileMetaData, int, bool]] = OrderedDict()
# _metas' keys by whether checked, least recently used first; their serialized bytes, all
# and of those not checked
_order: dict[bool, OrderedDict[FileKey, None]] = {True: OrderedDict(), False: OrderedDict()}
_totals = {"bytes": 0, "opened_bytes": 0}
_kept = threading.Lock()  # guards _scans, _metas, _order and _totals
_checking = threading.Lock()  # one check at a time: a footer is not walked by two threads


def _after_fork_in_child() -> None:
    global _kept, _checking
    # another thread may have held them at fork(); what is kept stays true in the child
    _kept, _checking = threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def file_key(path: str, st: os.stat_result) -> FileKey:
    """The version of a file a stat shows (what the gate's verdicts are kept by)."""
    return (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino)


def _current_key(path: str) -> FileKey | None:
    try:
        return file_key(path, os.stat(path))
    except OSError:
        return None


def read_metadata(path: str) -> pq.FileMetaData:
    """Parse a local file's footer with pyarrow (its column chunks are not touched).

    Raises:
        OSError, ValueError, pyarrow.ArrowException: If pyarrow cannot read it.
    """
    # pyarrow's reader itself, not pq.read_metadata: that resolves a filesystem and maps
    # every column's path in Python first, half its time on a footer of a few columns
    # (74 against 40 us; a dataset of 200 small shards parses each footer twice)
    reader = pq.ParquetReader()
    try:
        reader.open(path)
        return reader.metadata
    finally:
        reader.close()


def kept_metadata(key: FileKey) -> pq.FileMetaData | None:
    """The footer parsed earlier from file version ``key`` (kept, bounded), or None.

    Only its parse is reused: whoever takes it checks it as a fresh one.
    """
    kept = _kept_meta(key)
    return None if kept is None else kept[0]


def keep_metadata(key: FileKey, meta: pq.FileMetaData) -> None:
    """Keep a footer parsed at open for :func:`checked_metadata`, if the file is still ``key``.

    ``key`` must be the file's version before it was parsed: unchanged after, the parse
    is that version's. The read path then checks it as any footer, without parsing again.
    """
    if _current_key(key[0]) == key:
        _keep_meta(key, meta, checked=False)


def _drop_meta(key: FileKey) -> None:
    _, size, checked = _metas.pop(key)
    del _order[checked][key]
    _totals["bytes"] -= size
    if not checked:
        _totals["opened_bytes"] -= size


def _keep_meta(key: FileKey, meta: pq.FileMetaData, *, checked: bool) -> None:
    size = int(meta.serialized_size)
    with _kept:
        if key in _metas:
            _drop_meta(key)
        _metas[key] = (meta, size, checked)
        _order[checked][key] = None
        _totals["bytes"] += size
        if not checked:
            _totals["opened_bytes"] += size
        # least recently used first out, as if at most METAS_KEPT were kept, but for the
        # parses from open while they are few and small; the read path's at most METAS_KEPT
        while len(_metas) > 1:
            small = (
                len(_order[False]) <= OPENED_KEPT
                and _totals["opened_bytes"] <= OPENED_BYTES_KEPT
            )
            if _totals["bytes"] > META_BYTES_KEPT or (len(_metas) > METAS_KEPT and not small):
                victim = next(iter(_metas))
            elif len(_order[True]) > METAS_KEPT:
                victim = next(iter(_order[True]))
            else:
                break
            if victim == key:
                break
            _drop_meta(victim)


def _kept_meta(key: FileKey) -> tuple[pq.FileMetaData, bool] | None:
    with _kept:
        kept = _metas.get(key)
        if kept is None:
            return None
        _metas.move_to_end(key)
        _order[kept[2]].move_to_end(key)
        return kept[0], kept[2]


def _walk(path: str, footer: bytes, key: FileKey | None) -> FooterScan | None:
    """:func:`scan_footer`, once per file version ``key`` (None: not kept)."""
    if key is not None:
        with _kept:
            if key in _scans:
                _scans.move_to_end(key)
                return _scans[key]
    scan = scan_footer(footer)
    # the footer was read after ``key`` was taken: unchanged now, the walk is its version's
    if key is not None and _current_key(path) == key:
        with _kept:
            _scans[key] = scan
            _scans.move_to_end(key)
            while len(_scans) > SCANS_KEPT:
                _scans.popitem(last=False)
    return scan


# A ColumnChunk's crypto_metadata (field 8, a struct) holding ENCRYPTION_WITH_COLUMN_KEY
# (union field 2, a struct, whose own first field header is 0x19, 0x28, or STOP). pyarrow's
# column metadata accessor aborts the process on such a chunk when the file has no
# decryption keys, so a footer that may hold one is parsed here first.
_COLUMN_KEY = re.compile(
    rb"(?:[\x1c\x2c\x3c\x4c\x5c\x6c\x7c\x8c]|\x0c\x10)\x2c[\x00\x08\x09\x19\x28]"
)


def file_magic(path: str) -> tuple[bytes, bytes]:
    """Return a file's first and last four bytes (empty if the file is shorter).

    Raises:
        OSError: If the file cannot be read.
    """
    with open(path, "rb") as fh:
        head = fh.read(4)
        fh.seek(0, os.SEEK_END)
        if fh.tell() < 8:
            return head, b""
        fh.seek(-4, os.SEEK_END)
        return head, fh.read(4)


def check_encryption(
    path: str,
    meta: pq.FileMetaData | None,
    size: int,
    *,
    scan: FooterScan | None = None,
    key: FileKey | None = None,
    footer: bytes | None = None,
) -> None:
    """Refuse a shard whose footer or columns are encrypted, before any column is touched.

    An encrypted footer starts and ends with ``PARE``. A plaintext footer with encrypted
    columns is followed by a 28-byte signature (so the footer is longer than the metadata
    pyarrow parsed) and its column chunks carry crypto metadata; such a footer is parsed here
    (pyarrow would abort the whole process on those chunks, not raise).

    Args:
        path: The shard.
        meta: Its metadata as pyarrow parsed it (None if it could not be).
        size: The file's size in bytes.
        scan: Its footer's scan, if the caller already made it (else it is made here
            when needed).
        key: The file's version (:func:`file_key`) taken before ``meta`` was parsed: a
            scan made here is kept for it (None: not kept).
        footer: The footer's bytes, if the caller already read them from this version
            (else they are read here when needed).

    Raises:
        EncryptedShardError: If the footer or any column is encrypted.
    """
    try:
        head, tail = file_magic(path)
    except OSError:
        return
    if ENCRYPTED_MAGIC in (head, tail):
        raise EncryptedShardError(
            f"Parquet shard {path} is encrypted (Parquet modular encryption with an encrypted "
            "footer); undertale_duck cannot read encrypted files: decrypt it, or remove it "
            "from the dataset",
            path,
        )
    if meta is None:
        return
    if footer is None:
        footer = footer_bytes(path, size)
    check_encrypted_columns(path, meta, footer, scan=scan, key=key)


def checked_metadata(path: str, size: int, mtime_ns: int) -> pq.FileMetaData:
    """A local shard's footer, checked for encryption, once per file version (kept).

    pyarrow aborts the process on encrypted columns, so their metadata is touched only
    after :func:`check_encryption`; that check walks the footer in Python. The walk and
    pyarrow's parse are kept by file version (:func:`file_key`, bounded): a footer walked
    or parsed at open is neither walked nor parsed again here, and the readers that need
    the footer again (``direct.py``, ``nested.py``) share one parse.

    Args:
        path: The local shard file.
        size: Its size in bytes when it was opened.
        mtime_ns: Its modification time when it was opened.

    Returns:
        The footer.

    Raises:
        OSError: If the file cannot be read, or is no longer that size and time.
        ValueError: If a column chunk has a type, codec or encoding pyarrow's chunk
            accessors do not know (they abort the process on those).
        EncryptedShardError: If the footer or any column is encrypted.
        pyarrow.ArrowException: If pyarrow cannot parse the footer.
    """
    def same() -> os.stat_result:
        st = os.stat(path)
        if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
            raise OSError(f"{path} changed since it was opened")
        return st

    key = file_key(path, same())
    kept = _kept_meta(key)
    if kept is not None and kept[1]:
        return kept[0]
    with _checking:
        kept = _kept_meta(key)  # another thread may have checked it meanwhile
        if kept is not None and kept[1]:
            return kept[0]
        if kept is not None:
            meta = kept[0]  # parsed at open from this version: checked below as any parse
        else:
            meta = read_metadata(path)
            if file_key(path, same()) != key:
                raise OSError(f"{path} changed since it was opened")
        with _kept:
            walked, scan = key in _scans, _scans.get(key)
        footer = None
        if not walked:
            footer = footer_bytes(path, size)
            # one walk, and one read of the footer, for both checks
            scan = _walk(path, footer, key) if footer is not None else None
        check_encryption(path, meta, size, scan=scan, key=key, footer=footer)
        del footer
        if scan is None or not scan.known:  # pyarrow's chunk accessors would abort the process
            raise ValueError(
                f"{path} has column chunks with a type, codec or encoding unknown here"
            )
        if _current_key(path) == key:  # what was checked is that version's
            _keep_meta(key, meta, checked=True)
        return meta


def check_encrypted_columns(
    path: str,
    meta: pq.FileMetaData,
    footer: bytes | None,
    *,
    scan: FooterScan | None = None,
    key: FileKey | None = None,
) -> None:
    """Refuse a plaintext footer whose columns are encrypted (see :func:`check_encryption`).

    Args:
        path: The shard (for the message; a URL for a remote shard).
        meta: Its metadata as pyarrow parsed it.
        footer: The footer's bytes (without the 8-byte length and magic), or None.
        scan: The footer's scan (:func:`scan_footer`), if the caller already made it.
        key: The local file's version before ``footer`` was read: a scan made here is
            kept for it, and one kept is used (None: neither).

    Raises:
        EncryptedShardError: If any column is encrypted.
    """
    if footer is None:
        return
    if len(footer) == meta.serialized_size and not _COLUMN_KEY.search(footer):
        return
    scan = scan if scan is not None else _walk(path, footer, key)
    if scan is None:
        return  # not parseable here: pyarrow parsed it; DuckDB reports what it finds
    if scan.encrypted:
        raise EncryptedShardError(
            f"Parquet shard {path} has encrypted columns (Parquet modular encryption); "
            "undertale_duck cannot read encrypted files: decrypt it, or remove it from "
            "the dataset",
            path,
        )


#: Enum values pyarrow's column chunk accessors know: physical Type, CompressionCodec,
#: Encoding (parquet.thrift). On any other value those accessors abort the process.
_KNOWN_TYPES = range(8)
_KNOWN_CODECS = range(8)
_KNOWN_ENCODINGS = range(10)


def chunks_known(path: str, size: int) -> bool:
    """Whether every column chunk of a local shard's footer has a known type, codec, encodings.

    pyarrow aborts the process (an uncaught C++ exception) when its column chunk metadata
    accessors meet a codec or type value it does not know, such as a codec id of 99; a
    footer is parsed here before those accessors are used.

    Args:
        path: The local shard.
        size: Its size in bytes.

    Returns:
        False if the footer cannot be parsed here or holds an unknown value.
    """
    return footer_chunks_known(footer_bytes(path, size))


def footer_chunks_known(footer: bytes | None) -> bool:
    """Whether a footer's column chunks all have a known type, codec and encodings.

    Args:
        footer: The footer's Thrift bytes (without the length and magic), or None.

    Returns:
        False if it cannot be parsed here or holds an unknown value (see
        :func:`chunks_known`).
    """
    scan = scan_footer(footer) if footer is not None else None
    return scan is not None and scan.known


class FooterScan(NamedTuple):
    """What the footer gate learns from one walk of a footer.

    Attributes:
        encrypted: Whether the footer or a column chunk carries encryption metadata
            (FileMetaData field 8, ColumnChunk field 8).
        known: Whether every column chunk has ColumnMetaData with a known type, codec
            and encodings (:func:`chunks_known`).
    """

    encrypted: bool
    known: bool


#: Compact types whose value is an integer (i8, i16, i32, i64).
_INTS = (3, 4, 5, 6)


def scan_footer(footer: bytes) -> FooterScan | None:
    """Walk a footer once for the gate's checks, or None if it cannot be parsed here.

    Every byte is walked and checked as :meth:`Thrift.struct` would, but only the few
    fields the gate reads become Python values: memory stays constant however many row
    groups and column chunks the footer holds (a 21 MB footer of 100,000 row groups once
    became millions of dicts, hundreds of MiB and seconds per walk here). Where a field
    repeats, every copy is checked (stricter than the last copy the C++ reader keeps).

    Args:
        footer: The footer's Thrift bytes (without the length and magic).

    Returns:
        The scan, or None if the footer is malformed.
    """
    t = Thrift(footer)
    encrypted, known = False, True
    try:
        for fid, kind in t.fields(0):
            if fid == 8:
                encrypted = True  # FileMetaData.encryption_algorithm
            if fid != 4 or kind not in (9, 10):
                _skip_field(t, kind, 0)
                continue
            size, elem = t.list_head()  # row_groups
            for _ in range(size):
                if elem != 12:
                    t.skip(elem, 1)
                    continue
                for gfid, gkind in t.fields(2):
                    if gfid != 1 or gkind not in (9, 10):
                        _skip_field(t, gkind, 2)
                        continue
                    csize, celem = t.list_head()  # the row group's columns
                    for _ in range(csize):
                        if celem != 12:
                            known = False  # a chunk that is not a struct has no metadata
                            t.skip(celem, 3)
                            continue
                        chunk_encrypted, chunk_known = _scan_chunk(t, 4)
                        encrypted = encrypted or chunk_encrypted
                        known = known and chunk_known
    except (IndexError, ValueError, struct.error):
        return None
    return FooterScan(encrypted, known)


def _skip_field(t: Thrift, kind: int, depth: int) -> None:
    """Move past a struct field's value (a boolean field's is in its header)."""
    if kind not in (1, 2):
        t.skip(kind, depth)


def _scan_chunk(t: Thrift, depth: int) -> tuple[bool, bool]:
    """Walk one ColumnChunk: (whether it is encrypted, whether its metadata is known)."""
    encrypted, has_meta, known = False, False, True
    for fid, kind in t.fields(depth):
        if fid == 8:
            encrypted = True  # ColumnChunk.crypto_metadata
        if fid != 3:
            _skip_field(t, kind, depth)
        elif kind != 12:
            known = False  # meta_data that is not a struct
            _skip_field(t, kind, depth)
        else:
            has_meta = True
            known = _scan_column_meta(t, depth + 1) and known
    return encrypted, known and has_meta


def _scan_column_meta(t: Thrift, depth: int, *, shortcut: bool = True) -> bool:
    """Walk one ColumnMetaData: whether its type, codec and encodings are all known.

    With ``shortcut``, the fields after the first one whose id is above 4 are skipped
    without Python per field (:meth:`Thrift.skip_rest`) when none of them can be field 1,
    2 or 4 again; else the struct is walked again field by field.
    """
    start = t.pos
    kind_of: int | None = None
    codec: int | None = None
    encodings_known: bool | None = None
    for fid, kind in t.fields(depth):
        if fid in (1, 4):  # type, codec: the last copy counts, as in the C++ reader
            value: int | None = None  # not an integer: unknown
            if kind in _INTS:
                raw = t.value(kind, depth)
                value = raw if isinstance(raw, int) else None
            else:
                _skip_field(t, kind, depth)
            if fid == 1:
                kind_of = value
            else:
                codec = value
        elif fid == 2 and kind in (9, 10):
            size, elem = t.list_head()
            # the C++ reader takes every element as a varint i32, so only varint elements
            # are read as what it reads (a byte or a boolean would be decoded differently)
            encodings_known = elem in (4, 5, 6) or size == 0
            for _ in range(size):
                if elem in (4, 5, 6):
                    encoding = t.value(elem, depth + 1)
                    encodings_known = encodings_known and encoding in _KNOWN_ENCODINGS
                else:
                    t.skip(elem, depth + 1)
        else:
            if fid == 2:
                encodings_known = False  # encodings that are not a list
            _skip_field(t, kind, depth)
            if shortcut and fid > 4:
                if not t.skip_rest(depth):  # an id given outright: it may be 1, 2 or 4
                    t.pos = start
                    return _scan_column_meta(t, depth, shortcut=False)
                break
    return (
        kind_of in _KNOWN_TYPES and codec in _KNOWN_CODECS and encodings_known is True
    )


#: Bytes of a min/max statistic per fixed-width physical type (Type enum -> width).
_STAT_WIDTHS = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8}


def check_statistics(path: str, meta: pq.FileMetaData) -> None:
    """Refuse footer statistics whose min or max has the wrong width for the column's type.

    pyarrow aborts the process (an uncaught C++ exception) when it decodes such a statistic;
    the footer is serialized and parsed here before its statistics are touched.

    Args:
        path: The shard (a local path or a URL), for the message.
        meta: Its metadata.

    Raises:
        CorruptShardError: If a statistic has the wrong width (or the footer cannot be
            parsed here).
    """
    sink = pa.BufferOutputStream()
    meta.write_metadata_file(sink)
    data = sink.getvalue().to_pybytes()[4:-8]  # without the magic and the length
    try:
        parsed = Thrift(data).struct(0)
    except (IndexError, ValueError, struct.error):
        raise CorruptShardError(
            f"Parquet shard {path} is corrupt: its footer cannot be parsed", path
        ) from None
    for g, group in enumerate(list_of(field_of(parsed, 4))):
        for chunk in list_of(field_of(group, 1)):
            cmeta = field_of(chunk, 3)
            kind = field_of(cmeta, 1)
            width = _STAT_WIDTHS.get(kind) if isinstance(kind, int) else None
            stats = field_of(cmeta, 12)
            if width is None or not isinstance(stats, dict):
                continue
            for fid in (1, 2, 5, 6):  # max, min, max_value, min_value
                value = stats.get(fid)
                if isinstance(value, bytes) and len(value) != width:
                    parts = list_of(field_of(cmeta, 3))
                    column = ".".join(
                        p.decode("utf-8", "replace") for p in parts if isinstance(p, bytes)
                    )
                    raise CorruptShardError(
                        f"Parquet shard {path} is corrupt: the footer statistics of column "
                        f"{column!r} in row group {g} hold a {len(value)}-byte min or max "
                        f"for a {width}-byte type",
                        path,
                    )


def unreadable_footer(path: str, exc: BaseException) -> CorruptShardError | UnsupportedShardError:
    """Our error for a footer pyarrow cannot decode, naming the shard.

    Args:
        path: The shard (a local path or a URL).
        exc: pyarrow's error.

    Returns:
        :class:`UnsupportedShardError` for a schema nested deeper than pyarrow reads (a
        sound file; pyarrow's advice to raise its limit is no option here), else
        :class:`CorruptShardError`.
    """
    text = first_line(exc)
    if "too deeply nested" in text:
        return UnsupportedShardError(
            f"shard {path} has a schema nested deeper than pyarrow reads ({text}); the file "
            "is not corrupt: rewrite it with shallower nesting (a list takes two levels)",
            path,
        )
    return CorruptShardError(
        f"Parquet shard {path} is truncated or corrupt: its footer cannot be read ({text})",
        path,
    )


def arrow_schema(path: str, meta: pq.FileMetaData) -> pa.Schema:
    """The Arrow schema a footer describes, or our error naming the shard.

    Args:
        path: The shard (a local path or a URL), for messages.
        meta: Its decoded footer.

    Returns:
        The schema.

    Raises:
        UnsupportedShardError: If a column's type has no Arrow counterpart.
        CorruptShardError: If the schema cannot be decoded.
    """
    try:
        return served_types(meta.schema.to_arrow_schema(), meta.schema)
    except (pa.ArrowNotImplementedError, NotImplementedError) as exc:
        raise UnsupportedShardError(
            f"Parquet shard {path} uses a column type Arrow cannot represent: {first_line(exc)}",
            path,
        ) from None
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise CorruptShardError(
            f"Parquet shard {path} is corrupt: its schema cannot be read ({first_line(exc)})",
            path,
        ) from None


def served_types(schema: pa.Schema, parquet: pq.ParquetSchema) -> pa.Schema:
    """``schema`` with the Arrow types reads serve for the leaves annotated UUID or INTERVAL.

    ``ParquetSchema.to_arrow_schema`` reads both as fixed-size binary. A UUID leaf is served
    as Arrow's ``uuid`` (pyarrow's own reads, ``ParquetFile`` and ``read_table`` with Arrow
    extensions on, give it too; only a file without pyarrow's stored schema differs:
    DuckDB's, Spark's). An INTERVAL leaf (12 bytes: months, days, milliseconds) is read by
    DuckDB, which serves ``month_day_nano_interval``. The leaves of ``schema`` are the
    footer's columns in order.

    Args:
        schema: The footer's schema as ``to_arrow_schema`` gives it.
        parquet: The footer's Parquet schema.

    Returns:
        The schema of the values served (``schema`` itself when no leaf changes).
    """
    served: dict[int, tuple[pa.DataType, pa.DataType]] = {}
    for i in range(len(parquet)):
        column = parquet.column(i)
        if column.physical_type != "FIXED_LEN_BYTE_ARRAY":
            continue
        if str(column.logical_type) == "UUID":
            served[i] = (pa.binary(16), pa.uuid())
        elif column.converted_type == "INTERVAL" or str(column.logical_type) == "Interval":
            served[i] = (pa.binary(12), pa.month_day_nano_interval())
    if not served:
        return schema
    leaf = iter(range(len(parquet)))

    def convert(typ: pa.DataType) -> pa.DataType:
        if pa.types.is_map(typ):
            return pa.map_(convert(typ.key_type), convert(typ.item_type), typ.keys_sorted)
        if typ.num_fields == 0:
            stored, serves = served.get(next(leaf), (None, None))
            return serves if serves is not None and typ == stored else typ
        fields = [typ.field(k) for k in range(typ.num_fields)]
        children = [f.with_type(convert(f.type)) for f in fields]
        if pa.types.is_struct(typ):
            return pa.struct(children)
        if pa.types.is_large_list(typ):
            return pa.large_list(children[0])
        if pa.types.is_fixed_size_list(typ):
            return pa.list_(children[0], typ.list_size)
        if pa.types.is_list(typ):
            return pa.list_(children[0])
        raise NotImplementedError(f"a column of type {typ} holding a UUID or an INTERVAL")

    fields = [f.with_type(convert(f.type)) for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def checked_row_groups(path: str, meta: pq.FileMetaData, size: int) -> tuple[tuple[int, int], ...]:
    """Return ``(rows, uncompressed bytes)`` of each row group, checked against the file.

    The dataset's row count is the sum of its row groups' rows, which is what DuckDB and
    pyarrow read: a footer whose file-level row count disagrees with that sum (for example
    ``repeated_no_annotation.parquet`` of the Apache parquet-testing suite, whose footer
    says 0 rows while its row group holds 6) is read by its row groups.

    Args:
        path: The shard.
        meta: Its metadata.
        size: The file's size in bytes.

    Returns:
        One ``(rows, bytes)`` pair per row group, in file order.

    Raises:
        CorruptShardError: If a row group has a negative row count or size, or the row
            groups claim more rows than a file of this size can hold (at most
            ``2**31 - 1`` values per page, and a page takes at least
            :data:`MIN_PAGE_BYTES` bytes).
    """
    groups = []
    total = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        rows, nbytes = int(rg.num_rows), int(rg.total_byte_size)
        if rows < 0 or nbytes < 0:
            raise CorruptShardError(
                f"Parquet shard {path} is corrupt: its footer gives row group {i} "
                f"{rows} rows and {nbytes} bytes",
                path,
            )
        total += rows
        groups.append((rows, nbytes))
    most = max(1, size // MIN_PAGE_BYTES) * MAX_PAGE_VALUES
    if total > most:
        raise CorruptShardError(
            f"Parquet shard {path} is corrupt: its footer claims {total} rows, more than a "
            f"file of {size} bytes can hold (at most {most}: a page holds at most "
            f"{MAX_PAGE_VALUES} values and takes at least {MIN_PAGE_BYTES} bytes)",
            path,
        )
    return tuple(groups)


def footer_digest(footer: bytes | None) -> int:
    """The XXH3-64 of a file's footer bytes (:func:`footer_bytes`; 0: they could not be read).

    Compared when a shard's status-change time moved while its size, modification time and
    inode stayed: a ``chmod`` keeps the footer, a rewrite in place with its time put back
    (``rsync --inplace --times``) changes it.
    """
    return 0 if footer is None else xxhash.xxh3_64_intdigest(footer) or 1


def footer_bytes(path: str, size: int) -> bytes | None:
    """A Parquet file's footer bytes (its metadata, without the trailer), or None."""
    try:
        with open(path, "rb") as fh:
            fh.seek(-8, os.SEEK_END)
            length = struct.unpack("<I", fh.read(4))[0]
            if not 0 < length <= size - 12:
                return None
            fh.seek(-8 - length, os.SEEK_END)
            return fh.read(length)
    except (OSError, struct.error):
        return None


