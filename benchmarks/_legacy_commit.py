"""The commit path before the snapshot producer: a pyiceberg transaction (for comparison only).

:class:`TransactionCommitter` is the sink's :class:`~sink.commit.committer.Committer` with
its one commit attempt made the way earlier versions made it: ``fast_append`` or
``merge_append`` and ``set_properties`` in a pyiceberg transaction, which applies every
step to a deep copy of the table metadata. The retry loop, the ledger checks and the
clean-up are the committer's own, so the two differ in the attempt alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.table import Table, TableProperties

from sink.commit import ledger
from sink.commit.committer import Committer
from sink.commit.ledger import BatchRange
from sink.commit.staging import StagedBatch


class TransactionCommitter(Committer):
    """A :class:`Committer` whose attempts go through a pyiceberg transaction."""

    def _commit_once(self, staged: Sequence[StagedBatch], batches: BatchRange) -> int | None:
        files = [f for b in staged for f in b.files]
        attempts = {b.batch_id: b.attempt for b in staged}
        summary = ledger.summary_properties(self._sink_id, batches, attempts)
        table = _without_inner_retries(self.table)
        merge = table.metadata.properties.get("commit.manifest-merge.enabled", "false").lower() == "true"
        with table.transaction() as tx:
            if files:
                update = tx.update_snapshot(snapshot_properties=summary)
                with update.merge_append() if merge else update.fast_append() as append:
                    for message in files:
                        append.append_data_file(self._data_file(message))
            marker = ledger.marker_properties(self._sink_id, batches, attempts.get(batches.last, ""))
            tx.set_properties(marker)
        self.table.metadata, self.table.metadata_location = table.metadata, table.metadata_location
        snapshot = table.current_snapshot()
        return snapshot.snapshot_id if files and snapshot is not None else None


def _without_inner_retries(table: Table) -> Table:
    """A copy of ``table`` whose commits pyiceberg does not retry itself."""
    properties = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog, table.config)
