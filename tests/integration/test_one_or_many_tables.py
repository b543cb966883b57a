"""What one-table and routed sinks do alike, each test run for both: replays, the commit cadence, crashes.

A routed sink is the one-table sink's lifecycle run for each of its tables, so each
behaviour here is one test parametrized over the two shapes; what only one shape has
stays in its own file (``test_routed_*``, ``test_sink_*``).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from icesink import IcebergSink
from tests.integration.test_crash_recovery import job_arguments, job_result, parquet_files_on_disk, run_job
from tests.support.tables import catalog_from_options, summary_of

KINDS = ("a", "b")


@dataclass(frozen=True)
class Shape:
    """A sink of one table, or a sink routing rows by their ``kind`` to one table each."""

    routed: bool

    def options(self, catalog_options: dict[str, str], **more: str) -> dict[str, str]:
        if self.routed:
            routing = {"route.by": "field", "route.field": "kind", "route.table-template": "db.{value}"}
            return {**catalog_options, "sink-id": "shape", **routing, **more}
        return {**catalog_options, "sink-id": "shape", "table": "db.t", **more}

    @property
    def tables(self) -> dict[str, tuple[str, ...]]:
        """Each table and the kinds of rows it holds."""
        return {f"db.{k}": (k,) for k in KINDS} if self.routed else {"db.t": KINDS}

    def expected(self, ids: range) -> dict[str, list[int]]:
        return {name: [i for i in ids if KINDS[i % 2] in kinds] for name, kinds in self.tables.items()}


SHAPES = [pytest.param(Shape(False), id="one-table"), pytest.param(Shape(True), id="routed")]


def _frame(spark: SparkSession, ids: range) -> DataFrame:
    return spark.createDataFrame([(i, KINDS[i % 2]) for i in ids], "id long, kind string")


def _read(options: dict[str, str], name: str) -> tuple[list[int], list[str]]:
    """The table's ids, and the batch ids of each of its snapshots."""
    table = catalog_from_options(options).load_table(name)
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    return ids, [summary_of(s)["icesink.batch-ids"] for s in table.snapshots()]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_replayed_batch_is_written_once(
    spark: SparkSession, catalog_options: dict[str, str], warehouse: Path, shape: Shape
) -> None:
    options = shape.options(catalog_options)
    with IcebergSink.from_options(options) as sink:
        sink(_frame(spark, range(100)), 7)
        files = parquet_files_on_disk(warehouse)
        sink(_frame(spark, range(100)), 7)  # Spark replays the batch after a failure
        sink(_frame(spark, range(100, 150)), 8)
        registry = sink.metrics.registry
    for name, ids in shape.expected(range(150)).items():
        assert _read(options, name) == (ids, ["7", "8"])
        labels = {"table": name, "sink_id": "shape"}
        assert registry.get_sample_value("icesink_replays_skipped_total", labels) == 1
    new = parquet_files_on_disk(warehouse) - files
    assert new and all("-b8-" in f for f in new)  # the replay wrote no file: only batch 8's are new


@pytest.mark.parametrize("shape", SHAPES)
def test_the_cadence_holds_each_tables_batches_until_due_and_flush_commits_the_rest(
    spark: SparkSession, catalog_options: dict[str, str], shape: Shape
) -> None:
    options = shape.options(catalog_options, **{"commit.max-batches": "3"})
    sink = IcebergSink.from_options(options)
    for batch_id in range(5):
        sink(_frame(spark, range(batch_id * 20, batch_id * 20 + 20)), batch_id)
    sink(_frame(spark, range(60, 80)), 3)  # a replay of a staged batch: skipped
    for name, ids in shape.expected(range(60)).items():
        assert _read(options, name) == (ids, ["0-2"])  # 3 and 4 staged, durable, not yet visible
    sink.flush()
    for name, ids in shape.expected(range(100)).items():
        assert _read(options, name) == (ids, ["0-2", "3-4"])
    sink.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_an_empty_batch_commits_what_is_staged(
    spark: SparkSession, catalog_options: dict[str, str], shape: Shape
) -> None:
    options = shape.options(catalog_options, **{"commit.interval-s": "3600"})
    sink = IcebergSink.from_options(options)
    sink(_frame(spark, range(0, 10)), 0)
    sink(_frame(spark, range(10, 20)), 1)
    assert all(_read(options, name)[1] == [] for name in shape.tables)
    sink(_frame(spark, range(0)), 2)  # the source has caught up: a chunk boundary
    for name, ids in shape.expected(range(20)).items():
        assert _read(options, name) == (ids, ["0-2"])
        properties = catalog_from_options(options).load_table(name).properties
        assert properties["icesink.sink.shape.last-batch-id"] == "2"


BATCHES = 12
ROWS = 90


def _write_input(folder: Path) -> range:
    folder.mkdir(parents=True)
    for n in range(BATCHES):
        ids = list(range(n * ROWS, (n + 1) * ROWS))
        columns = {"id": pa.array(ids, pa.int64()), "kind": pa.array([KINDS[i % 2] for i in ids])}
        pq.write_table(pa.table(columns), folder / f"part-{n:03d}.parquet")
    return range(BATCHES * ROWS)


# Two processes each; the routed run is in make test-faults, to keep make test's SIGKILL cases few.
SIGKILLED = [SHAPES[0], pytest.param(Shape(True), id="routed", marks=pytest.mark.faults_full)]


@pytest.mark.parametrize("shape", SIGKILLED)
def test_killed_while_batches_are_staged_then_restarted_writes_each_row_once(
    tmp_path: Path, warehouse: Path, catalog_options: dict[str, str], shape: Shape
) -> None:
    ids = _write_input(tmp_path / "input")
    # Maintenance off: every snapshot read back is a commit of batches (no compaction's).
    options = shape.options(catalog_options, **{"commit.max-batches": "4", "maintenance.enabled": "false"})
    del options["sink-id"]  # the query's id, as a streaming job has it
    common = job_arguments(tmp_path / "input", tmp_path / "ck", options)
    killed = run_job(*common, "--crash-at", "after-stage", "--crash-batch", "6")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    for name in shape.tables:  # batches 0-3 committed; 4 and 5 staged on every table when the process died
        assert _read(options, name)[1] == ["0-3"]
    done = run_job(*common)
    assert done.returncode == 0, done.stderr[-3000:]

    referenced: set[str] = set()
    for name, expected in shape.expected(ids).items():
        read, batches = _read(options, name)
        assert read == expected  # every row once
        covered: list[int] = []
        for batch_ids in batches:
            first, _, last = batch_ids.partition("-")
            covered.extend(range(int(first), int(last or first) + 1))
        assert sorted(covered) == list(range(BATCHES))  # every batch in exactly one snapshot
        table = catalog_from_options(options).load_table(name)
        referenced |= {t.file.file_path for t in table.scan().plan_files()}
    assert parquet_files_on_disk(warehouse) == referenced  # no file of the killed run left behind
    # The restarted run commits the staged batches it reloaded and the rest.
    assert job_result(done)["icesink_rows_written_total"] == len(ids) - 4 * ROWS
