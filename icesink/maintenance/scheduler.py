"""The sink's own maintenance of a table, a little after each commit, within a time budget.

After a micro-batch's commits the sink gives its tables a budget of ``maintenance.budget-s``
(:class:`Budget`, shared by the tables of a routed batch). Each table's
:class:`TableMaintenance` spends it one unit at a time, cheapest first, so that reads and writes
both stay flat over a long upsert stream, as in an LSM store:

1. expire   - snapshots older than the retention, beyond the newest ones kept, and the files only
              they reached (:func:`~icesink.maintenance.operations.expire_snapshots`); due when the
              table's oldest snapshot is past the retention, read from the metadata in hand;
2. rewrite  - in one ``replace`` snapshot (:func:`~icesink.maintenance.rewrite_run.rewrite_partitions`):
              the data files of the partitions due rewritten where it pays, with their deletes
              applied (:func:`~icesink.upsert.compaction.rewrite_partition`), one partition at a
              time while the budget allows and at most ``maintenance.compact.partitions-per-batch``
              a batch: keys spread over every partition make them all due at once, and the stream
              would pay for all of them in one batch; and the delete files of every other partition
              with more than ``maintenance.compact.max-delete-files`` merged into one, no data file
              read (:func:`~icesink.upsert.delete_merge.merged_deletes`);
3. orphans  - every ``maintenance.orphan.interval-s``, files of the data folder no snapshot
              references, older than ``maintenance.orphan.older-than-s`` and not kept by the
              sink (its staged batches, its attempts in flight).

The partitions are planned (every manifest read, :func:`~icesink.maintenance.planning.plan_partitions`)
only when the snapshot summary's totals grew by a threshold since the last plan; the plan is then
worked through over as many batches as it takes.

No unit starts once the budget is spent, but one always may when none ran yet, so every batch
makes progress. A unit that loses a race with another commit gives way: the other commit stands,
the unit's files are deleted (:class:`~icesink.errors.RewriteConflictError`), and the unit is
tried again after the next batch. The replay marker is a table property, which none of this
touches: a batch replayed after its snapshot expired is still recognised.

Manifests are not rewritten here: pyiceberg 0.12 has no manifest rewrite, and the tables the
sink creates merge their manifests at each commit (``commit.manifest-merge.enabled``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

from icesink.config_maintenance import MaintenanceConfig
from icesink.errors import RewriteConflictError
from icesink.maintenance.operations import expire_snapshots, remove_orphan_files
from icesink.maintenance.planning import Partition, Rewrite, plan_partitions
from icesink.maintenance.rewrite_run import rewrite_partitions

logger = logging.getLogger(__name__)

KeepFiles = Callable[[], Callable[[str], bool]]  # built only when orphans are removed


class Budget:
    """The time maintenance may take after one micro-batch (see the module).

    Args:
        seconds: The budget.
        clock: Monotonic seconds (``time.monotonic``).
    """

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._deadline = clock() + seconds
        self.units = 0

    def allows(self) -> bool:
        """Whether another unit may start: none ran yet, or time is left."""
        return self.units == 0 or self._clock() < self._deadline

    def spent(self) -> None:
        """A unit ran."""
        self.units += 1


@dataclass(frozen=True)
class MaintenanceRun:
    """What one table's maintenance did after a batch.

    Attributes:
        compacted_partitions: Partitions rewritten.
        rewritten_data_files: Data files the compactions removed.
        removed_delete_files: Delete files the compactions removed.
        added_data_files: Data files the compactions wrote.
        added_delete_files: Delete files the compactions wrote (positions left on files not rewritten).
        merged_partitions: Partitions whose delete files were merged.
        merged_delete_files: Delete files the merges replaced.
        written_delete_files: Delete files the merges wrote.
        expired_snapshots: Snapshots expired.
        expired_files: Files deleted because only expired snapshots reached them.
        orphan_files: Orphan files deleted.
        conflicts: Units that gave way to another commit.
        pending: Partitions planned and still to compact (or to merge the delete files of).
        delete_files: Live delete files of the table afterwards.
    """

    compacted_partitions: int = 0
    rewritten_data_files: int = 0
    removed_delete_files: int = 0
    added_data_files: int = 0
    added_delete_files: int = 0
    merged_partitions: int = 0
    merged_delete_files: int = 0
    written_delete_files: int = 0
    expired_snapshots: int = 0
    expired_files: int = 0
    orphan_files: int = 0
    conflicts: int = 0
    pending: int = 0
    delete_files: int = 0

    @property
    def outcome(self) -> str:
        """``conflict``, ``deferred`` (work left for the next batch) or ``done``."""
        return "conflict" if self.conflicts else "deferred" if self.pending else "done"


class TableMaintenance:
    """One table's maintenance state, kept by the sink between batches (see the module).

    Args:
        name: The table.
        clock: Monotonic seconds, for the orphan interval.
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._started = clock()
        self._orphans_at: float | None = None  # monotonic time of the last orphan removal
        self._pending: list[Rewrite] = []
        self._merges: list[Partition] = []
        self._planned_totals = (0, 0)  # delete and data files at the last plan
        self.last_run = float("-inf")

    @property
    def pending(self) -> int:
        """Partitions planned and still to compact or to merge the delete files of."""
        return len(self._pending) + len(self._merges)

    def run(
        self, table: Table, config: MaintenanceConfig, target_file_size: int, budget: Budget, keep: KeepFiles
    ) -> MaintenanceRun:
        """Spend ``budget`` on ``table`` (see the module); ``keep`` says which files orphan removal spares."""
        self.last_run = self._clock()
        run = MaintenanceRun()
        if budget.allows():
            run = self._expire(table, config, budget, run)
        self._plan(table, config, target_file_size)
        if budget.allows() and (self._merges or self._pending):
            run = self._rewrite(table, config, target_file_size, budget, run)
        if budget.allows() and self._orphans_due(config):
            run = self._remove_orphans(table, config, budget, keep, run)
        return replace(run, pending=self.pending, delete_files=_totals(table)[0])

    def _expire(
        self, table: Table, config: MaintenanceConfig, budget: Budget, run: MaintenanceRun
    ) -> MaintenanceRun:
        properties = table.metadata.properties
        keep, age_s = config.snapshots_to_keep(properties), config.snapshot_age_s(properties)
        snapshots = table.metadata.snapshots
        cutoff_ms = (time.time() - age_s) * 1000  # snapshot timestamps are wall-clock
        if len(snapshots) <= keep or min(s.timestamp_ms for s in snapshots) >= cutoff_ms:
            return run
        budget.spent()
        older_than = dt.datetime.fromtimestamp(cutoff_ms / 1000, dt.UTC)
        try:
            report = expire_snapshots(table, retain_last=keep, older_than=older_than)
        except CommitFailedException as e:
            logger.info(
                "snapshot expiry of %s gave way to another commit (%s): tried again later", self.name, e
            )
            return replace(run, conflicts=run.conflicts + 1)
        return replace(
            run, expired_snapshots=report.expired_snapshots, expired_files=len(report.deleted_files)
        )

    def _plan(self, table: Table, config: MaintenanceConfig, target_file_size: int) -> None:
        """Plan again when the table's totals grew by a threshold since the last plan or unit.

        Partitions still waiting keep their place, so that none waits behind newer ones forever.
        """
        if table.metadata.format_version != 2:
            return  # rewrites write format v2's replace snapshots
        deletes, data = _totals(table)
        planned_deletes, planned_data = self._planned_totals
        if (
            deletes - planned_deletes < min(config.max_delete_files, config.min_delete_files)
            and data - planned_data < config.min_small_files
        ):
            return
        self._planned_totals = (deletes, data)
        plan = plan_partitions(table, config, target_file_size)
        due = {r.partition: r for r in plan.rewrites}
        waiting = [due.pop(r.partition) for r in self._pending if r.partition in due]
        self._merges, self._pending = plan.merges, waiting + [r for r in plan.rewrites if r.partition in due]
        if self.pending:
            logger.info(
                "%s partitions of %s to merge the delete files of, %s to compact",
                len(self._merges),
                self.name,
                len(self._pending),
            )

    def _rewrite(
        self,
        table: Table,
        config: MaintenanceConfig,
        target_file_size: int,
        budget: Budget,
        run: MaintenanceRun,
    ) -> MaintenanceRun:
        """The partitions due rewritten, up to ``partitions-per-batch`` while the budget allows, and
        the delete files merged, in one snapshot (:mod:`icesink.maintenance.rewrite_run`)."""

        def next_partition() -> bool:
            if not budget.allows():
                return False
            budget.spent()
            return True

        if not self._pending:
            budget.spent()  # the merges alone: a unit too
        planned = self._pending[: config.partitions_per_batch]
        try:
            done = rewrite_partitions(table, planned, self._merges, config, target_file_size, next_partition)
        except RewriteConflictError as e:
            logger.info(
                "compaction of partitions %s of %s gave way to another commit: %s",
                [r.partition for r in planned],
                self.name,
                e,
            )
            return replace(run, conflicts=run.conflicts + 1)  # all tried again after the next batch
        except BaseException:
            tried = len(planned)  # a failure: tried again after the next batch, last
            self._pending = self._pending[tried:] + self._pending[:tried]
            raise
        self._pending = self._pending[len(done.tried) :]
        self._merges = []
        self._planned_totals = _totals(table)  # the next plan once as many more files came
        compacted = done.compacted
        return replace(
            run,
            compacted_partitions=run.compacted_partitions + len(compacted),
            rewritten_data_files=run.rewritten_data_files + sum(r.rewritten_data_files for r in compacted),
            removed_delete_files=run.removed_delete_files + sum(r.removed_delete_files for r in compacted),
            added_data_files=run.added_data_files + sum(r.added_data_files for r in compacted),
            added_delete_files=run.added_delete_files + sum(r.added_delete_files for r in compacted),
            merged_partitions=len(done.merges),
            merged_delete_files=sum(len(m.replaced) for m in done.merges),
            written_delete_files=sum(m.message is not None for m in done.merges),
        )

    def _orphans_due(self, config: MaintenanceConfig) -> bool:
        last = self._started if self._orphans_at is None else self._orphans_at
        return self._clock() - last >= config.orphan_interval_s

    def _remove_orphans(
        self, table: Table, config: MaintenanceConfig, budget: Budget, keep: KeepFiles, run: MaintenanceRun
    ) -> MaintenanceRun:
        budget.spent()
        older_than = dt.timedelta(seconds=config.orphan_older_than_s)
        report = remove_orphan_files(table, older_than, keep=keep())
        self._orphans_at = self._clock()  # only once done: a failed removal is tried after the next batch
        return replace(run, orphan_files=len(report.deleted_files))


def _totals(table: Table) -> tuple[int, int]:
    """Live delete files and data files of the table, from its current snapshot's summary."""
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    if summary is None:
        return 0, 0
    return int(summary.get("total-delete-files") or 0), int(summary.get("total-data-files") or 0)
