"""undertale_duck: serve sharded Parquet datasets to PyTorch and Lightning through DuckDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import schema
from .checks import CheckResult, ValidationReport
from .collate import collate
from .dataset import ParquetDataset
from .errors import (
    ArgumentError,
    ColumnError,
    CorruptShardError,
    NotParquetError,
    QueryError,
    ReadOnlyError,
    SchemaError,
    ShardChangedError,
    SourceError,
    UndertaleDuckError,
)
from .loader import load
from .sampler import ChunkedSampler

if TYPE_CHECKING:
    from .datamodule import DataModule

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "CheckResult",
    "ChunkedSampler",
    "ColumnError",
    "CorruptShardError",
    "DataModule",
    "NotParquetError",
    "ParquetDataset",
    "QueryError",
    "ReadOnlyError",
    "SchemaError",
    "ShardChangedError",
    "SourceError",
    "UndertaleDuckError",
    "ValidationReport",
    "__version__",
    "collate",
    "load",
    "schema",
]


def __getattr__(name: str) -> Any:
    # DataModule imports lightning (slow); import it only when asked for.
    if name == "DataModule":
        from .datamodule import DataModule

        return DataModule
    raise AttributeError(f"module 'undertale_duck' has no attribute {name!r}")
