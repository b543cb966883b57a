"""Which micro-batches a sink has committed: the replay check.

Two records, written in the same atomic commit as the data:

- the snapshot summary names the sink id, the batch ids it covers and the attempt;
- a table property ``icesink.sink.<sink id>.last-batch-id`` (and the committing
  attempt) survives snapshot expiration, so a batch replayed by Spark after every
  snapshot of it has been expired is still recognised.

Batches of one sink are committed in order, so "batch ``b`` is committed" is
``b <= last-batch-id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

SUMMARY_SINK_ID = "icesink.sink-id"
SUMMARY_BATCH_IDS = "icesink.batch-ids"
SUMMARY_ATTEMPTS = "icesink.attempts"  # "batch:attempt,batch:attempt"
_PROPERTY_PREFIX = "icesink.sink."


@dataclass(frozen=True)
class BatchRange:
    """Micro-batch ids ``first..last`` (inclusive) committed together."""

    first: int
    last: int

    def __str__(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"

    @classmethod
    def parse(cls, text: str) -> BatchRange:
        """Parse ``"7"`` or ``"7-12"``."""
        first, _, last = text.partition("-")
        return cls(int(first), int(last or first))

    def __contains__(self, batch_id: object) -> bool:
        return isinstance(batch_id, int) and self.first <= batch_id <= self.last


@dataclass(frozen=True)
class CommitRecord:
    """What the table says a sink last committed."""

    last_batch_id: int
    attempt: str


def marker_properties(sink_id: str, batches: BatchRange, attempt: str) -> dict[str, str]:
    """Table properties set in the same commit as the batch's data."""
    return {
        f"{_PROPERTY_PREFIX}{sink_id}.last-batch-id": str(batches.last),
        f"{_PROPERTY_PREFIX}{sink_id}.last-attempt": attempt,
    }


def summary_properties(sink_id: str, batches: BatchRange, attempts: Mapping[int, str]) -> dict[str, str]:
    """Snapshot summary entries of a commit (``attempts``: the attempt of each batch with files)."""
    return {
        SUMMARY_SINK_ID: sink_id,
        SUMMARY_BATCH_IDS: str(batches),
        SUMMARY_ATTEMPTS: ",".join(f"{b}:{a}" for b, a in sorted(attempts.items())),
    }


def _parse_attempts(text: str | None) -> dict[int, str]:
    pairs = (item.split(":", 1) for item in (text or "").split(",") if ":" in item)
    return {int(b): a for b, a in pairs}


def last_commit(table: Table, sink_id: str) -> CommitRecord | None:
    """The sink's last commit as recorded in the table (``None`` if it never committed)."""
    properties = table.metadata.properties
    last = properties.get(f"{_PROPERTY_PREFIX}{sink_id}.last-batch-id")
    if last is not None:
        return CommitRecord(int(last), properties.get(f"{_PROPERTY_PREFIX}{sink_id}.last-attempt", ""))
    # Tables committed to before the marker existed, or whose properties were reset:
    # fall back to the newest snapshot that names this sink.
    for snapshot in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number or 0, reverse=True):
        summary = snapshot.summary
        if summary is not None and summary.get(SUMMARY_SINK_ID) == sink_id:
            batches = BatchRange.parse(str(summary[SUMMARY_BATCH_IDS]))
            attempt = _parse_attempts(summary.get(SUMMARY_ATTEMPTS)).get(batches.last, "")
            return CommitRecord(batches.last, attempt)
    return None


def is_committed(table: Table, sink_id: str, batch_id: int) -> bool:
    """Whether ``batch_id`` of ``sink_id`` is already in the table."""
    record = last_commit(table, sink_id)
    return record is not None and batch_id <= record.last_batch_id


def attempt_of_batch(table: Table, sink_id: str, batch_id: int) -> str | None:
    """The attempt that committed ``batch_id``, if a snapshot or the marker still says so."""
    record = last_commit(table, sink_id)
    if record is not None and record.last_batch_id == batch_id:
        return record.attempt
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        if summary is None or summary.get(SUMMARY_SINK_ID) != sink_id:
            continue
        if batch_id in BatchRange.parse(str(summary[SUMMARY_BATCH_IDS])):
            return _parse_attempts(summary.get(SUMMARY_ATTEMPTS)).get(batch_id)
    return None


def snapshot_of_attempt(table: Table, sink_id: str, batch_id: int, attempt: str) -> Snapshot | None:
    """The snapshot in which ``attempt`` committed the files of ``batch_id``, if not expired."""
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        if summary is None or summary.get(SUMMARY_SINK_ID) != sink_id:
            continue
        batches = BatchRange.parse(str(summary[SUMMARY_BATCH_IDS]))
        if batch_id in batches and _parse_attempts(summary.get(SUMMARY_ATTEMPTS)).get(batch_id) == attempt:
            return snapshot
    return None


def committed_files(table: Table, sink_id: str, batch_id: int, attempt: str) -> set[str] | None:
    """Paths of the data files added by the snapshot in which ``attempt`` committed ``batch_id``.

    Reads that snapshot's manifest list and the manifests it wrote, never the whole
    table's. ``None`` when the snapshot has expired.
    """
    snapshot = snapshot_of_attempt(table, sink_id, batch_id, attempt)
    if snapshot is None:
        return None
    paths: set[str] = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id:
                paths.add(entry.data_file.file_path)
    return paths
