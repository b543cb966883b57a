"""Upserts with the commit cadence on a SQLite catalog, files and lookups in this process (no Spark).

Random changes of a few keys over many batches, staged three at a time: after every
commit the table holds the last change of every key, once; a restart (new states, same
sink id) between stage and commit loses nothing; a concurrent writer's rows of staged keys
make the group's lookups be redone.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog

from icesink.batch.commits import Written
from icesink.batch.key import BatchKey
from icesink.batch.staged_row_deltas import StagedRowDeltaCommits
from icesink.batch.states import TableStates
from icesink.batch.table_batch import TableBatch
from icesink.config import SinkConfig
from icesink.metrics import SinkMetrics
from icesink.upsert.changes import change_set
from icesink.write.task import DataTaskWriter
from tests.support.upserts import State, changes, create_table, expected_state, rows_of, sql_catalog

NAME = "db.items"
SINK_ID = "unit-sink"
IN_DRIVER = {"num_data_columns": 3, "partition_values_in_task": True}


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    catalog = sql_catalog(tmp_path)
    create_table(catalog, NAME)
    return catalog


@pytest.fixture()
def config(tmp_path: Path) -> SinkConfig:
    return SinkConfig.from_options(
        {
            "catalog.name": "test",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.warehouse": f"file://{tmp_path / 'warehouse'}",
            "table": NAME,
            "sink-id": SINK_ID,
            "write.mode": "upsert",
            "upsert.key-columns": "id",
            "upsert.order-column": "seq",
            "commit.max-batches": "3",
        }
    )


def _random_batch(rng: random.Random, batch_id: int) -> pa.Table:
    keys = rng.sample(range(12), 5)
    return changes(*[(k, f"b{batch_id}k{k}", batch_id, rng.choice("cud"), batch_id) for k in keys])


def _apply(
    commits: StagedRowDeltaCommits,
    catalog: Catalog,
    config: SinkConfig,
    states: TableStates,
    batch_id: int,
    batch: pa.Table,
) -> None:
    table = catalog.load_table(NAME)
    state = states.get(NAME, config, table, SINK_ID)
    table_batch = TableBatch(NAME, config, table, BatchKey.new(SINK_ID, batch_id), state)
    change = change_set(batch, ["id"], "_op", "seq")
    spec = table_batch.begin(IN_DRIVER)
    rows = change.rows.select(["id", "name", "v"]).cast(table.schema().as_arrow())
    files = DataTaskWriter(spec, task_id=0, attempt=0).write_all(iter(rows.to_batches()))
    commits.commit([Written(table_batch, files, change.keys)])


def _batch_ids(catalog: Catalog) -> list[str | None]:
    table = catalog.load_table(NAME)
    return [s.summary.get("icesink.batch-ids") if s.summary else None for s in table.snapshots()]


def _rows(catalog: Catalog) -> State:
    return rows_of(catalog.load_table(NAME).scan().to_arrow())


def test_random_changes_staged_three_at_a_time_leave_the_last_change_per_key(
    catalog: Catalog, config: SinkConfig
) -> None:
    rng = random.Random(7)
    commits, states = StagedRowDeltaCommits(config.commit, SinkMetrics()), TableStates(SinkMetrics())
    state: State = {}
    committed: State = {}
    for batch_id in range(12):
        batch = _random_batch(rng, batch_id)
        _apply(commits, catalog, config, states, batch_id, batch)
        expected_state(state, batch)
        if batch_id % 3 == 2:
            committed = dict(state)
        assert _rows(catalog) == committed  # staged batches are not visible before their group commits
    assert _batch_ids(catalog) == ["0-2", "3-5", "6-8", "9-11"]


def test_a_restart_between_stage_and_commit_commits_the_staged_batches_once(
    catalog: Catalog, config: SinkConfig
) -> None:
    rng = random.Random(11)
    state: State = {}
    commits, states = StagedRowDeltaCommits(config.commit, SinkMetrics()), TableStates(SinkMetrics())
    for batch_id in range(5):  # 0-2 committed, 3 and 4 staged
        batch = _random_batch(rng, batch_id)
        _apply(commits, catalog, config, states, batch_id, batch)
        expected_state(state, batch)
    commits, states = StagedRowDeltaCommits(config.commit, SinkMetrics()), TableStates(SinkMetrics())
    batch = _random_batch(rng, 5)
    _apply(commits, catalog, config, states, 5, batch)  # looked up over the reloaded 3 and 4
    expected_state(state, batch)
    assert _batch_ids(catalog) == ["0-2", "3-5"]
    assert _rows(catalog) == state


def test_a_concurrent_writers_rows_of_staged_keys_make_the_lookups_be_redone(
    catalog: Catalog, config: SinkConfig
) -> None:
    commits, states = StagedRowDeltaCommits(config.commit, SinkMetrics()), TableStates(SinkMetrics())
    first = changes(*[(k, "first", 0, "c", 0) for k in range(6)])
    _apply(commits, catalog, config, states, 0, first)
    _apply(commits, catalog, config, states, 1, changes((1, "second", 1, "u", 1), (2, None, None, "d", 1)))
    table = catalog.load_table(NAME)  # another writer: rows of staged keys 1 and 3, and of key 9
    table.append(
        pa.table({"id": [1, 3, 9], "name": ["other"] * 3, "v": [9, 9, 9]}, table.schema().as_arrow())
    )
    _apply(commits, catalog, config, states, 2, changes((3, "third", 2, "u", 2)))
    state: State = {k: ("first", 0) for k in range(6)}
    state.update({1: ("second", 1), 3: ("third", 2), 9: ("other", 9)})
    del state[2]
    assert _rows(catalog) == state  # the sink's changes replaced the other writer's rows of 1 and 3
    assert _batch_ids(catalog) == [None, "0-2"]


def test_a_restarted_sinks_flush_commits_the_staged_batches_with_their_key_index(
    catalog: Catalog, config: SinkConfig
) -> None:
    rng = random.Random(13)
    state: State = {}
    commits, states = StagedRowDeltaCommits(config.commit, SinkMetrics()), TableStates(SinkMetrics())
    for batch_id in range(5):  # 0-2 committed, 3 and 4 staged
        batch = _random_batch(rng, batch_id)
        _apply(commits, catalog, config, states, batch_id, batch)
        expected_state(state, batch)
    commits, states = StagedRowDeltaCommits(config.commit, SinkMetrics()), TableStates(SinkMetrics())
    table = catalog.load_table(NAME)
    commits.commit_staged(table, config, states.get(NAME, config, table, SINK_ID))  # no lookup first
    assert _batch_ids(catalog) == ["0-2", "3-4"]
    assert _rows(catalog) == state
    table.refresh()
    assert [s.snapshot_id for s in table.metadata.statistics][-1] == table.metadata.current_snapshot_id
