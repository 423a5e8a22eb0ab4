"""A dataset with planted violations, nulls, duplicates across shards and schema drift.

Every value is a function of the global row index, so any executor's report can be compared
with the in-process one (and with what the planting says).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from undertale_duck import schema

TAGS = ("a", "b", "c")


class Point(BaseModel):
    """A struct column whose ``y`` must not be null."""

    x: int
    y: int


class Planted(BaseModel):
    """The schema the planted dataset violates in every way it can."""

    id: Annotated[int, schema.Unique]
    name: Annotated[str, schema.Unique, Field(min_length=2)]
    score: float | None = Field(default=None, ge=0)
    label: int = Field(ge=0, le=4)
    tag: Literal["a", "b", "c"]
    point: Point


def row(i: int) -> dict[str, Any]:
    """The row at global index ``i``."""
    return {
        "id": i - 40 if i % 17 == 5 and i >= 40 else i,  # duplicates a row in an earlier shard
        "name": "x" if i % 13 == 0 else (f"n{i % 5}" if i % 11 == 3 else f"name-{i}"),
        "score": None if i % 7 == 0 else float(i % 50) - (60.0 if i % 19 == 0 else 0.0),
        "label": None if i % 23 == 0 else i % 6,
        "tag": "z" if i % 29 == 0 else TAGS[i % 3],
        "point": {"x": i, "y": None if i % 31 == 0 else -i},
    }


#: Layout variants a shard may be written in (schema drift).
DRIFTS = ("plain", "label32", "no_tag", "label_text", "extra")


def table(start: int, stop: int, drift: str = "plain") -> pa.Table:
    """Rows ``start..stop-1`` in one of the :data:`DRIFTS` layouts."""
    rows = [row(i) for i in range(start, stop)]
    label_type = {"label32": pa.int32(), "label_text": pa.string()}.get(drift, pa.int64())
    labels = [r["label"] for r in rows]
    if drift == "label_text":
        labels = [None if v is None else str(v) for v in labels]
    columns: dict[str, pa.Array] = {
        "id": pa.array([r["id"] for r in rows], pa.int64()),
        "name": pa.array([r["name"] for r in rows], pa.string()),
        "score": pa.array([r["score"] for r in rows], pa.float64()),
        "label": pa.array(labels, label_type),
        "tag": pa.array([r["tag"] for r in rows], pa.string()),
        "point": pa.array(
            [r["point"] for r in rows], pa.struct([("x", pa.int64()), ("y", pa.int64())])
        ),
    }
    if drift == "no_tag":
        del columns["tag"]
    if drift == "extra":
        columns["extra"] = pa.array(range(start, stop), pa.int64())
    return pa.table(columns)


def write(
    directory: Path, sizes: Sequence[int], drifts: Sequence[str] | None = None
) -> list[Path]:
    """Write consecutive shards of ``sizes`` rows (``drifts[k]`` the layout of shard ``k``)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    start = 0
    for k, size in enumerate(sizes):
        drift = drifts[k] if drifts is not None else "plain"
        path = directory / f"part-{k:05d}.parquet"
        pq.write_table(table(start, start + size, drift), path, row_group_size=16)
        paths.append(path)
        start += size
    return paths


def dump(report: Any) -> dict[str, Any]:
    """A report as a dict without the time it took (what executors must agree on)."""
    data: dict[str, Any] = report.model_dump(exclude={"seconds"})
    return data
