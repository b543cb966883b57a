"""The decoding sink on real local Spark: Kafka-shaped batches in, table rows and dead letters out, once."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import functions as F

from icesink import BadRecordError, IcebergSink
from icesink.batch.source_write import SOURCE_FILE_SUFFIX
from icesink.jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat, parse_ddl
from icesink.route import router
from tests.support.tables import added_files, catalog_from_options, check_data_files, summary_of

KAFKA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def kafka_batch(spark: Any, values: Sequence[bytes | None], first_offset: int = 0) -> Any:
    rows = [
        (None, value, "events", offset % 2, offset, T0 + dt.timedelta(seconds=offset))
        for offset, value in enumerate(values, start=first_offset)
    ]
    return spark.createDataFrame(rows, KAFKA_DDL)


def read(options: dict[str, str], table: str) -> list[dict[str, Any]]:
    return catalog_from_options(options).load_table(table).scan().to_arrow().to_pylist()


def decoding_sink(options: dict[str, str], decode: DecodeOptions | None = None) -> DecodingSink:
    return DecodingSink(IcebergSink.from_options(options), ValueDecoder(decode or DecodeOptions()))


def test_rows_and_dead_letters_exactly_once_across_a_replay(
    spark: Any, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**catalog_options, "table": "db.events", "sink-id": "events-test"}
    values: list[bytes | None] = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(40)]
    values[3], values[17], values[30] = b'{"id": 3', None, b"\xff\xfe"
    batch = kafka_batch(spark, values)
    decoding = decoding_sink(options)

    # The first attempt dies after its dead letters were committed, before the data commit.
    real_call = IcebergSink.__call__
    monkeypatch.setattr(IcebergSink, "__call__", lambda *args: (_ for _ in ()).throw(RuntimeError("crash")))
    with pytest.raises(RuntimeError, match="crash"):
        decoding(batch, 0)
    monkeypatch.setattr(IcebergSink, "__call__", real_call)
    decoding(batch, 0)  # Spark's replay
    decoding(batch, 0)  # and once more, after everything was committed

    rows = read(options, "db.events")
    dead = read(options, "db.events__dlq")
    assert sorted(r["_kafka_offset"] for r in rows) == [i for i in range(40) if i not in (3, 17, 30)]
    originals = [json.loads(d["original_row"]) for d in dead]
    assert sorted(o["_kafka_offset"] for o in originals) == [3, 17, 30]
    by_offset = {o["_kafka_offset"]: o for o in originals}
    assert base64.b64decode(by_offset[30]["_kafka_value"]) == b"\xff\xfe"  # the raw bytes, kept
    assert by_offset[17]["_kafka_value"] is None
    assert {d["reason"] for d in dead} == {"parse_error"}
    assert {d["sink_id"] for d in dead} == {"events-test.decode"}
    assert rows[0]["_kafka_topic"] == "events" and rows[0]["_kafka_timestamp"] is not None


def test_new_fields_and_wider_integers_evolve_the_table(spark: Any, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.evolving", "sink-id": "evolving"}
    decoding = decoding_sink(options)
    decoding(kafka_batch(spark, [json.dumps({"id": i, "n": i}).encode() for i in range(5)]), 0)
    second = [json.dumps({"id": i, "n": 2**40 + i, "email": f"{i}@x"}).encode() for i in range(5, 10)]
    decoding(kafka_batch(spark, second, first_offset=5), 1)

    table = catalog_from_options(options).load_table("db.evolving")
    first_schema = table.metadata.schemas[0]
    assert str(first_schema.find_field("n").field_type) == "int"
    assert str(table.schema().find_field("n").field_type) == "long"
    assert table.schema().find_field("email") is not None
    rows = sorted(read(options, "db.evolving"), key=lambda r: r["id"])
    assert [r["n"] for r in rows] == [0, 1, 2, 3, 4, *(2**40 + i for i in range(5, 10))]
    assert [r["email"] for r in rows[:5]] == [None] * 5


def test_a_fixed_schema_creates_the_table_and_the_sink_converts_or_dead_letters(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.fixed", "sink-id": "fixed", "schema.evolution": "off"}
    decoding = decoding_sink(
        options, DecodeOptions(fixed_schema=parse_ddl("id BIGINT, day DATE, note STRING"))
    )
    decoding.prepare()
    table = catalog_from_options(options).load_table("db.fixed")
    assert [f.name for f in table.schema().fields][:3] == ["id", "day", "note"]

    values = [
        json.dumps({"id": 1, "day": "2024-05-01", "note": "a", "ignored": True}).encode(),
        json.dumps({"id": 2, "day": "not a date"}).encode(),
        json.dumps({"id": 3, "note": {"nested": 1}}).encode(),
    ]
    decoding(kafka_batch(spark, values), 0)
    rows = {r["id"]: r for r in read(options, "db.fixed")}
    assert set(rows) == {1, 3}
    assert rows[1]["day"] == dt.date(2024, 5, 1) and "ignored" not in rows[1]
    assert rows[3]["note"] == '{"nested": 1}'
    dead = read(options, "db.fixed__dlq")
    assert [(d["column"], d["reason"]) for d in dead] == [("day", "parse_error")]


def test_debezium_events(spark: Any, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.cdc", "sink-id": "cdc"}
    events = [
        {"before": None, "after": {"id": 1, "name": "a"}, "op": "c", "source": {"ts_ms": 1_700_000_000_000}},
        {"before": {"id": 1, "name": "a"}, "after": None, "op": "d", "source": {"ts_ms": 1_700_000_000_500}},
        {"id": 9},
    ]
    decoding = decoding_sink(options, DecodeOptions(format=ValueFormat.DEBEZIUM_JSON))
    decoding(kafka_batch(spark, [json.dumps(e).encode() for e in events]), 0)
    rows = sorted(read(options, "db.cdc"), key=lambda r: r["_kafka_offset"])
    assert [(r["id"], r["name"], r["_op"]) for r in rows] == [(1, "a", "c"), (1, "a", "d")]
    assert rows[1]["_source_ts"] == dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=dt.UTC)
    dead = read(options, "db.cdc__dlq")
    assert [d["reason"] for d in dead] == ["type_mismatch"]


def test_debezium_tombstones_are_skipped_and_counted_not_dead_lettered(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.cdc_deletes", "sink-id": "cdc-deletes"}
    values: list[bytes | None] = []
    for i in range(40):  # every 10th change a delete, followed by its tombstone, as Debezium sends them
        delete = i % 10 == 9
        image = {"id": i, "name": f"n{i}"}
        event = {
            "before": image if delete else None,
            "after": None if delete else image,
            "op": "dc"[not delete],
        }
        values.append(json.dumps(event).encode())
        if delete:
            values.append(None)
    values.append(b"not json")  # still a dead letter
    decoding = decoding_sink(options, DecodeOptions(format=ValueFormat.DEBEZIUM_JSON))
    decoding(kafka_batch(spark, values), 0)

    rows = read(options, "db.cdc_deletes")
    assert sorted(r["id"] for r in rows) == list(range(40))
    assert sorted(r["id"] for r in rows if r["_op"] == "d") == [9, 19, 29, 39]
    assert [d["reason"] for d in read(options, "db.cdc_deletes__dlq")] == [
        "parse_error"
    ]  # the tombstones: none
    registry = decoding.sink.metrics.registry
    labels = {"table": "db.cdc_deletes", "reason": "tombstone"}
    assert registry.get_sample_value("icesink_source_records_skipped_total", labels) == 4
    written = registry.get_sample_value(
        "icesink_rows_written_total", {"table": "db.cdc_deletes", "sink_id": "cdc-deletes"}
    )
    assert written == 40


def test_on_bad_record_fail_fails_the_batch(spark: Any, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.strict", "sink-id": "strict", "on-bad-record": "fail"}
    decoding = decoding_sink(options)
    with pytest.raises(BadRecordError, match="cannot be decoded"):
        decoding(kafka_batch(spark, [b'{"id": 1}', b"oops"]), 0)


def test_a_batch_of_only_bad_values_creates_no_table(spark: Any, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.later", "sink-id": "later"}
    decoding_sink(options)(kafka_batch(spark, [b"oops", None]), 0)
    catalog = catalog_from_options(options)
    assert not catalog.table_exists("db.later")
    assert len(read(options, "db.later__dlq")) == 2


@pytest.mark.parametrize(
    ("extra", "fused_batches", "by_source"),
    [
        # batch 0 creates the table; then the decoding tasks write the rows themselves
        ({}, [0], [1, 2]),
        ({"partition-by": "bucket(4, id)", "distribution-mode": "none"}, [0], [1, 2]),
        ({"partition-by": "bucket(4, id)"}, [], []),  # the bucket shuffle needs the rows in Spark
    ],
    ids=["unpartitioned", "none-mode", "bucket-mode"],
)
def test_write_tasks_decode_the_rows_when_spark_has_nothing_to_do_with_them(
    spark: Any,
    catalog_options: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    extra: dict[str, str],
    fused_batches: list[int],
    by_source: list[int],
) -> None:
    options = {**catalog_options, "table": "db.fused", "sink-id": "fused", **extra}
    decoding = decoding_sink(options)
    batches = [
        [json.dumps({"id": i, "name": f"n{i}", "score": i / 4}).encode() for i in range(0, 300)],
        [json.dumps({"id": i, "name": f"n{i}", "score": i / 4}).encode() for i in range(300, 600)],
        # no "name": the table's column gets nulls, which Spark's normalization adds
        [json.dumps({"id": i, "score": i / 4}).encode() for i in range(600, 700)],
    ]
    first = 0
    with caplog.at_level(logging.INFO, logger="icesink.batch.write_job"):
        for batch_id, values in enumerate(batches):
            decoding(kafka_batch(spark, values, first_offset=first), batch_id)
            first += len(values)
    fused = [_first_arg(r) for r in caplog.records if "the write tasks make the rows" in r.getMessage()]
    assert fused == fused_batches

    table = catalog_from_options(options).load_table("db.fused")
    rows = table.scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(700))
    assert sorted(r["_kafka_offset"] for r in rows) == list(range(700))
    for r in rows:
        assert r["score"] == r["id"] / 4
        assert r["name"] == (f"n{r['id']}" if r["id"] < 600 else None)
    assert [int(summary_of(s)["added-records"]) for s in table.snapshots()] == [300, 300, 100]
    assert check_data_files(table) >= 3
    assert [i for i, s in enumerate(table.snapshots()) if _all_by_source(table, s)] == by_source


def test_none_mode_batches_one_task_holds_are_still_made_by_the_write_tasks(
    spark: Any,
    catalog_options: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the first batch, ``none`` coalesces a batch one task holds (``icesink.route.router``):
    that moves no row, so the write tasks still decode the rows themselves, every batch."""
    monkeypatch.setattr(router, "SINGLE_TASK_MAX_BYTES", 0)  # the two-core rule, in a task
    monkeypatch.setattr(router, "DRIVER_MAX_BYTES", 0)
    options = {**catalog_options, "table": "db.fused_none", "sink-id": "fused_none"}
    options |= {"partition-by": "bucket(4, id)", "distribution-mode": "none"}
    decoding = DecodingSink(
        IcebergSink.from_options(options), ValueDecoder(DecodeOptions()), write_in_source=False
    )
    with caplog.at_level(logging.INFO, logger="icesink"):
        for batch_id in range(3):
            ids = range(batch_id * 300, (batch_id + 1) * 300)
            values = [json.dumps({"id": i, "score": i / 4}).encode() for i in ids]
            decoding(kafka_batch(spark, values, first_offset=batch_id * 300), batch_id)
    fused = [_first_arg(r) for r in caplog.records if "the write tasks make the rows" in r.getMessage()]
    coalesced = [_first_arg(r) for r in caplog.records if "one task holds it" in r.getMessage()]
    assert fused == [0, 1, 2] and coalesced == [1, 2]
    table = catalog_from_options(options).load_table("db.fused_none")
    rows = table.scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(900))
    assert all(r["score"] == r["id"] / 4 for r in rows)
    assert check_data_files(table) >= 3


