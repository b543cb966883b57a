"""A routing sink whose tables the decoding tasks write (``icesink.batch.source_write``): read back, once."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame

from icesink import CommitError, IcebergSink, failpoints
from icesink.batch.source_write import SOURCE_FILE_SUFFIX
from icesink.commit.recovery import AttemptLog
from icesink.jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder
from tests.integration.test_decoding_sink import KAFKA_DDL
from tests.support.failing_commits import second_commit_fails
from tests.support.tables import added_files, catalog_from_options, check_data_files, summary_of

T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
Records = list[tuple[str, bytes | None]]  # (topic, value)


def kafka_batch(spark: Any, partitions: list[Records], first_offset: int = 0) -> DataFrame:
    """Raw Kafka rows, each list of records a Spark partition of its own (as the source reads a range)."""
    context, parts, offset = spark.sparkContext, [], first_offset
    for records in partitions:
        rows = [
            (None, value, topic, 0, offset + i, T0 + dt.timedelta(seconds=offset + i))
            for i, (topic, value) in enumerate(records)
        ]
        parts.append(context.parallelize(rows, 1))
        offset += len(records)
    batch: DataFrame = spark.createDataFrame(context.union(parts), KAFKA_DDL)
    assert batch.rdd.getNumPartitions() == len(partitions)
    return batch


def values(topic: str, ids: range, **extra: Any) -> Records:
    return [(topic, json.dumps({"id": i, f"{topic}_name": f"n{i}", **extra}).encode()) for i in ids]


def routed(options: dict[str, str]) -> DecodingSink:
    routing = {"sink-id": "routed-src", "route.by": "topic", "route.table-template": "rs.{topic}"}
    return DecodingSink(IcebergSink.from_options({**options, **routing}), ValueDecoder(DecodeOptions()))


def by_source(name: str) -> bool:
    return SOURCE_FILE_SUFFIX + "-" in name


def test_the_decoding_tasks_write_each_known_topics_table_and_the_sink_the_rest(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    sink = routed(catalog_options)
    sink(kafka_batch(spark, [values("a", range(10)), values("b", range(10)), values("c", range(10))]), 0)
    first = kafka_batch(
        spark,
        [
            values("a", range(10, 60)),  # the table's type: written by the decoding tasks
            values("b", range(10, 40)),
            values("b", range(40, 50), b_email="x@y"),  # a new column: the table evolves first, in the driver
            values("c", range(10, 30)) + values("a", range(60, 70)),  # two topics at once: left to the sink
            values("d", range(20)),  # a topic not seen before: its table is created by the sink
            [("c", b'{"id": 30')],  # broken: a dead letter
        ],
        first_offset=30,
    )
    sink(first, 1)

    catalog = catalog_from_options(catalog_options)
    expected = {"a": range(70), "b": range(50), "c": range(30), "d": range(20)}
    for topic, ids in expected.items():
        table = catalog.load_table(f"rs.{topic}")
        rows = table.scan().to_arrow().to_pylist()
        assert sorted(r["id"] for r in rows) == list(ids), topic
        own = {"id", f"{topic}_name", *(["b_email"] if topic == "b" else [])}
        assert {f.name for f in table.schema().fields if not f.name.startswith("_kafka_")} == own
        assert check_data_files(table) == len(table.inspect.files())
    tables = {t: catalog.load_table(f"rs.{t}") for t in expected}
    snapshot_files = {t: added_files(table, table.snapshots()[-1]) for t, table in tables.items()}
    assert any(by_source(n) for n in snapshot_files["a"])
    assert not all(by_source(n) for n in snapshot_files["a"])  # its rows beside c's went the sink's way
    assert any(by_source(n) for n in snapshot_files["b"]) and not all(
        by_source(n) for n in snapshot_files["b"]
    )
    assert not any(by_source(n) for n in snapshot_files["c"] + snapshot_files["d"])
    b = catalog.load_table("rs.b").scan().to_arrow().to_pylist()
    assert all(r["b_email"] == ("x@y" if r["id"] >= 40 else None) for r in b)
    assert [int(summary_of(s)["added-records"]) for s in catalog.load_table("rs.a").snapshots()] == [10, 60]
    [dead] = catalog.load_table("rs.routed__dlq").scan().to_arrow().to_pylist()
    assert json.loads(dead["original_row"])["_kafka_topic"] == "c"

    # Only a's records: every row written by the decoding tasks, and no attempt left open on the idle tables.
    sink(kafka_batch(spark, [values("a", range(70, 80))], first_offset=200), 2)
    a = catalog.load_table("rs.a")
    assert all(by_source(n) for n in added_files(a, a.snapshots()[-1])) and len(a.snapshots()) == 3
    assert sorted(r["id"] for r in a.scan().to_arrow().to_pylist()) == list(range(80))
    for topic in expected:
        table = catalog.load_table(f"rs.{topic}")
        assert not AttemptLog.for_sink(sink.sink.config, table, "routed-src").open_attempts(), topic
    sink.sink.close()


@pytest.mark.parametrize("restart", [False, True], ids=["same-sink", "new-sink"])
def test_a_crash_between_two_tables_commits_replays_the_rest_once(
    spark: Any, catalog_options: dict[str, str], warehouse: Path, restart: bool
) -> None:
    topics = ("a", "b", "c")
    sink = routed(catalog_options)
    sink(kafka_batch(spark, [values(t, range(5)) for t in topics]), 0)
    batch = kafka_batch(spark, [values(t, range(5, 105)) for t in topics], first_offset=15)
    with second_commit_fails(), pytest.raises(CommitError):
        sink(batch, 1)
    catalog = catalog_from_options(catalog_options)
    committed = [t for t in topics if len(catalog.load_table(f"rs.{t}").snapshots()) == 2]
    assert len(committed) == 2  # tables commit independently: one lacks the batch
    if restart:
        sink.sink.close()
        sink = routed(catalog_options)
    sink(batch, 1)  # the replay: the decoding tasks write again, to the table that lacks the batch only
    sink(batch, 1)  # and once more: every table has it

    referenced = set()
    for topic in topics:
        table = catalog.load_table(f"rs.{topic}")
        assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == list(range(105))
        assert [int(summary_of(s)["added-records"]) for s in table.snapshots()] == [5, 100]
        names = added_files(table, table.snapshots()[1])
        assert names and all(by_source(n) for n in names) == (topic in committed or not restart)
        referenced |= {n for s in table.snapshots() for n in added_files(table, s)}
    on_disk = {p.name for p in warehouse.rglob("*.parquet") if "/rs/" in str(p)}
    assert on_disk == referenced  # nothing of the failed attempt is left
    sink.sink.close()


def test_a_batch_failing_after_the_tasks_wrote_is_settled_by_the_replay_in_the_same_sink(
    spark: Any, catalog_options: dict[str, str], warehouse: Path
) -> None:
    topics = ("a", "b")
    sink = routed(catalog_options)
    sink(kafka_batch(spark, [values(t, range(5)) for t in topics]), 0)
    batch = kafka_batch(spark, [*(values(t, range(5, 55)) for t in topics), [("a", b'{"id": 55')]], 10)
    failpoints.arm(
        "deadletter", "raise"
    )  # the broken value's dead letter: after the tasks wrote, before the sink
    try:
        with pytest.raises(failpoints.InjectedFault):
            sink(batch, 1)
    finally:
        failpoints.disarm_all()
    left = {p.name for p in warehouse.rglob("*.parquet") if by_source(p.name)}
    assert len(left) == 2  # a file per table, of an attempt that never reached the sink

    sink(batch, 1)  # the replay, in the same process: the failed attempt is settled first
    catalog = catalog_from_options(catalog_options)
    referenced = set()
    for topic in topics:
        table = catalog.load_table(f"rs.{topic}")
        assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == list(range(55))
        referenced |= {n for s in table.snapshots() for n in added_files(table, s)}
        assert not AttemptLog.for_sink(sink.sink.config, table, "routed-src").open_attempts()
    on_disk = {
        p.name for p in warehouse.rglob("*.parquet") if "/rs/" in str(p) and "routed__dlq" not in str(p)
    }
    assert on_disk == referenced and not left & on_disk
    assert len(catalog.load_table("rs.routed__dlq").scan().to_arrow()) == 1
    sink.sink.close()


def raw_records(records: Records, first_offset: int) -> pa.RecordBatch:
    """``records`` as the Kafka source's record batches hold them."""
    n = len(records)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array([v for _, v in records], pa.binary()),
            "topic": [t for t, _ in records],
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
            "timestamp": pa.array([T0] * n, pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * n, pa.int32()),
        }
    )


