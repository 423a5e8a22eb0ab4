"""Write real hostile and unusual Parquet files for the tests: lying footers, encrypted
columns, unsupported layouts, decompression bombs (small equivalents of the Apache
parquet-testing suite's edge cases, written here rather than vendored)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe

from . import footer

PHONE = pa.struct([pa.field("number", pa.int64(), nullable=False), pa.field("kind", pa.string())])
PHONES = [
    None,
    None,
    [],
    [{"number": 5555555555, "kind": None}],
    [{"number": 1111111111, "kind": "home"}],
    [
        {"number": 1111111111, "kind": "home"},
        {"number": 2222222222, "kind": None},
        {"number": 3333333333, "kind": "mobile"},
    ],
]


#: A child process's script that runs the command line with its arguments.
CLI_MAIN = "import sys; from undertale_duck.cli import main; sys.exit(main(sys.argv[1:]))"


def sha256s(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_python(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` in a child process that imports this checkout; capture its output."""
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def _drop_arrow_schema(meta: footer.Struct) -> None:
    kvs = footer.get(meta, 5)
    if kvs:
        kvs[1][:] = [e for e in kvs[1] if footer.get(e, 1) != b"ARROW:schema"]


def repeated_no_annotation(path: Path) -> list[dict[str, Any]]:
    """Write the equivalent of parquet-testing's ``repeated_no_annotation.parquet``.

    ``required int32 id; optional group phoneNumbers { repeated group phone { required int64
    number; optional binary kind (String) } }`` (a repeated group with no LIST annotation),
    6 rows in one row group, and a footer whose ``num_rows`` says 0.

    Returns:
        The rows pyarrow reads from it.
    """
    typ = pa.list_(pa.field("element", PHONE, nullable=False))
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), ("phoneNumbers", typ)])
    table = pa.table({"id": list(range(1, 7)), "phoneNumbers": PHONES}, schema=schema)
    src = path.with_name(path.name + ".src")
    pq.write_table(table, src)

    def edit(meta: footer.Struct) -> None:
        elements = footer.get(meta, 2)[1]
        names = [footer.get(e, 4) for e in elements]
        group = elements[names.index(b"phoneNumbers")]
        group[:] = [e for e in group if e[0] not in (6, 10)]  # no LIST annotation
        repeated = elements[names.index(b"list")]
        footer.put(repeated, 4, b"phone", footer.BINARY)
        footer.put(repeated, 5, 2, footer.I32)
        del elements[names.index(b"element")]  # a required group: no level changes
        for g in footer.row_groups(meta):
            for c in footer.column_meta(g):
                parts = footer.get(c, 3)[1]
                if b"list" in parts:
                    parts[:] = [b"phoneNumbers", b"phone", parts[-1]]
        _drop_arrow_schema(meta)
        footer.put(meta, 3, 0)  # FileMetaData.num_rows: 0, while the row group holds 6

    footer.rewrite(src, path, edit)
    src.unlink()
    return pq.read_table(path).to_pylist()


def claim_rows(src: Path, dst: Path, rows: int, group_bytes: int | None = None) -> None:
    """Copy ``src`` with every row count in its footer (file, row groups, columns) set."""

    def edit(meta: footer.Struct) -> None:
        footer.put(meta, 3, rows)
        for g in footer.row_groups(meta):
            footer.put(g, 3, rows)
            if group_bytes is not None:
                footer.put(g, 2, group_bytes)
            for c in footer.column_meta(g):
                footer.put(c, 5, rows)

    footer.rewrite(src, dst, edit)


def map_without_values(path: Path) -> None:
    """A MAP whose key_value group has a key and no value (parquet-testing's map_no_value)."""
    src = path.with_name(path.name + ".src")
    maps = pa.array([[("a", 1)], [], [("b", 2), ("c", 3)]], pa.map_(pa.string(), pa.int32()))
    pq.write_table(pa.table({"id": [1, 2, 3], "m": maps}), src)

    def edit(meta: footer.Struct) -> None:
        elements = footer.get(meta, 2)[1]
        k = [footer.get(e, 4) for e in elements].index(b"value")
        footer.put(elements[k - 2], 5, 1, footer.I32)  # key_value: one child
        del elements[k]
        for g in footer.row_groups(meta):
            chunks = footer.get(g, 1)[1]
            chunks[:] = [c for c in chunks if footer.get(footer.get(c, 3), 3)[1][-1] != b"value"]
        footer.get(meta, 7)[1].pop()  # one column order per leaf
        _drop_arrow_schema(meta)

    footer.rewrite(src, path, edit)
    src.unlink()


