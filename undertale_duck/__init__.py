"""undertale_duck: serve sharded Parquet datasets to PyTorch and Lightning through DuckDB."""

from __future__ import annotations

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

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ColumnError",
    "CorruptShardError",
    "NotParquetError",
    "ParquetDataset",
    "QueryError",
    "ReadOnlyError",
    "SchemaError",
    "ShardChangedError",
    "SourceError",
    "UndertaleDuckError",
    "__version__",
]
