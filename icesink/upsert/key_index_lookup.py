"""A batch's lookup through the key index, and the index of the snapshot its commit makes.

:func:`look_up` finds the live rows of a batch's keys in the index of the snapshot the
lookup starts on (and of the staged batches overlaid on it), on the driver, reading only
the blobs of the partitions the keys can be in, and writes the position deletes as the
lookup in the data files does: one delete file per partition per batch, sorted by path
then position (:class:`~icesink.write.position_deletes.PositionDeleteWriter`).

:class:`IndexCommit` rides along with the batch's commit: the index of the new snapshot
(the start's with the batch's files and deletes applied) is written as a Puffin file and
registered as the new snapshot's statistics file (``set-statistics``) in the same atomic
update, so it can never describe another snapshot. When another writer committed after
the lookup's snapshot the commit goes on without it; the next batch catches up from the
last snapshot with an index (:mod:`icesink.upsert.key_index_update`).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import uuid
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.statistics import StatisticsFile
from pyiceberg.table.update import SetStatisticsUpdate, TableUpdate

from icesink.upsert.candidates import KeyCandidates
from icesink.upsert.key_index import (
    FILE_PREFIX,
    BlobRef,
    IndexFormatError,
    Partition,
    is_index_path,
    write_index_file,
)
from icesink.upsert.key_index_update import KeyIndexStore
from icesink.upsert.key_index_view import DEFAULT_MAX_LINKS, IndexStep, KeyIndex
from icesink.upsert.lookup import LookupResult, LookupSpec
from icesink.upsert.messages import LookupReport
from icesink.write.messages import DataFileMessage
from icesink.write.position_deletes import PositionDeleteWriter

logger = logging.getLogger(__name__)


def look_up(
    view: KeyIndex,
    metadata: TableMetadata,
    key_columns: Sequence[str],
    keys: pa.Table,
    spec: LookupSpec,
    store: KeyIndexStore,
) -> tuple[LookupResult, dict[Partition, pa.Table]]:
    """The position deletes of the live rows of ``keys`` in ``view``, one file per partition; the rows."""
    candidates = KeyCandidates.of(metadata, key_columns, keys)
    before = view.cache.entries_read
    found = view.lookup(candidates)
    messages: list[DataFileMessage] = []
    matched = 0
    for n, ((spec_id, values), rows) in enumerate(sorted(found.items(), key=lambda item: repr(item[0]))):
        first = min(rows.column("file_path").to_pylist())
        folder = spec.location.rstrip("/") if spec.location else posixpath.dirname(first)
        writer = PositionDeleteWriter(
            store.io,
            f"{folder}/{spec.file_prefix}-deletes-{n:05d}.parquet",
            values,
            spec_id,
            spec.compression,
        )
        writer.write(rows.select(["file_path", "pos"]).combine_chunks().to_batches()[0])
        writer.close()
        message = writer.result()
        if message is not None:
            messages.append(message)
        matched += rows.num_rows
    read = view.cache.entries_read - before
    logger.info(
        "lookup of %s keys in %s through its key index at snapshot %s: %s rows found, %s blob entries read, "
        "%s delete files",
        keys.num_rows,
        spec.table,
        view.snapshot_id,
        matched,
        read,
        len(messages),
    )
    return LookupResult(messages, LookupReport(0, read, matched, 0)), found


class IndexCommit:
    """The index of the snapshot a commit makes (see the module).

    Args:
        table: The table (its FileIO and metadata location).
        store: The table's index store (it keeps the committed view for the next batch).
        start: The index of the snapshot the commit's lookup started on.
        steps: What the commit adds and deletes, in order (a step per staged batch).
        max_links: Most links of a partition's chain.
    """

    def __init__(
        self,
        table: Table,
        store: KeyIndexStore,
        start: KeyIndex,
        steps: Sequence[IndexStep],
        max_links: int = DEFAULT_MAX_LINKS,
    ) -> None:
        self._table = table
        self._store = store
        self._start = start
        self._after = start
        for step in steps:
            self._after = self._after.apply(step, None)
        self._max_links = max_links
        self._path: str | None = None
        self._written: KeyIndex | None = None
        self._statistics: StatisticsFile | None = None

    def updates(self, base: TableMetadata, snapshot_id: int) -> tuple[TableUpdate, ...]:
        """The ``set-statistics`` update for ``snapshot_id`` on ``base`` (none: ``base`` moved on)."""
        if base.current_snapshot_id != self._start.snapshot_id:
            return ()
        if self._statistics is None:
            try:
                self._write(base, snapshot_id)
            except (OSError, IndexFormatError) as e:
                logger.warning("key index of snapshot %s not written: %s", snapshot_id, e)
                self._store.forget()
                return ()
        assert self._statistics is not None
        return (SetStatisticsUpdate(statistics=self._statistics),)

    def _write(self, base: TableMetadata, snapshot_id: int) -> None:
        registered = [s.statistics_path for s in base.statistics if is_index_path(s.statistics_path)]
        blobs, chains, tables = self._after.blobs(registered, self._max_links)
        name = f"{FILE_PREFIX}{snapshot_id}-{uuid.uuid4().hex[:12]}.stats"
        path = self._table.location_provider().new_metadata_location(name)
        self._path = path
        size, footer = write_index_file(self._store.io, path, blobs, self._after.key_columns, chains)
        own: dict[int, BlobRef] = {}
        offset = 4
        for n, blob in enumerate(blobs):
            own[n] = BlobRef(path, offset, len(blob))
            offset += len(blob)
        for n, entries in tables.items():
            self._after.cache.put(own[n], entries, self._after.key_columns)
        resolved = {p: tuple(own[r] if isinstance(r, int) else r for r in c) for p, c in chains.items()}
        self._written = self._after.written(snapshot_id, resolved)
        self._statistics = StatisticsFile(
            snapshot_id=snapshot_id,
            statistics_path=path,
            file_size_in_bytes=size,
            file_footer_size_in_bytes=footer,
            blob_metadata=[],
        )

    def done(self, committed_with_index: bool) -> None:
        """After the commit: keep the view of the new snapshot, or remove the file no commit names."""
        if committed_with_index and self._written is not None:
            self._store.keep(self._written)
            return
        self.discard()

    def landed(self) -> None:
        """An attempt landed although its answer was lost: the table says whether it named the index."""
        self._store.forget()

    def discard(self) -> None:
        """The commit failed or went on without the index: its file is removed."""
        if self._path is not None:
            with contextlib.suppress(FileNotFoundError, OSError):
                self._store.io.delete(self._path)
            self._path = None
            self._statistics = None
