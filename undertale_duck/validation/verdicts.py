"""Reuse a passing validation verdict while the schema and the dataset's shards are unchanged."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Final, Protocol

from pydantic import BaseModel

from ..core.runtime import SQL_DIRS, cache_dir, kind_directory, read_cached, write_atomic
from ..core.source import Source
from ..errors import ArgumentError

#: Environment variable naming undertale_duck's cache directory (default: the user's cache).

#: Cache subdirectory of the verdict files.
KIND: Final = "verdicts"
#: Version of the verdict file layout; a new one ignores files written by an older one.
FORMAT = 1

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class Validatable(Protocol):
    """What :func:`validate` needs of a dataset: its shards, fingerprint and ``validate()``."""

    source: Source

    @property
    def fingerprint(self) -> str:
        """A stable hash of the dataset's query, columns and every shard's identity."""

    def validate(self, schema: type[BaseModel]) -> None:
        """Scan every shard against ``schema``; raise ``SchemaError`` if one does not conform."""


@dataclass(frozen=True)
class VerdictStats:
    """What this process did for :func:`validate` so far.

    Attributes:
        scans: Validations actually run (each scans every shard).
        reused: Passing verdicts found on record (this process's memory or the disk cache).
        shared: Verdicts received from rank 0 under ``torch.distributed``.
        together: Of ``scans``, those run by every rank of a ``torch.distributed`` job
            together (this rank scanned its share of the shards).
    """

    scans: int = 0
    reused: int = 0
    shared: int = 0
    together: int = 0


_stats = VerdictStats()
_known: set[str] = set()


def stats() -> VerdictStats:
    """Return this process's counts of scans and reused verdicts."""
    return _stats


def count(**increments: int) -> None:
    """Add to this process's :class:`VerdictStats` counters (e.g. ``count(shared=1)``).

    Args:
        **increments: Counter names and amounts.
    """
    global _stats
    _stats = replace(_stats, **{k: getattr(_stats, k) + v for k, v in increments.items()})


def forget() -> None:
    """Forget the verdicts this process remembers (the disk cache is kept)."""
    _known.clear()


# ---------------------------------------------------------------------- identities
@cache
def _checker_identity() -> str:
    """A hash of the validation code and its SQL: a new version never reuses old verdicts."""
    digest = hashlib.sha256()
    files = sorted(Path(__file__).resolve().parent.glob("*.py"))
    for directory in SQL_DIRS:
        if (directory / "checks").is_dir():
            files += sorted((directory / "checks").glob("*.sql"))
            break
    for path in files:
        digest.update(path.name.encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """The model and every model nested in its fields' annotations, each once."""
    seen: set[type[BaseModel]] = set()
    todo: list[Any] = [model]
    while todo:
        item = todo.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            if item in seen:
                continue
            seen.add(item)
            yield item
            todo.extend(f.annotation for f in item.model_fields.values())
        else:
            todo.extend(typing.get_args(item))


def schema_identity(schema: type[BaseModel]) -> str:
    """Return a hash of everything about a schema class that validation looks at.

    Its name, each field's annotation, constraints and markers (``Unique``), recursively
    through nested models, its JSON schema where pydantic can build one, and the validation
    code itself.

    Args:
        schema: A pydantic model class.

    Returns:
        A hex digest, equal across processes for the same schema and code.
    """
    parts: list[str] = [_checker_identity()]
    for model in _models(schema):
        parts.append(f"{model.__module__}.{model.__qualname__} {model.model_config!r}")
        parts.extend(f"{name}: {field!r}" for name, field in model.model_fields.items())
    try:
        parts.append(json.dumps(schema.model_json_schema(), sort_keys=True, default=str))
    except Exception:  # types pydantic cannot describe: the reprs above suffice
        parts.append("no JSON schema")
    text = _ADDRESS.sub("", "\n".join(parts))  # object addresses differ between processes
    return hashlib.sha256(text.encode()).hexdigest()


def verdict_key(dataset: Validatable, schema: type[BaseModel]) -> str:
    """Return the key of a verdict: the schema's identity and the dataset's fingerprint.

    The fingerprint (``ShardDataset.fingerprint``) covers the query, the columns read and
    every shard's path, rows, size, modification time and inode as read when the dataset was
    opened.

    Args:
        dataset: An opened dataset.
        schema: A pydantic model class.

    Returns:
        A hex digest.
    """
    payload = {"format": FORMAT, "schema": schema_identity(schema),
               "dataset": dataset.fingerprint}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------- the disk cache
def cache_directory() -> Path:
    """Return the directory of verdict files (created when a verdict is written).

    Returns:
        ``verdicts`` under the cache root (:func:`undertale_duck.core.runtime.kind_directory`)
        (``$UNDERTALE_DUCK_CACHE``, else ``$XDG_CACHE_HOME/undertale_duck``, else
        ``~/.cache/undertale_duck``).
    """
    return kind_directory(KIND)


def _on_disk(key: str) -> bool:
    # only a file of ours in a private directory: anyone else able to write there could
    # plant a passing verdict for a failing dataset (or a FIFO that would block the read)
    try:  # where verdicts are written: our folder inside a directory that is not ours
        directory = cache_dir(KIND)
    except (ArgumentError, OSError):
        return False
    raw = read_cached(directory / f"{key}.json")
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("key") == key and data.get("passed") is True


def _write(key: str, dataset: Validatable, schema: type[BaseModel]) -> None:
    """Record a passing verdict atomically; skipped where we may not or cannot write."""
    source = dataset.source
    record = {
        "format": FORMAT,
        "key": key,
        "passed": True,
        "schema": f"{schema.__module__}.{schema.__qualname__}",
        "source": str(source.spec),
        "shards": len(source.shards),
        "rows": source.rows,
        "checked": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    homes = sorted({str(Path(s.path).parent) for s in source.shards})
    # a cache inside the dataset, or one we cannot create or write, only costs a scan next time
    with contextlib.suppress(ArgumentError, OSError):
        directory = cache_dir(KIND, protected=homes)
        write_atomic(directory, f"{key}.json", json.dumps(record).encode())


# ---------------------------------------------------------------------- validate
def known(key: str) -> bool:
    """Tell whether a passing verdict for ``key`` is on record (memory, then disk).

    Args:
        key: A :func:`verdict_key`.

    Returns:
        True if the dataset passed with this schema and fingerprint before.
    """
    if key in _known:
        return True
    if _on_disk(key):
        _known.add(key)
        return True
    return False


def remember(key: str) -> None:
    """Remember a passing verdict in this process (e.g. one received from rank 0).

    Args:
        key: A :func:`verdict_key`.
    """
    _known.add(key)


def record(key: str, dataset: Validatable, schema: type[BaseModel], *, write: bool = True) -> None:
    """Record a passing verdict: in this process, and (``write``) in :func:`cache_directory`.

    Args:
        key: The dataset's :func:`verdict_key`.
        dataset: The dataset that passed.
        schema: The schema it passed.
        write: Also write the verdict file (one rank of a job writes it for the others).
    """
    _known.add(key)
    if write:
        _write(key, dataset, schema)


def validate(dataset: Validatable, schema: type[BaseModel], key: str | None = None) -> None:
    """Validate a dataset like ``dataset.validate(schema)``, reusing a passing verdict.

    A verdict is reused while its :func:`verdict_key` is unchanged; a pass is recorded in
    this process and in :func:`cache_directory` (written atomically; never inside the
    dataset). Failures are not recorded: a failing dataset is checked again each time.

    Args:
        dataset: An opened dataset.
        schema: A pydantic model class.
        key: The dataset's :func:`verdict_key`, when already computed.

    Raises:
        SchemaError: If the dataset does not conform.
        ArgumentError: If ``schema`` is not a pydantic model class.
    """
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        dataset.validate(schema)  # raises the usual ArgumentError
        return
    key = key or verdict_key(dataset, schema)
    if known(key):
        count(reused=1)
        return
    count(scans=1)
    dataset.validate(schema)
    record(key, dataset, schema)
