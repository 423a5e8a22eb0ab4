"""The per-process DuckDB database with the ``dataset`` view, and its per-thread cursors."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb

from . import duck, lifecycle, sqlfiles
from .duck import duckdb_path


class Connection:
    """A per-process in-memory DuckDB database with the ``dataset`` view and per-thread cursors.

    The database is opened lazily (by :func:`duck.connect`), closed before any ``fork()`` and
    at exit (:mod:`lifecycle`) and never pickled, so a dataset is safe to use from DataLoader
    workers under every start method.

    Args:
        files: Shard paths the ``dataset`` view covers.
        columns: Columns the view exposes.
        config: DuckDB settings applied when the database opens.
        setup: Called with the database once it is open (registers a view's side tables).
        filesystem: Returns this process's fsspec filesystem, through which DuckDB reads
            remote shard URLs (called when the database opens, so after a fork too).
        view: Whether to create the ``dataset`` view (a reader of cached copies needs none).
        convert: Given the open database, the select list of each shard (by its index in
            ``files``) whose columns DuckDB reads as other types than the first shard's,
            converting them (``core/source/convert.py``); the view then reads runs of
            shards read alike, in shard order. None: every shard as the first.
    """

    def __init__(
        self,
        files: Sequence[str],
        columns: Sequence[str],
        config: dict[str, Any] | None = None,
        setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
        *,
        filesystem: Callable[[], Any] | None = None,
        view: bool = True,
        convert: Callable[[duckdb.DuckDBPyConnection], Mapping[int, str]] | None = None,
    ) -> None:
        self._setup = setup
        self._convert = convert
        self._files = list(files)
        self._columns = list(columns)
        self._config = dict(config or {})
        self._filesystem = filesystem
        self._view = view
        self._lock = threading.Lock()
        self._db: duckdb.DuckDBPyConnection | None = None
        self._pid = -1
        self._local = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._generation = 0
        #: The error creating the ``dataset`` view when the database last opened, if any.
        self.view_error: duckdb.Error | None = None
        lifecycle.track_connection(self)

    def _open(self) -> duckdb.DuckDBPyConnection:
        db = duck.connect(self._config)
        if self._filesystem is not None:
            db.register_filesystem(self._filesystem())
        self.view_error = None
        if self._view:
            try:
                converted = {} if self._convert is None else self._convert(db)
                db.execute(sqlfiles.render("dataset_view", reads=self._reads(converted)))
            except duckdb.Error as exc:
                # The view binds the first shard's schema: a first shard DuckDB cannot open
                # must not stop window reads, which read each shard by itself. ds.sql
                # reports it.
                self.view_error = exc
        if self._setup is not None:  # a view's side tables, then its dataset_view
            try:
                self._setup(db)
            except duckdb.CatalogException:
                if self.view_error is None:
                    raise
                # dataset_view is defined over ``dataset``, which could not be created (its
                # first shard unreachable: a store down, though the shards are cached). Window
                # reads define their own ``dataset`` and need only the side tables, registered
                # before it; ds.sql reports view_error.
        return db

    def _reads(self, converted: Mapping[int, str]) -> str:
        """The ``dataset`` view's reads: runs of shards read alike, in shard order."""
        plain = sqlfiles.column_list(self._columns)
        runs: list[tuple[str, list[str]]] = []
        for k, path in enumerate(self._files):
            columns = converted.get(k, plain)
            if runs and columns == plain and runs[-1][0] == plain:
                runs[-1][1].append(path)
            else:
                runs.append((columns, [path]))
        if len(runs) <= 1:
            files = sqlfiles.literal_list(duckdb_path(f) for f in self._files)
            return sqlfiles.fragment("dataset_read", columns=plain, files=files)
        lead = "__undertale_duck_run"
        while lead.lower() in {c.lower() for c in self._columns}:
            lead += "_"
        reads = [
            sqlfiles.fragment(
                "dataset_read", columns=f"NULL AS {sqlfiles.quote_identifier(lead)}, {columns}",
                files=sqlfiles.literal_list(duckdb_path(f) for f in files),
            )
            for columns, files in runs
        ]
        # one SELECT per run: DuckDB's UNION ALL keeps its inputs' order (insertion order)
        return sqlfiles.fragment("dataset_runs", columns=plain, runs=" UNION ALL ".join(reads))

    def sibling(self, settings: Callable[[dict[str, Any]], dict[str, Any]]) -> Connection:
        """A new connection over the same shards, view and side tables, with other settings.

        Args:
            settings: Given this connection's DuckDB settings, returns the new one's.

        Returns:
            The connection (opened on first use); the caller closes it.
        """
        return Connection(
            self._files, self._columns, settings(dict(self._config)), self._setup,
            filesystem=self._filesystem, view=self._view, convert=self._convert,
        )

    @property
    def generation(self) -> int:
        """Changes whenever the database is opened or closed (a cursor of an older one is dead)."""
        return self._generation

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """Return this thread's cursor on the process's database, opening it if needed.

        Returns:
            A DuckDB connection object private to the calling thread.
        """
        pid = os.getpid()
        cur = getattr(self._local, "cursor", None)
        if cur is not None and self._local.generation == self._generation and self._pid == pid:
            return cur  # type: ignore[no-any-return]
        with self._lock:
            if self._db is None or self._pid != pid:
                self._db = None
                self._cursors = []
                self._db = self._open()
                self._pid = pid
                self._generation += 1
            cur = self._db.cursor()
            self._cursors.append(cur)
            self._local.cursor = cur
            self._local.generation = self._generation
            return cur

    def close(self) -> None:
        """Close the database and every cursor; the next :meth:`cursor` reopens it."""
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                for cur in self._cursors:
                    with contextlib.suppress(duckdb.Error):
                        cur.close()
                with contextlib.suppress(duckdb.Error):
                    self._db.close()
            self._db = None
            self._cursors = []
            self._generation += 1
