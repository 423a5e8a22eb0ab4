"""Write small real Parquet datasets whose every value is a function of the global row index."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

EPOCH = dt.datetime(2024, 1, 1)
CATEGORIES = ("alpha", "beta", "gamma")


def row(i: int) -> dict[str, Any]:
    """The row at global index ``i`` of a generated dataset."""
    return {
        "id": f"row-{i:08d}",
        "label": i % 7,
        "score": None if i % 11 == 0 else i / 4,
        "tokens": [(i * 31 + k) % 1000 for k in range(i % 5)],
        "blob": bytes([(i + k) % 256 for k in range(i % 4)]),
        "when": EPOCH + dt.timedelta(seconds=i),
        "point": {"x": i, "tags": [f"t{i % 3}"] * (i % 3)},
        "nested": [[i, i + 1], [], [i * 2]] if i % 2 else [],
        "category": CATEGORIES[i % 3],
    }


def schema() -> pa.Schema:
    """The Arrow schema of generated rows (category dictionary-encoded)."""
    return pa.schema(
        [
            ("id", pa.string()),
            ("label", pa.int64()),
            ("score", pa.float64()),
            ("tokens", pa.list_(pa.int32())),
            ("blob", pa.binary()),
            ("when", pa.timestamp("us")),
            ("point", pa.struct([("x", pa.int64()), ("tags", pa.list_(pa.string()))])),
            ("nested", pa.list_(pa.list_(pa.int64()))),
            ("category", pa.dictionary(pa.int32(), pa.string())),
        ]
    )


def table(start: int, stop: int) -> pa.Table:
    """Rows ``start..stop-1`` as an Arrow table."""
    rows = [row(i) for i in range(start, stop)]
    columns = {name: [r[name] for r in rows] for name in schema().names}
    arrays = []
    for field in schema():
        if pa.types.is_dictionary(field.type):
            arrays.append(pa.array(columns[field.name], pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(columns[field.name], field.type))
    return pa.Table.from_arrays(arrays, schema=schema())


def write_shards(
    directory: Path,
    sizes: Sequence[int],
    *,
    row_group_size: int | Sequence[int] = 64,
    compression: str = "snappy",
    writer: str = "pyarrow",
    prefix: str = "part",
) -> list[Path]:
    """Write consecutive shards of ``sizes`` rows into ``directory``; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    start = 0
    for k, size in enumerate(sizes):
        path = directory / f"{prefix}-{k:05d}.parquet"
        data = table(start, start + size)
        rgs = row_group_size if isinstance(row_group_size, int) else row_group_size[k]
        if writer == "pyarrow":
            pq.write_table(data, path, row_group_size=max(rgs, 1), compression=compression)
        elif writer == "duckdb":
            con = duckdb.connect()
            con.register("t", data)
            con.execute(
                f"COPY (SELECT * FROM t) TO '{path}' "
                f"(FORMAT parquet, ROW_GROUP_SIZE {max(rgs, 1)}, COMPRESSION {compression})"
            )
            con.close()
        else:
            raise ValueError(writer)
        paths.append(path)
        start += size
    return paths


def tokens(i: int, width: int) -> list[int]:
    """Row ``i``'s token list in :func:`write_token_shards`'s datasets."""
    return [(i * 13 + k) % 50_021 for k in range(width)]


def write_token_shards(
    directory: Path, sizes: Sequence[int], *, group: int, width: int, blob: int = 0
) -> int:
    """Shards of ``id`` (the global row), ``tokens`` (:func:`tokens`, ``width`` each) and,
    with ``blob``, a ``blob`` of ``blob`` bytes ``i % 251``; return the rows written."""
    directory.mkdir(parents=True, exist_ok=True)
    start = 0
    for k, size in enumerate(sizes):
        rows = range(start, start + size)
        columns: dict[str, pa.Array] = {
            "id": pa.array(list(rows), pa.int64()),
            "tokens": pa.array([tokens(i, width) for i in rows], pa.list_(pa.int32())),
        }
        if blob:
            columns["blob"] = pa.array([bytes([i % 251]) * blob for i in rows], pa.binary())
        pq.write_table(pa.table(columns), directory / f"part-{k:03d}.parquet",
                       row_group_size=group)
        start += size
    return start


def expected(total: int) -> list[dict[str, Any]]:
    """What pyarrow's ``as_py()`` gives for rows ``0..total-1``."""
    return table(0, total).to_pylist() if total else []


def plain(value: Any) -> Any:
    """A numpy/torch value as the Python value ``as_py()`` would give (others unchanged)."""
    import numpy as np
    import torch

    if isinstance(value, np.ndarray | torch.Tensor):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
