"""Opening a view reads only what its filter needs: the schema probe reads no row."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset, SourceError
from undertale_duck.core.runtime import nan_safe, planned_as_configured

GROUP = 50


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("UNDERTALE_DUCK_CACHE", str(cache))
    return cache


def _tokens(i: int) -> list[int]:
    return [(i * 7 + k) % 1009 for k in range(40)]


def _write(path: Path, start: int, rows: int) -> None:
    ids = range(start, start + rows)
    table = pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "label": pa.array([i % 3 for i in ids], pa.int64()),
        "tokens": pa.array([_tokens(i) for i in ids], pa.list_(pa.int32())),
    })
    # no dictionary: the pages hold the values themselves, compressed
    pq.write_table(table, path, row_group_size=GROUP, compression="zstd",
                   use_dictionary=False)


def _damage_tokens(path: Path, group: int) -> None:
    """Overwrite the middle of ``tokens``' compressed pages in ``group`` (headers intact)."""
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(group).column(2)
    assert chunk.path_in_schema == "tokens.list.element"
    start, size = chunk.data_page_offset, chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    # past the first page's header (tens of bytes), inside its compressed values
    for at in range(start + size // 3, start + size // 3 + 64):
        data[at] ^= 0xA5
    path.write_bytes(bytes(data))


def test_opening_a_view_reads_no_data_column(tmp_path: Path) -> None:
    """The probe of a view's schema used to scan its whole first shard (its row-number filter
    ran above the scan in the NaN-safe indexing database): a shard whose second row group is
    damaged in a column the filter does not read failed at open. Now the damage is found by
    the read of the rows that hold it, and only there."""
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "part-0.parquet", 0, 2 * GROUP)
    _write(data / "part-1.parquet", 2 * GROUP, GROUP)
    _damage_tokens(data / "part-0.parquet", 1)
    ds = ParquetDataset(data, where="label != 1", window_bytes=1)
    kept = [i for i in range(3 * GROUP) if i % 3 != 1]
    assert len(ds) == len(kept)
    first_group = [k for k, i in enumerate(kept) if i < GROUP]
    rows = ds.__getitems__(first_group)
    assert [r["id"] for r in rows] == kept[: len(first_group)]
    assert all(r["tokens"] == _tokens(r["id"]) for r in rows)
    last = [k for k, i in enumerate(kept) if i >= 2 * GROUP]
    assert [r["id"] for r in ds.__getitems__(last)] == kept[len(kept) - len(last):]
    with pytest.raises(SourceError, match=r"part-0\.parquet"):
        ds[len(first_group)]
    ds.close()


@settings(max_examples=25, deadline=None)
@given(given_names=st.lists(st.sampled_from(
    ["filter_pushdown", "statistics_propagation", "join_order", "compressed_materialization",
     "build_side_probe_side"]), unique=True, max_size=3), fail=st.booleans())
def test_planned_as_configured_restores_the_nan_safe_setting(
    given_names: list[str], fail: bool
) -> None:
    """Inside: the optimizers the user's settings turn off, only those; after (also after a
    failing query): the NaN-safe list again."""
    config = {"disabled_optimizers": ",".join(given_names)} if given_names else {}
    safe = nan_safe(config)
    con = duckdb.connect(config=safe)

    def disabled() -> set[str]:
        ((value,),) = con.sql("SELECT current_setting('disabled_optimizers')").fetchall()
        return {n.strip() for n in str(value).split(",") if n.strip()}

    want = set(safe["disabled_optimizers"].split(","))
    assert disabled() == want
    try:
        with planned_as_configured(con, config):
            assert disabled() == set(given_names)
            if fail:
                con.sql("SELECT * FROM no_such_table")
    except duckdb.CatalogException:
        assert fail
    assert disabled() == want
    con.close()
