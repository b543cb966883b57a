"""After the commits: each maintained table of the micro-batch gets its maintenance, within one budget.

The last step of a micro-batch (:mod:`icesink.batch.finish`). The tables a batch committed (one,
or a routed batch's many) share ``maintenance.budget-s``; the one maintained longest ago goes
first, so a budget too small for all of them reaches each in turn. Each table keeps its own
:class:`~icesink.maintenance.scheduler.TableMaintenance`, per table and sink id, for the life of
the sink. Orphan removal spares what the sink still needs, which the sink says
(:attr:`CommittedTable.kept_files`): the files of its staged batches and of its batch attempts
on record.

Maintenance never fails a batch: the batch is committed by then. A failure is logged
(``ICESINK-MAINTENANCE``), counted, and the work is tried again after the next batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from pyiceberg.table import Table

from icesink.config import SinkConfig
from icesink.log_context import batch_logger
from icesink.maintenance.scheduler import Budget, KeepFiles, MaintenanceRun, TableMaintenance
from icesink.metrics import SinkMetrics

__all__ = ["BatchMaintenance", "CommittedTable"]

logger = batch_logger(__name__)


@dataclass(frozen=True)
class CommittedTable:
    """A table a micro-batch committed to, as its maintenance sees it.

    Attributes:
        name: The table's name (its metrics' ``table`` label).
        sink_id: The sink id that committed.
        config: The table's configuration (its ``maintenance`` and ``write`` sections).
        table: The table as committed.
        lock: Held while the table is maintained: no staged commit of the table meanwhile.
        kept_files: Whether a file is one the sink still needs (built only when orphans are removed).
    """

    name: str
    sink_id: str
    config: SinkConfig
    table: Table
    lock: AbstractContextManager[object]
    kept_files: KeepFiles


class BatchMaintenance:
    """The maintenance of the tables a sink commits to (see the module).

    Args:
        config: The sink's configuration (its budget).
        metrics: Where each run is recorded.
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics) -> None:
        self._budget_s = config.maintenance.budget_s
        self._metrics = metrics
        self._lock = threading.Lock()
        self._tables: dict[tuple[str, str], TableMaintenance] = {}

    def after_commit(self, tables: Sequence[CommittedTable]) -> None:
        """Maintain the ``tables`` whose configuration and properties say so, in one budget."""
        chosen = [t for t in tables if t.config.maintenance.enabled_for(t.table.metadata.properties)]
        if not chosen:
            return
        with self._lock:
            states = [self._tables.setdefault((t.name, t.sink_id), TableMaintenance(t.name)) for t in chosen]
        budget = Budget(self._budget_s)
        for state, committed in sorted(zip(states, chosen, strict=True), key=lambda p: p[0].last_run):
            if not budget.allows():
                break
            with committed.lock:  # no staged commit of the table meanwhile
                self._maintain(state, committed, budget)

    def _maintain(self, state: TableMaintenance, committed: CommittedTable, budget: Budget) -> None:
        started = time.monotonic()
        config = committed.config
        target = config.write.target_file_size(committed.table.metadata.properties)
        try:
            run = state.run(committed.table, config.maintenance, target, budget, committed.kept_files)
        except Exception as e:  # the batch is committed: the stream goes on, the work is tried again
            logger.warning(
                "ICESINK-MAINTENANCE: maintenance of %s failed, tried again after the next batch: %s",
                committed.name,
                e,
                exc_info=True,
            )
            self._metrics.record_maintenance(committed.name, "failed", time.monotonic() - started)
            return
        self._record(committed.name, run, time.monotonic() - started)

    def _record(self, name: str, run: MaintenanceRun, seconds: float) -> None:
        files = {
            "rewritten": run.rewritten_data_files,
            "delete_removed": run.removed_delete_files,
            "written": run.added_data_files,
            "delete_merged": run.merged_delete_files,
            "delete_written": run.written_delete_files + run.added_delete_files,
            "expired_deleted": run.expired_files,
            "orphan_deleted": run.orphan_files,
        }
        counts = {
            "snapshots_expired": run.expired_snapshots,
            "conflicts": run.conflicts,
            "delete_files": run.delete_files,
            "pending": run.pending,
            "compacted": run.compacted_partitions,
            "merged": run.merged_partitions,
        }
        self._metrics.record_maintenance(name, run.outcome, seconds, files, counts)
        if any(files.values()) or run.expired_snapshots or run.conflicts:
            logger.info(
                "maintenance of %s: %s partitions compacted (%s data and %s delete files into %s), "
                "%s partitions' delete files merged (%s into %s), "
                "%s snapshots expired (%s files deleted), %s orphan files deleted, %s conflicts, "
                "%s partitions left",
                name,
                run.compacted_partitions,
                run.rewritten_data_files,
                run.removed_delete_files,
                run.added_data_files,
                run.merged_partitions,
                run.merged_delete_files,
                run.written_delete_files,
                run.expired_snapshots,
                run.expired_files,
                run.orphan_files,
                run.conflicts,
                run.pending,
            )
