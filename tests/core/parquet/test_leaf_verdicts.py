"""The allow-list's leaf verdicts, found once per Parquet schema, are each shard's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undertale_duck import ParquetDataset
from undertale_duck.core.parquet import LeafVerdicts
from undertale_duck.core.parquet import pages as page_scan

COLUMNS = ["row", "tokens", "label"]
SCHEMA = pa.schema([("row", pa.int64()), ("tokens", pa.list_(pa.int32())), ("label", pa.int64())])


def _table(variant: str, start: int, rows: int) -> pa.Table:
    """Rows ``start..`` of one layout; every value a function of the global row index."""
    index = np.arange(start, start + rows)
    row = pa.array(index, pa.int64())
    tokens = pa.array([[i % 101, i % 7] for i in index.tolist()], pa.list_(pa.int32()))
    label = pa.array(index % 3, pa.int64())
    if variant == "reordered":  # same columns, other leaf indices
        return pa.table({"label": label, "tokens": tokens, "row": row})
    if variant == "extra":  # a column more, before the others
        return pa.table({"x": pa.array(index * 2, pa.int64()), "row": row, "tokens": tokens,
                         "label": label})
    if variant == "narrow":  # a label of another type: off the allow-list for SCHEMA
        return pa.table({"row": row, "tokens": tokens, "label": label.cast(pa.int32())})
    if variant == "large":  # same Parquet schema, other Arrow type (ARROW:schema metadata)
        return pa.table({"row": row, "tokens": tokens.cast(pa.large_list(pa.int32())),
                         "label": label})
    if variant == "tagged":  # key-value metadata no reader knows
        return pa.table({"row": row, "tokens": tokens, "label": label}).replace_schema_metadata(
            {"geo": "{}"}
        )
    return pa.table({"row": row, "tokens": tokens, "label": label})


#: "/bare": written without pyarrow's ARROW:schema metadata, so two shards can differ in
#: their Parquet schema alone
VARIANTS = ["plain", "reordered", "extra", "narrow", "large", "tagged", "plain/bare",
            "reordered/bare"]


def _write(variant: str, path: Path, start: int = 0, rows: int = 10, **kw: object) -> None:
    layout, _, bare = variant.partition("/")
    pq.write_table(_table(layout, start, rows), path, store_schema=not bare,  # type: ignore[arg-type]
                   **kw)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(order=st.lists(st.sampled_from(VARIANTS), min_size=1, max_size=12))
def test_each_shard_gets_the_verdict_of_its_own_schema(
    tmp_path: Path, order: list[str]
) -> None:
    """Shards of several layouts in any order: the kept verdict is always the fresh one."""
    verdicts = LeafVerdicts(COLUMNS, SCHEMA)
    for k, variant in enumerate(order):
        path = tmp_path / f"{variant.replace('/', '-')}.parquet"
        if not path.exists():
            _write(variant, path)
        meta = pq.read_metadata(path)
        assert verdicts.of(meta) == page_scan._leaves(meta, COLUMNS, SCHEMA), (k, variant)


def test_verdicts_are_kept_by_schema_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [0]
    real = page_scan._leaves

    def counted(*args: object) -> object:
        calls[0] += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(page_scan, "_leaves", counted)
    verdicts = LeafVerdicts(COLUMNS, SCHEMA)
    metas = {}
    for variant in VARIANTS:
        path = tmp_path / f"{variant.replace('/', '-')}.parquet"
        _write(variant, path)
        metas[variant] = pq.read_metadata(path)
    for variant in VARIANTS:
        verdicts.of(metas[variant])
    assert calls[0] == len(VARIANTS)
    for variant in VARIANTS:  # all kept: none walked again
        verdicts.of(pq.read_metadata(tmp_path / f"{variant.replace('/', '-')}.parquet"))
    assert calls[0] == len(VARIANTS)
    # more schemas than kept: the oldest is walked again
    monkeypatch.setattr(page_scan, "SCHEMAS_KEPT", 2)
    verdicts = LeafVerdicts(COLUMNS, SCHEMA)
    for variant in ("plain", "reordered", "extra", "plain"):
        verdicts.of(metas[variant])
    assert calls[0] == len(VARIANTS) + 4
    verdicts.of(metas["extra"])  # the last two kept
    assert calls[0] == len(VARIANTS) + 4
    # a large footer's schema is not kept (it would hold the whole footer alive)
    monkeypatch.setattr(page_scan, "SCHEMA_FOOTER_BYTES", 16)
    verdicts = LeafVerdicts(COLUMNS, SCHEMA)
    verdicts.of(metas["plain"])
    verdicts.of(metas["plain"])
    assert calls[0] == len(VARIANTS) + 6


def test_a_dataset_of_shards_with_columns_in_other_orders_reads_every_row(
    tmp_path: Path,
) -> None:
    """Shards alike but for the order of their columns: each read by its own leaves."""
    rows = 300
    for k in range(6):
        variant = ("reordered" if k % 2 else "plain") + ("/bare" if k % 3 == 2 else "")
        _write(variant, tmp_path / f"part-{k}.parquet", k * rows, rows, row_group_size=100)
    ds = ParquetDataset(tmp_path, columns=COLUMNS, memory=64)
    got = [ds[i] for i in range(len(ds))]
    assert len(got) == 6 * rows
    for i, item in enumerate(got):
        assert item["row"] == i
        assert item["tokens"] == [i % 101, i % 7]
        assert item["label"] == i % 3
    assert ds.reader.decoder.direct is not None
    assert ds.reader.decoder.direct.stats["direct"] > 0  # read by the pyarrow path
    ds.close()
