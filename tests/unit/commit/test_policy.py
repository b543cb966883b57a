"""icesink.commit.policy: when staged batches are committed."""

from __future__ import annotations

from pathlib import Path

from icesink.commit.policy import CommitPolicy
from icesink.commit.staging import StagedBatch, StagingArea
from icesink.commit.state import StateFolder
from icesink.write.messages import DataFileMessage
from tests.unit.commit_fixtures import CountingFileIO


def staging_with(tmp_path: Path, *batches: tuple[int, int, float]) -> StagingArea:
    """A staging area holding batches of (batch id, bytes, staged at)."""
    io = CountingFileIO()
    staging = StagingArea(StateFolder(io, str(tmp_path / "staged")), io)
    for batch_id, size, staged_at in batches:
        message = DataFileMessage(f"file:///f{batch_id}.parquet", (), 0, 1, size)
        staging.stage(StagedBatch(batch_id, f"a{batch_id}", (message,), staged_at))
    return staging


def test_without_a_threshold_every_batch_is_committed(tmp_path: Path) -> None:
    policy = CommitPolicy()
    assert not policy.stages
    assert not policy.due(staging_with(tmp_path / "empty"))
    assert policy.due(staging_with(tmp_path / "one", (0, 10, 0.0)), now=0.0)


def test_max_batches(tmp_path: Path) -> None:
    policy = CommitPolicy(max_batches=3)
    assert policy.stages
    assert not policy.due(staging_with(tmp_path / "two", (0, 1, 0.0), (1, 1, 0.0)), now=0.0)
    assert policy.due(staging_with(tmp_path / "three", (0, 1, 0.0), (1, 1, 0.0), (2, 1, 0.0)), now=0.0)


def test_target_bytes(tmp_path: Path) -> None:
    policy = CommitPolicy(target_bytes=100)
    assert not policy.due(staging_with(tmp_path / "small", (0, 60, 0.0), (1, 39, 0.0)), now=0.0)
    assert policy.due(staging_with(tmp_path / "big", (0, 60, 0.0), (1, 40, 0.0)), now=0.0)


def test_interval_counts_from_the_oldest_staged_batch(tmp_path: Path) -> None:
    policy = CommitPolicy(interval_s=30)
    staging = staging_with(tmp_path, (0, 1, 100.0), (1, 1, 125.0))
    assert not policy.due(staging, now=129.9)
    assert policy.due(staging, now=130.0)
    assert not CommitPolicy(interval_s=30).due(staging_with(tmp_path / "none"), now=1e9)
