"""Step 4 done by the source: a batch whose rows the source's own tasks write as they make them.

A source that makes its rows in Python (the Kafka job's decoding source) would hand them
to the JVM, and the write tasks would get them back. When the batch needs nothing from
Spark on the way (no shuffle, no partition-value column, no row that can be bad), the
source's tasks can write the files themselves (:mod:`sink.write.source_task`):

1. before the source runs, :func:`plan_source_write` decides that the table allows it
   and records the write's attempt (so a crash leaves files a restart can find, as for
   any write), and :meth:`SourceWrite.in_source_tasks` hands the plan to the tasks of
   the jobs that read the batch;
2. each task writes the rows it can give the table's exact type, and yields the rest as
   usual;
3. the sink gets the files' messages with the batch (:meth:`SourceWrite.record`); what
   the source did not write goes through the usual steps as the same attempt, and both
   are committed in one snapshot, exactly once.

Only a table whose columns are all optional qualifies (a null is never a bad row there),
with no shuffle (``write.distribution-mode=none``, or an unpartitioned table) and
partition values the tasks can compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from sink import failpoints
from sink.commit.recovery import AttemptLog
from sink.config import DistributionMode, SinkConfig
from sink.route.routed import resolve_mode
from sink.spark_session import local_property
from sink.type_mapping import all_optional, row_schema_of
from sink.write.keys import arrow_key_functions
from sink.write.messages import DataFileMessage, files_of
from sink.write.source_task import TASK_PROPERTY, SourceTable, SourceWritePlan
from sink.write.spec import WriteSpec

if TYPE_CHECKING:
    from sink.batch.table_batch import TableBatch

SOURCE_FILE_SUFFIX = "-s"  # after the attempt's file prefix: its write tasks' names stay apart


@dataclass(frozen=True)
class PlannedTable:
    """A table of a source write.

    Attributes:
        table: The table as loaded when the write was planned.
        attempts: The attempt log holding the write's attempt on it.
        spec: The attempt's write spec on it (the source's tasks name their files apart).
    """

    table: Table
    attempts: AttemptLog
    spec: WriteSpec


@dataclass
class SourceWrite:
    """One batch's write by the source's tasks (see the module).

    Attributes:
        plan: What the tasks are told.
        batch_id: The micro-batch.
        attempt: The write's attempt id, on every table of the plan; the rows the source
            leaves go out as the same attempt.
        tables: The plan's tables by name, each with the attempt on record.
        files: The data files the source's tasks wrote (after :meth:`record`), each naming its table.
        remaining_rows: The batch's other rows, which reach the sink as its DataFrame.
    """

    plan: SourceWritePlan
    batch_id: int
    attempt: str
    tables: dict[str, PlannedTable]
    files: list[DataFileMessage] = field(default_factory=list)
    remaining_rows: int = 0

    @property
    def rows(self) -> int:
        """The rows in ``files``."""
        return sum(f.record_count for f in self.files)

    def files_of(self, table: str) -> list[DataFileMessage]:
        """The files the source's tasks wrote to ``table``."""
        return files_of(self.files, table)

    @contextmanager
    def in_source_tasks(self, spark: SparkSession) -> Iterator[None]:
        """Hand the plan to every task of the jobs run inside, from this thread.

        Keep it for as long as the batch's source may be read again (a cached block
        recomputed): a task makes the same choice with the same plan, so no row is
        written once by the source and again by the sink.
        """
        with local_property(spark, TASK_PROPERTY, self.plan.encode()):
            yield

    def record(self, messages: Iterable[str], remaining_rows: int) -> None:
        """The messages the source's tasks yielded, and the count of the rows they left."""
        self.files = [DataFileMessage.from_json(text) for text in messages]
        self.remaining_rows = remaining_rows

    def end(self, names: Iterable[str] | None = None) -> None:
        """Nothing of the attempt is left on these tables (default: all): forget it there."""
        for name in self.tables if names is None else names:
            self.tables[name].attempts.end(self.batch_id, self.attempt)


def plan_source_write(
    batches: Sequence[tuple[TableBatch, dict[str, Any]]],
    memory_budget_bytes: int,
    routes: Mapping[str, int] | None = None,
) -> SourceWrite:
    """The source's write of a batch to the tables of ``batches`` (each with its tasks' options),
    every attempt on record; ``routes``: a routed source's value -> index in ``batches``.

    Each table's crashed attempts must be settled first (its state recovered): a recovery
    after this would delete the files the source's tasks write.
    """
    tables, planned = [], {}
    for batch, task_options in batches:
        spec = batch.begin(task_options)
        tables.append(
            SourceTable(
                replace(spec, file_prefix=spec.file_prefix + SOURCE_FILE_SUFFIX), row_schema_of(batch.table)
            )
        )
        planned[batch.name] = PlannedTable(batch.table, batch.attempts, spec)
    key = batches[0][0].key
    plan = SourceWritePlan(tuple(tables), memory_budget_bytes, routes, failpoints.for_tasks())
    return SourceWrite(plan, key.batch_id, key.attempt, planned)


def source_task_options(table: Table, config: SinkConfig, routed: bool = False) -> dict[str, Any] | None:
    """The write tasks' options for ``table`` when a source's tasks can write it; else ``None``.

    Every column optional (a null is never a bad row there), and no shuffle (an
    unpartitioned table, or ``write.distribution-mode=none``, a routed sink's unless it asks
    for one) with partition values the tasks can compute.
    """
    spec, schema = table.spec(), table.schema()
    if not all_optional(row_schema_of(table)):
        return None
    if spec.fields:  # an unpartitioned table's rows are never shuffled, whatever the mode
        mode = (
            config.write.distribution_mode if routed else resolve_mode(config.write.distribution_mode, spec)
        )
        if mode in (DistributionMode.BUCKET, DistributionMode.HASH):  # a routed sink's unset mode: none
            return None
        if arrow_key_functions(spec, schema) is None:
            return None
    return {"num_data_columns": len(schema.fields), "partition_values_in_task": bool(spec.fields) or routed}
