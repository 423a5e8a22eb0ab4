"""Row groups' decoded sizes estimated from footers (``core/group_sizes.py``) and the window
plan cut by them: a column that encodes far smaller than it decodes (run-length or
dictionary encoded tokens) no longer makes windows many times their target."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet.group_sizes import decoded_sizes
from undertale_duck.core.source import windows as win

FIXED = {
    "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
    "u8": pa.uint8(), "u16": pa.uint16(), "f32": pa.float32(), "f64": pa.float64(),
}


def _column(kind: str, rows: int, width: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    if kind.startswith("list_"):
        typ = FIXED[kind[5:]]
        values = rng.integers(0, 50, size=rows * width).astype(typ.to_pandas_dtype())
        offsets = np.arange(rows + 1, dtype=np.int32) * width
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, typ))
    return pa.array(rng.integers(0, 50, size=rows).astype(FIXED[kind].to_pandas_dtype()),
                    FIXED[kind])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from([*FIXED, *(f"list_{k}" for k in FIXED)]), min_size=1,
                   max_size=4),
    rows=st.integers(1, 3000),
    width=st.integers(1, 64),
    group=st.integers(1, 3000),
    dictionary=st.booleans(),
    compression=st.sampled_from(["none", "snappy", "zstd"]),
    seed=st.integers(0, 1 << 20),
)
def test_fixed_width_estimates_match_what_arrow_decodes(
    kinds: list[str], rows: int, width: int, group: int, dictionary: bool, compression: str,
    seed: int, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    table = pa.table({f"c{k}": _column(kind, rows, width, seed + k)
                      for k, kind in enumerate(kinds)})
    path = tmp_path_factory.mktemp("sizes") / "a.parquet"
    pq.write_table(table, path, row_group_size=group, use_dictionary=dictionary,
                   compression=compression)
    meta = pq.read_metadata(path)
    sizes = decoded_sizes(meta)
    assert len(sizes) == meta.num_row_groups
    parquet = pq.ParquetFile(path)
    for g, size in enumerate(sizes):
        decoded = parquet.read_row_group(g).nbytes
        # values x width, plus an offset per list: what Arrow holds besides validity bitmaps
        assert abs(size - decoded) <= 0.05 * decoded + 64 * len(kinds), (g, size, decoded)


def test_strings_count_at_least_their_encoded_size_and_offsets(tmp_path: Path) -> None:
    names = pa.array([f"function_{i % 40}" for i in range(5000)])
    pq.write_table(pa.table({"s": names}), tmp_path / "a.parquet", row_group_size=1000)
    meta = pq.read_metadata(tmp_path / "a.parquet")
    for g, size in enumerate(decoded_sizes(meta)):
        chunk = meta.row_group(g).column(0)
        assert size >= chunk.total_uncompressed_size + 4 * chunk.num_values


def _padded(root: Path, shards: int, rows: int, width: int, group: int) -> Path:
    """Token rows that are mostly padding: run-length encoding makes them tiny on disk."""
    root.mkdir(parents=True, exist_ok=True)
    for k in range(shards):
        i = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
        tokens = np.zeros((rows, width), dtype=np.int32)
        tokens[:, 0] = i % 1000  # the row's own token, then padding
        tokens[:, 1] = 7
        offsets = np.arange(rows + 1, dtype=np.int32) * width
        table = pa.table({"i": i,
                          "tokens": pa.ListArray.from_arrays(offsets, tokens.ravel())})
        pq.write_table(table, root / f"part-{k:03d}.parquet", row_group_size=group)
    return root


def test_padded_tokens_are_cut_by_their_decoded_size(tmp_path: Path) -> None:
    # 2,400 rows of 16,384 int32 tokens (150 MiB once decoded) in row groups of 150 rows
    # whose footers record a few KiB each: by the footers alone the shard was one window,
    # whose read passed a 64 MB budget's read limit and stopped as a decompression bomb
    root = _padded(tmp_path / "d", 1, 2400, 16384, 150)
    meta = pq.read_metadata(root / "part-000.parquet")
    assert sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)) < (1 << 20)
    ds = ParquetDataset(root, memory=64, format="numpy")
    assert len(ds.windows) >= 2400 * 16384 * 4 // ds.window_bytes
    assert max(w.rows for w in ds.windows) * 16384 * 4 <= ds.window_bytes
    for a in range(0, len(ds), 100):
        batch = ds.__getitems__(list(range(a, min(a + 100, len(ds)))))
        tokens = batch.batched("tokens")
        assert tokens is not None
        assert (tokens[:, 0] == np.arange(a, a + len(tokens)) % 1000).all()
        assert (tokens[:, 1] == 7).all() and not tokens[:, 2:].any()
    assert ds.cache_stats.bytes <= ds.cache_stats.limit
    ds.close()


@pytest.mark.parametrize("claim", [0, -5])
def test_an_unknown_or_broken_estimate_falls_back_to_the_footer(claim: int) -> None:
    groups = [(10, 1000), (5, 200)]
    assert win.planned(groups, ()) == groups
    assert win.planned(groups, (claim,)) == groups  # not one per group: ignored
    assert win.planned(groups, (claim, 5000)) == [(10, 1000), (5, 5000)]
