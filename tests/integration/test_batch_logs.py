"""Every log record of a batch's steps names that batch (``icesink_batch_id``, with sink id and table)."""

from __future__ import annotations

import logging
import re

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink

STEP_LOGGERS = {
    "icesink.sink",
    "icesink.normalize",
    "icesink.schema.coordinator",
    "icesink.route.router",
    "icesink.batch.write_job",
    "icesink.batch.dead_letters",
    "icesink.batch.commits",
    "icesink.batch.table_batch",
    "icesink.commit.committer",
}


def test_each_step_record_carries_its_batch_id(
    spark: SparkSession, catalog_options: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    options = {**catalog_options, "table": "db.logged", "sink-id": "logged"}
    sink = IcebergSink.from_options(options)
    first = spark.range(0, 20).select("id", F.lit("x").alias("v"))
    second = spark.range(20, 40).select("id", F.lit("y").alias("v"), F.lit(1).alias("extra"))  # evolves
    records: dict[int, list[logging.LogRecord]] = {}
    for batch_id, frame in ((7, first), (8, second)):
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="icesink"):
            sink(frame, batch_id)
        records[batch_id] = [r for r in caplog.records if r.name in STEP_LOGGERS]

    for batch_id, batch_records in records.items():
        assert {r.name for r in batch_records} >= {"icesink.batch.commits", "icesink.commit.committer"}
        for record in batch_records:
            assert record.__dict__.get("icesink_batch_id") == batch_id, record.getMessage()
            assert record.__dict__.get("icesink_sink_id") == "logged"
            assert record.__dict__.get("icesink_table") == "db.logged"
            named = re.search(r"\bbatch(?:es)? (\d+)", record.getMessage())
            if named:
                assert int(named.group(1)) == batch_id, record.getMessage()
            assert record.args is None or isinstance(record.args, tuple)  # %s arguments, formatted lazily
    assert any(r.name == "icesink.schema.coordinator" for r in records[8])  # batch 8 added a column


def test_records_outside_a_batch_carry_no_batch_id(
    catalog_options: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    from icesink.log_context import batch_logger

    with caplog.at_level(logging.INFO, logger="icesink"):
        batch_logger("icesink.sink").info("no batch here: %s", 1)
    (record,) = caplog.records
    assert record.__dict__["icesink_batch_id"] is None
    assert record.getMessage() == "no batch here: 1"
