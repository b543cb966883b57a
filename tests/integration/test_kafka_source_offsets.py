"""The ``icesink-kafka`` source on offsets that hold no record, or no longer hold one, on Apache Kafka.

- Transaction markers take offsets of their own: ranges that end on, start after or span
  them are read exactly.
- With ``kafka.isolation.level=read_committed`` a stream stops at the last stable offset
  while a transaction is open, reads its records once it commits, and never reads those of
  an aborted one; with the default ``read_uncommitted`` (Spark's connector's default too)
  it reads every record in the log, the aborted ones included.
- Records deleted before the stream read them (DeleteRecords moves the partition's low
  watermark, as retention does): with ``failOnDataLoss`` (the default) the micro-batch
  fails with ``ICESINK-KAFKA-DATA-LOSS`` naming the offsets lost, having read nothing;
  with ``failOnDataLoss=false`` it goes on from the low watermark. Either way each record
  read is the one produced at its offset, read once: nothing is invented, and nothing still
  in Kafka is skipped. The same holds for records deleted while a task reads its range: the
  broker refuses the next fetch, and the offsets below the new low watermark are lost the
  same way, the records fetched before kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from icesink.jobs.kafka.source import KafkaDataLossError, KafkaOffsetReader, KafkaSourceOptions
from icesink.jobs.kafka.source.kafka import register_kafka_source
from icesink.jobs.kafka.source.kafka_offsets import OffsetRange
from icesink.jobs.kafka.source.kafka_range_reader import read_ranges
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_source_runs import (
    Collector,
    Position,
    assert_exactly,
    produce_spread,
    run_available_now,
    source_options,
    start_query,
)

PER_TRANSACTION = 5
BIG_VALUE_BYTES = 100_000  # a record batch holds about ten such records; a fetch returns one batch


@pytest.fixture(scope="module")
def kafka_format(spark: Any) -> str:
    return register_kafka_source(spark)


def transaction(broker: KafkaBroker, topic: str, number: int, *, commit: bool) -> dict[Position, bytes]:
    """Produce transaction ``number`` (``PER_TRANSACTION`` records to partition 0); value by position.

    The topic must hold only earlier transactions of this kind: each takes its records'
    offsets and one more for its marker.
    """
    first = number * (PER_TRANSACTION + 1)
    values = [f"txn{number}-{i}".encode() for i in range(PER_TRANSACTION)]
    broker.produce_transaction(topic, [(0, None, v) for v in values], f"{topic}-{number}", commit=commit)
    return {(0, first + i): v for i, v in enumerate(values)}


def values_of(collector: Collector) -> dict[Position, bytes]:
    return {(row.partition, row.offset): bytes(row.value) for row in collector.rows()}


# --- transactions ------------------------------------------------------------------------


def test_transaction_markers_leave_offset_gaps_that_are_skipped(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    expected: dict[Position, bytes] = {}
    for number in range(3):  # each commit marker takes an offset: 5, 11 and 17
        expected |= transaction(apache_kafka, topic_name, number, commit=True)
    assert apache_kafka.watermarks(topic_name, 0) == (0, 18)
    collector = Collector()

    # Ranges of 4 offsets end on, start after and span the markers.
    run_available_now(
        spark,
        kafka_format,
        source_options(
            apache_kafka, subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="4"
        ),
        tmp_path / "checkpoint",
        collector,
    )

    assert_exactly(collector.positions(), expected)
    assert values_of(collector) == expected
    assert len(collector.calls) == 5


def test_read_committed_waits_for_an_open_transaction_and_never_reads_an_aborted_one(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    committed = transaction(apache_kafka, topic_name, 0, commit=True)  # offsets 0-4, marker 5
    aborted = transaction(apache_kafka, topic_name, 1, commit=False)  # offsets 6-10, marker 11
    pending = {(0, 12 + i): f"open-{i}".encode() for i in range(PER_TRANSACTION)}  # 12-16, marker 17
    options = source_options(
        apache_kafka,
        subscribe=topic_name,
        startingOffsets="earliest",
        **{"kafka.isolation.level": "read_committed"},
    )
    collector = Collector()
    query = start_query(spark, kafka_format, options, tmp_path / "checkpoint", collector)
    try:
        open_records = [(0, None, v) for v in pending.values()]
        with apache_kafka.open_transaction(topic_name, open_records, f"{topic_name}-open"):
            assert apache_kafka.watermarks(topic_name, 0, committed=True) == (0, 12)  # the stable end
            reader = KafkaOffsetReader(KafkaSourceOptions.from_options(options, "stream"))
            try:
                assert reader.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 12}
            finally:
                reader.close()
            query.processAllAvailable()
            assert_exactly(collector.positions(), committed)  # nothing past the open transaction
        query.processAllAvailable()  # committed now
    finally:
        query.stop()

    assert values_of(collector) == committed | pending
    assert_exactly(collector.positions(), committed | pending)

    # read_uncommitted, the default: every record of the log, the aborted ones too, as Spark's connector.
    everything = spark.read.format(kafka_format).options(**source_options(apache_kafka, subscribe=topic_name))
    rows = everything.load().collect()
    assert {(r.partition, r.offset): bytes(r.value) for r in rows} == committed | aborted | pending
    assert len(rows) == 3 * PER_TRANSACTION


# --- records deleted before they were read -----------------------------------------------


def test_a_new_stream_from_earliest_starts_at_the_low_watermark(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    produced = produce_spread(apache_kafka, topic_name, {0: 100, 1: 40})
    assert apache_kafka.delete_records(topic_name, 0, 30) == 30
    collector = Collector()

    run_available_now(  # failOnDataLoss is on: what was deleted before the stream began is no loss
        spark,
        kafka_format,
        source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest"),
        tmp_path / "checkpoint",
        collector,
    )

    expected = {(p, o): value for (p, o), value in produced.items() if p == 1 or o >= 30}
    assert_exactly(collector.positions(), expected)
    assert values_of(collector) == expected


def test_records_deleted_before_the_stream_read_them_fail_it_or_are_skipped_as_fail_on_data_loss_says(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    first = produce_spread(apache_kafka, topic_name, {0: 50, 1: 50})
    options = source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest")
    checkpoint = tmp_path / "checkpoint"
    collector = Collector()
    run_available_now(spark, kafka_format, options, checkpoint, collector)
    assert_exactly(collector.positions(), first)
    records = [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for p in (0, 1) for i in range(50, 100)]
    second = dict(zip(apache_kafka.produce(topic_name, records), (r[2] for r in records), strict=True))
    assert apache_kafka.delete_records(topic_name, 0, 80) == 80  # [50, 80) of partition 0, never read

    with pytest.raises(StreamingQueryException, match="ICESINK-KAFKA-DATA-LOSS") as failure:
        run_available_now(spark, kafka_format, options, checkpoint, collector)
    assert f"offsets [50, 80) of {topic_name}-0 were deleted before they were read" in str(failure.value)
    assert "the earliest available offset is 80" in str(failure.value)
    assert "failOnDataLoss=false" in str(failure.value)  # the hint: how to accept the loss
    assert_exactly(collector.positions(), first)  # the failed micro-batch handed nothing over

    run_available_now(spark, kafka_format, {**options, "failOnDataLoss": "false"}, checkpoint, collector)
    kept = {position: value for position, value in second.items() if position[0] == 1 or position[1] >= 80}
    assert_exactly(collector.positions(), first | kept)  # from the low watermark on, the rest whole
    assert values_of(collector) == first | kept


def test_a_new_partition_whose_first_records_were_deleted_is_data_loss(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    first = produce_spread(apache_kafka, topic_name, {0: 10})
    options = source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest")
    checkpoint = tmp_path / "checkpoint"
    collector = Collector()
    run_available_now(spark, kafka_format, options, checkpoint, collector)
    apache_kafka.add_partitions(topic_name, 2)
    added = produce_spread(apache_kafka, topic_name, {1: 20})
    assert apache_kafka.delete_records(topic_name, 1, 5) == 5  # before the stream saw partition 1

    with pytest.raises(StreamingQueryException, match="ICESINK-KAFKA-DATA-LOSS") as failure:
        run_available_now(spark, kafka_format, options, checkpoint, collector)
    assert f"new topic-partition {topic_name}-1 starts at offset 5 instead of 0" in str(failure.value)
    assert_exactly(collector.positions(), first)

    run_available_now(spark, kafka_format, {**options, "failOnDataLoss": "false"}, checkpoint, collector)
    kept = {position: value for position, value in added.items() if position[1] >= 5}
    assert_exactly(collector.positions(), first | kept)
    assert values_of(collector) == first | kept


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["fail", "go-on"])
def test_records_deleted_while_a_task_reads_its_range_are_lost_as_fail_on_data_loss_says(
    apache_kafka: KafkaBroker, topic_name: str, fail_on_data_loss: bool
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    values = [bytes([n]) * BIG_VALUE_BYTES for n in range(60)]
    apache_kafka.produce(topic_name, [(0, None, v) for v in values])
    consumer_holds_one_batch = {
        "kafka.max.partition.fetch.bytes": "1",
        "kafka.queued.min.messages": "1",
        "kafka.queued.max.messages.kbytes": "1",
    }
    options = KafkaSourceOptions.from_options(
        source_options(
            apache_kafka,
            subscribe=topic_name,
            failOnDataLoss=str(fail_on_data_loss).lower(),
            **consumer_holds_one_batch,
        )
    )
    batches = read_ranges(options, [OffsetRange(topic_name, 0, 0, 60)], batch_rows=1)
    read = [next(batches)]  # the consumer has fetched the first record batch, not offset 40
    assert apache_kafka.delete_records(topic_name, 0, 40) == 40

    if fail_on_data_loss:
        lost = rf"offsets \[\d+, 40\) of {re.escape(topic_name)}-0 were deleted before they were read"
        with pytest.raises(KafkaDataLossError, match=lost):
            read.extend(batches)
    else:
        read.extend(batches)

    offsets = [o for batch in read for o in batch.column("offset").to_pylist()]
    fetched = [o for o in offsets if o < 40]
    assert fetched == list(range(len(fetched))) and fetched  # fetched before the deletion: kept, once
    assert [o for o in offsets if o >= 40] == ([] if fail_on_data_loss else list(range(40, 60)))
    read_values = [v for batch in read for v in batch.column("value").to_pylist()]
    assert read_values == [values[o] for o in offsets]  # each record the one produced at its offset
