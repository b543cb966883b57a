"""A routed sink with a commit cadence: what only many tables have (what one table has too is in
``test_one_or_many_tables.py``): tables a batch does not write, per-table options."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql import DataFrame, SparkSession

from icesink import IcebergSink
from icesink.commit import policy
from tests.support.tables import catalog_from_options, summary_of

KINDS = ("a", "b", "c")


def _routed(catalog_options: dict[str, str], **options: str) -> dict[str, str]:
    routing = {"route.by": "field", "route.field": "kind", "route.table-template": "ev.{value}"}
    return {**catalog_options, "sink-id": "cadence", **routing, **options}


def _batch(spark: SparkSession, batch_id: int, kinds: tuple[str, ...] = KINDS, rows: int = 30) -> DataFrame:
    ids = range(batch_id * rows, (batch_id + 1) * rows)
    return spark.createDataFrame([(i, kinds[i % len(kinds)]) for i in ids], "id long, kind string")


def _batch_ids(options: dict[str, str], name: str) -> list[str]:
    table = catalog_from_options(options).load_table(name)
    return [summary_of(s)["icesink.batch-ids"] for s in table.snapshots()]


def _ids(options: dict[str, str], name: str) -> list[int]:
    table = catalog_from_options(options).load_table(name)
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_a_table_seen_once_is_staged_until_the_sink_closes(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = _routed(catalog_options, **{"commit.max-batches": "3"})
    with IcebergSink.from_options(options) as sink:
        sink(_batch(spark, 0, (*KINDS, "rare")), 0)  # "rare" appears once: staged, never due
        for batch_id in range(1, 5):
            sink(_batch(spark, batch_id), batch_id)
        sink(_batch(spark, 3), 3)  # a replay of a staged batch: skipped
        for kind in KINDS:  # committed with batch 2; 3 and 4 staged
            assert _batch_ids(options, f"ev.{kind}") == ["0-2"]
        assert _batch_ids(options, "ev.rare") == []
        replays = sink.metrics.registry.get_sample_value(
            "icesink_replays_skipped_total", {"table": "ev.a", "sink_id": "cadence"}
        )
        assert replays == 1
    # close() commits what is staged, each table in one snapshot
    expected = {kind: [i for i in range(30, 150) if KINDS[i % 3] == kind] for kind in KINDS}
    for i in range(30):
        expected.setdefault((*KINDS, "rare")[i % 4], []).append(i)
    for kind in KINDS:
        assert _batch_ids(options, f"ev.{kind}") == ["0-2", "3-4"]
        assert _ids(options, f"ev.{kind}") == sorted(expected[kind])
    assert _batch_ids(options, "ev.rare") == ["0"]
    assert _ids(options, "ev.rare") == expected["rare"]


def test_a_query_s_flush_commits_what_it_staged_in_its_routed_tables(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    """What the listener calls when the query goes idle or stops: ``flush(query id)``."""
    options = _routed(catalog_options, **{"commit.max-batches": "3"})
    source = str(tmp_path / "input")
    _batch(spark, 0).write.parquet(source)
    with IcebergSink.from_options(options) as sink:
        query = (
            spark.readStream.schema("id long, kind string")
            .parquet(source)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(600)
        assert query.exception() is None, query.exception()
        sink.flush(str(query.id))  # before close(), which would commit them anyway
        for kind in KINDS:
            assert _batch_ids(options, f"ev.{kind}") == ["0"]


def test_a_table_that_gets_no_more_rows_is_committed_once_its_interval_passes(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _routed(catalog_options, **{"commit.interval-s": "60"})
    sink = IcebergSink.from_options(options)
    sink(_batch(spark, 0), 0)
    assert all(_batch_ids(options, f"ev.{kind}") == [] for kind in KINDS)  # staged
    later = time.time() + 61  # the cadence's clock only: staging keeps the real one
    monkeypatch.setattr(policy, "time", SimpleNamespace(time=lambda: later))
    sink(_batch(spark, 1, ("a",)), 1)  # only table a gets rows; b and c are due all the same
    assert _batch_ids(options, "ev.a") == ["0-1"]
    assert _batch_ids(options, "ev.b") == _batch_ids(options, "ev.c") == ["0"]
    assert _ids(options, "ev.b") == [i for i in range(30) if i % 3 == 1]


def test_an_upserted_routed_table_stages_its_row_deltas_with_the_cadence(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    table_options = '{"ev.a": {"write.mode": "upsert", "upsert.key-columns": "id"}}'
    options = _routed(catalog_options, **{"commit.max-batches": "3", "route.table-options": table_options})
    with IcebergSink.from_options(options) as sink:
        for batch_id in range(3):  # the same rows three times: upserted into ev.a, appended to ev.b
            sink(_batch(spark, 0), batch_id)
    assert _batch_ids(options, "ev.a") == _batch_ids(options, "ev.b") == ["0-2"]
    assert _ids(options, "ev.a") == [i for i in range(30) if i % 3 == 0]
    assert _ids(options, "ev.b") == sorted([i for i in range(30) if i % 3 == 1] * 3)
