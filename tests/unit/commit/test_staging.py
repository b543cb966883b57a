"""icesink.commit.staging and icesink.commit.state: staged batches, durable outside the table,
checked on load."""

from __future__ import annotations

from pathlib import Path

import pytest

from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from icesink.commit.staging import StagedBatch, StagingArea
from icesink.commit.state import STAGED, state_folder, state_location
from icesink.config import SinkConfig
from icesink.errors import CommitError, ConfigError
from tests.unit.commit_fixtures import FAST_RETRIES, SINK_ID, make_table, sink_config, write_attempt


def test_staged_batches_round_trip_through_the_state_folder(tmp_path: Path) -> None:
    config = sink_config(tmp_path)
    _, table = make_table(config)
    staging = StagingArea.for_sink(config, table, SINK_ID)
    batches = [write_attempt(table, b, f"a{b}", range(b * 10, b * 10 + 10)) for b in (1, 0)]
    for batch in batches:
        staging.stage(batch)
    assert staging.size_bytes == sum(b.size_bytes for b in batches) > 0

    restarted = StagingArea.for_sink(config, table, SINK_ID)
    assert restarted.load() == sorted(batches, key=lambda b: b.batch_id)
    assert restarted.contains(1) and not restarted.contains(2)
    folder = tmp_path / "warehouse" / "_icesink_state" / "db.t" / SINK_ID / "staged"
    assert sorted(p.name for p in folder.iterdir()) == ["000000000000.json", "000000000001.json"]
    assert not list(Path(table.location().removeprefix("file://"), "metadata").glob("icesink-*"))

    restarted.remove([b for b in restarted.batches if b.batch_id == 0])
    assert [b.batch_id for b in restarted.batches] == [1]
    assert [b.batch_id for b in StagingArea.for_sink(config, table, SINK_ID).load()] == [1]


def test_staged_batch_whose_file_is_gone_fails_to_load(tmp_path: Path) -> None:
    config = sink_config(tmp_path)
    _, table = make_table(config)
    batch = write_attempt(table, 4, "a4", range(10))
    StagingArea.for_sink(config, table, SINK_ID).stage(batch)
    table.io.delete(batch.files[0].path)
    with pytest.raises(CommitError, match="staged batch 4 are missing") as raised:
        StagingArea.for_sink(config, table, SINK_ID).load()
    assert batch.files[0].path in str(raised.value) and "000000000004.json" in str(raised.value)


def test_staged_batch_committed_by_another_attempt_loads_without_its_files(tmp_path: Path) -> None:
    config = sink_config(tmp_path)
    _, table = make_table(config)
    ours = write_attempt(table, 0, "ours", range(10))
    StagingArea.for_sink(config, table, SINK_ID).stage(ours)
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(
        [write_attempt(table, 0, "theirs", range(10))], BatchRange(0, 0)
    )
    table.io.delete(ours.files[0].path)  # deleted as unreferenced; the process died before the record went
    assert StagingArea.for_sink(config, table, SINK_ID).load() == [ours]  # the sink then forgets it


def test_records_of_an_earlier_version_are_moved_once(tmp_path: Path) -> None:
    config = sink_config(tmp_path)
    _, table = make_table(config)
    batch = write_attempt(table, 0, "a0", range(10))
    legacy = f"{table.location()}/metadata/icesink-staged/{SINK_ID}/000000000000.json"
    old = StagedBatch(batch.batch_id, batch.attempt, batch.files, batch.staged_at)  # no location then
    with table.io.new_output(legacy).create() as out:
        out.write(old.to_json().encode())
    assert StagingArea.for_sink(config, table, SINK_ID).load() == [old]
    assert not table.io.new_input(legacy).exists()
    assert StagingArea.for_sink(config, table, SINK_ID).load() == [old]


def test_state_location_option_is_used(tmp_path: Path) -> None:
    config = sink_config(tmp_path, state_location=f"file://{tmp_path}/state/")
    _, table = make_table(config)
    assert state_location(config) == f"file://{tmp_path}/state"
    assert (
        state_folder(config, table, SINK_ID, STAGED).location
        == f"file://{tmp_path}/state/db.t/{SINK_ID}/staged"
    )


def test_state_location_inside_the_table_is_refused(tmp_path: Path) -> None:
    config = sink_config(tmp_path)
    _, table = make_table(config)
    inside = SinkConfig.model_validate({**config.model_dump(), "state_location": table.location()})
    with pytest.raises(ConfigError, match="inside the location"):
        state_folder(inside, table, SINK_ID, STAGED)


def test_state_location_is_required_for_a_warehouse_on_object_storage() -> None:
    config = SinkConfig.from_options(
        {
            "table": "db.t",
            "catalog.type": "sql",
            "catalog.uri": "sqlite://",
            "catalog.warehouse": "s3://bucket/wh",
        }
    )
    with pytest.raises(ConfigError, match="state-location"):
        state_location(config)
    with_option = SinkConfig.from_options(
        {"table": "db.t", "catalog.warehouse": "s3://bucket/wh", "state-location": "s3://bucket/icesink"}
    )
    assert state_location(with_option) == "s3://bucket/icesink"
