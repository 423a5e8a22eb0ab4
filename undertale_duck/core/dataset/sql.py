"""Ad hoc SQL on the core dataset: ``sql``, ``sql_batches`` and the session behind them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import torch

from ..query import DEFAULT_BATCH_ROWS, Params, QuerySession, SqlFiles, memory_limit, result_limit
from ..runtime import worker_duckdb_config

if TYPE_CHECKING:
    from ..source import Source
    from ..views import IndexedView


class SqlAccess:
    """The SQL methods of :class:`~.dataset.ShardDataset` (see docs/sql.md).

    Ad hoc SQL runs in its own DuckDB database per process, apart from window reads. The
    attributes below are set by the dataset.
    """

    source: Source
    view: IndexedView | None
    duckdb_config: dict[str, Any]
    memory_bytes: int
    sql_files: SqlFiles
    _user_config: frozenset[str]
    _sql_session: QuerySession | None

    @property
    def sql_session(self) -> QuerySession:
        """This process's database for :meth:`sql` (apart from window reads), made on first use."""
        if self._sql_session is None:
            config = dict(self.duckdb_config)
            info = torch.utils.data.get_worker_info()
            if info is not None:  # a DataLoader worker: its share of the cores, as for reads
                tuned = worker_duckdb_config(info.num_workers)
                config.update({k: v for k, v in tuned.items() if k not in self._user_config})
            if "memory_limit" not in self._user_config:
                config["memory_limit"] = memory_limit(self.memory_bytes)
            self._sql_session = QuerySession(
                self.source,
                config,
                sql_files=self.sql_files,
                max_bytes=result_limit(self.memory_bytes),
                memory_bytes=self.memory_bytes,
                setup=None if self.view is None else self.view.setup,
                readable=[] if self.view is None else [s.path for s in self.view.sides if s.path],
                sides=[] if self.view is None else [
                    s.footer for s in self.view.sides if s.footer is not None
                ],
                side_values=[] if self.view is None else [
                    s.values for s in self.view.sides if s.values is not None
                ],
            )
        return self._sql_session

    def sql(
        self, query: str, params: Params = None, *, max_bytes: int | None = None
    ) -> pa.Table:
        """Run one read-only SQL statement in which ``dataset`` is the view over every shard.

        The whole result is collected, up to ``max_bytes``; :meth:`sql_batches` streams
        results of any size. See docs/sql.md for what may run.

        Args:
            query: SQL text, e.g. ``"SELECT label, count(*) FROM dataset GROUP BY label"``.
            params: Values for ``$name`` (mapping) or ``?`` (sequence) placeholders.
            max_bytes: The most bytes of result to collect; by default ``memory`` (at least
                64 MiB).

        Returns:
            The result as an Arrow table.

        Raises:
            ArgumentError: If ``query`` is not a string, ``params`` neither a mapping nor
                a list or tuple, or one of its values is not one DuckDB can bind.
            QueryError: If the SQL fails, holds more than one statement, or its result is
                larger than ``max_bytes``.
            ReadOnlyError: If the SQL would write or change state (``COPY``, ``ATTACH`` ...).
            SourceError: If a shard cannot be read (the subclass says why: encrypted,
                unsupported, out of range, corrupt) or its result cannot be handed to Arrow.
            ShardChangedError: If a shard changed on disk since the dataset was opened
                (checked before and after the query, so no answer mixes two versions).
        """
        return self.sql_session.table(query, params, max_bytes=max_bytes)

    def sql_batches(
        self,
        query: str,
        params: Params = None,
        *,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> pa.RecordBatchReader:
        """Run one read-only SQL statement and stream its result in record batches.

        DuckDB computes the result as it is read, so memory stays bounded whatever its size.
        Read it to the end, or drop the reader (``del reader``) or call ``close()`` to stop
        the query early: pyarrow's ``close()`` of a reader of Python batches does not reach
        the query.

        Args:
            query: SQL text in which ``dataset`` is the view over every shard.
            params: Values for ``$name`` (mapping) or ``?`` (sequence) placeholders.
            batch_rows: The most rows per batch.

        Returns:
            A ``pyarrow.RecordBatchReader``; errors while reading are :class:`QueryError`.

        Raises:
            ArgumentError: As :meth:`sql` (``query``, ``params``, also ``batch_rows``).
            QueryError: If the SQL fails to parse, bind or start.
            ReadOnlyError: If the SQL would write or change state.
            ShardChangedError: If a shard changed on disk (checked before, and after the
                last batch).
        """
        return self.sql_session.batches(query, params, batch_rows=batch_rows)
