"""undertale_duck: serve sharded Parquet datasets to PyTorch and Lightning through DuckDB."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .errors import (
    ArgumentError,
    ColumnError,
    CorruptShardError,
    EmptyEpochWarning,
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
    WorkerStartError,
    WorkerStartWarning,
)

# "undertale_duck" and its children (undertale_duck.core.dataset, ...) log opening, indexing,
# downloads, evictions and refusals; nothing is shown unless the application configures logging
logging.getLogger(__name__).addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from . import schema
    from .core.pack import Pack
    from .core.views import Split
    from .dataset import PackedDataset, ParquetDataset
    from .training.collate import collate
    from .training.datamodule import DataModule
    from .training.loader import ChunkedLoader, load
    from .training.lookup import batch_rows
    from .training.mixture import Mixture, Stream
    from .training.one_block import one_block
    from .training.sampler import ChunkedSampler
    from .validation.model import CheckResult, ValidationReport

#: Names imported on first use: they pull in torch (and lightning for DataModule) or pydantic,
#: which the command line does not need before it runs (importing little keeps the window in
#: which Ctrl-C could interrupt the import itself, before the CLI handles it, short).
_LAZY = {
    "schema": "",  # the submodule itself
    "CheckResult": "validation.model",
    "ValidationReport": "validation.model",
    "ParquetDataset": "dataset",
    "PackedDataset": "dataset",
    "Pack": "core.pack",
    "Split": "core.views",
    "ChunkedSampler": "training.sampler",
    "ChunkedLoader": "training.loader",
    "load": "training.loader",
    "DataModule": "training.datamodule",
    "collate": "training.collate",
    "one_block": "training.one_block",
    "Mixture": "training.mixture",
    "Stream": "training.mixture",
    "batch_rows": "training.lookup",
}

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "CheckResult",
    "ChunkedLoader",
    "ChunkedSampler",
    "ColumnError",
    "CorruptShardError",
    "DataModule",
    "EmptyEpochWarning",
    "EncryptedShardError",
    "MemoryBudgetError",
    "MemoryBudgetWarning",
    "Mixture",
    "NotParquetError",
    "OutOfRangeError",
    "Pack",
    "PackedDataset",
    "ParquetDataset",
    "QueryError",
    "RandomAccessWarning",
    "ReadOnlyError",
    "SchemaError",
    "ShardChangedError",
    "SourceError",
    "Split",
    "Stream",
    "UndertaleDuckError",
    "UnsupportedShardError",
    "ValidationReport",
    "WorkerStartError",
    "WorkerStartWarning",
    "__version__",
    "batch_rows",
    "collate",
    "load",
    "one_block",
    "schema",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'undertale_duck' has no attribute {name!r}")
    import importlib

    if not module:
        value: Any = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
