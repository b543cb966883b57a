"""Two streaming queries of one process write one table at once: every row exactly once.

Processes writing one table at once are tested where they also evolve it: on SQLite in
``test_schema_evolution.py`` (eight queries and two processes), on PostgreSQL in
``tests/deploy/test_sink_postgres.py``.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.integration.test_crash_recovery import write_input


def test_two_queries_in_one_process(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.shared", "partition-by": "bucket(4, id)"}
    sink = IcebergSink.from_options(options)
    expected: set[int] = set()
    queries = []
    for q in range(2):
        source = tmp_path / f"in{q}"
        expected |= write_input(source, files=3, offset=q * 100_000)
        schema = spark.read.parquet(str(source)).schema
        queries.append(
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / f"ck{q}"))
            .trigger(availableNow=True)
            .start()
        )
    for query in queries:
        query.awaitTermination(600)
        assert query.exception() is None
    table = sink.catalog.load_table("db.shared")
    ids = table.scan().to_arrow().column("id").to_pylist()
    assert len(ids) == len(expected) and set(ids) == expected
    sink_ids = {s.summary["icesink.sink-id"] for s in table.snapshots() if s.summary is not None}
    assert sink_ids == {str(q.id) for q in queries}
    assert len(table.snapshots()) == 6
