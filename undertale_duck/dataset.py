"""``ParquetDataset``: the loading core's dataset plus schema validation (the public class)."""

from __future__ import annotations

from pydantic import BaseModel

from .core.dataset import ShardDataset
from .core.runtime import threads_of
from .errors import SchemaError
from .validation import runner
from .validation.executors import Executor
from .validation.model import ValidationReport
from .validation.relation import view_rows


class ParquetDataset(ShardDataset):
    """A Parquet-backed dataset with random access, a memory budget and schema validation.

    Everything about reading (arguments, formats, windows, ``sql``) is documented on
    :class:`undertale_duck.core.dataset.ShardDataset`; this class adds :meth:`report` and
    :meth:`validate`, as in undertale's original dataset module. The split keeps the loading
    core free of any dependency on validation.
    """

    def report(
        self, schema: type[BaseModel], *, executor: Executor | None = None
    ) -> ValidationReport:
        """Check every shard against a schema and return the report (never raises for data).

        For a view (``query=``/``where=``) the schema describes the view's rows, computed
        columns and side-table columns included; examples carry the index in the view.

        Args:
            schema: A pydantic model class, e.g. ``undertale_duck.schema.TokenizedDataset``.
            executor: Where the checks run: in this process (default),
                ``TorchDistributedExecutor()`` over the ranks of a ``torch.distributed``
                job, or ``RayExecutor(address)`` on a Ray cluster (docs/validation.md). The
                report is the same.

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
            executor=executor,
            config=self.duckdb_config,
            storage_options=self._remote.get("storage_options"),
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
