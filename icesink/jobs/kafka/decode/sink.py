"""A ``foreachBatch`` sink for raw Kafka micro-batches: decode the values, then write them.

::

    sink = IcebergSink.from_options({...})
    decoding = DecodingSink(sink, ValueDecoder(DecodeOptions(format=ValueFormat.JSON)))
    (spark.readStream.format("kafka")...load()
         .writeStream.foreachBatch(decoding).option("checkpointLocation", ck).start())

Per micro-batch:

0. plan (``write_in_source``): when the table allows it, the sink plans a write by the
   decoding tasks themselves (:class:`~icesink.sources.SourceWrite`), before they run;
1. decode (:class:`~icesink.jobs.kafka.decode.decoder.ValueDecoder`): typed rows, plus the values
   that could not be decoded;
2. dead letters (:class:`~icesink.jobs.kafka.decode.rejects.RejectedValues`): those values go to the
   sink's dead-letter table with their raw bytes, committed exactly once;
3. write: the rows go through the :class:`~icesink.IcebergSink`, whose schema
   evolution adds new fields as columns and widens types, exactly once. When the rows
   need nothing from Spark on their way to the files (see
   :class:`~icesink.sources.ArrowSource`), the write tasks decode them from the cache
   themselves, and the rows cross from Python to the JVM and back once fewer. With a
   plan, the decoding tasks wrote the rows they could give the table's type already;
   the sink writes the rest (rows with new fields or wider types, after evolving the
   table for them) and commits both at once.

A sink routing rows to many tables (``route.by``) gets the rows with their
``_kafka_topic`` column (the metadata columns, on by default) and creates each table
on first sight: nothing is prepared up front, and a batch without values writes nothing.
A sink routing by topic plans a write by the decoding tasks to each table it wrote
before, as for one table; given ``latest_records`` (the job's
:class:`~icesink.jobs.kafka.source.kafka_sample.LatestRecords`), it also makes the
table of each topic it has not seen from the topic's latest records, before the batch
(step ``prepare``), so that the decoding tasks write a new topic's first batch too; for
the topics there are when the query starts, :meth:`DecodingSink.prepare` does it on a
thread while Spark starts the query.

Every Kafka record ends up once in the table or in the dead-letter table. A replayed
batch decodes to the same rows and the same dead letters (a value's fate depends on
the value alone), and each of the two commits recognises the replay on its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame

from icesink import ConfigError, RouteBy, load_table, route_label
from icesink.jobs.kafka.decode.decoder import ValueDecoder
from icesink.jobs.kafka.decode.rejects import RejectedValues
from icesink.sources import TOMBSTONE, ArrowSource

if TYPE_CHECKING:
    from icesink import IcebergSink
    from icesink.sources import SourceWrite

logger = logging.getLogger(__name__)

_QUERY_ID_PROPERTY = "sql.streaming.queryId"  # as the sink finds its default sink id

ReadLatest = Callable[[frozenset[str]], Mapping[str, list[pa.RecordBatch]]]
"""The latest raw records of each topic not in the given set that has records not seen yet."""


class DecodingSink:
    """Decodes Kafka values and writes them with an :class:`~icesink.IcebergSink` (see the module).

    Args:
        sink: Writes the rows; its dead-letter table takes the undecodable values.
        decoder: Decodes the values.
        write_in_source: Let the decoding tasks write the rows they can give the table's
            type to the table themselves, when the sink allows it (:class:`~icesink.sources.SourceWrite`).
        latest_records: For a sink routing by topic: reads the latest records of the topics
            it has no table for yet, to make their tables before the batch (see the module).
    """

    def __init__(
        self,
        sink: IcebergSink,
        decoder: ValueDecoder,
        *,
        write_in_source: bool = True,
        latest_records: ReadLatest | None = None,
    ) -> None:
        self.sink = sink
        self.decoder = decoder
        self.write_in_source = write_in_source
        self.latest_records = latest_records
        self._rejects = RejectedValues(sink)
        self._early: threading.Thread | None = None  # new topics' tables made while the query starts

    @property
    def routed(self) -> bool:
        """Whether the sink routes rows to many tables (``route.by``)."""
        return self.sink.config.route.enabled

    @property
    def label(self) -> str:
        """The ``table`` label of the decoding steps: the table, or the routed sink's label."""
        return self.sink.config.table or route_label(self.sink.config.route)

    @property
    def _prepares_topics(self) -> bool:
        """Whether new topics' tables are made from their latest records (see the module)."""
        planned = self.write_in_source and self.decoder.metadata_columns  # a plan names a table per topic
        return planned and self.latest_records is not None and self.sink.config.route.by is RouteBy.TOPIC

    def prepare(self) -> None:
        """With a fixed value schema, create (or check) the table before the stream starts.

        A routed sink has no one table to prepare: it creates each on first sight. Routing
        by topic with ``latest_records``, the tables of the topics there are now are made
        from their latest records on a thread of their own, while the query starts; the
        first batch waits for it.
        """
        schema = self.decoder.fixed_schema()
        if schema is not None and not self.routed:
            self.sink.prepare(schema)
        elif self._prepares_topics and self._early is None:
            self._early = threading.Thread(target=self._prepare_early, name="icesink-new-topics", daemon=True)
            self._early.start()

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Decode and write one micro-batch (the ``foreachBatch`` function)."""
        # A routed sink's plan names a table per topic, the value of the rows' _kafka_topic column.
        planned = self.write_in_source and (self.decoder.metadata_columns or not self.routed)
        by_source = None
        if self._prepares_topics:
            with self.sink.metrics.time_step(self.label, "prepare"):
                if self._early is not None:
                    self._early.join()
                self._prepare_new_topics()
        if planned:
            with self.sink.metrics.time_step(self.label, "plan"):
                by_source = self.sink.source_write(batch_df, batch_id)
        if by_source is None:
            self._write(batch_df, batch_id, None)
            return
        with by_source.in_source_tasks(batch_df.sparkSession):
            self._write(batch_df, batch_id, by_source)

    def _prepare_early(self) -> None:
        try:
            self._prepare_new_topics()
        except Exception as e:  # the first batch makes them again, and fails if it must
            logger.warning("could not make the tables of the topics before the query's first batch: %s", e)

    def _prepare_new_topics(self) -> None:
        """Make the tables of topics not seen yet from their latest records (the sink names them).

        Reading them is worth a warning when it fails, not the batch: the batch reads
        the topics itself, and writes them through the sink.
        """
        assert self.latest_records is not None
        known = self.sink.prepare_destinations({})
        try:
            records = self.latest_records(known)
        except Exception as e:
            logger.warning(
                "could not read the latest records of new topics; their first batch goes "
                "through the sink: %s",
                e,
            )
            return
        schemas = {topic: s for topic, batches in records.items() if (s := self.decoder.schema_of(batches))}
        if schemas:
            self.sink.prepare_destinations(schemas)

    def _write(self, batch_df: DataFrame, batch_id: int, by_source: SourceWrite | None) -> None:
        metrics, table = self.sink.metrics, self.label
        with metrics.time_step(table, "decode"):
            decoded = self.decoder.decode(batch_df)
        try:
            query_id = _query_id(batch_df)
            if decoded.decoded_in_source and query_id:  # Spark counted the source's few rows per task
                metrics.count_source_records(query_id, batch_id, decoded.input_rows)
            sink_id = self.sink.config.sink_id or query_id
            if not sink_id:
                raise ConfigError(
                    "no sink id: the sink was called outside a streaming query and 'sink-id' is not set",
                    hint="set the 'sink-id' option (e.g. 'orders-ingest') when calling the sink directly",
                )
            if decoded.rejected_rows:
                with metrics.time_step(table, "decode_dead_letters"):
                    self._rejects.deliver(decoded.dead_letters, decoded.rejected_rows, sink_id, batch_id)
            if decoded.skipped_rows:
                metrics.source_records_skipped.labels(table, TOMBSTONE).inc(decoded.skipped_rows)
            skipped = decoded.skipped_rows
            remaining = decoded.input_rows - decoded.rejected_rows - decoded.written_rows - skipped
            logger.info(
                "batch %s of sink %s: %s Kafka records, %s decoded (%s written by the source's tasks), "
                "%s dead-lettered, %s tombstones skipped (%s)",
                batch_id,
                sink_id,
                decoded.input_rows,
                decoded.input_rows - decoded.rejected_rows - skipped,
                decoded.written_rows,
                decoded.rejected_rows,
                skipped,
                table,
            )
            if by_source is not None:
                by_source.record(decoded.written, remaining)
            if decoded.has_values or decoded.written or self._writes_without_values():
                source = ArrowSource(
                    decoded.payloads,
                    decoded.conform,
                    remaining,
                    in_range_columns=self.decoder.in_range_columns(),
                    written=by_source,
                )
                self.sink(decoded.rows, batch_id, source)
            elif by_source is not None:
                by_source.end()  # nothing written, nothing to write
        finally:
            decoded.release()

    def _writes_without_values(self) -> bool:
        """Whether a batch without values still goes to the sink: to a fixed-schema or existing table.

        A batch without values must not create the table (its type is unknown); a routed
        batch without values has no destination.
        """
        if self.routed:
            return False
        if self.decoder.fixed_schema() is not None:
            return True
        return load_table(self.sink.catalog, self.sink.config.table) is not None


def _query_id(batch_df: DataFrame) -> str | None:
    return batch_df.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
