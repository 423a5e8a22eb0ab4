"""Demo: write a small sharded dataset and read it through undertale_duck.

Run with ``python3 tasks.py demo`` (which creates .venv and installs the package first).
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from undertale_duck import ParquetDataset

TOKENS = 32


def write_sample(out: Path, shards: int = 4, rows: int = 2500) -> Path:
    """Write ``shards`` Parquet files of tokenized rows (id, tokens, mask, label)."""
    data = out / "train"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    rng = random.Random(0)
    for k in range(shards):
        ids, tokens, masks, labels = [], [], [], []
        for j in range(rows):
            i = k * rows + j
            length = rng.randrange(4, TOKENS + 1)
            ids.append(f"fn-{i:06d}")
            tokens.append([(i * 7 + t) % 30000 for t in range(length)] + [0] * (TOKENS - length))
            masks.append([1] * length + [0] * (TOKENS - length))
            labels.append(i % 4)
        table = pa.table(
            {
                "id": ids,
                "tokens": pa.array(tokens, pa.list_(pa.int32())),
                "mask": pa.array(masks, pa.list_(pa.int8())),
                "label": pa.array(labels, pa.int64()),
            }
        )
        pq.write_table(table, data / f"part-{k:05d}.parquet", row_group_size=500)
    (data / "_SUCCESS").write_text("")
    return data


def main() -> None:
    """Write the sample dataset and show what the library does with it."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("build/demo"))
    args = parser.parse_args()

    data = write_sample(args.out)
    print(f"wrote {len(list(data.glob('*.parquet')))} shards to {data}")

    ds = ParquetDataset(data, memory=64)
    print(f"\n== ParquetDataset\n{ds}")
    row = ds[1234]
    print(f"ds[1234]: id={row['id']} label={row['label']} tokens[:6]={row['tokens'][:6]}")
    print(f"ds[-1]:   id={ds[-1]['id']}")
    batch = ds.__getitems__([0, 5000, 9999])
    print(f"batched fetch: {[r['id'] for r in batch]}")
    print(f"cache: {ds.cache_stats}")
    counts = ds.sql("SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label")
    print(f"\n== ds.sql: rows per label\n{counts.to_pylist()}")


if __name__ == "__main__":
    main()
