"""One snapshot built straight from table metadata: manifests, manifest list, summary, updates.

Every commit of the sink goes through here: appends (:mod:`icesink.commit.committer`, also
for dead letters), row deltas and rewrites (:mod:`icesink.upsert`). pyiceberg 0.12 cannot
add delete files, and its transaction applies every staged update to a deep copy of the
whole table metadata at each step, which makes a commit cost grow with the table's
history. :class:`SnapshotProducer` reads the base metadata once and returns the catalog
updates of one snapshot, committed in one catalog call
(:func:`icesink._pyiceberg.commit_table_updates`):

- the added data files in one manifest per partition spec, the added position delete
  files in delete manifests (content ``deletes``), all with the snapshot's id and an
  unassigned sequence number, which the manifest list gives them (the table's next
  sequence number: a delete file then applies to data files up to its own number, so
  also to rows added by the same snapshot, see Iceberg's spec); data files whose write
  tasks encoded their entries go in a manifest per write, the blocks copied
  (:mod:`icesink.commit.encoded_manifests`), their snapshot id inherited likewise;
- the manifests of the base snapshot, unchanged, except those holding a removed file,
  rewritten with that entry marked deleted (and the others existing);
- manifests merged as the table's ``commit.manifest-merge.*`` properties ask
  (:mod:`icesink.commit.manifest_merge`), as pyiceberg's merge append does;
- a summary with pyiceberg's counts (added/removed records, files, delete files,
  position deletes, totals) plus the caller's properties, and table properties set in
  the same atomic update (the ledger's marker).

The manifests of added files depend only on the snapshot id, which stays the same on a
retry, so they are written once; only the rewritten manifests and the manifest list
are written again for a new base. The same producer serves appends (``append``, data
files only), row deltas (``overwrite``) and rewrites (``replace``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    write_manifest,
)
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
)
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)

from icesink._pyiceberg import DeleteManifestWriter
from icesink._pyiceberg.avro import write_manifest_list
from icesink.commit import manifest_lists
from icesink.commit.encoded_manifests import split_encoded, write_encoded_manifest
from icesink.commit.manifest_entries import live_entries
from icesink.commit.manifest_merge import MergePolicy, merge_manifests
from icesink.commit.summary import snapshot_summary
from icesink.errors import UpsertError
from icesink.write.manifest_entry import EncodedEntry, manifest_codec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingSnapshot:
    """A snapshot ready to commit: the catalog updates and the requirements they rest on."""

    snapshot: Snapshot
    updates: tuple[TableUpdate, ...]
    requirements: tuple[TableRequirement, ...]
    files: tuple[str, ...]  # the manifest list and the manifests this snapshot wrote


class SnapshotProducer:
    """Builds one snapshot of added data and delete files and removed files.

    Args:
        table: The table (its FileIO and location; its metadata is the first base).
        operation: ``append``, ``overwrite`` (row delta) or ``replace`` (rewrite).
        snapshot_properties: Extra summary entries (the ledger's).
        table_properties: Table properties set in the same commit (the ledger's marker).
    """

    def __init__(
        self,
        table: Table,
        operation: Operation,
        snapshot_properties: Mapping[str, str] | None = None,
        table_properties: Mapping[str, str] | None = None,
    ) -> None:
        if operation != Operation.APPEND:
            require_format_v2(table)  # an append is what pyiceberg writes to a v1 table too
        self._table = table
        self._operation = operation
        self._snapshot_properties = dict(snapshot_properties or {})
        self._table_properties = dict(table_properties or {})
        self._snapshot_id = table.metadata.new_snapshot_id()
        self._commit_uuid = uuid.uuid4()
        self._counter = itertools.count()
        self._added: list[DataFile] = []
        self._encoded: dict[str, EncodedEntry] = {}  # by file path
        self._removed: set[str] = set()
        self._sequence_numbers: dict[str, int] = {}  # by file path: data sequence numbers kept
        self._added_manifests: list[ManifestFile] | None = None
        self.written: list[str] = []  # every manifest and manifest list written, for clean-up
        self._attempt = 0

    @property
    def snapshot_id(self) -> int:
        return self._snapshot_id

    def add_file(
        self,
        data_file: DataFile,
        encoded: EncodedEntry | None = None,
        data_sequence_number: int | None = None,
    ) -> None:
        """Add a data file or a position delete file, with its entry if its write task encoded it.

        ``data_sequence_number``: the file's, when it must keep an earlier one than the snapshot's
        (a rewrite of delete files: see :mod:`icesink.upsert.delete_merge`); by default it inherits
        the snapshot's.
        """
        if data_file.content == DataFileContent.EQUALITY_DELETES:
            raise ValueError(f"equality delete files are not written: {data_file.file_path}")
        if self._operation == Operation.APPEND and data_file.content != DataFileContent.DATA:
            # Conflict checks skip appends: an append must never carry deletes.
            raise ValueError(f"an append adds data files only, not {data_file.file_path}")
        self._added.append(data_file)
        if data_sequence_number is not None:
            self._sequence_numbers[data_file.file_path] = data_sequence_number
        if encoded is not None:
            self._encoded[data_file.file_path] = encoded
        self._added_manifests = None

    def remove_path(self, path: str) -> None:
        """Remove a live data or delete file of the base snapshot (by path)."""
        if self._operation == Operation.APPEND:
            raise ValueError(f"an append removes no file, not {path}")
        self._removed.add(path)

    def build(self, base: TableMetadata) -> PendingSnapshot:
        """The snapshot on top of ``base``'s main branch, its files written."""
        if self._added_manifests is None:
            self._added_manifests = self._write_added_manifests(base)
        parent = base.current_snapshot()
        kept, removed_entries = self._base_manifests(base, parent)
        manifests = merge_manifests(
            self._added_manifests + kept,
            self._table.io,
            MergePolicy.of(base.properties),
            self._snapshot_id,
            lambda spec_id, deletes: self._manifest_writer(base, spec_id, deletes),
        )
        sequence_number = base.next_sequence_number()
        manifest_list = self._write_manifest_list(base, parent, sequence_number, manifests)
        snapshot = Snapshot(
            snapshot_id=self._snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=sequence_number,
            manifest_list=manifest_list,
            summary=snapshot_summary(
                base,
                parent,
                self._operation,
                (self._added, [e.data_file for e in removed_entries]),
                self._snapshot_properties,
            ),
            schema_id=base.current_schema_id,
        )
        updates: tuple[TableUpdate, ...] = (
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(
                ref_name=MAIN_BRANCH,
                type=SnapshotRefType.BRANCH,
                snapshot_id=self._snapshot_id,
                max_ref_age_ms=None,
                max_snapshot_age_ms=None,
                min_snapshots_to_keep=None,
            ),
        )
        if self._table_properties:
            updates += (SetPropertiesUpdate(updates=self._table_properties),)
        requirements: tuple[TableRequirement, ...] = (
            AssertTableUUID(uuid=base.table_uuid),
            AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=parent.snapshot_id if parent else None),
        )
        own = [m.manifest_path for m in manifests if m.added_snapshot_id == self._snapshot_id]
        return PendingSnapshot(snapshot, updates, requirements, (*own, manifest_list))

    def clean_up(self, keep: Iterable[str] = ()) -> None:
        """Delete the manifests and manifest lists written (but those in ``keep``)."""
        kept = set(keep)
        for path in self.written:
            if path not in kept:
                with contextlib.suppress(FileNotFoundError):
                    self._table.io.delete(path)
        self.written = [p for p in self.written if p in kept]

    def _write_added_manifests(self, base: TableMetadata) -> list[ManifestFile]:
        groups: dict[tuple[int, bool], list[DataFile]] = defaultdict(list)
        for data_file in self._added:
            groups[(data_file.spec_id, data_file.content != DataFileContent.DATA)].append(data_file)
        manifests = []
        for (spec_id, deletes), group in sorted(groups.items()):
            encoded, files = (
                split_encoded(group, self._encoded, base, spec_id) if not deletes else ([], group)
            )
            for copied in encoded:
                output = self._table.io.new_output(self._new_manifest_location())
                manifests.append(write_encoded_manifest(output, base, spec_id, self._snapshot_id, copied))
            if not files:
                continue
            with self._manifest_writer(base, spec_id, deletes) as writer:
                for data_file in files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=self._sequence_numbers.get(data_file.file_path),
                            file_sequence_number=None,
                            data_file=data_file,
                        )
                    )
            manifests.append(writer.to_manifest_file())
        return manifests

    def _base_manifests(
        self, base: TableMetadata, parent: Snapshot | None
    ) -> tuple[list[ManifestFile], list[ManifestEntry]]:
        """The parent's manifests, those with removed files rewritten; and the removed entries."""
        if parent is None:
            if self._removed:
                raise UpsertError(f"cannot remove {sorted(self._removed)[:3]}: the table has no snapshot")
            return [], []
        kept: list[ManifestFile] = []
        removed: list[ManifestEntry] = []
        for manifest in manifest_lists.manifests_of(base, parent, self._table.io):
            if not self._removed:
                kept.append(manifest)
                continue
            entries = live_entries(self._table.io, manifest)
            hits = [e for e in entries if e.data_file.file_path in self._removed]
            if not hits:
                kept.append(manifest)
                continue
            removed += hits
            # The rewritten manifest is kept even when every entry is deleted: its deleted
            # entries are how later commits see what this snapshot removed.
            with self._manifest_writer(base, manifest.partition_spec_id, manifest.content != 0) as writer:
                for entry in entries:
                    if entry.data_file.file_path in self._removed:
                        writer.delete(entry)
                    else:
                        writer.existing(entry)
            kept.append(writer.to_manifest_file())
        missing = self._removed - {e.data_file.file_path for e in removed}
        if missing:
            raise UpsertError(
                f"files to remove are not live in snapshot {parent.snapshot_id}: {sorted(missing)[:5]}",
                hint="a concurrent commit removed them; plan the rewrite again from the current snapshot",
            )
        return kept, removed

    def _new_manifest_location(self) -> str:
        name = f"{self._commit_uuid}-m{next(self._counter)}.avro"
        path = self._table.location_provider().new_metadata_location(name)
        self.written.append(path)
        return path

    def _manifest_writer(self, base: TableMetadata, spec_id: int, deletes: bool) -> ManifestWriter:
        path = self._new_manifest_location()
        args = (base.specs()[spec_id], base.schema(), self._table.io.new_output(path), self._snapshot_id)
        codec = manifest_codec(base.properties)
        if deletes:
            return DeleteManifestWriter(*args, avro_compression=codec)  # type: ignore[arg-type]
        return write_manifest(base.format_version, *args, avro_compression=codec)  # type: ignore[arg-type]

    def _write_manifest_list(
        self,
        base: TableMetadata,
        parent: Snapshot | None,
        sequence_number: int,
        manifests: list[ManifestFile],
    ) -> str:
        self._attempt += 1
        name = f"snap-{self._snapshot_id}-{self._attempt}-{self._commit_uuid}.avro"
        path = self._table.location_provider().new_metadata_location(name)
        self.written.append(path)
        codec = manifest_codec(base.properties)
        with write_manifest_list(
            format_version=base.format_version,
            output_file=self._table.io.new_output(path),
            snapshot_id=self._snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=sequence_number,
            avro_compression=codec,
        ) as writer:
            writer.add_manifests(manifests)
        manifest_lists.remember(base, path, writer.data)
        return path


def require_format_v2(table: Table) -> None:
    """Raise :class:`UpsertError` unless the table is of format version 2.

    Position delete files exist in v2 only: v1 has no delete files, and v3 replaces them
    with deletion vectors.
    """
    version = table.metadata.format_version
    if version != 2:
        raise UpsertError(
            f"table {'.'.join(table.name())} has format version {version}; upserts need format version 2",
            table=".".join(table.name()),
            hint="create the table with properties={'format-version': '2'} "
            "(or upgrade a v1 table with transaction().upgrade_table_version(2))",
        )
