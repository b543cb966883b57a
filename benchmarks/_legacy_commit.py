"""Earlier commit paths, kept callable for comparison only.

:class:`TransactionCommitter` is the sink's :class:`~icesink.commit.committer.Committer` with
its one commit attempt made the way the first versions made it: ``fast_append`` or
``merge_append`` and ``set_properties`` in a pyiceberg transaction, which applies every
step to a deep copy of the table metadata.

:class:`CatalogCommitter` builds the snapshot as the committer does, but refreshes the
table with pyiceberg's ``Table.refresh()`` (the metadata parsed before every attempt) and
commits through the catalog's ``commit_table`` (which loads and parses the metadata
again and deep-copies the result): the path before the metadata was kept in hand.

In both, the retry loop, the ledger checks and the clean-up are the committer's own, so
they differ from it in the attempt alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

from pyiceberg.table import Table, TableProperties

from icesink.commit import committer, ledger
from icesink.commit.committer import CommitOutcome, Committer
from icesink.commit.ledger import BatchRange
from icesink.commit.staging import StagedBatch


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


class CatalogCommitter(Committer):
    """A :class:`Committer` that parses the metadata at each refresh and commits through ``commit_table``."""

    def commit_batches(self, *args: Any, **kwargs: Any) -> CommitOutcome:
        with _catalog_path():
            return super().commit_batches(*args, **kwargs)


@contextlib.contextmanager
def _catalog_path() -> Iterator[None]:
    """The committer's refreshes and commits made through pyiceberg's ``Table`` and catalog while inside."""
    in_hand = committer.metadata_cache
    committer.metadata_cache = SimpleNamespace(  # type: ignore[assignment]
        refresh=lambda table: table.refresh(),
        commit=lambda table, updates, requirements: table._do_commit(updates, requirements),
    )
    try:
        yield
    finally:
        committer.metadata_cache = in_hand
