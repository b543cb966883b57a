"""The ``foreachBatch`` sink: one micro-batch, step by step.

1. normalize  - align the batch to the table's schema, bad  (:mod:`sink.normalize`,
                rows to the dead-letter table                 :mod:`sink.deadletter`)
2. schema     - create the table on first use, evolve it    (:mod:`sink.catalog`,
                for new columns and wider types first         :mod:`sink.schema.coordinator`)
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
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st
from pyspark.sql.streaming import StreamingQueryListener

from sink import catalog as catalogs
from sink.commit import ledger
from sink.commit.committer import Committer
from sink.commit.ledger import BatchRange
from sink.commit.policy import CommitPolicy
from sink.commit.recovery import AttemptLog, AttemptRecord, attempt_location
from sink.commit.staging import StagedBatch, StagingArea
from sink.commit.state import state_location
from sink.config import SchemaEvolution, SinkConfig
from sink.deadletter import DeadLetterQueue, dead_letter_table_name
from sink.errors import BadRecordError, ConfigError, SchemaError, WriteError, find_error_code
from sink.metrics import SinkMetrics
from sink.metrics_server import MetricsServer, export, is_exported
from sink.normalize import NormalizedBatch, NormalizeOptions, bad_record_error, normalize
from sink.progress import watch_active_session
from sink.route.router import BucketRouter, RoutedBatch
from sink.route.skew import RoutingHistory
from sink.schema.convert import iceberg_to_spark_schema
from sink.schema.coordinator import coordinator_for
from sink.write.messages import RowCounts, WriteResult
from sink.write.task import ArrowFunction, WriteSpec, run_write

logger = logging.getLogger(__name__)

_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_TARGET_FILE_SIZE = ("write.target-file-size-bytes", "target_file_size_bytes")


class IcebergSink:
    """Writes each micro-batch of a streaming query to an Iceberg table, exactly once.

    Use as ``df.writeStream.foreachBatch(IcebergSink(config)).start()``. One instance may
    serve several streaming queries at once (each calls it from its own thread); each
    query gets its own sink id, so their replay checks stay apart.

    Args:
        config: The validated configuration.
        metrics: Where to record metrics (a private registry by default). With
            ``metrics.port`` or ``metrics.pushgateway-url`` set, they are served or pushed,
            together with every other exporting sink of the process.

    Raises:
        CatalogError: The catalog cannot be loaded (checked at construction).
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or SinkMetrics(target_file_size_bytes=config.write.target_file_size_bytes)
        self.metrics_server: MetricsServer | None = export(self.metrics, config.metrics)
        self.catalog: Catalog = catalogs.open_catalog(config)
        state_location(config)  # where the sink's bookkeeping goes: checked at start-up
        self._policy = CommitPolicy(
            target_bytes=config.commit.target_bytes,
            interval_s=config.commit.interval_s,
            max_batches=config.commit.max_batches,
        )
        self._schemas = coordinator_for(config)  # shared by every sink of this table in the driver
        self._dead_letters = DeadLetterQueue(config, self.catalog, self.metrics)
        self._normalize_options = NormalizeOptions.from_config(config, dead_letter_table_name(config))
        self._lock = threading.Lock()
        self._states: dict[str, _SinkState] = {}
        self._listening: set[int] = set()

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metrics: SinkMetrics | None = None) -> IcebergSink:
        """Build a sink from Spark-style string options (see :class:`~sink.config.SinkConfig`)."""
        return cls(SinkConfig.from_options(options), metrics)

    def prepare(self, schema: st.StructType) -> Table:
        """Check the stream's schema against the table before the stream starts.

        The table is created if missing, and evolved for new columns and wider types
        (unless ``schema.evolution=off``).

        Raises:
            PartitionSpecError: ``partition-by`` names a missing column or an impossible transform.
            SchemaError: The stream has a column the table cannot take.
        """
        table = catalogs.load_table(self.catalog, self.config.table)
        if table is None:
            table = catalogs.create_table(self.catalog, self.config, schema)
        table = self._evolve(table, schema, sink_id=None, batch_id=None)
        empty = _empty_frame_like(schema)
        if empty is not None:
            normalize(empty, table.schema(), self._normalize_options)
        return table

    @property
    def table_name(self) -> str:
        return self.config.table

    def __call__(self, batch_df: DataFrame, batch_id: int, arrow_source: ArrowSource | None = None) -> None:
        """Write one micro-batch (the ``foreachBatch`` function).

        ``arrow_source``, from callers that made ``batch_df`` in Python, says how: the
        write may then run that Python function inside its own tasks (see :class:`ArrowSource`).
        """
        sink_id = self._sink_id(batch_df)
        name = self.config.table
        table = catalogs.load_table(self.catalog, name)
        if table is None:
            with self.metrics.time_step(name, "schema"):
                table = catalogs.create_table(self.catalog, self.config, batch_df.schema)
        state = self._state(table, sink_id, batch_df)
        self.metrics.begin_batch(name, sink_id, batch_id, state.query_id, table.metadata.current_snapshot_id)
        if is_exported(self.metrics):
            watch_active_session(self.metrics)  # progress metrics; once per session
        with state.lock:
            self._write_batch(batch_df, batch_id, table, state, arrow_source)

    def _write_batch(
        self,
        batch_df: DataFrame,
        batch_id: int,
        table: Table,
        state: _SinkState,
        arrow_source: ArrowSource | None = None,
    ) -> None:
        name, sink_id = self.config.table, state.sink_id
        if ledger.is_committed(table, sink_id, batch_id) or state.staging.contains(batch_id):
            logger.info("batch %s of sink %s already committed to %s: skipped", batch_id, sink_id, name)
            self.metrics.replays_skipped.labels(name, sink_id).inc()
            self.metrics.batches.labels(name, sink_id, "replay_skipped").inc()
            return

        # 1. normalize, after 2. schema: new columns and wider types are added to the table first
        with self.metrics.time_step(name, "schema"):
            table = self._evolve(table, batch_df.schema, sink_id, batch_id)
        with self.metrics.time_step(name, "normalize"):
            normalized = normalize(batch_df, table.schema(), self._normalize_options)
        # 3. route
        with self.metrics.time_step(name, "route"):
            target = int(self._setting(table.metadata.properties, *_TARGET_FILE_SIZE))
            router = BucketRouter.for_table(
                table,
                self.config.write.distribution_mode,
                state.routing,
                target,
                table_name=name,
                sink_id=sink_id,
                batch_id=batch_id,
            )
            routed = router.route(normalized.rows)  # the first bucketed batch runs the self-checks
        # 4. write
        attempt = uuid.uuid4().hex[:16]
        fusable = arrow_source is not None and _fusable(batch_df, table, normalized, routed, arrow_source)
        fused = arrow_source if fusable else None
        # A fused batch's rows are made in the task, with no flag: none of them can be bad.
        flagged = normalized.bad_row_flag and fused is None
        spec = self._write_spec(table, sink_id, batch_id, attempt, routed, flagged)
        attempts = AttemptLog.for_sink(self.config, table, sink_id)
        attempts.begin(AttemptRecord(sink_id, batch_id, attempt, spec.file_prefix, spec.data_location))
        with self.metrics.time_step(name, "write"):
            if fused is not None:
                logger.info(
                    "batch %s of sink %s: the write tasks make the rows themselves", batch_id, sink_id
                )
                result = self._run_write(fused.df, spec, batch_id, before=fused.function)
            else:
                result = self._run_write(routed.df, spec, batch_id, in_driver=routed.in_driver)
        files = result.files
        state.routing.record(files)  # sizes the next batch's shuffle
        self.metrics.record_files(name, files, spec.target_file_size_bytes)
        # 1b. dead letters: committed before the batch's data, so a replay cannot repeat them.
        # Rows as the write tasks received them; a fused batch's maker counted them before that.
        counts = result.counts if fused is None else RowCounts(fused.rows, 0)
        written = sum(f.record_count for f in files)
        self._dead_letters.deliver(lambda: normalized.dead_letters, sink_id, batch_id, written, counts)
        # 5. stage
        if files:
            batch = StagedBatch(batch_id, attempt, tuple(files), location=spec.data_location)
            if self._policy.stages:
                state.staging.stage(batch)  # durable before foreachBatch returns
                self.metrics.record_staged(name, sink_id, state.staging.files)
            else:
                state.staging.batches.append(batch)
        if self._policy.stages or not files:
            attempts.end(batch_id, attempt)  # the staged record now accounts for the files
        boundary = not files  # an empty batch: the source has caught up
        if not files:
            logger.info("batch %s of sink %s is empty: nothing to write to %s", batch_id, sink_id, name)
            self.metrics.batches.labels(name, sink_id, "empty").inc()
        # 6. commit
        if self._policy.due(state.staging) or (boundary and state.staging.batches):
            self._commit_staged(table, state, last_batch_id=batch_id)
            # Unstaged files stay under their attempt record until committed: if the
            # commit's outcome is unknown, the restarted sink settles them.
            attempts.end(batch_id, attempt)
        elif files:
            logger.info(
                "batch %s of sink %s staged (%s files, %s bytes staged in all) for %s",
                batch_id,
                sink_id,
                len(files),
                state.staging.size_bytes,
                name,
            )

    def _commit_staged(self, table: Table, state: _SinkState, last_batch_id: int | None = None) -> None:
        """Commit every staged batch of ``state`` in one snapshot."""
        name, sink_id, staged = self.config.table, state.sink_id, list(state.staging.batches)
        files = state.staging.files
        batches = BatchRange(staged[0].batch_id, max(staged[-1].batch_id, last_batch_id or -1))
        committer = Committer(table, sink_id, self.config.commit)
        with self.metrics.time_step(name, "commit"):
            try:
                outcome = committer.commit_batches(staged, batches, durable=self._policy.stages)
            except Exception:
                self.metrics.commits.labels(name, sink_id, "failed").inc()
                if not self._policy.stages:
                    state.staging.batches.clear()  # Spark replays the batch; nothing is staged durably
                raise
        if outcome.skipped_replay:
            self.metrics.replays_skipped.labels(name, sink_id).inc()
            self.metrics.batches.labels(name, sink_id, "replay_skipped").inc()
        else:
            # 7. metrics
            self.metrics.record_commit(
                name, sink_id, batches.last, files, outcome.attempts, outcome.conflicts
            )
            self.metrics.batches.labels(name, sink_id, "committed").inc(len(staged))
            logger.info(
                "batches %s of sink %s: %s rows in %s files committed to %s as snapshot %s",
                batches,
                sink_id,
                sum(f.record_count for f in files),
                len(files),
                name,
                outcome.snapshot_id,
            )
        state.staging.remove(staged)
        self.metrics.record_staged(name, sink_id, state.staging.files)

    def flush(self, query_id: str | None = None) -> None:
        """Commit whatever is staged (all sinks, or those of one streaming query).

        Called automatically when a query goes idle or stops; call it yourself after
        ``awaitTermination()`` of an ``availableNow`` query to make the last staged
        batches visible at once.
        """
        with self._lock:
            states = [s for s in self._states.values() if query_id is None or s.query_id == query_id]
        for state in states:
            with state.lock:
                if state.staging.batches:
                    table = self.catalog.load_table(self.config.table)
                    self._commit_staged(table, state)

    def _sink_id(self, batch_df: DataFrame) -> str:
        if self.config.sink_id:
            return self.config.sink_id
        query_id = _query_id(batch_df)
        if not query_id:
            raise ConfigError(
                "no sink id: the sink was called outside a streaming query and 'sink-id' is not set",
                hint="set the 'sink-id' option (e.g. 'orders-ingest') when calling the sink directly",
            )
        return query_id

    def _state(self, table: Table, sink_id: str, batch_df: DataFrame) -> _SinkState:
        """The state of ``sink_id``; on first use, settle what a crashed run left behind."""
        with self._lock:
            state = self._states.get(sink_id)
            if state is not None:
                return state
            staging = StagingArea.for_sink(self.config, table, sink_id)
            state = _SinkState(sink_id, _query_id(batch_df), staging)
            with state.lock:
                self._recover(table, state)
            self._states[sink_id] = state  # only once recovered: a failed recovery runs again
        if self._policy.stages:
            self._listen_for_idle()
        return state

    def _recover(self, table: Table, state: _SinkState) -> None:
        """Settle crashed attempts and reload staged batches (first use of a sink id in this process)."""
        name = self.config.table
        staged = state.staging.load()
        committed = [b for b in staged if ledger.is_committed(table, state.sink_id, b.batch_id)]
        state.staging.remove(committed)  # the crash came between commit and cleanup
        if state.staging.batches:
            logger.info(
                "sink %s resumes %s staged batches (%s..%s) for %s",
                state.sink_id,
                len(state.staging.batches),
                state.staging.batches[0].batch_id,
                state.staging.batches[-1].batch_id,
                name,
            )
        staged_attempts = frozenset(b.attempt for b in state.staging.batches)
        report = AttemptLog.for_sink(self.config, table, state.sink_id).recover(table, staged_attempts)
        if report.deleted_files:
            self.metrics.orphan_files.labels(name, "deleted").inc(len(report.deleted_files))
        if report.kept_files:
            self.metrics.orphan_files.labels(name, "kept").inc(len(report.kept_files))

    def _listen_for_idle(self) -> None:
        """Flush staged batches when a query goes idle or stops (once per session).

        Registered on the active session: the session handed to ``foreachBatch`` is a
        clone whose listeners never hear of any query.
        """
        spark = SparkSession.getActiveSession()
        if spark is None:
            return
        with self._lock:
            if id(spark) in self._listening:
                return
            self._listening.add(id(spark))
        spark.streams.addListener(_FlushOnIdle(self))

    def _evolve(
        self, table: Table, schema: st.StructType, sink_id: str | None, batch_id: int | None
    ) -> Table:
        """The table, its schema evolved to take ``schema`` (unless ``schema.evolution=off``)."""
        if self.config.table_schema.evolution is SchemaEvolution.OFF:
            return table
        outcome = self._schemas.evolve(
            table,
            schema,
            retry=self.config.commit,
            case_sensitive=self.config.table_schema.case_sensitive,
            metrics=self.metrics,
            sink_id=sink_id,
            batch_id=batch_id,
        )
        return outcome.table

    def _write_spec(
        self, table: Table, sink_id: str, batch_id: int, attempt: str, routed: RoutedBatch, bad_row_flag: bool
    ) -> WriteSpec:
        properties = table.metadata.properties
        data_location = properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
        write = self.config.write
        return WriteSpec(
            table=self.config.table,
            schema=table.schema(),
            partition_spec=table.spec(),
            data_location=attempt_location(data_location, f"{_short(sink_id)}-b{batch_id}-{attempt}"),
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
            bad_row_flag=bad_row_flag,
            **routed.task_options(),
        )

    def _setting(self, properties: Mapping[str, str], table_property: str, field: str) -> Any:
        """A write setting: the sink option when given, else the table property, else the default."""
        write = self.config.write
        if field in write.model_fields_set:
            return getattr(write, field)
        return properties.get(table_property, getattr(write, field))

    def _run_write(
        self,
        df: DataFrame,
        spec: WriteSpec,
        batch_id: int,
        *,
        in_driver: bool = False,
        before: ArrowFunction | None = None,
    ) -> WriteResult:
        try:
            return run_write(df, spec, in_driver=in_driver, before=before)
        except Exception as e:
            error = find_error_code(str(e))
            if error is SchemaError:
                raise
            bad_record = bad_record_error(str(e), spec.table, batch_id) if error is BadRecordError else None
            if bad_record is not None:
                raise bad_record from e
            raise WriteError(
                f"write job of batch {batch_id} failed: {_first_line(e)}",
                table=spec.table,
                batch_id=batch_id,
                file_prefix=spec.file_prefix,
            ) from e


