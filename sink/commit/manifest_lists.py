"""The manifest list a commit of this process wrote last, per table, for the next commit to build on.

A commit rewrites its parent's manifest list with one more manifest, so it reads that
list first: a request to the object store and an Avro decode on every commit. When the
parent is the snapshot this process committed last (a streaming sink's usual case), its
manifests are known: they are what the commit wrote, with the sequence numbers the list
gave them. A list is remembered by its table's uuid and path, one per table, the newest
written; a commit on any other parent (another writer's, or one that failed) reads its
list from storage as before.

Only format version 2 lists are remembered: a v1 list holds no sequence numbers, so what
a reader gets back differs from what was written. The lists remembered hold at most
:data:`MAX_MANIFESTS` manifests together (about a kilobyte each); the tables committed
to least recently are forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

MAX_MANIFESTS = 20_000
"""Manifests the remembered lists hold together, at most."""

_REMEMBERED_VERSION = 2


class _Lists:
    """The last list written per table, least recently written first, and their manifests' count."""

    def __init__(self) -> None:
        self.lists: OrderedDict[str, tuple[str, tuple[ManifestFile, ...]]] = OrderedDict()
        self.manifests = 0
        self.lock = threading.Lock()

    def put(self, key: str, manifest_list: str, manifests: tuple[ManifestFile, ...]) -> None:
        with self.lock:
            self.manifests -= len(self.lists.pop(key, ("", ()))[1])
            self.lists[key] = (manifest_list, manifests)
            self.manifests += len(manifests)
            while self.manifests > MAX_MANIFESTS:
                self.manifests -= len(self.lists.popitem(last=False)[1][1])

    def get(self, key: str) -> tuple[str, tuple[ManifestFile, ...]] | None:
        with self.lock:
            return self.lists.get(key)

    def clear(self) -> None:
        with self.lock:
            self.lists.clear()
            self.manifests = 0


_lists = _Lists()


def remember(metadata: TableMetadata, manifest_list: str, manifests: Sequence[ManifestFile]) -> None:
    """Remember ``manifests``, as written to ``manifest_list`` for a snapshot of the table of ``metadata``."""
    if metadata.format_version == _REMEMBERED_VERSION and len(manifests) <= MAX_MANIFESTS:
        _lists.put(str(metadata.table_uuid), manifest_list, tuple(manifests))


def manifests_of(metadata: TableMetadata, snapshot: Snapshot, io: FileIO) -> list[ManifestFile]:
    """The manifests of ``snapshot`` of the table of ``metadata``: remembered, or read from its list."""
    remembered = _lists.get(str(metadata.table_uuid))
    if remembered is not None and remembered[0] == snapshot.manifest_list:
        return list(remembered[1])
    return snapshot.manifests(io)


def forget_all() -> None:
    """Forget every remembered list."""
    _lists.clear()


def held() -> tuple[int, int]:
    """The tables and the manifests remembered."""
    with _lists.lock:
        return len(_lists.lists), _lists.manifests
