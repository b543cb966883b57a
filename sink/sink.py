"""The ``foreachBatch`` sink: one micro-batch, step by step.

1. normalize  - align the batch to the table's schema      (:mod:`sink.normalize`)
2. schema     - create the table on first use               (:mod:`sink.catalog`)
3. route      - partition values, shuffle to write tasks    (:mod:`sink.route.router`)
4. write      - executors write Parquet data files          (:mod:`sink.write.task`)
5. stage      - collect the file messages on the driver     (:mod:`sink.write.messages`)
6. commit     - one atomic snapshot, exactly once           (:mod:`sink.commit.committer`)
7. metrics    - every step is counted and timed             (:mod:`sink.metrics`)
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import types as st

from sink import catalog as catalogs
from sink.commit import ledger
from sink.commit.committer import Committer
from sink.commit.ledger import BatchRange
from sink.commit.recovery import AttemptLog, AttemptRecord
from sink.config import SinkConfig
from sink.errors import ConfigError, SchemaError, WriteError, find_error_code
from sink.metrics import SinkMetrics
from sink.normalize import align_to_table
from sink.route.router import BucketRouter
from sink.write.messages import MESSAGE_DDL, DataFileMessage
from sink.write.task import WriteSpec, write_function

logger = logging.getLogger(__name__)

_QUERY_ID_PROPERTY = "sql.streaming.queryId"


class IcebergSink:
    """Writes each micro-batch of a streaming query to an Iceberg table, exactly once.

    Use as ``df.writeStream.foreachBatch(IcebergSink(config)).start()``. One instance may
    serve several streaming queries at once (each calls it from its own thread); each
    query gets its own sink id, so their replay checks stay apart.

    Args:
        config: The validated configuration.
        metrics: Where to record metrics (a private registry by default).

    Raises:
        CatalogError: The catalog cannot be loaded (checked at construction).
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or SinkMetrics(target_file_size_bytes=config.write.target_file_size_bytes)
        self.catalog: Catalog = catalogs.open_catalog(config)
        self._lock = threading.Lock()
        self._recovered: set[str] = set()

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metrics: SinkMetrics | None = None) -> IcebergSink:
        """Build a sink from Spark-style string options (see :class:`~sink.config.SinkConfig`)."""
        return cls(SinkConfig.from_options(options), metrics)

    def prepare(self, schema: st.StructType) -> Table:
        """Check the stream's schema against the table (creating it if missing) before the stream starts.

        Raises:
            PartitionSpecError: ``partition-by`` names a missing column or an impossible transform.
            SchemaError: The stream has a column the table cannot take.
        """
        table = catalogs.load_table(self.catalog, self.config.table)
        if table is None:
            table = catalogs.create_table(self.catalog, self.config, schema)
        empty = _empty_frame_like(schema)
        if empty is not None:
            align_to_table(empty, table.schema(), self.config.table)
        return table

    @property
    def table_name(self) -> str:
        return self.config.table

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Write one micro-batch (the ``foreachBatch`` function)."""
        sink_id = self._sink_id(batch_df)
        name = self.config.table
        table = catalogs.load_table(self.catalog, name)
        if table is None:
            with self.metrics.time_step(name, "schema"):
                table = catalogs.create_table(self.catalog, self.config, batch_df.schema)
        if ledger.is_committed(table, sink_id, batch_id):
            logger.info("batch %s of sink %s already committed to %s: skipped", batch_id, sink_id, name)
            self.metrics.replays_skipped.labels(name, sink_id).inc()
            self.metrics.batches.labels(name, sink_id, "replay_skipped").inc()
            self._recover(table, sink_id)
            return
        self._recover(table, sink_id)

        # 1. normalize
        with self.metrics.time_step(name, "normalize"):
            aligned = align_to_table(batch_df, table.schema(), name)
        # 3. route
        with self.metrics.time_step(name, "route"):
            router = BucketRouter(table.spec(), table.schema(), self.config.write.distribution_mode)
            routed = router.route(aligned)
        # 4. write + 5. stage
        attempt = uuid.uuid4().hex[:16]
        spec = self._write_spec(table, sink_id, batch_id, attempt, routed.num_data_columns)
        attempts = AttemptLog(table.io, table.location(), sink_id)
        attempts.begin(AttemptRecord(sink_id, batch_id, attempt, spec.file_prefix, spec.data_location))
        with self.metrics.time_step(name, "write"):
            files = self._run_write(routed.df, spec, batch_id)
        self.metrics.record_files(name, files)
        if not files:
            attempts.end(batch_id, attempt)
            logger.info("batch %s of sink %s is empty: nothing to commit to %s", batch_id, sink_id, name)
            self.metrics.batches.labels(name, sink_id, "empty").inc()
            return
        # 6. commit
        committer = Committer(table, sink_id, self.config.commit)
        with self.metrics.time_step(name, "commit"):
            try:
                outcome = committer.commit(files, BatchRange(batch_id, batch_id), attempt)
            except Exception:
                self.metrics.commits.labels(name, sink_id, "failed").inc()
                raise
        if outcome.skipped_replay:
            committer.delete_files(files)
            attempts.end(batch_id, attempt)
            self.metrics.replays_skipped.labels(name, sink_id).inc()
            self.metrics.batches.labels(name, sink_id, "replay_skipped").inc()
            return
        attempts.end(batch_id, attempt)
        # 7. metrics
        self.metrics.record_commit(name, sink_id, batch_id, files, outcome.attempts, outcome.conflicts)
        self.metrics.batches.labels(name, sink_id, "committed").inc()
        logger.info(
            "batch %s of sink %s: %s rows in %s files committed to %s as snapshot %s (mode %s)",
            batch_id,
            sink_id,
            sum(f.record_count for f in files),
            len(files),
            name,
            outcome.snapshot_id,
            routed.mode.value,
        )

    def _sink_id(self, batch_df: DataFrame) -> str:
        if self.config.sink_id:
            return self.config.sink_id
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
        if not query_id:
            raise ConfigError(
                "no sink id: the sink was called outside a streaming query and 'sink-id' is not set",
                hint="set the 'sink-id' option (e.g. 'orders-ingest') when calling the sink directly",
            )
        return query_id

    def _recover(self, table: Table, sink_id: str) -> None:
        """Settle crashed attempts of ``sink_id``, once per process."""
        with self._lock:
            if sink_id in self._recovered:
                return
            self._recovered.add(sink_id)
        report = AttemptLog(table.io, table.location(), sink_id).recover(table)
        name = self.config.table
        if report.deleted_files:
            self.metrics.orphan_files.labels(name, "deleted").inc(len(report.deleted_files))
        if report.kept_files:
            self.metrics.orphan_files.labels(name, "kept").inc(len(report.kept_files))

    def _write_spec(
        self, table: Table, sink_id: str, batch_id: int, attempt: str, num_data_columns: int
    ) -> WriteSpec:
        properties = table.metadata.properties
        data_location = properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
        write = self.config.write
        return WriteSpec(
            table=self.config.table,
            schema=table.schema(),
            partition_spec=table.spec(),
            data_location=data_location,
            io_properties={**self.config.catalog.plain_properties(), **table.io.properties},
            table_properties=dict(properties),
            file_prefix=f"{_short(sink_id)}-b{batch_id}-{attempt}",
            target_file_size_bytes=int(
                self._setting(properties, "write.target-file-size-bytes", "target_file_size_bytes")
            ),
            row_group_size_bytes=write.row_group_size_bytes,
            memory_budget_bytes=write.memory_budget_bytes,
            compression=str(
                self._setting(properties, "write.parquet.compression-codec", "compression_codec")
            ),
            num_data_columns=num_data_columns,
        )

    def _setting(self, properties: Mapping[str, str], table_property: str, field: str) -> Any:
        """A write setting: the sink option when given, else the table property, else the default."""
        write = self.config.write
        if field in write.model_fields_set:
            return getattr(write, field)
        return properties.get(table_property, getattr(write, field))

    def _run_write(self, df: DataFrame, spec: WriteSpec, batch_id: int) -> list[DataFileMessage]:
        try:
            rows = df.mapInArrow(write_function(spec), MESSAGE_DDL).collect()
        except Exception as e:
            error = find_error_code(str(e))
            if error is SchemaError:
                raise
            raise WriteError(
                f"write job of batch {batch_id} failed: {_first_line(e)}",
                table=spec.table,
                batch_id=batch_id,
                file_prefix=spec.file_prefix,
            ) from e
        return [DataFileMessage.from_json(row[0]) for row in rows]


def _short(sink_id: str) -> str:
    return sink_id.replace("-", "")[:12]


def _first_line(error: BaseException) -> str:
    text = str(error)
    for line in text.splitlines():
        if "ICESINK-" in line:
            return line.strip()
    return text.splitlines()[0] if text else type(error).__name__


def _empty_frame_like(schema: st.StructType) -> DataFrame | None:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    return spark.createDataFrame([], schema) if spark is not None else None
