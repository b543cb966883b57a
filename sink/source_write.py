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

import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from sink import catalog as catalogs
from sink import failpoints
from sink.commit import ledger
from sink.commit.recovery import AttemptLog, AttemptRecord
from sink.config import DistributionMode, SinkConfig
from sink.route.routed import resolve_mode
from sink.sink_state import SinkState, sink_id_of
from sink.spark_session import is_connect, local_property
from sink.type_mapping import iceberg_to_spark_schema
from sink.write.keys import arrow_key_functions
from sink.write.messages import DataFileMessage
from sink.write.source_task import TASK_PROPERTY, SourceTable, SourceWritePlan
from sink.write.spec import WriteSpec

SOURCE_FILE_SUFFIX = "-s"  # after the attempt's file prefix: its write tasks' names stay apart

SpecMaker = Callable[[Table, str, int, str, dict[str, Any]], WriteSpec]
"""The sink's write spec of an attempt (``BatchWriter.write_spec``)."""


@dataclass(frozen=True)
class PlannedTable:
    """A table of a source write.

    Attributes:
        table: The table as loaded when the write was planned.
        attempts: The attempt log holding the write's attempt on it.
    """

    table: Table
    attempts: AttemptLog


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
        return [f for f in self.files if f.table == table]

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
    config: SinkConfig,
    catalog: Catalog,
    batch_df: DataFrame,
    batch_id: int,
    state_of: Callable[[Table, str, DataFrame], SinkState],
    spec_of: SpecMaker,
) -> SourceWrite | None:
    """The source's write of the batch, its attempt recorded; ``None`` when the table does not allow one.

    ``state_of`` gives the sink's state of a sink id, recovered (as the batch's own call
    would); ``spec_of(table, sink id, batch id, attempt, task_options)`` the write spec of an
    attempt, as the sink's own write would have it.
    """
    if config.route.enabled or config.upsert.enabled or is_connect(batch_df.sparkSession):
        return None  # many tables (sink.routed_source); changes; no local properties under Connect
    table = catalogs.load_table(catalog, config.table)
    if table is None:
        return None  # its type comes from the batch
    task_options, row_schema = _task_options(table, config), row_schema_of(table)
    if task_options is None or not all_optional(row_schema):
        return None
    sink_id = sink_id_of(batch_df, config.sink_id)
    state = state_of(table, sink_id, batch_df)  # a crashed run's attempts settled first
    if ledger.is_committed(table, sink_id, batch_id) or state.staging.contains(batch_id):
        return None  # a replay: the sink skips it
    attempt = uuid.uuid4().hex[:16]
    source_table, planned = plan_table(
        config, table, row_schema, sink_id, batch_id, attempt, task_options, spec_of
    )
    plan = SourceWritePlan((source_table,), config.write.memory_budget_bytes, faults=failpoints.for_tasks())
    return SourceWrite(plan, batch_id, attempt, {config.table: planned})


def plan_table(
    config: SinkConfig,
    table: Table,
    row_schema: pa.Schema,
    sink_id: str,
    batch_id: int,
    attempt: str,
    task_options: dict[str, Any],
    spec_of: SpecMaker,
) -> tuple[SourceTable, PlannedTable]:
    """One table's part of a source write (``config`` is the table's), its attempt on record.

    The table's crashed attempts must be settled first: a recovery after this would
    delete the files the source's tasks write. ``row_schema`` is :func:`row_schema_of` the table.
    """
    spec = spec_of(table, sink_id, batch_id, attempt, task_options)
    attempts = AttemptLog.for_sink(config, table, sink_id)
    attempts.begin(AttemptRecord(sink_id, batch_id, attempt, spec.file_prefix, spec.data_location))
    tasks_spec = replace(spec, file_prefix=spec.file_prefix + SOURCE_FILE_SUFFIX)
    return SourceTable(tasks_spec, row_schema), PlannedTable(table, attempts)


def _task_options(table: Table, config: SinkConfig) -> dict[str, Any] | None:
    """The write tasks' routing options when no shuffle is needed; else ``None``."""
    spec, schema = table.spec(), table.schema()
    if spec.fields:  # an unpartitioned table's rows are never shuffled, whatever the mode
        if resolve_mode(config.write.distribution_mode, spec) is not DistributionMode.NONE:
            return None
        if arrow_key_functions(spec, schema) is None:
            return None
    return {"num_data_columns": len(schema.fields), "partition_values_in_task": bool(spec.fields)}


def row_schema_of(table: Table) -> pa.Schema:
    """The Arrow type of ``table``'s rows as Spark hands them to a write task."""
    return to_arrow_schema(iceberg_to_spark_schema(table.schema()), timezone="UTC")


def all_optional(row_schema: pa.Schema) -> bool:
    """Whether every column of a table's ``row_schema``, nested ones too, may be null (no row can be bad)."""
    return all(_optional(f) for f in row_schema)


def _optional(f: pa.Field) -> bool:
    """Whether ``f`` and everything nested in it may be null."""
    if not f.nullable:
        return False
    t = f.type
    if pa.types.is_struct(t):
        return all(_optional(t.field(i)) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _optional(t.item_field)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _optional(t.value_field)
    return True
