"""Manifest merging: keep a long stream's snapshots at a bounded number of manifests.

Every commit adds a data manifest and, for an upsert, a delete manifest; a reader opens
each of them. With ``commit.manifest-merge.enabled=true`` (the sink sets it on the tables
it creates), once a group of manifests of one content (data or deletes) and one partition
spec reaches ``commit.manifest.min-count-to-merge``, its manifests smaller than
``commit.manifest.target-size-bytes`` are rewritten into as few manifests of about that
size as they fill.

Rewritten entries keep what readers need: an entry added by the snapshot being built
stays added (its sequence number is still to be assigned); a live entry of an earlier
snapshot becomes existing with its data and file sequence numbers; an entry this
snapshot deletes stays deleted (later commits validate against it); entries deleted by
earlier snapshots are dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
)

MERGE_ENABLED = "commit.manifest-merge.enabled"
MIN_COUNT_TO_MERGE = "commit.manifest.min-count-to-merge"
TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"
DEFAULT_MIN_COUNT_TO_MERGE = 100
DEFAULT_TARGET_SIZE_BYTES = 8 * 1024 * 1024

NewWriter = Callable[[int, bool], ManifestWriter]
"""Opens a manifest writer for (spec id, whether it holds delete files)."""


@dataclass(frozen=True)
class MergePolicy:
    """When and into what size manifests are merged (from the table's properties)."""

    enabled: bool
    min_count: int
    target_size_bytes: int

    @classmethod
    def of(cls, properties: dict[str, str]) -> MergePolicy:
        return cls(
            properties.get(MERGE_ENABLED, "false").lower() == "true",
            int(properties.get(MIN_COUNT_TO_MERGE, DEFAULT_MIN_COUNT_TO_MERGE)),
            int(properties.get(TARGET_SIZE_BYTES, DEFAULT_TARGET_SIZE_BYTES)),
        )


def merge_manifests(
    manifests: list[ManifestFile], io: FileIO, policy: MergePolicy, snapshot_id: int, new_writer: NewWriter
) -> list[ManifestFile]:
    """``manifests`` with the small ones of each large enough group merged (order: data first)."""
    if not policy.enabled:
        return manifests
    groups: dict[tuple[int, int], list[ManifestFile]] = defaultdict(list)
    for manifest in manifests:
        groups[(int(manifest.content), manifest.partition_spec_id)].append(manifest)
    result: list[ManifestFile] = []
    for (content, spec_id), group in sorted(groups.items()):
        if len(group) < policy.min_count:
            result += group
            continue
        small = [m for m in group if m.manifest_length < policy.target_size_bytes]
        result += [m for m in group if m.manifest_length >= policy.target_size_bytes]
        for bin_ in _bins(small, policy.target_size_bytes):
            if len(bin_) == 1:
                result += bin_
                continue
            deletes = content == ManifestContent.DELETES
            result.append(_merge(bin_, io, snapshot_id, new_writer(spec_id, deletes)))
    return result


def _bins(manifests: list[ManifestFile], target_size_bytes: int) -> list[list[ManifestFile]]:
    """Consecutive manifests packed into bins of at most ``target_size_bytes`` (at least one each)."""
    bins: list[list[ManifestFile]] = []
    size = 0
    for manifest in manifests:
        if not bins or size + manifest.manifest_length > target_size_bytes:
            bins.append([])
            size = 0
        bins[-1].append(manifest)
        size += manifest.manifest_length
    return bins


def _merge(
    manifests: list[ManifestFile], io: FileIO, snapshot_id: int, writer: ManifestWriter
) -> ManifestFile:
    with writer:
        for manifest in manifests:
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                own = entry.snapshot_id == snapshot_id
                if entry.status == ManifestEntryStatus.DELETED:
                    if own:
                        writer.delete(entry)
                elif entry.status == ManifestEntryStatus.ADDED and own:
                    # Read back from an unassigned manifest, it inherited no real sequence number,
                    # unless it was given one (a merged delete file keeps those it replaces).
                    given = entry.sequence_number is not None and entry.sequence_number >= 0
                    kept = entry.sequence_number if given else None
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=snapshot_id,
                            sequence_number=kept,
                            file_sequence_number=None,
                            data_file=entry.data_file,
                        )
                    )
                else:
                    writer.existing(entry)
    return writer.to_manifest_file()
