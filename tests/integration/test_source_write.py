"""Rows the decoding tasks write themselves (``icesink.batch.source_write``): read back, once,
across a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from icesink import IcebergSink, failpoints
from icesink.batch.source_write import SOURCE_FILE_SUFFIX
from icesink.jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder
from tests.integration.test_decoding_sink import kafka_batch
from tests.support.tables import added_files, catalog_from_options, check_data_files, summary_of


def decoding_sink(options: dict[str, str]) -> DecodingSink:
    return DecodingSink(IcebergSink.from_options(options), ValueDecoder(DecodeOptions()))


def by_source(name: str) -> bool:
    return SOURCE_FILE_SUFFIX + "-" in name


def named(ids: range) -> list[bytes | None]:
    return [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in ids]


def files_on_disk(warehouse: Path, table: str) -> set[str]:
    """The Parquet files of ``db.<table>`` (not its dead-letter table's)."""
    return {p.name for p in (warehouse / "db" / table).rglob("*.parquet")}


def test_a_batch_half_written_by_the_decoding_tasks_commits_once_across_a_crash(
    spark: Any, catalog_options: dict[str, str], warehouse: Path
) -> None:
    options = {**catalog_options, "table": "db.src", "sink-id": "src"}
    decoding_sink(options)(kafka_batch(spark, named(range(100))), 0)  # creates the table

    # Most values have the table's type; 20 carry a new field (the table must evolve for
    # them first: they go through the sink) and one is broken (a dead letter).
    values = named(range(100, 300))
    values += [json.dumps({"id": i, "name": f"n{i}", "email": f"{i}@x"}).encode() for i in range(300, 320)]
    values.append(b'{"id": 320')
    batch = kafka_batch(spark, values, first_offset=100)

    # The decoding tasks wrote their files; the driver dies before the table evolves for the rest.
    failpoints.arm("schema", "raise")
    try:
        with pytest.raises(failpoints.InjectedFault):
            decoding_sink(options)(batch, 1)
    finally:
        failpoints.disarm_all()
    left = {p.name for p in warehouse.rglob("*.parquet") if by_source(p.name)}
    assert left, "the crashed attempt's source tasks wrote no file"

    decoding_sink(options)(batch, 1)  # the restarted query: a new sink settles the attempt, then the replay
    decoding_sink(options)(batch, 1)  # and once more, after it was committed: skipped

    table = catalog_from_options(options).load_table("db.src")
    rows = table.scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(320))
    assert all(r["email"] == (f"{r['id']}@x" if r["id"] >= 300 else None) for r in rows)
    assert all(r["name"] == f"n{r['id']}" for r in rows)
    assert [int(summary_of(s)["added-records"]) for s in table.snapshots()] == [100, 220]
    names = added_files(table, table.snapshots()[1])
    assert any(by_source(n) for n in names) and not all(by_source(n) for n in names)
    assert check_data_files(table) == len(names) + len(added_files(table, table.snapshots()[0]))
    on_disk = files_on_disk(warehouse, "src")
    assert on_disk == {*names, *added_files(table, table.snapshots()[0])}  # the crashed attempt's files: gone
    assert not left & on_disk
    [dead] = catalog_from_options(options).load_table("db.src__dlq").scan().to_arrow().to_pylist()
    assert json.loads(dead["original_row"])["_kafka_offset"] == 320


def test_a_table_with_a_required_column_is_written_by_the_sink(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.required", "sink-id": "required"}
    catalog = catalog_from_options(options)
    catalog.create_namespace_if_not_exists("db")
    catalog.create_table(
        "db.required",
        Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType())),
    )
    values = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(10)]
    values.append(json.dumps({"name": "no id"}).encode())  # a bad row for this table: a dead letter
    batch = kafka_batch(spark, values)
    sink = IcebergSink.from_options(options)
    assert sink.source_write(batch, 0) is None  # a null id is a bad row: only Spark's normalization finds it
    DecodingSink(sink, ValueDecoder(DecodeOptions(metadata_columns=False)))(batch, 0)

    table = catalog.load_table("db.required")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == list(range(10))
    assert not any(by_source(n) for n in added_files(table, table.snapshots()[0]))
    assert len(catalog.load_table("db.required__dlq").scan().to_arrow()) == 1


@pytest.mark.parametrize("point", ["storage.write", "write.task"])
def test_a_decoding_task_that_fails_while_writing_leaves_nothing_behind_the_replay(
    spark: Any, catalog_options: dict[str, str], warehouse: Path, point: str
) -> None:
    options = {**catalog_options, "table": "db.faulty", "sink-id": "faulty"}
    decoding_sink(options)(kafka_batch(spark, named(range(50))), 0)
    # A field that is always null has no type yet: no column for it, and no reason not to write.
    values = [json.dumps({"id": i, "name": f"n{i}", "note": None}).encode() for i in range(50, 250)]
    batch = kafka_batch(spark, values, first_offset=50)

    failpoints.arm(point, "raise")  # in the decoding tasks: as a file is opened, or after the files
    try:
        with pytest.raises(Exception, match=point.replace(".", "[.]")):
            decoding_sink(options)(batch, 1)
    finally:
        failpoints.disarm_all()
    replay = decoding_sink(options)
    replay(batch, 1)  # the restarted query's replay
    peak = replay.sink.metrics.registry.get_sample_value(
        "icesink_task_peak_rss_bytes", {"table": "db.faulty"}
    )
    assert peak is not None and peak > 0  # the decoding tasks report their worker's memory too
    phases = [
        replay.sink.metrics.registry.get_sample_value(
            "icesink_write_task_seconds_max", {"table": "db.faulty", "phase": phase}
        )
        for phase in ("input", "close")
    ]
    assert all(seconds is not None and seconds > 0 for seconds in phases)  # and their phases' times

    table = catalog_from_options(options).load_table("db.faulty")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == list(range(250))
    assert [int(summary_of(s)["added-records"]) for s in table.snapshots()] == [50, 200]
    first, second = (added_files(table, s) for s in table.snapshots())
    assert second and all(by_source(n) for n in second)
    assert "note" not in table.schema().column_names
    assert files_on_disk(warehouse, "faulty") == {*first, *second}
