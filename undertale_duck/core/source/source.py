"""A dataset: its Parquet shards (local or remote), their footers read once, and its schema."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb

from ...common.text import redact_url
from ...errors import SourceError, UnsupportedShardError
from ..runtime import Connection, duckdb_path, lifecycle
from .convert import conversions
from .local import SourceLike, local_paths
from .readable import check_types
from .remote import listing as remote
from .remote import store as storemod
from .remote.fsclient import check_options
from .remote.shard_cache import ShardCache
from .shard import Shard, check_column_names, read_footer, reference_schema

__all__ = ["Source", "source_text"]



class Source:
    """The resolved shards of a dataset with their footers, offsets and reference schema.

    Args:
        source: A file, directory, glob or list of files (see :func:`local_paths`); or an fsspec
            URL (``s3://bucket/prefix/``), glob URL or list of URLs (see ``core/remote.py``).
        columns: Columns to keep, or None for all.
        storage_options: Options of the fsspec filesystem of a remote source.
        cache_dir: The shard cache directory of a remote source (``core/shard_cache.py``).
        cache_limit: The shard cache's byte limit.
        retries: Retries of a failed store request.

    Raises:
        SourceError: If the source cannot be resolved or a shard cannot be read.
    """

    def __init__(
        self,
        source: SourceLike,
        columns: Sequence[str] | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        retries: int | None = None,
    ) -> None:
        # what names the dataset in reprs, logs and records: a URL without its secrets
        self.spec = source_text(source)
        self.store: Any = None  # a store.Store when the shards are in object storage
        if _remote_source(source):
            self.store = storemod.open_store(
                source,  # type: ignore[arg-type]
                storage_options,
                ShardCache(cache_dir, cache_limit),
                storemod.RETRIES if retries is None else retries,
            )
            self.shards: tuple[Shard, ...] = tuple(
                remote.open_shards(self.store, source)  # type: ignore[arg-type]
            )
        else:
            if _file_urls(source):  # read directly, but options given for file:// must be
                check_options("file", storage_options or {})  # its filesystem's, not misspelt
            self.shards = tuple(read_footer(p) for p in local_paths(source))
            self._protect()
        self.shards = _with_columns(self.shards, self.spec)
        self.schema = reference_schema(self.shards, columns)
        self.columns: tuple[str, ...] = tuple(self.schema.names)
        for shard in self.shards:
            duckdb_path(shard.path)  # refuse paths DuckDB cannot read before any query
        check_column_names(self.shards, self.columns)
        check_types(self.shards, self.columns)
        offsets = [0]
        for shard in self.shards:
            offsets.append(offsets[-1] + shard.rows)
        self.offsets: tuple[int, ...] = tuple(offsets)

    def _protect(self) -> None:
        """Keep spill files and caches of this process out of the dataset's directories."""
        homes = [os.path.dirname(s.path) for s in self.shards]
        if isinstance(self.spec, str) and os.path.isdir(self.spec):
            homes.append(self.spec)
        lifecycle.protect(homes)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.store is None:  # in a spawned worker too
            self._protect()

    @property
    def rows(self) -> int:
        """Total number of rows over all shards."""
        return self.offsets[-1]

    @property
    def paths(self) -> list[str]:
        """Shard paths in dataset order."""
        return [s.path for s in self.shards]

    def check_unchanged(self) -> None:
        """Check that no shard changed on disk since its footer was read.

        Raises:
            ShardChangedError: If a shard was deleted, replaced, truncated or extended.
        """
        if self.store is not None:  # one request per object: ask many at once
            self.store.check_all(self.shards)
            return
        for shard in self.shards:
            shard.check_unchanged()

    def connection(
        self,
        config: dict[str, Any] | None = None,
        setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> Connection:
        """Return a new lazily opened :class:`Connection` with the ``dataset`` view.

        For a remote source DuckDB reads the objects through the store's fsspec filesystem
        (range reads of the row groups a query needs), not through the shard cache.

        Args:
            config: DuckDB settings.
            setup: Called with the database once it is open (see :class:`Connection`).

        Returns:
            The connection holder (nothing is opened until first use).
        """
        fs = None if self.store is None else self.store.filesystem
        return Connection(
            self.paths, self.columns, config, setup, filesystem=fs, convert=self.converted
        )

    def converted(self, cursor: duckdb.DuckDBPyConnection) -> dict[int, str]:
        """The select list of each shard whose columns drift, converting them (by shard index).

        See :func:`convert.conversions`: a drifting column is converted to the dataset's
        type, and a value the cast would change stops the query with the shard's
        :class:`SourceError`, as the plain dataset's rows do.

        Args:
            cursor: A DuckDB cursor that can read the shards.

        Returns:
            ``{shard index: select list}``; empty without drift.
        """
        return dict(conversions(cursor, self.shards, self.schema).lists)


def _with_columns(shards: tuple[Shard, ...], spec: str) -> tuple[Shard, ...]:
    """The shards but those without columns and rows (pyarrow writes one for ``pa.table({})``).

    Such a file holds nothing, and DuckDB refuses to read it ("Need at least one non-root
    column"), which broke every query over the dataset.

    Args:
        shards: The dataset's shards.
        spec: The source, as errors name it.

    Returns:
        The shards that have columns, in order.

    Raises:
        UnsupportedShardError: If a shard without columns records rows (no reader here can
            serve them).
        SourceError: If no shard has columns.
    """
    for shard in shards:
        if not shard.schema.names and shard.rows:
            raise UnsupportedShardError(
                f"shard {shard.path} has no columns, but its footer records {shard.rows} "
                "rows, which DuckDB cannot read; remove the file or rewrite it with its "
                "columns",
                shard.path,
            )
    kept = tuple(s for s in shards if s.schema.names)
    if shards and not kept:
        which = (f"shard {shards[0].path} has" if len(shards) == 1
                 else f"none of the {len(shards)} shards of {spec} has")
        raise SourceError(
            f"{which} no columns (pyarrow writes such a file for a table without columns): "
            "there is nothing to read; write the data with its columns",
            shards[0].path,
        )
    return kept


def _remote_source(source: object) -> bool:
    """Whether a source is a URL or list of URLs (``core/remote.py`` reads those)."""
    return storemod.is_remote(source)


def source_text(source: SourceLike) -> str:
    """How reprs, logs, reports and descriptions name a source, without a URL's secrets.

    A path or URL as given; a list of shards as its files, or its first file and their
    count when there are more than three.

    Args:
        source: A source as ``ParquetDataset`` takes it.

    Returns:
        The text.
    """
    return redact_url(source if isinstance(source, str) else _describe(source))


def _describe(source: object) -> str:
    if isinstance(source, os.PathLike):
        return str(os.fspath(source))
    try:
        items = [str(os.fspath(s)) for s in source]  # type: ignore[attr-defined]
    except TypeError:
        return repr(source)
    if len(items) <= 3:
        return ", ".join(items)
    return f"{items[0]}, ... ({len(items)} files)"


def _file_urls(source: object) -> bool:
    """Whether a local source names its files as ``file://`` URLs."""
    items = [source] if isinstance(source, str) else source if isinstance(source, list | tuple) \
        else []
    return any(isinstance(s, str) and s[:7].lower() == "file://" for s in items)
