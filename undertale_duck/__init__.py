"""undertale_duck: serve sharded Parquet datasets to PyTorch and Lightning through DuckDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import schema
from .errors import (
    ArgumentError,
    ColumnError,
    CorruptShardError,
    EncryptedShardError,
    MemoryBudgetError,
    MemoryBudgetWarning,
    NotParquetError,
    OutOfRangeError,
    QueryError,
    RandomAccessWarning,
    ReadOnlyError,
    SchemaError,
    ShardChangedError,
    SourceError,
    UndertaleDuckError,
    UnsupportedShardError,
)
from .validation.model import CheckResult, ValidationReport

if TYPE_CHECKING:
    from .dataset import ParquetDataset
    from .training.collate import collate
    from .training.datamodule import DataModule
    from .training.loader import load
    from .training.lookup import batch_rows
    from .training.mixture import Mixture, Stream
    from .training.sampler import ChunkedSampler

#: Names imported on first use: they pull in torch (and lightning for DataModule), which the
#: command line's SQL, describe and validate commands do not need.
_LAZY = {
    "ParquetDataset": "dataset",
    "ChunkedSampler": "training.sampler",
    "load": "training.loader",
    "DataModule": "training.datamodule",
    "collate": "training.collate",
    "Mixture": "training.mixture",
    "Stream": "training.mixture",
    "batch_rows": "training.lookup",
}

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "CheckResult",
    "ChunkedSampler",
    "ColumnError",
    "CorruptShardError",
    "DataModule",
    "EncryptedShardError",
    "MemoryBudgetError",
    "MemoryBudgetWarning",
    "Mixture",
    "NotParquetError",
    "OutOfRangeError",
    "ParquetDataset",
    "QueryError",
    "RandomAccessWarning",
    "ReadOnlyError",
    "SchemaError",
    "ShardChangedError",
    "SourceError",
    "Stream",
    "UndertaleDuckError",
    "UnsupportedShardError",
    "ValidationReport",
    "__version__",
    "batch_rows",
    "collate",
    "load",
    "schema",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'undertale_duck' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
