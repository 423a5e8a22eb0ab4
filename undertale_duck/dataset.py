"""``ParquetDataset``: the loading core's dataset plus schema validation (the public class)."""

from __future__ import annotations

import bisect
import hashlib
import inspect
import json
import os
from collections.abc import Mapping, MutableSequence, Sequence
from typing import Any, ClassVar, Self, cast

import pyarrow as pa
from pydantic import BaseModel

from .common.keywords import guard
from .common.progress import progress_bar
from .common.sizes import DEFAULT_MEMORY
from .core.dataset import (
    RowList,
    ShardDataset,
    check_expected_rows,
    check_positions,
    named_filter,
)
from .core.pack import Pack, PackedBlocks, check_pack
from .core.query import QuerySession, SqlFiles
from .core.read import CacheStats, DiskStats, WindowReader
from .core.rows import Format, Row, check_collection
from .core.runtime import TaskMap, nan_safe, threads_of
from .core.source import SourceLike, StorageStats
from .core.source import windows as win
from .core.views import SideTable, Split, check_split
from .errors import ArgumentError, ColumnError, SchemaError
from .validation import runner, verdicts
from .validation.executors import Executor
from .validation.model import ValidationReport
from .validation.relation import view_rows


def _without_self(signature: inspect.Signature) -> inspect.Signature:
    """A method's signature as its class is called: without ``self``."""
    return signature.replace(parameters=list(signature.parameters.values())[1:])


