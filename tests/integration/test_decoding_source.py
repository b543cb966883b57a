"""``icesink-kafka-decoded`` against the real broker: the same rows and dead letters as decoding apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icesink import IcebergSink
from icesink.jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat, parse_ddl
from icesink.jobs.kafka.decode.passes import PASS_COLUMNS
from icesink.jobs.kafka.decoding_source import register_decoding_source
from icesink.jobs.kafka.source.kafka import register_kafka_source
from tests.support.kafka_broker import KafkaBroker
from tests.support.processes import wait_until

VALUES: list[bytes | None] = [
    *[json.dumps({"id": i, "name": f"n{i}", "tags": [i, i + 1]}).encode() for i in range(300)],
    b'{"id": 300',  # broken JSON
    None,  # a tombstone
    b"\xff\xfe",  # not UTF-8
    json.dumps({"id": 2**40, "email": "a@b", "nested": {"x": 1.5}}).encode(),  # wider and new fields
]


LISTENER_TIMEOUT_S = 60.0  # bounds a wait: the listener bus delivers progress asynchronously


def _order(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def decoded(decoder: ValueDecoder, batch_df: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    result = decoder.decode(batch_df)
    try:
        rows = sorted((r.asDict(recursive=True) for r in result.rows.collect()), key=_order)
        dead = sorted((r.asDict() for r in result.dead_letters.collect()), key=_order)
        return rows, dead, result.input_rows
    finally:
        result.release()


@pytest.mark.parametrize(
    "options",
    [
        DecodeOptions(),
        DecodeOptions(fixed_schema=parse_ddl("id BIGINT, name STRING"), metadata_columns=False),
    ],
    ids=["inferred", "fixed-schema"],
)
def test_decoding_in_the_source_gives_what_decoding_apart_gives(
    spark: Any, apache_kafka: KafkaBroker, topic_name: str, options: DecodeOptions
) -> None:
    apache_kafka.create_topic(topic_name, partitions=3)
    apache_kafka.produce(topic_name, [(i % 3, None, v) for i, v in enumerate(VALUES)], linger_ms=20)
    decoder = ValueDecoder(options)
    kafka = {"kafka.bootstrap.servers": apache_kafka.bootstrap_servers, "subscribe": topic_name}

    raw = spark.read.format(register_kafka_source(spark)).options(**kafka).load()
    source = register_decoding_source(spark)
    in_source = spark.read.format(source).options(**kafka, **decoder.source_options()).load()

    assert tuple(in_source.columns) == PASS_COLUMNS
    rows, dead, count = decoded(decoder, in_source)
    assert (rows, dead, count) == decoded(decoder, raw)
    assert count == len(VALUES)
    assert len(rows) + len(dead) == len(VALUES) and len(dead) == 3
    assert {r["id"] for r in rows} == {*range(300), 2**40}


def test_a_debezium_stream_through_the_decoding_source_is_exactly_once(
    spark: Any, apache_kafka: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=2)
    events = [
        {
            "before": None,
            "after": {"id": i, "v": f"v{i}"},
            "op": "c",
            "source": {"ts_ms": 1_714_564_800_000 + i},
        }
        for i in range(50)
    ]
    apache_kafka.produce(topic_name, [(i % 2, None, json.dumps(e).encode()) for i, e in enumerate(events)])
    decoder = ValueDecoder(DecodeOptions(format=ValueFormat.DEBEZIUM_JSON))
    seen: list[tuple[int, int, str]] = []

    def collect(batch_df: Any, batch_id: int) -> None:
        rows, dead, _ = decoded(decoder, batch_df)
        assert not dead
        seen.extend((r["_kafka_partition"], r["_kafka_offset"], r["_op"]) for r in rows)

    options = {
        "kafka.bootstrap.servers": apache_kafka.bootstrap_servers,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "20",
        **decoder.source_options(),
    }
    stream = spark.readStream.format(register_decoding_source(spark)).options(**options).load()
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
    finally:
        query.stop()
    assert sorted(seen) == sorted({(p, o, "c") for p in (0, 1) for o in range(25)})


def test_progress_metrics_count_the_kafka_records_not_the_rows_the_decoding_source_yields(
    spark: Any, apache_kafka: KafkaBroker, topic_name: str, catalog_options: dict[str, str], tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=3)
    apache_kafka.produce(topic_name, [(i % 3, None, v) for i, v in enumerate(VALUES)], linger_ms=20)
    decoder = ValueDecoder(DecodeOptions())
    sink = IcebergSink.from_options({**catalog_options, "table": "db.events", "metrics.port": "0"})
    options = {
        "kafka.bootstrap.servers": apache_kafka.bootstrap_servers,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "120",  # three micro-batches, each a few rows of the decoding pass
        **decoder.source_options(),
    }
    stream = spark.readStream.format(register_decoding_source(spark)).options(**options).load()
    query = (
        stream.writeStream.foreachBatch(DecodingSink(sink, decoder))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )

    def sample(name: str) -> float:
        return sum(s.value for m in sink.metrics.registry.collect() for s in m.samples if s.name == name)

    try:
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
        wait_until(
            lambda: sample("icesink_batch_duration_seconds_count") == 3,
            LISTENER_TIMEOUT_S,
            "the progress of three micro-batches",
        )
        spark_rows = sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        query.stop()
        sink.close()
    assert spark_rows < len(VALUES) / 10  # what Spark counts: the decoding pass's rows
    assert sample("icesink_input_rows_total") == len(VALUES)  # every record, dead letters included
    assert sample("icesink_rows_written_total") + sample("icesink_dead_letter_rows_total") == len(VALUES)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(None, "needs the option 'decode.spec'"), ("{}", "option 'decode.spec' has value '{}', which is not")],
)
def test_the_decoding_source_without_a_good_spec_fails_at_load(
    spark: Any, apache_kafka: KafkaBroker, spec: str | None, expected: str
) -> None:
    options = {"kafka.bootstrap.servers": apache_kafka.bootstrap_servers, "subscribe": "t"}
    if spec is not None:
        options["decode.spec"] = spec
    with pytest.raises(Exception, match="ICESINK-CONFIG") as failure:
        spark.read.format(register_decoding_source(spark)).options(**options).load()
    assert expected in str(failure.value)
