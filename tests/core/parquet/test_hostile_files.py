"""Hostile and unusual Parquet files: lying footers, encryption, unsupported layouts, bombs."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import datagen
from support import hostile_files as hf

from undertale_duck import (
    ArgumentError,
    ColumnError,
    CorruptShardError,
    EncryptedShardError,
    MemoryBudgetError,
    ParquetDataset,
    QueryError,
    UnsupportedShardError,
)
from undertale_duck.core.source import windows as win
from undertale_duck.core.source.source import read_footer


def _count(ds: ParquetDataset) -> int:
    return int(ds.sql("SELECT count(*) AS n FROM dataset").column("n")[0].as_py())


# --------------------------------------------------------------------------- footers
def test_footer_saying_zero_rows_is_read_by_its_row_groups(tmp_path: Path) -> None:
    # parquet-testing's repeated_no_annotation.parquet: footer num_rows 0, row group 6 rows
    root = tmp_path / "data"
    root.mkdir()
    want = hf.repeated_no_annotation(root / "a.parquet")
    assert pq.read_metadata(root / "a.parquet").num_rows == 0 and len(want) == 6
    good = pa.table({"id": pa.array(range(7, 10), pa.int32()), "phoneNumbers": [None] * 3})
    pq.write_table(good.cast(pq.read_schema(root / "a.parquet")), root / "b.parquet")
    before = hf.sha256s(root)

    single = ParquetDataset(root / "a.parquet", memory=1, window_bytes=1)
    assert len(single) == 6 == _count(single)
    assert [single[i] for i in range(6)] == want
    both = ParquetDataset(root, memory=1, window_bytes=1)
    assert len(both) == 9 == _count(both)
    rows = [both[i] for i in range(9)]
    assert rows[:6] == want
    assert [r["id"] for r in rows] == list(range(1, 10))  # the second file's rows, not the first's
    assert both.__getitems__([8, 0, 6]) == [rows[8], rows[0], rows[6]]
    assert both.locate(6) == (str(root / "b.parquet"), 0)
    assert hf.sha256s(root) == before


def test_footer_claiming_2_60_rows_is_refused_at_open(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    lying = tmp_path / "lying.parquet"
    hf.claim_rows(src, lying, 1 << 60, group_bytes=0)  # no size: planning would use rows
    assert lying.stat().st_size < 12 << 10
    with pytest.raises(CorruptShardError, match="claims 1152921504606846976 rows") as info:
        ParquetDataset(lying)
    assert info.value.path == str(lying)
    assert str(lying) in str(info.value)


def test_plausible_lying_row_count_keeps_the_plan_small_and_fails_on_read(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    # DuckDB's count(*) trusts the footer too (counted on a smaller lie: DuckDB still
    # steps through the claimed rows, two minutes for 2^38)
    smaller = tmp_path / "smaller.parquet"
    hf.claim_rows(src, smaller, 1 << 26)
    assert _count(ParquetDataset(smaller, memory=1, window_bytes=1)) == 1 << 26
    for group_bytes, error in ((None, CorruptShardError), (0, MemoryBudgetError)):
        lying = tmp_path / f"lying{group_bytes}.parquet"
        hf.claim_rows(src, lying, 1 << 38, group_bytes)  # within what the file could hold
        ds = ParquetDataset(lying, memory=1, window_bytes=1)
        assert len(ds) == 1 << 38
        assert len(ds.windows) <= 1 + lying.stat().st_size // win.SPLIT_FILE_BYTES
        with pytest.raises(error, match=re.escape(lying.name)) as info:
            ds[0]  # the data holds 6 rows: refused (corrupt, or too large to read), never wrong
        assert info.value.rows is not None  # type: ignore[attr-defined]


def test_sampler_over_a_lying_row_count_is_refused_not_killed(tmp_path: Path) -> None:
    from undertale_duck import ChunkedSampler

    src = tmp_path / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    for rows in (1 << 31, 1 << 36, 1 << 38):
        lying = tmp_path / f"lying{rows}.parquet"
        hf.claim_rows(src, lying, rows)
    for rows in (1 << 36, 1 << 38):
        lying = tmp_path / f"lying{rows}.parquet"
        ds = ParquetDataset(lying, memory=1, window_bytes=1)
        # its order would take 1.5 to 6 TiB while built: refused before allocating
        with pytest.raises(MemoryBudgetError, match="ChunkedSampler holds each rank's order"):
            ChunkedSampler(ds, 8, 0, shuffle=True)
        with pytest.raises(MemoryBudgetError, match=f"{rows:,}"):
            ChunkedSampler(ds, 8, 2, ranks=1, rank=0)
    # a share that fits is served as before: 2^31 rows over 4096 ranks is 524,288 each
    sampler = ChunkedSampler(ParquetDataset(tmp_path / f"lying{1 << 31}.parquet"), 8, 0,
                             ranks=4096, rank=1)
    assert len(sampler) == (1 << 31) // 4096
    order = sampler.order()
    assert order[0] == (1 << 31) // 4096 and len(order) == len(sampler)


def test_plan_is_bounded_by_file_size() -> None:
    groups = [[(1 << 40, 0), (5, 100)]]
    plan = win.plan(groups, 1, file_bytes=[4000])
    assert 2 <= len(plan) <= 2 + 4000 // win.SPLIT_FILE_BYTES
    assert plan[-1].end == (1 << 40) + 5 and sum(w.rows for w in plan) == (1 << 40) + 5
    assert len(win.plan([[(10, 100)]], 1, file_bytes=[10_000])) == 10  # honest splits kept


def test_row_group_claiming_more_rows_than_its_data_holds(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    lying = tmp_path / "more.parquet"
    hf.claim_rows(src, lying, 1000)
    ds = ParquetDataset(lying)
    assert len(ds) == 1000 == _count(ds)
    with pytest.raises(CorruptShardError, match=r"more\.parquet"):
        ds[999]


def test_negative_row_count_is_corrupt(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    hf.claim_rows(src, tmp_path / "neg.parquet", -5)
    with pytest.raises(CorruptShardError, match="-5 rows"):
        ParquetDataset(tmp_path / "neg.parquet")


# --------------------------------------------------------------------------- encryption
@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_encrypted_shard_is_refused_without_aborting(
    tmp_path: Path, plaintext_footer: bool
) -> None:
    path = tmp_path / "enc.parquet"
    hf.encrypted(path, plaintext_footer=plaintext_footer)
    with pytest.raises(EncryptedShardError, match=r"enc\.parquet") as info:
        ParquetDataset(path)
    assert "corrupt" not in str(info.value)
    assert isinstance(info.value, UnsupportedShardError)


def test_crafted_column_key_metadata_is_refused_without_aborting(tmp_path: Path) -> None:
    src = tmp_path / "src.parquet"
    pq.write_table(datagen.table(0, 6), src)
    hf.column_key_crypto_metadata(src, tmp_path / "crafted.parquet")
    with pytest.raises(EncryptedShardError, match=r"crafted\.parquet"):
        read_footer(str(tmp_path / "crafted.parquet"))


def test_describe_on_encrypted_columns_does_not_abort(tmp_path: Path) -> None:
    hf.encrypted(tmp_path / "enc.parquet", plaintext_footer=True)
    pq.write_table(datagen.table(0, 6), tmp_path / "good.parquet")
    before = hf.sha256s(tmp_path)
    done = hf.run_python("-m", "undertale_duck", "describe", str(tmp_path), timeout=120)
    assert done.returncode >= 0, done.stderr  # not killed by a signal (abort: -6)
    assert "Traceback" not in done.stderr
    assert "encrypted" in done.stdout + done.stderr
    assert hf.sha256s(tmp_path) == before


# --------------------------------------------------------------------------- unsupported
def _bss_flba(path: Path) -> None:
    values = pa.array([bytes([i]) * 4 for i in range(10)], pa.binary(4))
    pq.write_table(
        pa.table({"x": values}), path, use_dictionary=False,
        column_encoding={"x": "BYTE_STREAM_SPLIT"},
    )


@pytest.mark.parametrize(
    ("name", "write", "words"),
    [
        ("bss.parquet", _bss_flba, "BYTE_STREAM_SPLIT"),
        ("map.parquet", hf.map_without_values, "MAP"),
        ("geo.parquet", hf.invalid_geoparquet, "Geoparquet"),
    ],
)
def test_unsupported_features_are_named_not_corrupt(
    tmp_path: Path, name: str, write: object, words: str
) -> None:
    path = tmp_path / name
    write(path)  # type: ignore[operator]
    before = hf.sha256s(tmp_path)
    ds = ParquetDataset(path)
    for attempt in (lambda: ds[0], lambda: ds.sql("SELECT * FROM dataset")):
        with pytest.raises(UnsupportedShardError, match=words) as info:
            attempt()
        assert info.value.path == str(path)
        assert str(path) in str(info.value) and "corrupt" not in str(info.value).replace(
            "not corrupt", ""
        ).replace("not necessarily corrupt", "")
    assert hf.sha256s(tmp_path) == before


def test_unopenable_first_shard_does_not_blame_a_good_one(tmp_path: Path) -> None:
    hf.invalid_geoparquet(tmp_path / "a.parquet")
    pq.write_table(pa.table({"geometry": [b"x", b"y"]}), tmp_path / "b.parquet")
    ds = ParquetDataset(tmp_path)
    assert [ds[3], ds[4]] == [{"geometry": b"x"}, {"geometry": b"y"}]
    for attempt in (lambda: ds[0], lambda: ds.sql("SELECT count(*) FROM dataset")):
        with pytest.raises(UnsupportedShardError) as info:
            attempt()
        assert info.value.path == str(tmp_path / "a.parquet")
        assert "b.parquet" not in str(info.value)


def test_struct_nested_64_deep_gives_our_errors(tmp_path: Path) -> None:
    typ: pa.DataType = pa.int64()
    value: object = 1
    for _ in range(64):
        typ, value = pa.struct([("a", typ)]), {"a": value}
    table = pa.table({"id": [0, 1], "deep": pa.array([value, value], typ)})
    pq.write_table(table, tmp_path / "d.parquet")
    ds = ParquetDataset(tmp_path / "d.parquet")
    with pytest.raises(UnsupportedShardError, match="nested deeper"):
        ds[0]
    with pytest.raises(QueryError, match="nesting"):
        ds.sql("SELECT * FROM dataset")
    assert ds.sql("SELECT deep.a.a.a AS x FROM dataset").num_rows == 2  # shallower works
    assert ParquetDataset(tmp_path / "d.parquet", columns=["id"])[1] == {"id": 1}


def test_a_schema_deeper_than_pyarrow_reads_is_unsupported_not_corrupt(tmp_path: Path) -> None:
    # pyarrow's footer reader stops at 100 schema levels (a list takes two): a sound file
    # written by pyarrow itself was called "truncated or corrupt", with pyarrow's advice to
    # raise a limit no user can reach
    typ: pa.DataType = pa.int64()
    value: object = 1
    for _ in range(60):
        typ, value = pa.list_(typ), [value]
    pq.write_table(pa.table({"id": [0, 1], "deep": pa.array([value, value], typ)}),
                   tmp_path / "d.parquet")
    with pytest.raises(UnsupportedShardError, match="nested") as info:
        ParquetDataset(tmp_path)
    assert not isinstance(info.value, CorruptShardError)
    assert str(tmp_path / "d.parquet") in str(info.value)


# --------------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"duckdb_config": {"no_such_setting": 1}}, "duckdb_config"),
        ({"duckdb_config": {"threads": "many"}}, "duckdb_config"),
        ({"duckdb_config": {"memory_limit": ["1GB"]}}, "duckdb_config"),
        ({"duckdb_config": "threads=1"}, "duckdb_config"),
        ({"columns": [""]}, "columns"),
        ({"columns": [1]}, "columns"),
        ({"columns": 5}, "columns"),
        ({"memory": float("nan")}, "memory"),
        ({"memory": float("inf")}, "memory"),
        ({"memory": -1}, "memory"),
    ],
)
def test_bad_arguments_name_the_argument(
    tmp_path: Path, kwargs: dict[str, object], name: str
) -> None:
    pq.write_table(datagen.table(0, 3), tmp_path / "a.parquet")
    with pytest.raises(ArgumentError, match=name):
        ParquetDataset(tmp_path / "a.parquet", **kwargs)  # type: ignore[arg-type]


def test_sql_of_none_and_empty_column_names(tmp_path: Path) -> None:
    pq.write_table(pa.table({"": [1, 2], "b": [3, 4]}), tmp_path / "a.parquet")
    with pytest.raises(ColumnError, match="empty name"):
        ParquetDataset(tmp_path / "a.parquet")
    ds = ParquetDataset(tmp_path / "a.parquet", columns=["b"])
    assert [ds[0], ds[1]] == [{"b": 3}, {"b": 4}]
    with pytest.raises(ArgumentError, match="query"):
        ds.sql(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- bombs
_PEAK = textwrap.dedent(
    """
    import resource, sys, warnings
    warnings.simplefilter("ignore")
    from undertale_duck import MemoryBudgetError, ParquetDataset  # imports torch
    # VmHWM, not ru_maxrss: ru_maxrss survives exec and would start at pytest's own size
    def hwm():
        return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    before = hwm()
    try:
        ds = ParquetDataset(sys.argv[1], memory=64)
        ds[0]
        print("READ")
    except MemoryBudgetError as exc:
        print("MemoryBudgetError:", exc)
    grew = hwm() - before
    print("GREW_KIB", grew)
    """
)


@pytest.mark.heavy
@pytest.mark.parametrize("understate", [False, True])
def test_decompression_bomb_stops_at_the_budget(tmp_path: Path, understate: bool) -> None:
    path = tmp_path / "bomb.parquet"
    hf.bomb(path, 1024, understate=understate)  # 1 GiB of zeros in one row group
    assert path.stat().st_size < 256 << 10
    before = hf.sha256s(tmp_path)
    done = hf.run_python("-c", _PEAK, str(path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "MemoryBudgetError:" in out and "bomb.parquet" in out, out
    assert "corrupt" not in out
    if understate:
        assert "understates" in out
    grew = int(out.split("GREW_KIB")[1].split()[0]) << 10
    assert grew < 256 << 20, f"peak RSS grew by {grew >> 20} MiB reading a 1 GiB bomb"
    assert hf.sha256s(tmp_path) == before


def test_shard_too_wide_for_the_budget_is_not_called_a_bomb(tmp_path: Path) -> None:
    # an honest shard whose 5,000 columns need more DuckDB working memory than the budget
    # holds: the error says so and what to do, not "decompression bomb"
    n = 5000
    path = tmp_path / "wide.parquet"
    table = pa.table({f"c{i}": pa.array([r * n + i for r in range(4)], pa.int64())
                      for i in range(n)})
    pq.write_table(table, path, compression="lz4")  # lz4: read by DuckDB, not pyarrow
    with pytest.raises(MemoryBudgetError) as info:
        ParquetDataset(path, memory=32)[3]
    text = str(info.value)
    assert "too wide" in text and f"{n} columns" in text and str(path) in text, text
    assert "memory=" in text and "columns=" in text, text
    assert "bomb" not in text and "understates" not in text, text
    assert info.value.path == str(path) and info.value.rows == (0, 4)
    few = ParquetDataset(path, memory=32, columns=["c0", "c4999"])  # what the error advises
    assert few[3] == {"c0": 3 * n, "c4999": 3 * n + n - 1}


def test_row_groups_larger_than_the_budget_are_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    hf.bomb(path, 80, understate=False)  # one 80 MiB row group
    ds = ParquetDataset(path, memory=64)
    with pytest.raises(MemoryBudgetError, match="80 MiB") as info:
        ds[0]
    assert info.value.path == str(path) and info.value.rows is not None
    assert len(ParquetDataset(path, memory=128)[79]["s"]) == 1 << 20  # a larger budget reads
    shutil.rmtree(tmp_path)


def test_a_narrow_read_of_a_wide_row_group_is_weighed_by_its_columns(tmp_path: Path) -> None:
    # columns=["i"] decodes only i's chunks, but the read was refused for the whole 96 MiB
    # row group ("decompressing row groups of 96 MiB")
    path = tmp_path / "wide.parquet"
    values = [bytes([k]) * (1 << 20) for k in range(96)]
    pq.write_table(pa.table({"i": list(range(96)), "b": values, "j": [-k for k in range(96)]}),
                   path, row_group_size=96, compression="zstd")
    del values
    narrow = ParquetDataset(path, columns=["j", "i"], memory=8)
    assert [narrow[k] for k in (0, 95, 40)] == [{"j": -k, "i": k} for k in (0, 95, 40)]
    for columns in (["b"], ["i", "b"], None):  # the wide column is still weighed whole
        ds = ParquetDataset(path, columns=columns, memory=8)
        with pytest.raises(MemoryBudgetError, match=r"row groups of 9\d(\.\d+)? MiB"):
            ds[1]


# --------------------------------------------------------------------------- dictionary bombs
@pytest.mark.heavy
def test_dictionary_bomb_stops_at_the_budget_before_duckdb_materialises_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bomb.parquet"
    hf.dictionary_bomb(path, 100_000, 256 << 10)  # 25 GiB of one 256 KiB string, ~1 KB file
    assert path.stat().st_size < 16 << 10
    before = hf.sha256s(tmp_path)
    done = hf.run_python("-c", _PEAK, str(path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "MemoryBudgetError:" in out and "bomb.parquet" in out, out
    assert "dictionary bomb" in out and "GiB of string and binary values" in out, out
    grew = int(out.split("GREW_KIB")[1].split()[0]) << 10
    # without the bound DuckDB materialised one 2048-row vector of it: about 1.5 GiB
    assert grew < 192 << 20, f"peak RSS grew by {grew >> 20} MiB reading a dictionary bomb"
    assert hf.sha256s(tmp_path) == before


def test_dictionary_bomb_of_binary_values_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blob.parquet"
    hf.dictionary_bomb(path, 50_000, 64 << 10, ids=True, binary=True)
    ds = ParquetDataset(path, memory=64)
    with pytest.raises(MemoryBudgetError, match="dictionary bomb") as info:
        ds[7]
    assert info.value.path == str(path)
    assert ParquetDataset(path, memory=64, columns=["id"])[7] == {"id": 7}


def test_one_long_value_among_short_ones_is_still_read(tmp_path: Path) -> None:
    # the bound trips on the long value; its window's values are weighed and fit: read
    rows = 20_000
    texts = [f"row {i}" for i in range(rows)]
    texts[12_345] = "L" * (300 << 10)
    path = tmp_path / "outlier.parquet"
    pq.write_table(pa.table({"i": list(range(rows)), "s": texts}), path)
    before = hf.sha256s(tmp_path)
    ds = ParquetDataset(path, memory=64)
    assert ds[12_345] == {"i": 12_345, "s": texts[12_345]}
    assert [ds[i] for i in (0, 12_344, 19_999)] == [
        {"i": i, "s": texts[i]} for i in (0, 12_344, 19_999)
    ]
    assert hf.sha256s(tmp_path) == before


def test_arrow_string_limit_is_a_budget_error_not_corruption(tmp_path: Path) -> None:
    from undertale_duck.core.runtime import failures

    # the text DuckDB's Arrow appender raises (through pyarrow, as OSError) for a batch of
    # more than 2 GiB of strings: reproducing it takes gigabytes of memory, so the mapping
    # is checked on the message itself
    exc = OSError(
        "Invalid Input Error: Arrow Appender: The maximum total string size for regular "
        "string buffers is 2147483647 but the offset of 2147483648 exceeds this."
    )
    error = failures.shard_error(exc, "/d/x.parquet", "rows 0..9", (0, 10), memory=0)
    assert isinstance(error, MemoryBudgetError) and "corrupt" not in str(error)
    assert "/d/x.parquet" in str(error) and error.rows == (0, 10)


# --------------------------------------------------------------------- page checksums
def _page_bodies(path: Path) -> list[tuple[str, int, int]]:
    """``(column, body start, body length)`` of every page of a file, from its headers."""
    from undertale_duck.core.parquet.pages import chunk_range, page_headers

    meta = pq.read_metadata(path)
    out = []
    with open(path, "rb") as fh:
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(g).column(c)
                start, end = chunk_range(chunk)
                out += [(chunk.path_in_schema, p.body, p.packed)
                        for p in page_headers(fh, start, end)]
    return out


def _checksummed(path: Path, rows: int, **options: object) -> pa.Table:
    table = pa.table({
        "i": pa.array(range(rows), pa.int64()),
        "lst": [[i, i + 1, i * 3 % 7] for i in range(rows)],
        "s": [f"row-{i:05d}" for i in range(rows)],
    })
    pq.write_table(table, path, write_page_checksum=True, row_group_size=40,
                   data_page_size=256, **options)  # type: ignore[arg-type]
    return table


@given(data=st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_a_byte_flipped_in_a_checksummed_page_is_never_served(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    # DuckDB does not check page CRCs (and pyarrow is not given such files): a flipped byte in
    # a page that still decompresses was served as a wrong value ([599, 600, 505])
    root = tmp_path_factory.mktemp("crc")
    codec = data.draw(st.sampled_from(["NONE", "SNAPPY", "ZSTD"]))
    good = root / "good.parquet"
    want = _checksummed(good, 120, compression=codec, use_dictionary=data.draw(st.booleans()),
                        data_page_version=data.draw(st.sampled_from(["1.0", "2.0"])))
    bodies = [b for b in _page_bodies(good) if b[2] > 0]
    column, start, length = data.draw(st.sampled_from(bodies))
    at = start + data.draw(st.integers(0, length - 1))
    raw = bytearray(good.read_bytes())
    raw[at] ^= 1 << data.draw(st.integers(0, 7))
    bad = root / "bad.parquet"
    bad.write_bytes(bytes(raw))
    ds = ParquetDataset(bad, memory=64)
    with pytest.raises(CorruptShardError, match=re.escape(str(bad))) as info:
        [ds[i] for i in range(len(ds))]
    assert "CRC-32" in str(info.value) or "corrupt" in str(info.value)
    assert [ParquetDataset(good)[i] for i in (0, 59, 119)] == [
        want.slice(i, 1).to_pylist()[0] for i in (0, 59, 119)
    ]


def test_a_checksum_mismatch_names_the_column_and_row_group(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    want = _checksummed(good, 120, compression="NONE", use_dictionary=False)
    # the last page of "lst" in the second row group: its values, uncompressed, still decode
    column, start, length = [b for b in _page_bodies(good) if b[0].startswith("lst")][-1]
    raw = bytearray(good.read_bytes())
    raw[start + length - 1] ^= 0x04
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(raw))
    ds = ParquetDataset(bad, memory=64, window_bytes=1)  # windows within row groups
    assert [ds[i] for i in range(80)] == want.slice(0, 80).to_pylist()  # other groups serve
    with pytest.raises(CorruptShardError, match=r"column 'lst\.list\.element' in row group 2 "
                       r"\(local rows 80\.\.119\) does not match the CRC-32") as info:
        ds[100]
    assert info.value.rows is not None
    # the same flip in a file that records no checksums cannot be seen by any reader
    plain = tmp_path / "plain.parquet"
    pq.write_table(want, plain, row_group_size=40, data_page_size=256, compression="NONE",
                   use_dictionary=False)
    assert ParquetDataset(plain)[100] == want.slice(100, 1).to_pylist()[0]


def test_a_checksum_is_checked_in_a_column_whose_name_holds_a_dot(tmp_path: Path) -> None:
    # a chunk's dotted path ("a.b") names its top-level column ambiguously: such a dataset
    # has every chunk of the group checked, rather than none of that column's
    rows = 60
    table = pa.table({"i": list(range(rows)), "a.b": [[k, k * 2] for k in range(rows)]})
    good = tmp_path / "good.parquet"
    pq.write_table(table, good, write_page_checksum=True, compression="NONE",
                   use_dictionary=False, data_page_size=128)
    column, start, length = [b for b in _page_bodies(good) if b[0].startswith("a.b")][-1]
    raw = bytearray(good.read_bytes())
    raw[start + length - 1] ^= 0x01
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(raw))
    assert ParquetDataset(good)[rows - 1] == table.slice(rows - 1, 1).to_pylist()[0]
    with pytest.raises(CorruptShardError, match=r"does not match the CRC-32"):
        ParquetDataset(bad)[rows - 1]
