"""The ``icesink-kafka`` source against Apache Kafka and real local Spark.

Every stream test checks the one property that matters for an exactly-once pipeline:
each (partition, offset) arrives once, none is missing, none is extra. Offsets that hold
no record or are gone (transaction markers, aborted and open transactions, records deleted
by DeleteRecords or retention) are in ``test_kafka_source_offsets.py``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from icesink import ConfigError
from icesink.jobs.kafka.source import (
    KAFKA_SCHEMA,
    KafkaDataLossError,
    KafkaOffsetReader,
    KafkaSourceOptions,
)
from icesink.jobs.kafka.source.kafka import register_kafka_source
from icesink.jobs.kafka.source.kafka_offsets import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    pack_ranges,
    plan_ranges,
    rate_limit,
    resolve_read_start,
    split_ranges,
)
from icesink.jobs.kafka.source.kafka_range_reader import read_ranges
from icesink.jobs.kafka.source.kafka_sample import SAMPLE_RECORDS, LatestRecords
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_source_runs import (
    QUERY_TIMEOUT_S,
    Collector,
    assert_exactly,
    produce_spread,
    run_available_now,
    source_options,
    start_query,
)


@pytest.fixture(scope="module")
def kafka_format(spark: Any) -> str:
    return register_kafka_source(spark)


# --- reading a stream ------------------------------------------------------------------


def test_reads_every_message_exactly_once_with_spark_kafka_schema(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=3)
    before = datetime.now(UTC) - timedelta(seconds=5)
    expected = produce_spread(apache_kafka, topic_name, {0: 1000, 1: 700, 2: 300}, linger_ms=20)
    collector = Collector()

    run_available_now(
        spark,
        kafka_format,
        source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest"),
        tmp_path / "checkpoint",
        collector,
    )

    rows = collector.rows()
    assert_exactly(collector.positions(), expected)
    assert {(row.partition, row.offset): bytes(row.value) for row in rows} == expected
    assert all(bytes(row.key) == b"k" + bytes(row.value)[1:] for row in rows)
    assert {row.topic for row in rows} == {topic_name}
    assert {row.timestampType for row in rows} == {0}  # CreateTime, as Spark's Java client reports it
    assert all(before <= row.timestamp.replace(tzinfo=UTC) <= datetime.now(UTC) for row in rows)
    assert collector.schema == KAFKA_SCHEMA
    assert [(f.name, f.dataType.simpleString()) for f in KAFKA_SCHEMA.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]


def test_starting_offsets_json_per_partition(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=3)
    produce_spread(apache_kafka, topic_name, {0: 30, 1: 30, 2: 30}, linger_ms=10)
    starting = {topic_name: {"0": 5, "1": -2, "2": -1}}
    collector = Collector()

    run_available_now(
        spark,
        kafka_format,
        source_options(apache_kafka, subscribe=topic_name, startingOffsets=_json(starting)),
        tmp_path / "checkpoint",
        collector,
    )

    assert_exactly(collector.positions(), {(0, o) for o in range(5, 30)} | {(1, o) for o in range(30)})


def test_starting_offsets_json_must_name_every_partition(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    starting = {topic_name: {"0": -2}}

    with pytest.raises(StreamingQueryException, match="ICESINK-CONFIG") as failure:
        run_available_now(
            spark,
            kafka_format,
            source_options(apache_kafka, subscribe=topic_name, startingOffsets=_json(starting)),
            tmp_path / "checkpoint",
            Collector(),
        )
    assert f"missing: {topic_name}-1" in str(failure.value)


def test_starting_offsets_latest_reads_only_what_arrives_after_the_start(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    produce_spread(apache_kafka, topic_name, {0: 40, 1: 40}, linger_ms=10)
    collector = Collector()
    query = start_query(
        spark,
        kafka_format,
        source_options(apache_kafka, subscribe=topic_name),  # startingOffsets defaults to latest
        tmp_path / "checkpoint",
        collector,
    )
    try:
        query.processAllAvailable()
        assert collector.positions() == []
        produce_spread(apache_kafka, topic_name, {0: 15, 1: 5}, linger_ms=10)
        query.processAllAvailable()
    finally:
        query.stop()

    assert_exactly(collector.positions(), {(0, o) for o in range(40, 55)} | {(1, o) for o in range(40, 45)})


def test_max_offsets_per_trigger_spreads_the_limit_over_several_micro_batches(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    expected = produce_spread(apache_kafka, topic_name, {0: 700, 1: 300}, linger_ms=20)
    collector = Collector()

    run_available_now(
        spark,
        kafka_format,
        source_options(
            apache_kafka, subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="250"
        ),
        tmp_path / "checkpoint",
        collector,
    )

    sizes = [len(rows) for _, rows in collector.calls]
    assert len(sizes) >= 4 and max(sizes) <= 250, sizes
    first_batch = collector.calls[0][1]
    # Shared in proportion to each partition's backlog, as Spark does: 175 + 75.
    assert sum(row.partition == 0 for row in first_batch) == 175
    assert sum(row.partition == 1 for row in first_batch) == 75
    assert_exactly(collector.positions(), expected)


def test_restart_after_a_failed_batch_replays_it_and_continues_without_gaps(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    first = produce_spread(apache_kafka, topic_name, {0: 150, 1: 150}, linger_ms=20)
    options = source_options(
        apache_kafka, subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="100"
    )
    checkpoint = tmp_path / "checkpoint"
    collector = Collector(fail_on_batch=1)

    with pytest.raises(StreamingQueryException, match="injected failure"):
        run_available_now(spark, kafka_format, options, checkpoint, collector)
    assert [batch_id for batch_id, _ in collector.calls] == [0]

    run_available_now(spark, kafka_format, options, checkpoint, collector)
    replayed = dict(collector.calls)[1]
    assert sorted((r.partition, r.offset) for r in replayed) == sorted(
        (r.partition, r.offset) for r in collector.failed_rows
    )
    assert_exactly(collector.positions(), first)

    more = produce_spread(apache_kafka, topic_name, {0: 30, 1: 30}, linger_ms=20)
    before = len(collector.calls)
    run_available_now(spark, kafka_format, options, checkpoint, collector)
    assert_exactly([(r.partition, r.offset) for _, rows in collector.calls[before:] for r in rows], more)
    assert_exactly(collector.positions(), first | more)


def test_a_partition_added_to_the_topic_is_read_from_its_start(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    first = produce_spread(apache_kafka, topic_name, {0: 50, 1: 50}, linger_ms=10)
    options = source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest")
    collector = Collector()
    run_available_now(spark, kafka_format, options, tmp_path / "checkpoint", collector)
    assert_exactly(collector.positions(), first)

    apache_kafka.add_partitions(topic_name, 3)
    more = produce_spread(apache_kafka, topic_name, {2: 30, 0: 20}, linger_ms=10)
    before = len(collector.calls)
    run_available_now(spark, kafka_format, options, tmp_path / "checkpoint", collector)

    assert_exactly([(r.partition, r.offset) for _, rows in collector.calls[before:] for r in rows], more)
    assert set(more) == {(2, o) for o in range(30)} | {(0, o) for o in range(50, 70)}


def test_subscribe_pattern_picks_up_a_new_matching_topic_while_running(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    first, second, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}-b"
    apache_kafka.create_topic(first, partitions=2)
    produce_spread(apache_kafka, first, {0: 20, 1: 20})
    collector = Collector()
    options = source_options(
        apache_kafka, subscribePattern=re.escape(topic_name) + r"-.*", startingOffsets="earliest"
    )
    query = start_query(spark, kafka_format, options, tmp_path / "checkpoint", collector)
    try:
        query.processAllAvailable()
        apache_kafka.create_topic(second, partitions=1)
        apache_kafka.create_topic(other, partitions=1)
        produce_spread(apache_kafka, second, {0: 25}, linger_ms=10)
        produce_spread(apache_kafka, other, {0: 10})
        query.processAllAvailable()
    finally:
        query.stop()

    by_topic = [(row.topic, row.partition, row.offset) for row in collector.rows()]
    assert sorted(by_topic) == sorted(
        [(first, p, o) for p in (0, 1) for o in range(20)] + [(second, 0, o) for o in range(25)]
    )


def test_a_topic_created_during_a_batch_is_read_whole_by_the_next_batch(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    """Each ``latestOffset`` lists the topics again: a new match is in the very next micro-batch."""
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    apache_kafka.create_topic(first, partitions=1)
    produce_spread(apache_kafka, first, {0: 10})
    created_in: list[int] = []

    def create_during_the_first_batch(batch_df: Any, batch_id: int) -> None:
        collector(batch_df, batch_id)
        if not created_in:  # the topic and all its records exist before the next latestOffset
            created_in.append(batch_id)
            apache_kafka.create_topic(second, partitions=2)
            produce_spread(apache_kafka, second, {0: 15, 1: 5}, linger_ms=10)

    collector = Collector()
    options = source_options(
        apache_kafka, subscribePattern=re.escape(topic_name) + r"-.*", startingOffsets="earliest"
    )
    query = start_query(spark, kafka_format, options, tmp_path / "checkpoint", create_during_the_first_batch)
    try:
        query.processAllAvailable()
    finally:
        query.stop()

    batches = [
        (batch_id, sorted((r.topic, r.partition, r.offset) for r in rows))
        for batch_id, rows in collector.calls
    ]
    expected_second = sorted([(second, 0, o) for o in range(15)] + [(second, 1, o) for o in range(5)])
    assert batches[0] == (created_in[0], [(first, 0, o) for o in range(10)])
    assert batches[1] == (created_in[0] + 1, expected_second)  # whole, from offset 0, one trigger later
    assert len(batches) == 2


# --- ranges inside the broker's record batches ---------------------------------------


def test_rate_limited_micro_batches_cut_the_brokers_record_batches_at_their_offsets(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    # A long linger packs the records into a few record batches; a fetch returns whole ones.
    expected = produce_spread(apache_kafka, topic_name, {0: 2000}, linger_ms=100)
    assert apache_kafka.watermarks(topic_name, 0) == (0, 2000)

    options = source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest")
    reader = KafkaOffsetReader(KafkaSourceOptions.from_options(options, "stream"))
    try:
        assert reader.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 2000}
    finally:
        reader.close()

    # Rate limited, so micro-batches start and end inside the broker's record batches.
    collector = Collector()
    run_available_now(
        spark, kafka_format, {**options, "maxOffsetsPerTrigger": "300"}, tmp_path / "checkpoint", collector
    )
    assert len(collector.calls) == 7
    assert_exactly(collector.positions(), expected)


def test_batch_read_returns_exactly_a_range_inside_record_batches(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    produce_spread(apache_kafka, topic_name, {0: 1000}, linger_ms=100)

    def load(**options: str) -> Any:
        return spark.read.format(kafka_format).options(**source_options(apache_kafka, **options)).load()

    def offsets(df: Any) -> list[int]:
        return sorted(row.offset for row in df.select("offset").collect())

    inner = load(
        assign=_json({topic_name: [0]}),
        startingOffsets=_json({topic_name: {"0": 123}}),
        endingOffsets=_json({topic_name: {"0": 777}}),
    )
    assert offsets(inner) == list(range(123, 777))
    everything = load(subscribe=topic_name, minPartitions="5")  # earliest to latest, the true end
    assert everything.rdd.getNumPartitions() == 5
    assert offsets(everything) == list(range(1000))


def test_many_topics_packed_into_few_tasks_are_read_exactly_once(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    topics = [f"{topic_name}-{n}" for n in range(6)]
    expected: set[tuple[str, int, int]] = set()
    for n, topic in enumerate(topics):
        apache_kafka.create_topic(topic, partitions=2)
        delivered = produce_spread(apache_kafka, topic, {0: 40 + 10 * n, 1: 15})
        expected |= {(topic, partition, offset) for partition, offset in delivered}
    pattern = re.escape(topic_name) + r"-\d"
    seen: list[tuple[str, int, int]] = []
    tasks: list[int] = []

    def sink(batch_df: Any, batch_id: int) -> None:
        tasks.append(batch_df.rdd.getNumPartitions())
        seen.extend(
            (r.topic, r.partition, r.offset)
            for r in batch_df.select("topic", "partition", "offset").collect()
        )

    options = source_options(
        apache_kafka, subscribePattern=pattern, startingOffsets="earliest", maxOffsetsPerTrigger="200"
    )
    query = start_query(
        spark, kafka_format, {**options, "maxPartitions": "3"}, tmp_path / "ck", sink, availableNow=True
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the AvailableNow query did not finish"
    finally:
        query.stop()

    duplicates = [p for p, n in Counter(seen).items() if n > 1]
    assert not duplicates, f"read more than once: {sorted(duplicates)[:10]}"
    assert set(seen) == expected
    assert len(tasks) >= 2, "maxOffsetsPerTrigger should have made several micro-batches"
    assert max(tasks) == 3  # 12 topic-partitions in each micro-batch, packed into 3 tasks

    batch = spark.read.format(kafka_format).options(**{**options, "maxPartitions": "4"}).load()
    assert batch.rdd.getNumPartitions() == 4
    rows = batch.select("topic", "partition", "offset").collect()
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(expected)


def test_one_consumer_reads_a_tasks_ranges_of_many_partitions_and_split_pieces_exactly(
    apache_kafka: KafkaBroker, topic_name: str
) -> None:
    topics = [f"{topic_name}-{n}" for n in range(3)]
    for topic in topics:
        apache_kafka.create_topic(topic, partitions=2)
        produce_spread(apache_kafka, topic, {0: 300, 1: 50}, linger_ms=50)
    ranges = [
        OffsetRange(topics[0], 0, 10, 150),  # two pieces of one partition: read in two rounds
        OffsetRange(topics[0], 0, 150, 290),
        OffsetRange(topics[0], 1, 0, 50),
        OffsetRange(topics[1], 0, 0, 300),
        OffsetRange(topics[1], 1, 49, 50),
        OffsetRange(topics[2], 1, 20, 20),  # empty
        OffsetRange(topics[2], 0, 295, 300),
    ]
    options = KafkaSourceOptions.from_options(
        source_options(apache_kafka, subscribePattern=f"{topic_name}-.*")
    )

    batches = list(read_ranges(options, ranges, batch_rows=64))

    assert all(b.num_rows <= 64 for b in batches)
    assert all(len(set(b.column("topic").to_pylist())) == 1 for b in batches)  # a range per batch
    columns = ("topic", "partition", "offset", "value")
    rows = [row for b in batches for row in zip(*(b.column(c).to_pylist() for c in columns), strict=True)]
    read = [(t, p, o) for t, p, o, _ in rows]
    expected = [(r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end)]
    assert sorted(read) == sorted(expected)  # each once
    for key in {(t, p) for t, p, _ in read}:
        offsets = [o for t, p, o in read if (t, p) == key]
        assert offsets == sorted(offsets), f"{key} out of offset order"
    values = {(t, p, o): v for t, p, o, v in rows}
    assert values[(topics[0], 0, 150)] == b"v0-150"
    assert values[(topics[1], 1, 49)] == b"v1-49"


def test_the_latest_records_of_new_topics_are_read_once_until_more_arrive(
    apache_kafka: KafkaBroker, topic_name: str
) -> None:
    full, empty = f"{topic_name}-full", f"{topic_name}-empty"
    apache_kafka.create_topic(full, partitions=2)
    apache_kafka.create_topic(empty)
    produce_spread(apache_kafka, full, {0: 300, 1: 50}, linger_ms=50)
    options = KafkaSourceOptions.from_options(
        source_options(apache_kafka, subscribePattern=f"{topic_name}-.*")
    )
    latest = LatestRecords(options)
    try:
        first = latest.read(frozenset())
        assert set(first) == {full}  # the empty topic has nothing to look at
        read = [
            (p, o)
            for b in first[full]
            for p, o in zip(b["partition"].to_pylist(), b["offset"].to_pylist(), strict=True)
        ]
        expected = [(0, o) for o in range(300 - SAMPLE_RECORDS, 300)] + [
            (1, o) for o in range(max(0, 50 - SAMPLE_RECORDS), 50)
        ]
        assert sorted(read) == expected  # the last SAMPLE_RECORDS of each partition, at most
        assert latest.read(frozenset()) == {}  # nothing new since
        apache_kafka.produce(empty, [(0, None, b"first")])
        assert [b.num_rows for b in latest.read(frozenset())[empty]] == [1]
        produce_spread(apache_kafka, full, {1: 1})
        assert latest.read({full}) == {}  # known: not read
        again = latest.read(frozenset())[full]
        assert {p for b in again for p in b["partition"].to_pylist()} == {1}  # the partition with news
        assert sum(b.num_rows for b in again) == min(SAMPLE_RECORDS, 51)
    finally:
        latest.close()


# --- lost data and bad options -----------------------------------------------------------


def test_offsets_going_back_fail_the_query_unless_fail_on_data_loss_is_false(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=1)
    produce_spread(apache_kafka, topic_name, {0: 50})
    options = source_options(apache_kafka, subscribe=topic_name, startingOffsets="earliest")
    checkpoint = tmp_path / "checkpoint"
    collector = Collector()
    run_available_now(spark, kafka_format, options, checkpoint, collector)
    apache_kafka.delete_topic(topic_name)  # a recreated topic starts again at 0
    apache_kafka.create_topic(topic_name, partitions=1)
    produce_spread(apache_kafka, topic_name, {0: 10})

    with pytest.raises(StreamingQueryException, match="ICESINK-KAFKA-DATA-LOSS") as failure:
        run_available_now(spark, kafka_format, options, checkpoint, collector)
    assert "went back from 50 to 10" in str(failure.value)
    assert "failOnDataLoss=false" in str(failure.value)

    lenient = {**options, "failOnDataLoss": "false"}
    run_available_now(spark, kafka_format, lenient, checkpoint, collector)
    more = produce_spread(apache_kafka, topic_name, {0: 5})
    before = len(collector.calls)
    run_available_now(spark, kafka_format, lenient, checkpoint, collector)
    assert_exactly([(r.partition, r.offset) for _, rows in collector.calls[before:] for r in rows], more)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"kafka.bootstrap.servers": None}, "option 'kafka.bootstrap.servers' is required"),
        (
            {"subscribePattern": "t.*"},
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign'",
        ),
        ({"startingOffsets": "middle"}, "option 'startingOffsets' has value 'middle'"),
        ({"startingOffsets": '{"t": {"0": -3}}'}, "-2 (earliest) or -1 (latest)"),
        (
            {"maxOffsetsPerTrigger": "-5"},
            "option 'maxOffsetsPerTrigger' has value '-5'; accepted: a positive",
        ),
        (
            {"failOnDataLoss": "maybe"},
            "option 'failOnDataLoss' has value 'maybe'; accepted: 'true' or 'false'",
        ),
        ({"startingOffset": "earliest"}, "unknown option 'startingoffset' (value 'earliest')"),
        ({"kafka.auto.offset.reset": "earliest"}, "hint: use the startingOffsets option"),
        ({"kafka.no.such.property": "1"}, 'No such configuration property: \\"no.such.property\\"'),
        ({"includeHeaders": "true"}, "only 'false' is supported"),
        ({"maxPartitions": "0"}, "option 'maxPartitions' has value '0'; accepted: a positive"),
        (
            {"minPartitions": "8", "maxPartitions": "4"},
            "option 'minPartitions' (8) is greater than 'maxPartitions' (4)",
        ),
    ],
)
def test_bad_options_fail_at_load_with_the_option_value_and_what_is_accepted(
    spark: Any, kafka_format: str, apache_kafka: KafkaBroker, options: dict[str, str | None], expected: str
) -> None:
    given = {**source_options(apache_kafka, subscribe="t"), **options}
    given = {k: v for k, v in given.items() if v is not None}

    with pytest.raises(Exception, match="ICESINK-CONFIG") as failure:
        spark.readStream.format(kafka_format).options(**given).load()
    assert expected.replace('\\"', '"') in str(failure.value).replace('\\"', '"')


# --- offset arithmetic (no broker needed) ----------------------------------------------


def test_offsets_json_is_canonical_and_round_trips_with_string_partition_keys() -> None:
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 9): 7}
    as_json = offsets_to_json(offsets)
    assert _json(as_json) == '{"a": {"2": 1}, "b": {"9": 7, "10": 5}}'
    assert offsets_from_json(as_json) == offsets


def test_rate_limit_is_proportional_and_never_starves_a_partition() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 1000, ("t", 1): 2, ("t", 2): 100}
    assert rate_limit(100, start, latest) == {("t", 0): 99, ("t", 1): 1, ("t", 2): 100}
    assert rate_limit(5000, start, latest) == latest


def test_split_ranges_honours_min_partitions_without_losing_offsets() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 50, 150)]
    pieces = split_ranges(ranges, 10)
    assert len(pieces) == 10
    covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
    assert covered == sorted([(0, o) for o in range(900)] + [(1, o) for o in range(50, 150)])


def test_pack_ranges_keeps_every_range_once_in_at_most_max_partitions_balanced() -> None:
    ranges = [OffsetRange(f"t{n:03d}", n % 3, 10 * n, 10 * n + 100 + 37 * (n % 7)) for n in range(50)]
    groups = pack_ranges(ranges, 4)
    assert len(groups) == 4

    def key(r: OffsetRange) -> tuple[str, int, int, int]:
        return (r.topic, r.partition, r.start, r.end)

    assert sorted((r for g in groups for r in g), key=key) == sorted(ranges, key=key)  # once each, unsplit
    loads = [sum(r.size for r in g) for g in groups]
    assert max(loads) - min(loads) <= max(r.size for r in ranges)
    for g in groups:
        assert list(g) == sorted(g, key=key)
    assert pack_ranges(list(reversed(ranges)), 4) == groups  # depends on the ranges alone
    assert pack_ranges(ranges[:3], 4) == [(r,) for r in ranges[:3]]
    assert pack_ranges(ranges, None) == [(r,) for r in ranges]


def test_records_deleted_before_the_range_start_are_data_loss() -> None:
    offset_range = OffsetRange("t", 0, 10, 20)
    with pytest.raises(KafkaDataLossError, match=r"offsets \[10, 15\) of t-0 were deleted"):
        resolve_read_start(offset_range, 15, fail_on_data_loss=True)
    assert resolve_read_start(offset_range, 15, fail_on_data_loss=False) == 15
    assert resolve_read_start(offset_range, 25, fail_on_data_loss=False) == 25  # nothing left to read
    assert resolve_read_start(offset_range, 3, fail_on_data_loss=True) == 10


def test_plan_ranges_reports_vanished_and_late_starting_partitions() -> None:
    start = {("t", 0): 5, ("gone", 0): 3}
    end = {("t", 0): 9, ("t", 1): 4}
    with pytest.raises(KafkaDataLossError, match="gone-0 are gone"):
        plan_ranges(start, end, {("t", 1): 0}, fail_on_data_loss=True)
    with pytest.raises(KafkaDataLossError, match="t-1 starts at offset 2"):
        plan_ranges({("t", 0): 5}, end, {("t", 1): 2}, fail_on_data_loss=True)
    assert plan_ranges(start, end, {("t", 1): 2}, fail_on_data_loss=False) == [
        OffsetRange("t", 0, 5, 9),
        OffsetRange("t", 1, 2, 4),
    ]


def test_options_are_case_insensitive_pass_kafka_options_through_and_check_the_query_type() -> None:
    options = KafkaSourceOptions.from_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "Subscribe": "a, b",
            "kafka.security.protocol": "SASL_SSL",
            "MAXOFFSETSPERTRIGGER": "7",
        },
        "stream",
    )
    assert options.subscription.topics == ("a", "b")
    assert options.max_offsets_per_trigger == 7
    assert options.starting_offsets.kind == "latest"
    config = options.consumer_config("executor")
    assert config["security.protocol"] == "SASL_SSL"
    assert config["enable.auto.commit"] is False
    with pytest.raises(ConfigError, match=r"'startingOffsets' has value 'latest'; latest .* batch query"):
        KafkaSourceOptions.from_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "latest"}, "batch"
        )
    with pytest.raises(
        ConfigError, match=r"'endingOffsets' \(value 'latest'\) is not valid in a streaming query"
    ):
        KafkaSourceOptions.from_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "latest"}, "stream"
        )


def _json(value: Any) -> str:
    return json.dumps(value)
