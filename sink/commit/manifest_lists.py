"""The manifest list a commit of this process wrote last, per table, for the next commit to build on.

A commit rewrites its parent's manifest list with one more manifest, so it reads that
list first: a request to the object store and an Avro decode on every commit. When the
parent is the snapshot this process committed last (a streaming sink's usual case), its
manifests are known: they are what the commit wrote, with the sequence numbers the list
gave them. A list is remembered by its table's uuid and path, one per table, the newest
written; a commit on any other parent (another writer's, or one that failed) reads its
list from storage as before.

Only format version 2 lists are remembered: a v1 list holds no sequence numbers, so what
a reader gets back differs from what was written.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

MAX_TABLES = 4096
"""Tables whose last list is kept; the least recently committed are forgotten first."""

_REMEMBERED_VERSION = 2

_lists: OrderedDict[str, tuple[str, tuple[ManifestFile, ...]]] = OrderedDict()
_lock = threading.Lock()


def remember(metadata: TableMetadata, manifest_list: str, manifests: Sequence[ManifestFile]) -> None:
    """Remember ``manifests``, as written to ``manifest_list`` for a snapshot of the table of ``metadata``."""
    if metadata.format_version != _REMEMBERED_VERSION:
        return
    key = str(metadata.table_uuid)
    with _lock:
        _lists[key] = (manifest_list, tuple(manifests))
        _lists.move_to_end(key)
        while len(_lists) > MAX_TABLES:
            _lists.popitem(last=False)


def manifests_of(metadata: TableMetadata, snapshot: Snapshot, io: FileIO) -> list[ManifestFile]:
    """The manifests of ``snapshot`` of the table of ``metadata``: remembered, or read from its list."""
    with _lock:
        remembered = _lists.get(str(metadata.table_uuid))
    if remembered is not None and remembered[0] == snapshot.manifest_list:
        return list(remembered[1])
    return snapshot.manifests(io)


def forget_all() -> None:
    """Forget every remembered list."""
    with _lock:
        _lists.clear()
