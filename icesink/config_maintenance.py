"""The maintenance section of the sink's configuration (``maintenance.*``): table upkeep inside the stream.

After a table's batch is committed, the sink may compact its partitions, expire old snapshots and
remove orphan files, within a time budget (:mod:`icesink.maintenance.scheduler`). The defaults keep
what Iceberg keeps (snapshots of the last 5 days, Iceberg's ``history.expire.max-snapshot-age-ms``)
and act only where a table has piled up enough to be worth it, so a short stream is not touched.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

#: The table property the sink sets on tables it creates: maintenance runs there unless turned off.
MAINTENANCE_PROPERTY = "icesink.maintenance.enabled"
DEFAULT_BUDGET_S = 10.0
DEFAULT_MIN_DELETE_FILES = 20
DEFAULT_MIN_SMALL_FILES = 8
DEFAULT_MAX_DELETE_FILES = 4
DEFAULT_DELETE_RATIO_THRESHOLD = 0.3  # Iceberg's rewrite_data_files delete-ratio-threshold default
DEFAULT_PARTITIONS_PER_BATCH = 2
DEFAULT_MAX_SNAPSHOT_AGE_S = 5 * 24 * 3600.0  # Iceberg's history.expire.max-snapshot-age-ms default
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 100
DEFAULT_ORPHAN_OLDER_THAN_S = 24 * 3600.0
DEFAULT_ORPHAN_INTERVAL_S = 24 * 3600.0
MIN_ORPHAN_OLDER_THAN_S = 3600.0  # a batch of another process may be writing for a while


class MaintenanceConfig(BaseModel):
    """Table maintenance run by the sink between batches (``maintenance.*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool | None = Field(
        default=None,
        description="Whether the sink maintains its tables after their commits (``maintenance.enabled``): "
        "compacts partitions, expires snapshots, removes orphan files. Unset (the default): on for "
        "tables the sink created (they carry the table property ``icesink.maintenance.enabled=true``; "
        "set it on another table to opt it in), off for tables created by someone else. ``false`` "
        "turns all of it off, ``true`` turns it on for every table the sink writes.",
    )
    budget_s: float = Field(
        default=DEFAULT_BUDGET_S,
        ge=0,
        allow_inf_nan=False,
        description="Seconds of maintenance after a micro-batch's commits, shared by its tables "
        "(``maintenance.budget-s``, default 10). Work is done one unit at a time (one partition "
        "compacted, the snapshots expired, the orphan files removed) and no unit starts once the "
        "budget is spent; what is left continues after the next batch. At least one unit runs "
        "when one is due, so a started unit may overrun the budget by its own length.",
    )
    max_delete_files: int = Field(
        default=DEFAULT_MAX_DELETE_FILES,
        ge=1,
        description="Position delete files one partition may have before the sink merges them "
        "(``maintenance.compact.max-delete-files``, default 4): past it, the smaller ones (or all, "
        "when that is not enough to get back within it) are replaced by one file of their positions "
        "sorted by path and position, in one ``replace`` snapshot for every partition due, without "
        "reading or writing a data file; positions of data files no longer live are dropped. An "
        "upserted partition gains a delete file per batch that changes it and every reader applies "
        "each: 4 keeps a reader's delete files within a few per partition while a merge reads only "
        "a few small files, and with keys spread over every partition merges come every few batches, "
        "not every batch.",
    )
    min_small_files: int = Field(
        default=DEFAULT_MIN_SMALL_FILES,
        ge=2,
        description="Data files of one size class that make the sink compact a partition "
        "(``maintenance.compact.min-small-files``, default 8), and the ratio between two classes. "
        "In a partition without delete files the files below the table's target file size fall "
        "into classes this many times apart, counted down from the target (with 8 and 512 MiB: "
        "64-512 MiB, 8-64 MiB, 1-8 MiB, ...), and a class is merged once it holds this many files, "
        "as size-tiered compaction does: each rewrite lifts a row a class, so a row is rewritten "
        "about log(target / file size) / log(8) times on its way to the target (3 times from files "
        "of 1-8 MiB), however long the stream, and after its compaction a partition holds at most "
        "7 files of each class (21 below the target from files of 1-8 MiB). In a partition with "
        "delete files, this many files below the target make the sink rewrite the small ones, "
        "smallest first while each is no bigger than those chosen together, and the files past "
        "``maintenance.compact.delete-ratio-threshold``, with their deletes applied. Larger: fewer "
        "rewrites of each row, more files for every reader to open.",
    )
    delete_ratio_threshold: float = Field(
        default=DEFAULT_DELETE_RATIO_THRESHOLD,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Share of a data file's rows deleted at which the sink rewrites it, however large "
        "(``maintenance.compact.delete-ratio-threshold``, default 0.3, Iceberg's "
        "``rewrite_data_files`` default): below it, a reader skips the deleted rows at less cost than "
        "rewriting the file. A partition is examined when it has small files to rewrite "
        "(``maintenance.compact.min-small-files``), or delete files to merge that hold this share "
        "of the rows of its largest data file.",
    )
    min_delete_files: int = Field(
        default=DEFAULT_MIN_DELETE_FILES,
        ge=1,
        description="Position delete files in one partition that make the sink rewrite all its data "
        "files (``maintenance.compact.min-delete-files``, default 20): with the deletes applied and "
        "the delete files dropped, in one ``replace`` snapshot. Merges "
        "(``maintenance.compact.max-delete-files``) keep partitions below it unless set above it.",
    )
    partitions_per_batch: int = Field(
        default=DEFAULT_PARTITIONS_PER_BATCH,
        ge=1,
        description="Partitions whose data files the sink may rewrite after one micro-batch "
        "(``maintenance.compact.partitions-per-batch``, default 2); the others due wait for the next "
        "batches, most delete files first. Keys spread over every partition make them all due at "
        "once: this spreads that work over the batches, so no batch pays for every partition. "
        "Delete file merges are not counted: they read no data file.",
    )
    max_snapshot_age_s: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Snapshots older than this many seconds are expired, beyond the newest "
        "``maintenance.expire.min-snapshots-to-keep`` (``maintenance.expire.max-snapshot-age-s``). "
        "Unset: the table property ``history.expire.max-snapshot-age-ms``, else 5 days. Files only "
        "the expired snapshots reached are deleted. A replayed batch is still recognised after its "
        "snapshot expired: the replay marker is a table property.",
    )
    min_snapshots_to_keep: int | None = Field(
        default=None,
        ge=1,
        description="Newest snapshots never expired (``maintenance.expire.min-snapshots-to-keep``). "
        "Unset: the table property ``history.expire.min-snapshots-to-keep``, else 100.",
    )
    orphan_older_than_s: float = Field(
        default=DEFAULT_ORPHAN_OLDER_THAN_S,
        ge=MIN_ORPHAN_OLDER_THAN_S,
        allow_inf_nan=False,
        description="Files in a table's data folder that no snapshot references are deleted once "
        "older than this many seconds (``maintenance.orphan.older-than-s``, default 1 day, at least "
        "1 hour: another process's batch may be writing files not yet committed). Files of this "
        "sink's staged batches and of its batch attempts in flight are never deleted, whatever their "
        "age; those of other sinks writing the same table are spared by this age alone: keep it above "
        "the longest ``commit.interval-s`` of any of them.",
    )
    orphan_interval_s: float = Field(
        default=DEFAULT_ORPHAN_INTERVAL_S,
        ge=0,
        allow_inf_nan=False,
        description="Seconds between two orphan file removals of a table "
        "(``maintenance.orphan.interval-s``, default 1 day); the first comes this long after the "
        "sink started. Each lists the table's data folder and reads every manifest.",
    )

    def enabled_for(self, properties: Mapping[str, str]) -> bool:
        """Whether a table with these ``properties`` is maintained (see ``enabled``)."""
        if self.enabled is not None:
            return self.enabled
        return properties.get(MAINTENANCE_PROPERTY, "false").strip().lower() == "true"

    def snapshot_age_s(self, properties: Mapping[str, str]) -> float:
        """The age past which a table's snapshots are expired: the option, the table property, the default."""
        if self.max_snapshot_age_s is not None:
            return self.max_snapshot_age_s
        ms = properties.get("history.expire.max-snapshot-age-ms")
        return int(ms) / 1000 if ms and ms.strip().isdigit() else DEFAULT_MAX_SNAPSHOT_AGE_S

    def snapshots_to_keep(self, properties: Mapping[str, str]) -> int:
        """The newest snapshots of a table never expired: the option, the table property, the default."""
        if self.min_snapshots_to_keep is not None:
            return self.min_snapshots_to_keep
        kept = properties.get("history.expire.min-snapshots-to-keep")
        return max(1, int(kept)) if kept and kept.strip().isdigit() else DEFAULT_MIN_SNAPSHOTS_TO_KEEP
