"""A REST commit's answer against the updates applied in hand
(:func:`icesink._pyiceberg.rest.server_metadata`).

The answers are real metadata (a table of the SQLite catalog with committed batches) as
JSON, changed the way a server might write it differently; the commits themselves run
against a real REST catalog in ``tests/deploy/test_metadata_cache_rest.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table.metadata import TableMetadata

from icesink._pyiceberg.rest import server_metadata
from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from tests.unit.commit_fixtures import FAST_RETRIES, SINK_ID, make_table, sink_config, write_attempt


@pytest.fixture()
def metadata(tmp_path: Path) -> TableMetadata:
    """A table's metadata after three committed batches."""
    _, table = make_table(sink_config(tmp_path))
    committer = Committer(table, SINK_ID, FAST_RETRIES)
    for b in range(3):
        batch = write_attempt(committer.table, b, f"a{b}", range(b * 10, b * 10 + 10))
        committer.commit_batches([batch], BatchRange(b, b))
    return committer.table.metadata


def as_json(metadata: TableMetadata) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(metadata.model_dump_json())
    return answer


def test_an_answer_saying_the_same_keeps_the_metadata_in_hand(metadata: TableMetadata) -> None:
    answer = as_json(metadata)
    answer["last-updated-ms"] += 7  # the server's clock is the one kept
    answer.pop("statistics", None)  # an empty list written or left out: the same
    answer["partition-statistics"] = []

    kept = server_metadata(metadata, answer)

    assert kept.last_updated_ms == metadata.last_updated_ms + 7
    assert kept.model_copy(update={"last_updated_ms": metadata.last_updated_ms}) == metadata
    assert kept.snapshots is metadata.snapshots  # not parsed again


def changed_property(answer: dict[str, Any]) -> None:
    answer["properties"]["server.owner"] = "catalog"


def changed_last_snapshot(answer: dict[str, Any]) -> None:
    answer["snapshots"][-1]["summary"]["server.note"] = "x"


def changed_first_snapshot(answer: dict[str, Any]) -> None:
    answer["snapshots"][0]["timestamp-ms"] += 1


def dropped_log_entry(answer: dict[str, Any]) -> None:
    answer["snapshot-log"] = answer["snapshot-log"][1:]


def changed_current_snapshot(answer: dict[str, Any]) -> None:
    answer["current-snapshot-id"] = answer["snapshots"][0]["snapshot-id"]
    answer["refs"]["main"]["snapshot-id"] = answer["snapshots"][0]["snapshot-id"]


@pytest.mark.parametrize(
    "change",
    [
        changed_property,
        changed_last_snapshot,
        changed_first_snapshot,
        dropped_log_entry,
        changed_current_snapshot,
    ],
)
def test_an_answer_saying_otherwise_is_parsed_and_kept(metadata: TableMetadata, change: Any) -> None:
    answer = as_json(metadata)
    change(answer)

    kept = server_metadata(metadata, answer)

    assert kept != metadata
    assert as_json(kept) == answer
