"""Schema evolution: new columns and wider types reach the table, coordinated across writers."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StructType,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import CommitConfig, IcebergSink, SinkMetrics
from icesink.commit.committer import Committer
from icesink.schema.coordinator import SchemaCheck, SchemaCoordinator
from tests.support.processes import spawn_evolving_writer
from tests.support.tables import catalog_from_options, row_multiset, table_rows


def sample(metrics: SinkMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


# --- one stream whose batches drift -------------------------------------------------------

ADDRESS = "struct<city:string>"
ADDRESS_ZIP = "struct<city:string, zip:int>"
ADDRESS_ZIP_LONG = "struct<city:string, zip:bigint>"
BATCHES: list[tuple[str, list[tuple[Any, ...]]]] = [
    # 0: creates the table
    (
        f"id bigint not null, qty int, price float, address {ADDRESS}, amount decimal(10,2)",
        [(i, i, i + 0.5, (f"c{i}",), Decimal(i) / 4) for i in range(0, 100)],
    ),
    # 1: a new top-level column, a new nested field
    (
        f"id bigint, qty int, price float, address {ADDRESS_ZIP}, note string",
        [(i, i, i + 0.25, (f"c{i}", 10_000 + i), f"n{i}") for i in range(100, 200)],
    ),
    # 2: int to long, float to double (values only the wider types hold)
    ("id bigint, qty bigint, price double", [(i, 2**40 + i, i + 0.1) for i in range(200, 300)]),
    # 3: narrower than the table: nothing changes, no lock
    ("id bigint, qty int", [(i, -i) for i in range(300, 400)]),
    # 4: a list of structs, then 5: a field inside its element struct
    ("id bigint, items array<struct<sku:string>>", [(i, [(f"s{i}",)]) for i in range(400, 500)]),
    (
        "id bigint, items array<struct<sku:string, n:bigint>>",
        [(i, [(f"s{i}", i * 2**33)]) for i in range(500, 600)],
    ),
    # 6: a nested int to long, decimal precision up with the same scale
    (
        f"id bigint, address {ADDRESS_ZIP_LONG}, amount decimal(14,2)",
        [(i, (f"c{i}", 2**35 + i), Decimal("123456789012.34")) for i in range(600, 700)],
    ),
]


def _expected(ddl: str, rows: list[tuple[Any, ...]], spark: SparkSession) -> list[dict[str, Any]]:
    """The rows as the final table must return them (every column; missing ones null)."""
    names = [f.name for f in spark.createDataFrame([], ddl).schema.fields]
    full: list[dict[str, Any]] = []
    for row in rows:
        values = dict(zip(names, row, strict=True))
        address = values.get("address")
        full.append(
            {
                "id": values["id"],
                "qty": values.get("qty"),
                "price": values.get("price"),
                "address": None
                if address is None
                else {"city": address[0], "zip": address[1] if len(address) > 1 else None},
                "amount": values.get("amount"),
                "note": values.get("note"),
                "items": None
                if values.get("items") is None
                else [{"sku": it[0], "n": it[1] if len(it) > 1 else None} for it in values["items"]],
            }
        )
    return full


def _read_back(table: Any) -> list[dict[str, Any]]:
    """The table's rows, with pyiceberg's null ``list<struct>`` read bug undone.

    pyiceberg 0.12 reads a null ``list<struct<...>>`` as ``[]`` (apache/iceberg-python#3833);
    the files hold nulls (checked here on the files themselves), and no input has an empty list.
    """
    for task in table.scan().plan_files():
        content = pq.read_table(task.file.file_path.removeprefix("file://"))
        if "items" in content.column_names:
            assert [] not in content.column("items").to_pylist()
    rows = table_rows(table)
    for row in rows:
        if row["items"] == []:
            row["items"] = None
    return rows


def test_batches_add_columns_and_widen_types(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.drift", "sink-id": "drift", "partition-by": "bucket(4, id)"}
    sink = IcebergSink.from_options(options)
    expected: list[dict[str, Any]] = []
    ids_before: dict[str, int] = {}
    for batch_id, (ddl, rows) in enumerate(BATCHES):
        sink(spark.createDataFrame(rows, ddl), batch_id)
        expected += _expected(ddl, rows, spark)
        if batch_id == 0:
            schema = sink.catalog.load_table("db.drift").schema()
            ids_before = {f.name: f.field_id for f in schema.fields}

    table = sink.catalog.load_table("db.drift")
    schema = table.schema()
    assert [f.name for f in schema.fields] == ["id", "qty", "price", "address", "amount", "note", "items"]
    assert {f.name: f.field_id for f in schema.fields if f.name in ids_before} == ids_before
    assert schema.find_field("qty").field_type == LongType()
    assert schema.find_field("price").field_type == DoubleType()
    assert schema.find_field("amount").field_type == DecimalType(14, 2)
    assert schema.find_field("address.zip").field_type == LongType()
    items = schema.find_field("items").field_type
    assert isinstance(items, ListType) and isinstance(items.element_type, StructType)
    assert [f.name for f in items.element_type.fields] == ["sku", "n"]
    assert all(not f.required for f in schema.fields if f.name != "id")
    # Old rows read back with nulls in new columns, every value exact (old files read by field id).
    assert row_multiset(_read_back(table)) == row_multiset(expected)

    m = sink.metrics
    t = {"table": "db.drift"}
    assert sample(m, "icesink_schema_changes_total", kind="add_column", **t) == 4  # note, zip, items, items.n
    assert sample(m, "icesink_schema_changes_total", kind="widen_type", **t) == 4  # qty, price, zip, amount
    # Only batches with a real difference took the lock: 1, 2, 4, 5, 6 (not 0, which created it; not 3).
    assert sample(m, "icesink_schema_lock_acquisitions_total", **t) == 5
    assert sample(m, "icesink_schema_checks_total", outcome="unchanged", **t) == 2
    assert len(table.metadata.schemas) == 6


def test_evolution_off_leaves_the_schema_alone(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.frozen", "sink-id": "frozen", "schema.evolution": "off"}
    sink = IcebergSink.from_options(options)
    sink(spark.createDataFrame([(1, 5)], "id bigint, qty int"), 0)
    sink(spark.createDataFrame([(2, 2**40), (3, 7)], "id bigint, qty bigint"), 1)  # no widening: out of range
    table = sink.catalog.load_table("db.frozen")
    assert table.schema().find_field("qty").field_type == IntegerType()
    assert sorted(r["id"] for r in table_rows(table)) == [1, 3]
    dead = table_rows(sink.catalog.load_table("db.frozen__dlq"))
    assert [(d["column"], d["reason"], d["value"]) for d in dead] == [("qty", "out_of_range", str(2**40))]
    assert sample(sink.metrics, "icesink_schema_lock_acquisitions_total", table="db.frozen") == 0


# --- data written under one schema, committed after another writer changed it -------------


def test_files_committed_after_another_writer_evolved_are_read_by_field_id(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = {**catalog_options, "table": "db.interleave"}
    sink_a = IcebergSink.from_options({**base, "sink-id": "a"})
    sink_b = IcebergSink.from_options({**base, "sink-id": "b"})
    sink_a(spark.createDataFrame([(1, 10, "one")], "id bigint, qty int, label string"), 0)

    real_commit = Committer.commit_batches
    interleaved = threading.Event()

    def commit(self: Committer, *args: Any, **kwargs: Any) -> Any:
        if not interleaved.is_set():  # A's files are written with the old schema; before they commit:
            interleaved.set()
            # ... another writer widens qty and adds a column, and someone renames label.
            sink_b(
                spark.createDataFrame(
                    [(2, 2**40, "two", "x")], "id bigint, qty bigint, label string, extra string"
                ),
                0,
            )
            table = sink_b.catalog.load_table("db.interleave")
            table.update_schema().rename_column("label", "title").commit()
        return real_commit(self, *args, **kwargs)

    monkeypatch.setattr(Committer, "commit_batches", commit)
    sink_a(spark.createDataFrame([(3, 30, "three")], "id bigint, qty int, label string"), 1)
    assert interleaved.is_set()
    # A's next batch still says "label": that is a new column now, with a new field id.
    sink_a(spark.createDataFrame([(4, 40, "four")], "id bigint, qty int, label string"), 2)

    table = sink_a.catalog.load_table("db.interleave")
    schema = table.schema()
    assert [f.name for f in schema.fields] == ["id", "qty", "title", "extra", "label"]
    assert schema.find_field("label").field_id > schema.find_field("title").field_id
    rows = sorted(table_rows(table), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "qty": 10, "title": "one", "extra": None, "label": None},
        {"id": 2, "qty": 2**40, "title": "two", "extra": "x", "label": None},
        {"id": 3, "qty": 30, "title": "three", "extra": None, "label": None},
        {"id": 4, "qty": 40, "title": None, "extra": None, "label": "four"},
    ]


# --- the coordinator: races lost, changes already applied, cached schemas -------------------


def _struct(*fields: tuple[str, st.DataType]) -> st.StructType:
    return st.StructType([st.StructField(n, t) for n, t in fields])


def test_schema_commit_that_loses_a_race_is_retried(catalog_options: dict[str, str]) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace("db")
    catalog.create_table("db.race", schema=Schema(NestedField(1, "id", LongType())))
    mine, theirs = SchemaCoordinator("db.race"), SchemaCoordinator("db.race")  # two drivers: two locks
    table, their_table = catalog.load_table("db.race"), catalog.load_table("db.race")
    early = catalog.load_table("db.race")  # a third driver's view, from before either change
    retry = CommitConfig(min_wait_ms=1, max_wait_ms=10)
    real_update_schema = table.update_schema

    def update_schema(*args: Any, **kwargs: Any) -> Any:
        if len(catalog.load_table("db.race").schema().fields) == 1:  # between my refresh and my commit
            theirs.evolve(their_table, _struct(("id", st.LongType()), ("b", st.StringType())), retry=retry)
        return real_update_schema(*args, **kwargs)

    table.update_schema = update_schema  # type: ignore[method-assign]
    metrics = SinkMetrics()
    outcome = mine.evolve(
        table, _struct(("id", st.LongType()), ("a", st.LongType())), retry=retry, metrics=metrics
    )

    assert outcome.check is SchemaCheck.EVOLVED and outcome.conflicts == 1
    assert [f.name for f in catalog.load_table("db.race").schema().fields] == ["id", "b", "a"]
    assert sample(metrics, "icesink_schema_commit_conflicts_total", table="db.race") == 1
    # A third driver, loaded before both, wanting b: under the lock it finds b there.
    late = SchemaCoordinator("db.race")
    outcome = late.evolve(early, _struct(("b", st.StringType())), retry=retry, metrics=metrics)
    assert outcome.check is SchemaCheck.ALREADY_APPLIED and not outcome.changes


def test_cached_schema_spares_the_lock(catalog_options: dict[str, str]) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace("db")
    catalog.create_table("db.cached", schema=Schema(NestedField(1, "id", LongType())))
    stale = catalog.load_table("db.cached")  # another query loaded it before the change
    coordinator, metrics, retry = SchemaCoordinator("db.cached"), SinkMetrics(), CommitConfig()
    batch = _struct(("id", st.LongType()), ("c", st.StringType()))
    first = coordinator.evolve(catalog.load_table("db.cached"), batch, retry=retry, metrics=metrics)
    second = coordinator.evolve(stale, batch, retry=retry, metrics=metrics)
    assert (first.check, second.check) == (SchemaCheck.EVOLVED, SchemaCheck.REFRESHED)
    assert [f.name for f in second.table.schema().fields] == ["id", "c"]
    assert sample(metrics, "icesink_schema_lock_acquisitions_total", table="db.cached") == 1


# --- eight queries in this driver and another process, all evolving at once ----------------------

QUERIES = 8
PROCESSES = 1  # a second costs a JVM more; the PostgreSQL test runs two processes at once
ROWS_PER_FILE = 300
BASE_SCHEMA = st.StructType(
    [st.StructField("id", st.LongType(), False), st.StructField("k", st.IntegerType())]
)


def _write_writer_input(folder: Path, writer: str, offset: int) -> list[int]:
    """Two files (two micro-batches) with the base columns plus the writer's own ones."""
    folder.mkdir(parents=True)
    ids: list[int] = []
    for n in range(2):
        batch_ids = list(range(offset + n * ROWS_PER_FILE, offset + (n + 1) * ROWS_PER_FILE))
        ids += batch_ids
        table = pa.table(
            {
                "id": pa.array(batch_ids, pa.int64()),
                "k": pa.array([i % 7 for i in batch_ids], pa.int32()),
                f"{writer}_value": pa.array([i * 3 for i in batch_ids], pa.int64()),
                "meta": pa.array(
                    [{writer: f"{writer}-{i}"} for i in batch_ids], pa.struct([(writer, pa.string())])
                ),
            }
        )
        pq.write_table(table, folder / f"part-{n}.parquet")
    return ids


def _start_query(spark: SparkSession, source: Path, checkpoint: Path, foreach: Any) -> Any:
    schema = spark.read.parquet(str(source)).schema
    stream: DataFrame = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    return (
        stream.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


@pytest.mark.slow
def test_queries_and_processes_evolving_at_once_converge(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.crowd"}  # unpartitioned: no shuffle, the race is the point
    writers = [f"q{q}" for q in range(QUERIES)] + [f"p{p}" for p in range(PROCESSES)]
    ids = {w: _write_writer_input(tmp_path / "in" / w, w, n * 100_000) for n, w in enumerate(writers)}
    go = tmp_path / "go"
    # the other writers boot meanwhile
    processes = [spawn_evolving_writer(tmp_path, w, options, go) for w in writers[QUERIES:]]
    try:
        sink = IcebergSink.from_options(options)
        sink.prepare(BASE_SCHEMA)  # so that every writer's first batch brings something new

        def release() -> None:  # run once all eight queries wait: then the processes go too
            deadline = time.monotonic() + 300
            while not all((tmp_path / f"{w}.ready").exists() for w in writers[QUERIES:]):
                assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
                time.sleep(0.05)
            go.touch()

        barrier = threading.Barrier(QUERIES, action=release, timeout=600)

        def at_once(batch_df: DataFrame, batch_id: int) -> None:
            if batch_id == 0:
                barrier.wait()  # every writer's first batch evolves at the same moment
            sink(batch_df, batch_id)

        queries = [
            _start_query(spark, tmp_path / "in" / w, tmp_path / "ck" / w, at_once) for w in writers[:QUERIES]
        ]
        for query in queries:
            query.awaitTermination(900)
            assert query.exception() is None, query.exception()
        outputs = [p.communicate(timeout=600) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(processes, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
        result = json.loads(
            next(line for line in out.splitlines() if line.startswith("ICESINK_JOB_RESULT"))[19:]
        )
        assert result["icesink_rows_written_total"] == 2 * ROWS_PER_FILE
        assert result["icesink_schema_lock_acquisitions_total"] == 1  # its first batch only

    table = sink.catalog.load_table("db.crowd")
    schema = table.schema()
    names = [f.name for f in schema.fields]
    assert sorted(names) == sorted(["id", "k", "meta", *(f"{w}_value" for w in writers)])  # each exactly once
    meta = schema.find_field("meta").field_type
    assert isinstance(meta, StructType) and sorted(f.name for f in meta.fields) == sorted(writers)
    rows = table_rows(table)
    assert len(rows) == sum(len(v) for v in ids.values())
    writer_of = {i: w for w, batch in ids.items() for i in batch}
    for row in rows:
        w = writer_of[row["id"]]
        assert row[f"{w}_value"] == row["id"] * 3
        assert row["meta"] == {x: (f"{w}-{row['id']}" if x == w else None) for x in writers}
        assert all(row[f"{x}_value"] is None for x in writers if x != w)

    m, t = sink.metrics, {"table": "db.crowd"}
    # In this driver, exactly the eight first batches had a difference, and only they took the lock.
    assert sample(m, "icesink_schema_lock_acquisitions_total", **t) == QUERIES
    evolved = sample(m, "icesink_schema_checks_total", outcome="evolved", **t)
    already = sample(m, "icesink_schema_checks_total", outcome="already_applied", **t)
    assert evolved + already == QUERIES
    # Every second batch found nothing new (and prepare() found its own schema).
    assert sample(m, "icesink_schema_checks_total", outcome="unchanged", **t) == QUERIES + 1
    assert sample(m, "icesink_schema_changes_total", kind="add_column", **t) >= QUERIES
