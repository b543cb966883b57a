"""Dead letters: the rows of a batch that cannot be written, in an Iceberg table of their own.

The dead-letter table (``<table>__dlq`` unless ``dead-letter.table`` says otherwise) is created
on first use, partitioned by day of ``failed_at``. A row's reason is a code
(:class:`~icesink.normalize.BadRecordReason`); a routed row's adds why after a colon, so that
``split_part(reason, ':', 1)`` groups by code.

The table is a table batch of a fixed schema, with its own ledger, committed *before* the
batch's data: if the process dies between the two commits, Spark replays the batch; the main
table does not have it, so it is written again, but the dead-letter ledger has it, so its dead
letters are not. Exactly once on both sides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from icesink import catalog as catalogs
from icesink import failpoints
from icesink.batch.commits import AppendCommits, Written
from icesink.batch.states import TableStates
from icesink.batch.table_batch import TableBatch
from icesink.batch.write_job import write_failures
from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.commit.committer import Committer
from icesink.config import SinkConfig
from icesink.config_route import default_dead_letter_table, route_label
from icesink.errors import ConfigError, SchemaError, WriteError
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.normalize import BadRecordReason
from icesink.route.routed import RoutedBatch
from icesink.route.router import BucketRouter
from icesink.type_mapping import iceberg_to_spark_type
from icesink.write.messages import RowCounts
from icesink.write.task import run_write

if TYPE_CHECKING:
    from icesink.batch.key import BatchKey

logger = batch_logger(__name__)

DEAD_LETTER_SUFFIX = "__dlq"
DEAD_LETTER_SCHEMA = Schema(
    NestedField(1, "source_table", StringType(), required=True),
    NestedField(2, "sink_id", StringType(), required=True),
    NestedField(3, "batch_id", LongType(), required=True),
    NestedField(4, "column", StringType(), required=False, doc="first column that could not be converted"),
    NestedField(5, "reason", StringType(), required=True, doc="parse_error, out_of_range, ..."),
    NestedField(6, "value", StringType(), required=False, doc="the offending value as text (truncated)"),
    NestedField(7, "original_row", StringType(), required=False, doc="the whole input row as JSON"),
    NestedField(8, "failed_at", TimestamptzType(), required=True),
)
DEAD_LETTER_SPEC = PartitionSpec(PartitionField(8, 1000, DayTransform(), "failed_at_day"))


def dead_letter_table_name(config: SinkConfig) -> str:
    """The dead-letter table of ``config``: ``dead-letter.table``, else ``<table>__dlq``.

    A routed sink without ``table``: ``<namespace>.routed__dlq`` (see :func:`default_dead_letter_table`).
    """
    if config.dead_letter.table:
        return config.dead_letter.table
    if not config.table:
        return default_dead_letter_table(config.route)
    return f"{config.table}{DEAD_LETTER_SUFFIX}"


@dataclass(frozen=True)
class DeadLetterOutcome:
    """What :meth:`DeadLetterQueue.deliver` did: the rows it committed, as snapshot ``snapshot_id``;
    or ``skipped_replay``: the batch's dead letters were committed already."""

    rows: int = 0
    skipped_replay: bool = False
    snapshot_id: int | None = None