def invalid_geoparquet(path: Path) -> None:
    """A binary column whose GeoParquet ``geo`` metadata names an encoding that does not exist."""
    geo = {
        "version": "1.0.0",
        "primary_column": "geometry",
        "columns": {"geometry": {"encoding": "no-such-encoding", "geometry_types": []}},
    }
    table = pa.table({"geometry": [b"\x01\x01\x00\x00\x00" + bytes(16)] * 3})
    pq.write_table(table.replace_schema_metadata({"geo": json.dumps(geo)}), path)


class _Kms(pe.KmsClient):  # type: ignore[misc]
    """A key store that keeps keys in the file (base64): real encryption, test keys."""

    def __init__(self, _config: pe.KmsConnectionConfig) -> None:
        super().__init__()

    def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> bytes:
        return base64.b64encode(key_bytes)

    def unwrap_key(self, wrapped_key: bytes, master_key_identifier: str) -> bytes:
        return base64.b64decode(wrapped_key)


def encrypted(path: Path, *, plaintext_footer: bool) -> None:
    """A file with an encrypted column (and an encrypted footer unless ``plaintext_footer``)."""
    table = pa.table({"a": list(range(10)), "b": [str(i) for i in range(10)]})
    config = pe.EncryptionConfiguration(
        footer_key="footer",
        column_keys={"column": ["b"]},
        plaintext_footer=plaintext_footer,
        double_wrapping=False,
    )
    factory = pe.CryptoFactory(_Kms)
    props = factory.file_encryption_properties(pe.KmsConnectionConfig(), config)
    with pq.ParquetWriter(path, table.schema, encryption_properties=props) as writer:
        writer.write_table(table)


def column_key_crypto_metadata(src: Path, dst: Path) -> None:
    """Copy ``src``, marking its first column chunk as encrypted with a column key (a
    crafted plain footer: pyarrow's column metadata accessor aborts on it)."""

    def edit(meta: footer.Struct) -> None:
        for g in footer.row_groups(meta):
            chunk = footer.get(g, 1)[1][0]
            key = [[1, footer.LIST, [footer.BINARY, [b"id"]]]]
            footer.put(chunk, 8, [[2, footer.STRUCT, key]], footer.STRUCT)

    footer.rewrite(src, dst, edit)


