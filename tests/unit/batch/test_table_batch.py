"""The per-table lifecycle on a SQLite catalog, with files written in this process (no Spark).

A table batch's attempt is on record before its files exist; a restarted process settles
what a crashed attempt left; the commit kinds commit each batch once, a replay is skipped,
and the cadence holds batches across a restart.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField, StringType

from icesink.batch.commits import AppendCommits, StagedCommits, Written
from icesink.batch.key import BatchKey
from icesink.batch.states import TableStates
from icesink.batch.table_batch import TableBatch
from icesink.config import SinkConfig
from icesink.metrics import SinkMetrics
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.messages import DataFileMessage
from icesink.write.task import DataTaskWriter

NAME = "db.t"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "v", StringType(), required=False)
)
IN_DRIVER = {"num_data_columns": 2}


@pytest.fixture()
def config(tmp_path: Path) -> SinkConfig:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    return SinkConfig.from_options(
        {
            "catalog.name": "unit",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.warehouse": f"file://{warehouse}",
            "table": NAME,
            "sink-id": "unit-sink",
        }
    )


@pytest.fixture()
def catalog(config: SinkConfig) -> Catalog:
    properties = config.catalog.plain_properties()
    catalog = SqlCatalog("unit", **{k: v for k, v in properties.items() if k != "type"})
    catalog.create_namespace("db")
    catalog.create_table(NAME, schema=SCHEMA)
    return catalog


def _batch(catalog: Catalog, config: SinkConfig, states: TableStates, batch_id: int) -> TableBatch:
    table = catalog.load_table(NAME)
    state = states.get(NAME, config, table, "unit-sink")
    return TableBatch(NAME, config, table, BatchKey.new("unit-sink", batch_id), state)


def _write(batch: TableBatch, ids: range) -> list[DataFileMessage]:
    spec = batch.begin(IN_DRIVER)
    rows = pa.table({"id": pa.array(list(ids), pa.int64()), "v": [str(i) for i in ids]})
    rows = rows.cast(iceberg_to_arrow_schema(SCHEMA))
    return DataTaskWriter(spec, task_id=0, attempt=0).write_all(iter(rows.to_batches()))


def _ids(table: Table) -> list[int]:
    table.refresh()
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def _files_on_disk(config: SinkConfig) -> set[str]:
    warehouse = Path(config.catalog.plain_properties()["warehouse"].removeprefix("file://"))
    return {p.name for p in warehouse.rglob("*.parquet")}


def test_the_attempt_key_names_every_file_and_folder() -> None:
    key = BatchKey("5f3c-9a1b-77aa-0000-1111", 7, "0123456789abcdef")
    assert key.batch_prefix == "5f3c9a1b77aa-b7"
    assert key.file_prefix == "5f3c9a1b77aa-b7-0123456789abcdef"
    assert BatchKey.new("s", 1).attempt != BatchKey.new("s", 1).attempt


def test_a_crashed_attempt_is_on_record_and_a_restart_deletes_its_files(
    catalog: Catalog, config: SinkConfig
) -> None:
    metrics = SinkMetrics()
    batch = _batch(catalog, config, TableStates(metrics), 0)
    files = _write(batch, range(100))
    assert [r.attempt for r in batch.attempts.open_attempts()] == [batch.key.attempt]
    assert {Path(f.path).name for f in files} <= _files_on_disk(config)
    assert all(Path(f.path).parent.name == batch.key.file_prefix for f in files)

    restarted = SinkMetrics()  # a new process: its first batch settles what the crash left
    _batch(catalog, config, TableStates(restarted), 0)
    assert _files_on_disk(config) == set()
    deleted = restarted.registry.get_sample_value(
        "icesink_orphan_files_total", {"table": NAME, "action": "deleted"}
    )
    assert deleted == len(files)
    assert batch.attempts.open_attempts() == []


def test_an_appended_batch_is_committed_once_and_its_replay_skipped(
    catalog: Catalog, config: SinkConfig
) -> None:
    metrics = SinkMetrics()
    states = TableStates(metrics)
    batch = _batch(catalog, config, states, 3)
    outcome = AppendCommits(metrics).commit_one(Written(batch, _write(batch, range(10))))
    assert outcome is not None and not outcome.skipped_replay
    assert batch.attempts.open_attempts() == []  # the commit ended the attempt
    assert _ids(batch.table) == list(range(10))

    replay = _batch(catalog, config, states, 3)
    assert replay.replayed(metrics)
    labels = {"table": NAME, "sink_id": "unit-sink"}
    assert metrics.registry.get_sample_value("icesink_replays_skipped_total", labels) == 1
    assert metrics.registry.get_sample_value("icesink_rows_written_total", labels) == 10


def test_the_commit_deletes_what_failed_task_attempts_left_in_the_attempts_folder(
    catalog: Catalog, config: SinkConfig
) -> None:
    batch = _batch(catalog, config, TableStates(SinkMetrics()), 0)
    files = _write(batch, range(10))
    spec = batch.spec
    assert spec is not None
    retried = dataclasses.replace(spec, file_prefix=spec.file_prefix)  # a task attempt Spark gave up on
    rows = pa.table({"id": pa.array([99], pa.int64()), "v": ["x"]}).cast(iceberg_to_arrow_schema(SCHEMA))
    lost = DataTaskWriter(retried, task_id=0, attempt=1).write_all(iter(rows.to_batches()))
    assert {Path(f.path).name for f in lost} <= _files_on_disk(config)
    AppendCommits(SinkMetrics()).commit_one(Written(batch, files))
    assert _files_on_disk(config) == {Path(f.path).name for f in files}
    assert _ids(batch.table) == list(range(10))


def test_a_second_attempt_of_a_committed_batch_commits_nothing(catalog: Catalog, config: SinkConfig) -> None:
    metrics = SinkMetrics()
    states = TableStates(metrics)
    first, second = _batch(catalog, config, states, 0), _batch(catalog, config, states, 0)
    first_files, second_files = _write(first, range(5)), _write(second, range(5))
    commits = AppendCommits(metrics)
    commits.commit_one(Written(first, first_files))
    outcome = commits.commit_one(Written(second, second_files))
    assert outcome is not None and outcome.skipped_replay
    assert _ids(first.table) == list(range(5))  # once
    assert {Path(f.path).name for f in second_files}.isdisjoint(_files_on_disk(config))  # the loser's deleted


def test_staged_batches_wait_for_the_cadence_and_survive_a_restart(
    catalog: Catalog, config: SinkConfig
) -> None:
    config = config.model_copy(update={"commit": config.commit.model_copy(update={"max_batches": 3})})
    metrics = SinkMetrics()
    commits, states = StagedCommits(config.commit, metrics), TableStates(metrics)
    for batch_id in (0, 1):
        batch = _batch(catalog, config, states, batch_id)
        commits.commit([Written(batch, _write(batch, range(batch_id * 10, batch_id * 10 + 10)))])
    table = catalog.load_table(NAME)
    assert table.current_snapshot() is None  # staged, durable, not yet visible
    assert _batch(catalog, config, states, 1).has_batch()  # a replay of a staged batch is skipped

    restarted = TableStates(SinkMetrics())  # a new process reloads the staged batches
    batch = _batch(catalog, config, restarted, 2)
    assert [b.batch_id for b in batch.state.staging.batches] == [0, 1]
    commits.commit([Written(batch, _write(batch, range(20, 30)))])
    table.refresh()
    assert _ids(table) == list(range(30))
    assert [s.summary["icesink.batch-ids"] for s in table.snapshots() if s.summary] == ["0-2"]


def test_the_write_spec_takes_the_option_when_set_else_the_table_property(
    catalog: Catalog, config: SinkConfig
) -> None:
    with catalog.load_table(NAME).transaction() as tx:
        tx.set_properties(
            {"write.target-file-size-bytes": "1234", "write.parquet.compression-codec": "snappy"}
        )
    states = TableStates(SinkMetrics())
    spec = _batch(catalog, config, states, 0).write_spec(IN_DRIVER)
    assert (spec.target_file_size_bytes, spec.compression) == (1234, "snappy")
    write = config.write.model_copy(update={"target_file_size_bytes": 4096})
    write.model_fields_set.add("target_file_size_bytes")
    given = config.model_copy(update={"write": write})
    assert _batch(catalog, given, states, 0).write_spec(IN_DRIVER).target_file_size_bytes == 4096