class DeadLetterQueue:
    """Writes the bad rows of batches to the dead-letter table, exactly once per batch.

    Args:
        config: The sink's configuration.
        catalog: The sink's catalog.
        metrics: Where to count dead-lettered rows.
        states: The sink's table states (the dead-letter table's attempts recovered once).

    Raises:
        ConfigError: The dead-letter table is the sink's own table.
    """

    def __init__(
        self, config: SinkConfig, catalog: Catalog, metrics: SinkMetrics, states: TableStates | None = None
    ) -> None:
        self.table_name = dead_letter_table_name(config)
        if not config.table:  # a routed sink: its rows' tables come with them (column source_table)
            config = config.model_copy(update={"table": route_label(config.route)})
        if self.table_name.lower() == config.table.lower():
            raise ConfigError(
                f"dead-letter.table {self.table_name!r} is the sink's own table",
                hint=f"leave dead-letter.table unset ({config.table}{DEAD_LETTER_SUFFIX}) or name another",
            )
        self._config = config
        self._catalog = catalog
        self._metrics = metrics
        self._states = states or TableStates(metrics)
        self._commits = AppendCommits(metrics)

    def deliver(
        self, dead_letters: Callable[[], DataFrame], key: BatchKey, rows_written: int, counts: RowCounts
    ) -> DeadLetterOutcome:
        """Commit a batch's dead letters: after its good rows were written, before they commit.

        Args:
            dead_letters: Builds the batch's bad rows; called only when ``counts`` has some.
            key: The batch attempt (its sink id is the dead-letter table's ledger key).
            rows_written: Good rows the write wrote: with the dead letters, every input row.
            counts: The batch's rows and bad rows, as the write counted them.

        Raises:
            WriteError: Rows are unaccounted for, or writing the dead letters failed.
            CommitError, CommitConflictError: As for data commits.
        """
        if rows_written != counts.good_rows:
            raise WriteError(
                f"{counts.input_rows} input rows, {counts.bad_rows} bad, but {rows_written} written",
                table=self._config.table,
                batch_id=key.batch_id,
                hint="the plan of the batch ran differently from how it was counted; please report this",
            )
        bad_rows = counts.bad_rows
        if bad_rows == 0:
            return DeadLetterOutcome()
        failpoints.hit("deadletter")
        table = catalogs.load_or_create(
            self._catalog, self.table_name, DEAD_LETTER_SCHEMA, DEAD_LETTER_SPEC, CREATED_TABLE_PROPERTIES
        )
        batch = TableBatch.of(self._states, self.table_name, self._config, table, key)
        if batch.has_batch():
            logger.info(
                "dead letters of batch %s of sink %s already in %s: not written again",
                key.batch_id,
                key.sink_id,
                self.table_name,
            )
            return DeadLetterOutcome(skipped_replay=True)
        return self._write_and_commit(dead_letters, batch, bad_rows)

    def _write_and_commit(
        self, dead_letters: Callable[[], DataFrame], batch: TableBatch, bad_rows: int
    ) -> DeadLetterOutcome:
        observation = Observation()
        key = batch.key
        rows = self._frame(dead_letters(), batch.table, key, observation)
        spec = batch.begin(rows.task_options())
        with write_failures(rows.df, self.table_name, key.batch_id, spec.file_prefix, "dead-letter write"):
            files = run_write(rows.df, spec, in_driver=rows.in_driver).files
        written = sum(f.record_count for f in files)
        if written != bad_rows:
            Committer(batch.table, key.sink_id, self._config.commit).delete_files(files)
            batch.end()
            raise WriteError(
                f"{written} dead letters written where {bad_rows} rows were found bad",
                table=self.table_name,
                batch_id=key.batch_id,
                hint="the batch's input changed between two runs of its plan (a non-deterministic source?)",
            )
        outcome = self._commits.commit_one(Written(batch, files), record=False)
        if outcome is None or outcome.skipped_replay:
            return DeadLetterOutcome(skipped_replay=True)
        self._count(key.sink_id, written, observation)
        logger.warning(
            "batch %s of sink %s: %s rows could not be written to %s; committed to %s as snapshot %s",
            key.batch_id,
            key.sink_id,
            written,
            self._config.table,
            self.table_name,
            outcome.snapshot_id,
        )
        return DeadLetterOutcome(written, snapshot_id=outcome.snapshot_id)

    def _frame(
        self, dead_letters: DataFrame, table: Table, key: BatchKey, observation: Observation
    ) -> RoutedBatch:
        values = {
            "source_table": F.col("source_table")
            if "source_table" in dead_letters.columns
            else F.lit(self._config.table),
            "sink_id": F.lit(key.sink_id),
            "batch_id": F.lit(key.batch_id),
            "column": F.col("column"),
            "reason": F.col("reason"),
            "value": F.col("value"),
            "original_row": F.col("original_row"),
            "failed_at": F.lit(dt.datetime.now(dt.UTC)),
        }
        # A plain projection, not normalize(): a second layer of filters over the first makes
        # Spark's constraint propagation blow up (minutes, or out of memory, at planning).
        columns = []
        for field in table.schema().fields:
            value = values.pop(field.name, None)
            if value is None and field.required:
                raise SchemaError(
                    f"dead-letter table {self.table_name} has a required column {field.name!r} the sink "
                    "does not fill",
                    table=self.table_name,
                    hint="drop the table (the sink creates it) or make the column optional",
                )
            spark_type = iceberg_to_spark_type(field.field_type)
            columns.append((F.lit(None) if value is None else value).cast(spark_type).alias(field.name))
        if values:
            raise SchemaError(
                f"dead-letter table {self.table_name} lacks columns {sorted(values)}",
                table=self.table_name,
                hint="drop the table (the sink creates it with every column) or add the columns",
            )
        code = F.substring_index(F.col("reason"), ":", 1)  # a routed row's reason says why after its code
        metrics = [F.count_if(code == r.value).alias(r.value) for r in BadRecordReason]
        aligned = dead_letters.select(*columns).observe(observation, *metrics)
        return BucketRouter(table.spec(), table.schema(), None).route(aligned)

    def _count(self, sink_id: str, rows: int, observation: Observation) -> None:
        name = self._config.table
        self._metrics.dead_letter_rows.labels(name, sink_id).inc(rows)
        try:
            by_reason = observation.get
        except Exception:  # the counts are for metrics only: never fail a committed batch for them
            logger.warning("dead letters of %s were not counted by reason", name, exc_info=True)
            return
        for reason, n in by_reason.items():
            if n:
                self._metrics.dead_letter_reasons.labels(name, reason).inc(n)
