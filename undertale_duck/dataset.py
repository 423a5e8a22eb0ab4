"""``ParquetDataset``: the loading core's dataset plus schema validation (the public class)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from .core.dataset import ShardDataset
from .core.duck import threads_of
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

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.

        Returns:
            A ``ValidationReport``: one ``CheckResult`` per check, with counts and examples.

        Raises:
            ArgumentError: If ``schema`` is not a pydantic model class.
        """
        return runner.run(
            schema,
            self.source.shards,
            self.reader.connection.cursor(),
            source=str(self.source.spec),
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
    """Refuse, in one line, a source that is no path or list of paths (an open dataset...)."""
    if isinstance(source, str | bytes | os.PathLike | Sequence):
        return
    if hasattr(source, "__getitem__") and hasattr(source, "__len__"):
        raise ArgumentError(
            f"ParquetDataset's source must be a path, URL, glob or list of them, not an open "
            f"{type(source).__name__}: pass that dataset to load(), DataModule or "
            "ChunkedSampler directly"
        )
    if not isinstance(source, Iterable):
        hint = " (a Stream belongs in a Mixture)" if type(source).__name__ == "Stream" else ""
        raise ArgumentError(
            f"ParquetDataset's source must be a path, URL, glob or list of them, not "
            f"{type(source).__name__}{hint}"
        )


def _signature() -> inspect.Signature:
    """``ShardDataset.__init__``'s parameters plus ``schema``, for help() and ``Mixture``."""
    base = inspect.signature(ShardDataset.__init__)
    schema = inspect.Parameter("schema", inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation="type[BaseModel] | None")
    return base.replace(parameters=[*base.parameters.values(), schema])


ParquetDataset.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
