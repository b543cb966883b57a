"""Faults in the commit path never lose acknowledged data nor leave files behind.

Each test drives the sink directly (``sink(batch_df, batch_id)`` with a ``sink-id``), like
Spark's ``foreachBatch``, injects the fault in process at the catalog (a concurrent
writer, a commit whose response is lost), restarts the sink where Spark would, and reads
the table back: every row once, every referenced file present, no unreferenced file left.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import Table
from pyiceberg.table.update import AddSnapshotUpdate
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from icesink._pyiceberg import sql as pyiceberg_sql
from icesink.errors import CommitConflictError, CommitError
from tests.support.tables import catalog_from_options

ROWS = 200


def frame(spark: SparkSession, batch_id: int) -> DataFrame:
    return spark.range(batch_id * ROWS, (batch_id + 1) * ROWS).select("id", F.lit("x").alias("v"))


def data_files_on_disk(table: Table) -> set[str]:
    data = Path(table.location().removeprefix("file://")) / "data"
    return {f"file://{p}" for p in data.rglob("*.parquet")}


def sound_ids(table: Table) -> list[int]:
    """The table's ids, after checking that its files and the data folder agree."""
    referenced = {task.file.file_path for task in table.scan().plan_files()}
    missing = {p for p in referenced if not Path(p.removeprefix("file://")).exists()}
    assert not missing, f"the table references missing files: {sorted(missing)}"
    assert data_files_on_disk(table) == referenced, "unreferenced data files left behind"
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def is_data_commit(updates: tuple[Any, ...]) -> bool:
    return any(isinstance(u, AddSnapshotUpdate) for u in updates)


class ConcurrentAppender:
    """Another writer that appends to the table just before each of the sink's data commits."""

    def __init__(self, options: dict[str, str], table_name: str) -> None:
        self._catalog = catalog_from_options(options)
        self._name = table_name
        self._ids = itertools.count(-1, -1)
        self.appended: list[int] = []

    def wrap(self, commit_table: Callable[..., Any]) -> Callable[..., Any]:
        def commit(table: Table, requirements: Any, updates: Any) -> Any:
            if is_data_commit(updates):
                self._append()
            return commit_table(table, requirements, updates)

        return commit

    def _append(self) -> None:
        table = self._catalog.load_table(self._name)
        ids = [next(self._ids) for _ in range(3)]
        rows = pa.table({"id": ids, "v": ["concurrent"] * 3}, schema=table.schema().as_arrow())
        table.append(rows)
        self.appended.extend(ids)


def lose_response(commit_table: Callable[..., Any], losses: list[int]) -> Callable[..., Any]:
    """``commit_table`` whose first data commit lands, then raises as if its response were lost."""

    def commit(table: Table, requirements: Any, updates: Any) -> Any:
        response = commit_table(table, requirements, updates)
        if is_data_commit(updates) and not losses:
            losses.append(1)
            raise ConnectionError("connection reset by peer after the commit was sent")
        return response

    return commit


@pytest.fixture()
def staged_options(catalog_options: dict[str, str]) -> Iterator[dict[str, str]]:
    yield {**catalog_options, "table": "db.safety", "sink-id": "safety", "commit.retry.min-wait-ms": "1"}


def test_commit_that_gives_up_keeps_staged_files_for_the_restarted_sink(
    spark: SparkSession, staged_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**staged_options, "commit.max-batches": "3", "commit.retry.num-retries": "0"}
    sink = IcebergSink.from_options(options)
    sink(frame(spark, 0), 0)
    sink(frame(spark, 1), 1)  # staged and acknowledged to Spark
    appender = ConcurrentAppender(options, "db.safety")
    monkeypatch.setattr(pyiceberg_sql, "sql_commit_table", appender.wrap(pyiceberg_sql.sql_commit_table))
    with pytest.raises(CommitConflictError):
        sink(frame(spark, 2), 2)
    monkeypatch.undo()

    restarted = IcebergSink.from_options(options)  # Spark restarts the query and replays batch 2
    restarted(frame(spark, 2), 2)
    restarted.flush()

    table = catalog_from_options(options).load_table("db.safety")
    assert sound_ids(table) == sorted([*range(3 * ROWS), *appender.appended])
    assert appender.appended  # the conflict was real


