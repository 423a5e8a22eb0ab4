"""``ParquetDataset``: the loading core's dataset plus schema validation (the public class)."""

from __future__ import annotations

import inspect
import os
from typing import Any

from pydantic import BaseModel

from .common.keywords import guard
from .common.progress import progress_bar
from .core.dataset import ShardDataset
from .core.runtime import threads_of
from .errors import ArgumentError, SchemaError
from .validation import runner, verdicts
from .validation.model import ValidationReport
from .validation.relation import view_rows


class ParquetDataset(ShardDataset):
    """A Parquet-backed dataset with random access, a memory budget and schema validation.

    Everything about reading (arguments, formats, windows, ``sql``) is documented on
    :class:`undertale_duck.core.dataset.ShardDataset`; this class adds :meth:`report` and
    :meth:`validate`, as in undertale's original dataset module. The split keeps the loading
    core free of any dependency on validation.
    """

    def __init__(
        self, source: Any, *args: Any, schema: type[BaseModel] | None = None, **kwargs: Any
    ) -> None:
        """Open the dataset (see ``ShardDataset``), validating it first when given a schema.

        With ``schema=`` (as undertale's training scripts call it) the dataset is checked on
        open as :func:`undertale_duck.validation.verdicts.validate` does: a passing verdict
        recorded for the same schema and shards is reused, so reopening costs no scan. Each
        process decides on its own, with no collective call, so under DDP a rank that opens
        a dataset alone never waits for the others. DataLoader workers receive the open
        dataset and never validate again.

        Raises:
            SchemaError: If the dataset does not conform to ``schema`` (it is closed).
            ArgumentError: If ``source`` is an open dataset, or ``schema`` no model class.
        """
        _check_source(source)
        super().__init__(source, *args, **kwargs)
        if schema is not None:
            try:
                verdicts.validate(self, schema)
            except BaseException:
                self.close()
                raise

    def report(self, schema: type[BaseModel]) -> ValidationReport:
        """Check every shard against a schema and return the report (never raises for data).

        For a view (``query=``/``where=``) the schema describes the view's rows, computed
        columns and side-table columns included; examples carry the index in the view.

        A progress bar is drawn on stderr while the checks run, only when stderr is a
        terminal (never in a pipe, a file or a CI log).

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.

        Returns:
            A ``ValidationReport``: one ``CheckResult`` per check, with counts and examples.

        Raises:
            ArgumentError: If ``schema`` is not a pydantic model class.
        """
        with progress_bar("validating", unit=" queries") as progress:
            return runner.run(
                schema,
                self.source.shards,
                self.reader.connection.cursor(),
                source=str(self.source.spec),
                progress=progress,
                relation=None if self.view is None else view_rows(self.view, self.source.columns),
                memory_bytes=self.memory_bytes,
                threads=threads_of(self.duckdb_config.get("threads")),
            )

    def validate(self, schema: type[BaseModel]) -> None:
        """Validate every shard of this dataset against a schema.

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.

        Raises:
            SchemaError: If any check fails; the message lists the failed checks with their
                counts and ``.report`` holds the full ``ValidationReport``.
            ArgumentError: If ``schema`` is not a pydantic model class.
        """
        result = self.report(schema)
        if not result.passed:
            raise SchemaError(f"dataset does not conform: {result.summary()}", report=result)


def _check_source(source: Any) -> None:
    """Refuse, in one line, an open dataset (a ``Mixture``, a ``ParquetDataset``) as a source."""
    if isinstance(source, str | bytes | os.PathLike | list | tuple):
        return
    if hasattr(source, "__getitem__") and hasattr(source, "__len__"):
        raise ArgumentError(
            f"ParquetDataset's source must be a path, URL, glob or list of them, not an open "
            f"{type(source).__name__}: pass that dataset to load(), DataModule or "
            "ChunkedSampler directly"
        )


def _signature() -> inspect.Signature:
    """``ShardDataset.__init__``'s parameters plus ``schema``, for help() and ``Mixture``."""
    base = inspect.signature(ShardDataset.__init__)
    schema = inspect.Parameter("schema", inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation="type[BaseModel] | None")
    return base.replace(parameters=[*base.parameters.values(), schema])


ParquetDataset.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
# num_workers=, batch_size= ... get one line naming the fix, not Python's TypeError
ParquetDataset.__init__ = guard("ParquetDataset()")(  # type: ignore[method-assign]
    ParquetDataset.__init__
)