class ParquetDataset(ShardDataset):
    """A Parquet-backed dataset with random access, a memory budget and schema validation.

    Everything about reading (arguments, formats, windows, ``sql``) is documented on
    :class:`undertale_duck.core.dataset.ShardDataset`; this class adds :meth:`report` and
    :meth:`validate`, as in undertale's original dataset module (kept apart so that the
    loading core does not depend on validation), and two keyword options (see
    docs/packing.md):

    Args:
        pack: Serve fixed-length blocks of tokens cut from the concatenation of the rows'
            token lists instead of the rows: a :class:`~undertale_duck.Pack` (or a dict of
            its fields). The dataset is then a :class:`PackedDataset`.
        split: Keep one part of a train/validation split by a seeded hash of a key column:
            a :class:`~undertale_duck.Split`. The part is a view (and-ed with ``where=``).

    Raises:
        ArgumentError: If ``pack`` or ``split`` is malformed (naming the field), or
            ``split`` comes with ``query=``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """A :class:`PackedDataset` when ``pack=`` is given, else this class."""
        if cls is ParquetDataset and kwargs.get("pack") is not None:
            return cast(Self, super().__new__(PackedDataset))
        return super().__new__(cls)

    @guard("ParquetDataset()")  # num_workers=, batch_size= ...: one line naming the fix
    def __init__(
        self,
        source: SourceLike,
        memory: float | str = DEFAULT_MEMORY,
        *,
        columns: Sequence[str] | None = None,
        window_bytes: int | str | None = None,
        duckdb_config: Mapping[str, Any] | None = None,
        format: Format = "python",
        read_ahead: bool | int = True,
        query: str | None = None,
        where: str | None = None,
        tables: Mapping[str, SideTable] | None = None,
        sql_files: SqlFiles = "any",
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        retries: int | None = None,
        disk: float | str | None = None,
        disk_dir: str | os.PathLike[str] | None = None,
        index_executor: TaskMap | None = None,
        pack: Pack | Mapping[str, Any] | None = None,
        split: Split | None = None,
        schema: type[BaseModel] | None = None,
    ) -> None:
        """Open the dataset (see ``ShardDataset``), validating it first when given a schema.

        ``pack=`` serves fixed-length token blocks instead of rows (:class:`PackedDataset`,
        docs/packing.md); ``split=`` keeps one part of a hashed split (docs/packing.md).
        With ``schema=`` (as undertale's training scripts call it) the dataset is checked on
        open as :func:`undertale_duck.validation.verdicts.validate` does: a passing verdict
        recorded for the same schema and shards is reused, so reopening costs no scan. Each
        process decides on its own, with no collective call, so under DDP a rank that opens
        a dataset alone never waits for the others. DataLoader workers receive the open
        dataset and never validate again.

        Raises:
            SchemaError: If the dataset does not conform to ``schema`` (it is closed).
            SourceError: If ``source`` is not a path, glob or list of them (an open dataset).
            ArgumentError: If an argument is not valid.
        """
        if pack is not None:
            raise ArgumentError(f"pack= is served by ParquetDataset itself, not {type(self)}")
        checked = check_split(split)
        #: The user's own where= (errors name it, not the split's condition added to it).
        self._where_given = where
        if checked is not None:
            if query is not None:
                raise ArgumentError(
                    "split= works on a plain dataset or with where=; with query= put the "
                    "split's condition (Split.condition()) in the query's WHERE"
                )
            with named_filter(where):
                where = checked.where(where)
        #: The split part this dataset keeps, or None.
        self.split = checked
        super().__init__(
            source,
            memory,
            columns=columns,
            window_bytes=window_bytes,
            duckdb_config=duckdb_config,
            format=format,
            read_ahead=read_ahead,
            query=query,
            where=where,
            tables=tables,
            sql_files=sql_files,
            storage_options=storage_options,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            retries=retries,
            disk=disk,
            disk_dir=disk_dir,
            index_executor=index_executor,
        )
        if schema is not None:
            try:
                verdicts.validate(self, schema)
            except BaseException:
                self.close()
                raise

    # __new__ takes (*args, **kwargs), which inspect.signature (help(), IDEs) would show for
    # the class: show __init__'s parameters instead
    __signature__: ClassVar[inspect.Signature] = _without_self(inspect.signature(__init__))

    def _check_source(self) -> None:
        # the key before the split's condition is indexed: a missing one is named, not a
        # Binder Error of the view's query
        if self.split is not None:
            self.split.check_key(self.source.schema)

    def report(
        self,
        schema: type[BaseModel],
        *,
        executor: Executor | None = None,
        examples: int = runner.DEFAULT_EXAMPLES,
    ) -> ValidationReport:
        """Check every shard against a schema and return the report (never raises for data).

        For a view (``query=``/``where=``) the schema describes the view's rows, computed
        columns and side-table columns included; examples carry the index in the view.

        A progress bar is drawn on stderr while the checks run, only when stderr is a
        terminal (never in a pipe, a file or a CI log).

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.
            executor: Where the checks run: in this process (default),
                ``TorchDistributedExecutor()`` over the ranks of a ``torch.distributed``
                job, or ``RayExecutor(address)`` on a Ray cluster (docs/validation.md). The
                report is the same.
            examples: Offending rows kept per failed check.

        Returns:
            A ``ValidationReport``: one ``CheckResult`` per check, with counts and examples.

        Raises:
            ArgumentError: If ``schema`` is not a pydantic model class, or ``examples`` is
                not a whole number from 0.
        """
        # a database of its own, whose scans see NaN whatever the footers' statistics say
        # (nan_safe); the reader's keeps the optimizers its row-number filters need
        connection = self.reader.connection.sibling(nan_safe)
        try:
            with progress_bar("validating", unit=" queries") as progress:
                return runner.run(
                    schema,
                    self.source.shards,
                    connection.cursor(),
                    source=str(self.source.spec),
                    examples=examples,
                    progress=progress,
                    relation=(
                        None if self.view is None else view_rows(self.view, self.source.columns)
                    ),
                    memory_bytes=self.memory_bytes,
                    threads=threads_of(self.duckdb_config.get("threads")),
                    executor=executor,
                    config=nan_safe(self.duckdb_config),
                    storage_options=self._remote.get("storage_options"),
                )
        finally:
            connection.close()

    def validate(self, schema: type[BaseModel], *, executor: Executor | None = None) -> None:
        """Validate every shard of this dataset against a schema.

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.
            executor: Where the checks run (see :meth:`report`).

        Raises:
            SchemaError: If any check fails; the message lists the failed checks with their
                counts and ``.report`` holds the full ``ValidationReport``.
            ArgumentError: If ``schema`` is not a pydantic model class.
        """
        # report(schema) as before when no executor is named (a subclass may override it so)
        result = self.report(schema) if executor is None else self.report(
            schema, executor=executor)
        if not result.passed:
            raise SchemaError(f"dataset does not conform: {result.summary()}", report=result)


class PackedDataset(ParquetDataset):
    """Fixed-length blocks of tokens cut from a dataset's documents: ``ParquetDataset(pack=)``.

    Row ``k`` is block ``k`` of the concatenation of the documents' (the rows', or a view's
    rows') token lists in shard and row order; ``len`` is exact, from one indexing pass over
    the lengths kept in the cache directory. A block is read from the windows it spans,
    through the documents' window cache and memory budget. :attr:`windows` are runs of
    blocks (the blocks starting in each window of the documents), so ``ChunkedSampler``
    shuffles runs of blocks and the rows inside them. ``report``, ``validate`` and ``sql``
    are about the documents (:attr:`documents`). See docs/packing.md.

    Built by ``ParquetDataset(source, ..., pack=Pack(...))`` with the same arguments.
    """

    def __init__(
        self,
        source: SourceLike,
        memory: float | str = DEFAULT_MEMORY,
        *,
        pack: Pack | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        spec = check_pack(pack)
        split = options.get("split")
        chosen = options.get("columns") is None and options.get("query") is None and (
            options.get("where") is None
        )
        if chosen:  # read only the packed columns (and the split's key)
            keys = [split.key] if isinstance(split, Split) else []
            options["columns"] = [*spec.inputs, *(k for k in keys if k not in spec.inputs)]
        self.pack = spec
        try:
            #: The dataset whose rows are the documents packed.
            self.documents = ParquetDataset(source, memory, **options)
        except ColumnError as exc:
            if not chosen or not exc.missing:
                raise
            # the columns are the spec's, not a columns= the caller gave: name its field
            name = exc.missing[0]
            field = ("pack.column" if name == spec.column else
                     "pack.alongside" if name in spec.alongside else "split.key")
            raise ColumnError(
                f"{field}: {str(exc).removeprefix('columns: ')}", exc.path, exc.missing
            ) from None
        self._open_blocks()

    def _open_blocks(self) -> None:
        documents = self.documents
        self.blocks = PackedBlocks(documents, self.pack)
        for name in (
            "source", "memory", "memory_bytes", "format", "query", "view", "duckdb_config",
            "window_bytes", "read_ahead", "read_depth", "disk", "disk_dir", "sql_files",
            "split",
        ):
            setattr(self, name, getattr(documents, name))
        self.windows = self.blocks.runs  # type: ignore[assignment]
        self._run_starts = [run.offset for run in self.blocks.runs]

    # ------------------------------------------------------------------ rows are blocks
    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, index: int) -> Row:
        """Block ``index`` as ``{column: value}`` (see docs/packing.md for the columns).

        Raises:
            IndexError: If the index is out of range.
            TypeError: If the index is not an integer.
        """
        return self.blocks.block(index, self.format)

    def __getitems__(self, indices: Sequence[int]) -> MutableSequence[Row]:
        """Many blocks, each window they span read once (a ``RowBatch`` for numpy/torch)."""
        return self.blocks.blocks(indices, self.format)

    def documents_of(self, index: int) -> range:
        """The row indices in :attr:`documents` of the documents with a token in a block."""
        return self.blocks.documents_of(index)

    def document_rows(self, index: int) -> list[int]:
        """The row indices in :attr:`documents` of every document with a token in a block.

        In stream order, one per segment: entry ``i`` made ``segment_ids == i + 1``.
        """
        return self.blocks.document_rows(index)

    def locate(self, index: int) -> tuple[str, int]:
        """The shard and local row of the document holding a block's first token."""
        return self.documents.locate(self.documents_of(index).start)

    def locate_many(self, indices: Sequence[int]) -> list[tuple[str, int]]:
        """The shard and local row of the document holding each block's first token.

        :meth:`locate` of many blocks, in order (not the documents' row lookup, which would
        read block indices as rows).

        Raises:
            IndexError: If an index is out of range.
            TypeError: If an index is not an integer, or ``indices`` is no ordered
                collection (see :meth:`ShardDataset.locate_many`).
        """
        check_collection(indices, "locate_many")
        return self.documents.locate_many([self.documents_of(i).start for i in indices])

    def locate_documents(self, index: int) -> list[tuple[str, int]]:
        """The shard and local row of every document with a token in a block, in order.

        What ``batch_rows`` names under ``documents`` for a packed dataset.
        """
        return self.documents.locate_many(self.document_rows(index))

    def window_of(self, index: int) -> int:
        """The position in :attr:`windows` (runs of blocks) of the run holding a block."""
        return bisect.bisect_right(self._run_starts, win.normalize_index(index, len(self))) - 1

    def prefetch(
        self, windows: Sequence[int] | None, *, lazy: bool = False, rows: RowList | None = None
    ) -> None:
        """Read-ahead hint in runs of blocks: the documents' windows they span, in order.

        ``rows`` (the blocks batches will ask for) is checked and not used: a batch of blocks
        is cut from its documents when it is asked for.
        """
        if rows is not None:
            check_expected_rows(rows, len(self))
        if windows is None:
            self.documents.prefetch(None, lazy=lazy)
            return
        runs = check_positions(windows, len(self.windows), "run")
        self.documents.prefetch(self.blocks.source_windows(runs), lazy=lazy)

    # ------------------------------------------------------------------ about the blocks
    @property
    def columns(self) -> list[str]:
        """The columns of a block."""
        return self.pack.outputs

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of a block (every column a list of ``pack.length`` integers)."""
        types = [pa.from_numpy_dtype(d) for d in self.blocks.out_dtypes()]
        return pa.schema(
            [pa.field(n, pa.list_(t, self.pack.length)) for n, t in zip(
                self.columns, types, strict=True)]
        )

    @property
    def fingerprint(self) -> str:
        """A short stable hash of the documents' fingerprint and the packing spec."""
        payload = {"documents": self.documents.fingerprint, "pack": self.pack.key()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ the documents'
    @property
    def reader(self) -> WindowReader:
        """The documents' window reader."""
        return self.documents.reader

    @property
    def sql_session(self) -> QuerySession:
        """The documents' SQL database (``dataset`` and ``dataset_view`` are documents)."""
        return self.documents.sql_session

    @property
    def shards(self) -> list[str]:
        """Paths of the shards, in dataset order."""
        return self.documents.shards

    @property
    def cache_stats(self) -> CacheStats:
        """The documents' window cache counters."""
        return self.documents.cache_stats

    @property
    def disk_stats(self) -> DiskStats | None:
        """The documents' disk tier counters, or None."""
        return self.documents.disk_stats

    @property
    def storage_stats(self) -> StorageStats | None:
        """The documents' object storage counters, or None."""
        return self.documents.storage_stats

    def reader_settings(self) -> Any:
        """The documents' reader settings."""
        return self.documents.reader_settings()

    def report(
        self,
        schema: type[BaseModel],
        *,
        executor: Executor | None = None,
        examples: int = runner.DEFAULT_EXAMPLES,
    ) -> ValidationReport:
        """Check the documents against a schema (see :meth:`ParquetDataset.report`)."""
        return self.documents.report(schema, executor=executor, examples=examples)

    def refresh(self) -> None:
        """Reopen the documents as they are on disk now, and index the blocks again if needed."""
        self.documents.refresh()
        self._open_blocks()

    def close(self) -> None:
        """Close the documents' connection and empty their cache (reopened on next use)."""
        self.documents.close()

    def __repr__(self) -> str:
        return (
            f"PackedDataset({self.source.spec!r}, memory={self.memory}, blocks={len(self)}, "
            f"length={self.pack.length}, documents={len(self.documents)})"
        )