@dataclass(frozen=True)
class ArrowSource:
    """How a batch was made in Python: ``df.mapInArrow(function, <the batch's schema>)``.

    Handing the rows from that function to the JVM and back to the write task costs two
    conversions of every row. When the batch needs nothing from Spark on the way (its
    schema is the table's, no row can be bad but in ``in_range_columns``, no partition-value
    column or shuffle is added: :func:`_fusable`), the write tasks run ``function`` on
    ``df``'s rows themselves.

    Attributes:
        df: The DataFrame ``function`` maps.
        function: The ``mapInArrow`` function that made the batch.
        rows: The batch's rows, as its maker counted them: the write must account for each.
        in_range_columns: Date and timestamp columns whose values the maker keeps within
            the range the sink writes (0001-01-01 to 9999-12-31), so Spark need not check them.
    """

    df: DataFrame
    function: ArrowFunction
    rows: int
    in_range_columns: frozenset[str] = frozenset()


def _fusable(
    batch_df: DataFrame, table: Table, normalized: NormalizedBatch, routed: RoutedBatch, source: ArrowSource
) -> bool:
    """Whether the batch can be made inside the write tasks (see :class:`ArrowSource`)."""
    if routed.in_driver or routed.df is not normalized.rows:
        return False  # the rows must go through Spark: shuffled or collected
    checks = normalized.range_checks
    if checks is None or not checks <= source.in_range_columns:
        return False  # Spark must find the bad rows
    table_fields = iceberg_to_spark_schema(table.schema()).fields
    batch_fields = batch_df.schema.fields
    return len(batch_fields) == len(table_fields) and all(
        b.name == t.name and b.dataType == t.dataType for b, t in zip(batch_fields, table_fields, strict=True)
    )


@dataclass
class _SinkState:
    """What the sink keeps per sink id: its staged batches, and a lock for its batches."""

    sink_id: str
    query_id: str | None
    staging: StagingArea
    lock: threading.RLock = field(default_factory=threading.RLock)
    routing: RoutingHistory = field(default_factory=RoutingHistory)


class _FlushOnIdle(StreamingQueryListener):
    """Commits a query's staged batches when it goes idle or terminates (a chunk boundary)."""

    def __init__(self, sink: IcebergSink) -> None:
        self._sink = sink

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        pass

    def onQueryIdle(self, event: Any) -> None:
        self._flush(str(event.id))

    def onQueryTerminated(self, event: Any) -> None:
        self._flush(str(event.id))

    def _flush(self, query_id: str) -> None:
        try:
            self._sink.flush(query_id)
        except Exception:  # a listener must not kill the listener bus; the next batch retries
            logger.exception("flushing staged batches of query %s failed", query_id)


def _query_id(batch_df: DataFrame) -> str | None:
    return batch_df.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)


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