def test_new_topics_get_their_tables_from_their_latest_records_and_the_decoding_tasks_write_them(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    latest: dict[str, Records] = {
        "a": values("a", range(10, 20)),
        "b": values("b", range(5, 15)),  # without the field of b's last records
        "c": [("c", b"not json")],  # nothing decodes: no table before the batch
    }
    asked: list[frozenset[str]] = []

    def latest_records(known: frozenset[str]) -> dict[str, list[pa.RecordBatch]]:
        asked.append(known)
        return {t: [raw_records(r, 0)] for t, r in latest.items() if t not in known}

    routing = {"sink-id": "routed-new", "route.by": "topic", "route.table-template": "rn.{topic}"}
    iceberg = IcebergSink.from_options({**catalog_options, **routing})
    sink = DecodingSink(iceberg, ValueDecoder(DecodeOptions()), latest_records=latest_records)
    sink.prepare()  # before the query starts: the topics' tables, on a thread the first batch waits for
    first = [
        values("a", range(20)),
        values("b", range(15)),
        values("b", range(15, 20), b_email="x@y"),
        latest["c"],
    ]
    sink(kafka_batch(spark, first), 0)

    catalog = catalog_from_options(catalog_options)
    a, b = catalog.load_table("rn.a"), catalog.load_table("rn.b")
    assert sorted(r["id"] for r in a.scan().to_arrow().to_pylist()) == list(range(20))
    assert sorted(r["id"] for r in b.scan().to_arrow().to_pylist()) == list(range(20))
    assert all(by_source(n) for n in added_files(a, a.snapshots()[-1]))  # a's first batch: the tasks wrote it
    b_files = added_files(b, b.snapshots()[-1])
    assert any(by_source(n) for n in b_files) and not all(
        by_source(n) for n in b_files
    )  # the new field: the sink
    assert "b_email" not in {f.name for f in b.schemas()[0].fields}  # the latest records' type first
    assert "b_email" in {f.name for f in b.schema().fields}
    assert [len(a.snapshots()), len(b.snapshots())] == [1, 1]
    assert not catalog.table_exists("rn.c")
    [dead] = catalog.load_table("rn.routed__dlq").scan().to_arrow().to_pylist()
    assert json.loads(dead["original_row"])["_kafka_topic"] == "c"

    sink(kafka_batch(spark, [values("a", range(20, 30))], first_offset=100), 1)
    # Before the query, then before each batch: c's latest records are read again, a and b's not.
    assert asked == [frozenset(), {"a", "b"}, {"a", "b"}]
    iceberg.close()


def test_new_topics_whose_latest_records_cannot_be_read_or_typed_go_through_the_sink_once(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    def unreadable(known: frozenset[str]) -> dict[str, list[pa.RecordBatch]]:
        raise RuntimeError("broker unreachable")

    routing = {
        "sink-id": "routed-fail",
        "route.by": "topic",
        "route.table-template": "rf.{topic}",
        # b's table cannot be made from its latest records (they lack b_email), but from its batch's
        "route.table-options": json.dumps({"rf.b": {"partition-by": "b_email"}}),
    }
    iceberg = IcebergSink.from_options({**catalog_options, **routing})
    sink = DecodingSink(iceberg, ValueDecoder(DecodeOptions()), latest_records=unreadable)
    sink(kafka_batch(spark, [values("a", range(10))]), 0)  # the read fails: a's first batch is the sink's

    b_latest = {"b": [raw_records(values("b", range(3)), 0)]}
    sink.latest_records = lambda known: {t: r for t, r in b_latest.items() if t not in known}
    batch = [values("a", range(10, 20)), values("b", range(10), b_email="x@y")]
    sink(kafka_batch(spark, batch, first_offset=10), 1)

    catalog = catalog_from_options(catalog_options)
    a = catalog.load_table("rf.a")
    assert sorted(r["id"] for r in a.scan().to_arrow().to_pylist()) == list(range(20))
    assert not any(by_source(n) for n in added_files(a, a.snapshots()[0]))
    assert all(by_source(n) for n in added_files(a, a.snapshots()[-1]))  # known after its first batch
    assert check_data_files(a) == len(a.inspect.files())
    b = catalog.load_table("rf.b")
    assert sorted(r["id"] for r in b.scan().to_arrow().to_pylist()) == list(range(10))
    assert [f.name for f in b.spec().fields] == ["b_email"]
    assert not any(by_source(n) for n in added_files(b, b.snapshots()[0]))
    assert check_data_files(b) == len(b.inspect.files())
    iceberg.close()
