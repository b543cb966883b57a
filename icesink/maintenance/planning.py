"""Which partitions of a table the sink's maintenance works on: one read of the current snapshot's manifests.

:func:`plan_partitions` counts, per partition of the default spec, its delete files and their
positions, its data files below the target size and its largest data file, and finds

- the partitions whose delete files to merge (more than ``maintenance.compact.max-delete-files``;
  :func:`~icesink.upsert.delete_merge.merge_deletes`), and
- the partitions whose data files to rewrite (:func:`~icesink.upsert.compaction.compact_partition`):
  every file of those with ``maintenance.compact.min-delete-files`` delete files; only what pays
  of those without delete files that have ``maintenance.compact.min-small-files`` files of one
  size class (:mod:`icesink.upsert.size_tiers`), of those with delete files that have as many
  small files, or delete files to merge that hold ``maintenance.compact.delete-ratio-threshold``
  of the rows of their largest file. Most delete files first: they cost readers most.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icesink.commit.manifest_entries import live_entries
from icesink.config_maintenance import MaintenanceConfig
from icesink.upsert.size_tiers import tiers_to_merge

Partition = tuple[Any, ...]


@dataclass(frozen=True)
class Rewrite:
    """A partition whose data files to rewrite: all of them (``full``) or only what pays."""

    partition: Partition
    full: bool


@dataclass(frozen=True)
class PartitionPlan:
    """What :func:`plan_partitions` found (see the module)."""

    merges: list[Partition] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)


def live_files(table: Table, snapshot: Snapshot) -> Iterator[tuple[Partition, DataFile]]:
    """Every live file (data and delete) of ``snapshot`` in the table's default spec, with its
    partition values."""
    for manifest in snapshot.manifests(table.io):
        if manifest.partition_spec_id != table.metadata.default_spec_id:
            continue
        for entry in live_entries(table.io, manifest):
            file = entry.data_file
            yield tuple(file.partition[i] for i in range(len(file.partition))), file


def plan_partitions(table: Table, config: MaintenanceConfig, target_file_size_bytes: int) -> PartitionPlan:
    """The partitions to merge the delete files of, and to rewrite (see the module)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return PartitionPlan()
    small: Counter[Partition] = Counter()
    deletes: Counter[Partition] = Counter()
    positions: Counter[Partition] = Counter()
    largest: Counter[Partition] = Counter()  # rows of the largest data file
    sizes: dict[Partition, list[int]] = {}
    for values, file in live_files(table, snapshot):
        if file.content != DataFileContent.DATA:
            deletes[values] += 1
            positions[values] += file.record_count
            continue
        largest[values] = max(largest[values], file.record_count)
        sizes.setdefault(values, []).append(file.file_size_in_bytes)
        if file.file_size_in_bytes < target_file_size_bytes:
            small[values] += 1
    tiered = {  # appended partitions: by size class
        p
        for p, s in sizes.items()
        if not deletes[p] and tiers_to_merge(s, target_file_size_bytes, config.min_small_files)
    }
    full = {p for p, n in deletes.items() if n >= config.min_delete_files}
    worn = {  # examined with the merges: a stream of deletes alone adds no small file
        p
        for p, n in positions.items()
        if deletes[p] > config.max_delete_files and n >= config.delete_ratio_threshold * max(largest[p], 1)
    }
    chosen = (
        full | worn | tiered | {p for p, n in small.items() if deletes[p] and n >= config.min_small_files}
    )
    order = sorted(chosen, key=lambda p: (-deletes[p], -small[p], repr(p)))
    return PartitionPlan(
        merges=sorted((p for p, n in deletes.items() if n > config.max_delete_files), key=repr),
        rewrites=[Rewrite(p, p in full) for p in order],
    )
