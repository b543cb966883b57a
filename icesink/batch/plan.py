"""What the batch loop of :class:`~icesink.sink.IcebergSink` asks of a plan, for one table or many.

One loop writes every micro-batch, as Iceberg Kafka Connect writes one table or many through
``writerForTable`` and ``commitToTable``: the plan prepares the batch's table batches
(replays skipped), splits its changes, writes them, and :class:`~icesink.batch.finish.Finish`
commits what it wrote. The one-table plan (:mod:`icesink.batch.one_table`) is a plan with one
destination; the routed plan (:mod:`icesink.batch.routed`) finds its destinations in the batch.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar

from pyspark.sql import DataFrame

from icesink.batch.commits import WrittenBatch

if TYPE_CHECKING:
    from icesink.batch.arrow_source import ArrowSource
    from icesink.batch.changes import ChangeBatch
    from icesink.batch.key import BatchKey
    from icesink.batch.source_write import SourceWrite

Prepared = TypeVar("Prepared")


class BatchPlan(Protocol[Prepared]):
    """How one sink's micro-batches reach their tables (see the module).

    Attributes:
        label: What names the sink in its batches' log records.
    """

    label: str

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: a write of its rows by the source's own tasks, or ``None``."""
        ...

    def prepare(
        self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None
    ) -> AbstractContextManager[Prepared | None]:
        """Inside: the batch's table batches, loaded or created, recovered, the replays skipped
        (``None``: nothing left to write); the tables' locks held."""
        ...

    def changes(self, batch_df: DataFrame, prepared: Prepared) -> ChangeBatch:
        """Upsert mode: the last change per key of each upserted table; else the batch as it is."""
        ...

    def write(self, prepared: Prepared, changes: ChangeBatch) -> WrittenBatch:
        """Evolve, normalize, distribute and write the rows: what the commits take."""
        ...