def test_commit_that_gives_up_without_staging_deletes_only_its_own_files(
    spark: SparkSession, staged_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**staged_options, "commit.retry.num-retries": "1"}
    sink = IcebergSink.from_options(options)
    sink(frame(spark, 0), 0)
    appender = ConcurrentAppender(options, "db.safety")
    monkeypatch.setattr(pyiceberg_sql, "sql_commit_table", appender.wrap(pyiceberg_sql.sql_commit_table))
    with pytest.raises(CommitConflictError, match="were deleted"):
        sink(frame(spark, 1), 1)
    monkeypatch.undo()
    table = catalog_from_options(options).load_table("db.safety")
    assert sound_ids(table) == sorted([*range(ROWS), *appender.appended])  # batch 1's files are gone

    sink(frame(spark, 1), 1)  # Spark replays the batch
    table = catalog_from_options(options).load_table("db.safety")
    assert sound_ids(table) == sorted([*range(2 * ROWS), *appender.appended])
    assert len(appender.appended) == 2 * 3  # one conflict per attempt, no retry of pyiceberg's own


def test_commit_with_lost_response_then_flush_keeps_the_snapshot_that_landed(
    spark: SparkSession, staged_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**staged_options, "commit.max-batches": "2"}
    sink = IcebergSink.from_options(options)
    sink(frame(spark, 0), 0)
    losses: list[int] = []
    lost = lose_response(pyiceberg_sql.sql_commit_table, losses)
    monkeypatch.setattr(pyiceberg_sql, "sql_commit_table", lost)
    with pytest.raises(CommitError, match="unknown outcome"):
        sink(frame(spark, 1), 1)
    assert losses
    sink.flush()  # what the listener does when the failed query terminates

    table = catalog_from_options(options).load_table("db.safety")
    assert sound_ids(table) == list(range(2 * ROWS))
    assert [s.summary["icesink.batch-ids"] for s in table.snapshots() if s.summary] == ["0-1"]


def test_batch_committed_by_another_process_during_the_retry_is_not_committed_twice(
    spark: SparkSession, staged_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**staged_options, "commit.retry.num-retries": "3"}
    sink = IcebergSink.from_options(options)
    sink(frame(spark, 0), 0)
    other = IcebergSink.from_options(options)  # a second process of the same query
    raced: list[int] = []
    real_commit = pyiceberg_sql.sql_commit_table

    def commit(table: Table, requirements: Any, updates: Any) -> Any:
        if is_data_commit(updates) and not raced:
            raced.append(1)
            other(frame(spark, 1), 1)  # commits batch 1 first: this commit conflicts
        return real_commit(table, requirements, updates)

    monkeypatch.setattr(pyiceberg_sql, "sql_commit_table", commit)
    sink(frame(spark, 1), 1)

    table = catalog_from_options(options).load_table("db.safety")
    assert sound_ids(table) == list(range(2 * ROWS))  # once, and this attempt's files deleted
    assert table.properties["icesink.sink.safety.last-batch-id"] == "1"


def test_staged_batch_with_a_missing_file_is_a_clear_error_not_a_broken_snapshot(
    spark: SparkSession, staged_options: dict[str, str]
) -> None:
    options = {**staged_options, "commit.max-batches": "10"}
    sink = IcebergSink.from_options(options)
    sink(frame(spark, 0), 0)
    sink(frame(spark, 1), 1)
    table = sink.catalog.load_table("db.safety")
    victim = sorted(data_files_on_disk(table))[0]
    Path(victim.removeprefix("file://")).unlink()

    restarted = IcebergSink.from_options(options)
    with pytest.raises(CommitError, match="missing") as raised:
        restarted(frame(spark, 2), 2)
    assert victim in str(raised.value)
    with pytest.raises(CommitError, match="missing"):  # and again: never a snapshot without the file
        restarted(frame(spark, 2), 2)
    assert catalog_from_options(options).load_table("db.safety").current_snapshot() is None
