"""A routed sink with a commit cadence: each table stages its batches and commits them on the cadence."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from icesink import IcebergSink
from sink.errors import ConfigError
from tests.integration.test_crash_recovery import job_arguments, job_result, parquet_files_on_disk, run_job
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


def test_each_table_stages_its_batches_and_commits_every_max_batches(
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


def test_an_empty_batch_commits_every_table_staged(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = _routed(catalog_options, **{"commit.interval-s": "3600"})
    sink = IcebergSink.from_options(options)
    sink(_batch(spark, 0), 0)
    sink(_batch(spark, 1, ("a",)), 1)
    assert all(_batch_ids(options, f"ev.{kind}") == [] for kind in KINDS)
    sink(_batch(spark, 2).limit(0), 2)  # the source has caught up: a chunk boundary
    assert _batch_ids(options, "ev.a") == ["0-1"]
    assert _batch_ids(options, "ev.b") == _batch_ids(options, "ev.c") == ["0"]
    assert len(_ids(options, "ev.a")) == 10 + 30


def test_a_table_that_gets_no_more_rows_is_committed_when_due(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = _routed(catalog_options, **{"commit.target-bytes": "1"})  # due as soon as staged
    sink = IcebergSink.from_options(options)
    sink(_batch(spark, 0), 0)
    assert all(_batch_ids(options, f"ev.{kind}") == ["0"] for kind in KINDS)
    sink(_batch(spark, 1, ("a",)), 1)
    assert _batch_ids(options, "ev.a") == ["0", "1"]
    assert _batch_ids(options, "ev.b") == ["0"]


def test_an_upserted_routed_table_refuses_the_cadence(catalog_options: dict[str, str]) -> None:
    table_options = '{"ev.a": {"write.mode": "upsert", "upsert.key-columns": "id"}}'
    with pytest.raises(ConfigError, match=r"pattern 'ev.a' upserts .* \['commit.max-batches'\] cannot hold"):
        IcebergSink.from_options(
            _routed(catalog_options, **{"commit.max-batches": "3", "route.table-options": table_options})
        )


BATCHES = 12
ROWS = 90


def _write_input(folder: Path) -> None:
    folder.mkdir(parents=True)
    for n in range(BATCHES):
        ids = list(range(n * ROWS, (n + 1) * ROWS))
        kinds = [KINDS[i % len(KINDS)] for i in ids]
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "kind": pa.array(kinds)}),
            folder / f"part-{n:03d}.parquet",
        )


def test_killed_while_several_tables_hold_staged_batches_then_restarted_writes_each_row_once(
    tmp_path: Path, warehouse: Path, catalog_options: dict[str, str]
) -> None:
    _write_input(tmp_path / "input")
    options = _routed(catalog_options, **{"commit.max-batches": "4"})
    del options["sink-id"]  # the query's id, as a streaming job has it
    common = job_arguments(tmp_path / "input", tmp_path / "ck", options)
    killed = run_job(*common, "--crash-at", "after-stage", "--crash-batch", "6")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    for kind in KINDS:  # batches 0-3 committed; 4 and 5 staged on every table when the process died
        assert _batch_ids(options, f"ev.{kind}") == ["0-3"]
    done = run_job(*common)
    assert done.returncode == 0, done.stderr[-3000:]

    written = 0
    for kind in KINDS:
        expected = [i for i in range(BATCHES * ROWS) if KINDS[i % 3] == kind]
        assert _ids(options, f"ev.{kind}") == expected  # every row once
        covered: list[int] = []
        for ids in _batch_ids(options, f"ev.{kind}"):
            first, _, last = ids.partition("-")
            covered.extend(range(int(first), int(last or first) + 1))
        assert sorted(covered) == list(range(BATCHES))  # every batch in exactly one snapshot
        written += len(expected)
    referenced = set()
    for kind in KINDS:
        table = catalog_from_options(options).load_table(f"ev.{kind}")
        referenced |= {t.file.file_path for t in table.scan().plan_files()}
    assert parquet_files_on_disk(warehouse) == referenced  # no file of the killed run left behind
    # The restarted run commits the staged batches it reloaded (4, 5, 6 if staged) and the rest.
    assert job_result(done)["icesink_rows_written_total"] == written - 4 * ROWS