def _all_by_source(table: Any, snapshot: Any) -> bool:
    """Whether every data file ``snapshot`` added was written by the source's tasks (by its name)."""
    names = added_files(table, snapshot)
    return bool(names) and all(SOURCE_FILE_SUFFIX + "-" in n for n in names)


def test_a_kafka_timestamp_no_table_can_hold_is_dead_lettered_and_the_rest_fused(
    spark: Any, catalog_options: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    options = {**catalog_options, "table": "db.far", "sink-id": "far"}
    values = [json.dumps({"id": i}).encode() for i in range(20)]
    far_micros = 300_000_000_000_000_000  # year 11476: Spark holds it, the sink's range does not
    batch = kafka_batch(spark, values).withColumn(
        "timestamp",
        F.when(F.col("offset") == 7, F.timestamp_micros(F.lit(far_micros))).otherwise(F.col("timestamp")),
    )
    with caplog.at_level(logging.INFO, logger="icesink.batch.write_job"):
        decoding_sink(options)(batch, 0)
    assert any("the write tasks make the rows" in r.getMessage() for r in caplog.records)

    rows = read(options, "db.far")
    assert sorted(r["_kafka_offset"] for r in rows) == [i for i in range(20) if i != 7]
    [dead] = read(options, "db.far__dlq")
    assert dead["reason"] == "out_of_range"
    original = json.loads(dead["original_row"])
    assert original["_kafka_offset"] == 7 and original["_kafka_timestamp"] == str(far_micros)
    assert json.loads(base64.b64decode(original["_kafka_value"])) == {"id": 7}


def _first_arg(record: logging.LogRecord) -> object:
    assert isinstance(record.args, tuple)
    return record.args[0]