def bomb(path: Path, mib: int, *, understate: bool) -> None:
    """One row group of ``mib`` 1 MiB values of zeros, zstd-compressed to a few dozen KB.

    Written as 16-row row groups (so writing never holds more than 16 MiB) and merged into
    one row group in the footer. With ``understate`` the footer records 4 KiB of
    uncompressed data for it (the pages' own headers still say 1 MiB each).
    """
    src = path.with_name(path.name + ".src")
    schema = pa.schema([("s", pa.binary())])
    batch = pa.record_batch([pa.array([bytes(1 << 20)] * 16, pa.binary())], schema=schema)
    with pq.ParquetWriter(src, schema, compression="zstd", use_dictionary=False) as writer:
        for _ in range(mib // 16):
            writer.write_batch(batch)

    def edit(meta: footer.Struct) -> None:
        footer.merge_row_groups(meta)
        if understate:
            group = footer.row_groups(meta)[0]
            footer.put(group, 2, 4096)
            footer.put(footer.column_meta(group)[0], 6, 4096)

    footer.rewrite(src, path, edit)
    src.unlink()


def dictionary_bomb(
    path: Path,
    rows: int,
    length: int,
    *,
    row_group_rows: int = 1 << 20,
    ids: bool = False,
    binary: bool = False,
    store_schema: bool = True,
) -> None:
    """A column ``s`` whose every row is the one ``length``-byte string of its dictionary.

    The file is tiny (one dictionary page per row group, run-length encoded indices) while
    the decoded column holds ``rows * length`` bytes: slow to scan, and a memory bomb for a
    reader that materialises the strings. With ``ids`` an ``id`` column (the row index)
    comes first; with ``binary`` the values are bytes; without ``store_schema`` the file
    reads as plain strings, as other writers' files do.
    """
    import numpy as np

    value = "x" * (length - 1) + "y"
    kind = pa.binary() if binary else pa.string()
    dictionary = pa.array([value.encode() if binary else value], kind)
    fields = [("id", pa.int64())] if ids else []
    schema = pa.schema([*fields, ("s", pa.dictionary(pa.int32(), kind))])
    with pq.ParquetWriter(path, schema, compression="zstd", store_schema=store_schema) as writer:
        done = 0
        while done < rows:
            n = min(rows - done, row_group_rows)
            indices = pa.array(np.zeros(n, dtype=np.int32))
            column = pa.DictionaryArray.from_arrays(indices, dictionary)
            columns = [pa.array(np.arange(done, done + n))] if ids else []
            writer.write_table(pa.table([*columns, column], schema=schema), row_group_size=n)
            done += n


NESTED_KINDS = ("list", "struct", "list_struct", "map")


def nested_dictionary_bomb(
    path: Path, kind: str, rows: int, length: int, *, outlier: bool = False
) -> list[Any] | None:
    """A column ``c`` of strings nested as ``kind``, dictionary-encoded, with an ``id`` column.

    ``kind`` is ``list`` (``list<string>``), ``struct`` (``struct<s: string>``),
    ``list_struct`` (``list<struct<s: string>>``) or ``map`` (``map<string, string>``); each
    row holds one nested string (a map: one key and one value). Without ``outlier`` every
    row's string is the dictionary's one ``length``-byte entry (the column decodes to
    ``rows * length`` bytes, or twice that for a map, from a file of a few dozen KB); with it,
    rows hold short distinct strings and row ``rows // 2`` the one long entry.

    Returns:
        With ``outlier``, the rows' ``c`` values as pyarrow reads them; else None.
    """
    import numpy as np

    if outlier:
        dictionary = pa.array(["L" * length] + [f"v{i}" for i in range(rows)], pa.string())
        indices = np.arange(1, rows + 1, dtype=np.int32)
        indices[rows // 2] = 0
    else:
        dictionary = pa.array(["x" * (length - 1) + "y"], pa.string())
        indices = np.zeros(rows, np.int32)
    leaf = pa.DictionaryArray.from_arrays(pa.array(indices), dictionary)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32))
    column: pa.Array
    if kind == "list":
        column = pa.ListArray.from_arrays(offsets, leaf)
    elif kind == "struct":
        column = pa.StructArray.from_arrays([leaf], ["s"])
    elif kind == "list_struct":
        column = pa.ListArray.from_arrays(offsets, pa.StructArray.from_arrays([leaf], ["s"]))
    elif kind == "map":
        column = pa.MapArray.from_arrays(offsets, leaf, leaf)
    else:
        raise ValueError(kind)
    table = pa.table({"id": np.arange(rows), "c": column})
    # no stored Arrow schema: the file reads as plain strings, as other writers' files do
    pq.write_table(table, path, compression="zstd", store_schema=False)
    return pq.read_table(path).column("c").to_pylist() if outlier else None


def chunk_codec(src: Path, dst: Path, codec: int) -> None:
    """Copy ``src`` with every column chunk's codec id set to ``codec`` (99: no such codec;
    pyarrow's column chunk accessors abort the process on it)."""

    def edit(meta: footer.Struct) -> None:
        for g in footer.row_groups(meta):
            for c in footer.column_meta(g):
                footer.put(c, 4, codec, footer.I32)

    footer.rewrite(src, dst, edit)


def short_statistics(src: Path, dst: Path) -> None:
    """Copy ``src`` with the first column's min/max statistics one byte long (for an INT64
    column: pyarrow aborts the process decoding them)."""

    def edit(meta: footer.Struct) -> None:
        for g in footer.row_groups(meta):
            stats = [[fid, footer.BINARY, b"\x01"] for fid in (1, 2, 5, 6)]
            footer.put(footer.column_meta(g)[0], 12, stats, footer.STRUCT)

    footer.rewrite(src, dst, edit)


def interval_column(src: Path, dst: Path, name: str) -> None:
    """Copy ``src`` with column ``name`` (a fixed_size_binary(12)) annotated INTERVAL."""

    def edit(meta: footer.Struct) -> None:
        elements = footer.get(meta, 2)[1]
        element = next(e for e in elements if footer.get(e, 4) == name.encode())
        footer.put(element, 6, 21, footer.I32)  # ConvertedType INTERVAL
        _drop_arrow_schema(meta)

    footer.rewrite(src, dst, edit)
