"""The manifest list a commit of this process wrote last, per table, for the next commit to build on.

A commit rewrites its parent's manifest list with one more manifest, so it reads that
list first: a request to the object store on every commit. When the parent is the
snapshot this process committed last (a streaming sink's usual case), the list's bytes
are known: they are what the commit wrote. A list is remembered by its table's uuid and
path, one per table, the newest written; a commit on any other parent (another writer's,
or one that failed) reads its list from storage as before.

The lists are kept as their bytes, not as pyiceberg's objects: a list of a hundred
manifests is about 6 KB as bytes and one allocation, where its objects are hundreds of
small allocations that, kept from one commit to the next amid the commit's short-lived
ones, keep the allocator's pages from being reused (the driver's memory grew 3-5 MiB more
over 500 batches when the objects were kept). Either way the list is decoded with a reader
prepared once (:func:`icesink._pyiceberg.avro.read_manifest_list`). The lists remembered hold
at most :data:`MAX_BYTES` together; the tables committed to least recently are forgotten
first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from icesink._pyiceberg.avro import read_manifest_list

MAX_BYTES = 32 * 1024 * 1024
"""Bytes the remembered lists hold together, at most."""


class _Lists:
    """The last list written per table, least recently written first, and their bytes' total."""

    def __init__(self) -> None:
        self.lists: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def put(self, key: str, manifest_list: str, data: bytes) -> None:
        with self.lock:
            self.size -= len(self.lists.pop(key, ("", b""))[1])
            self.lists[key] = (manifest_list, data)
            self.size += len(data)
            while self.size > MAX_BYTES:
                self.size -= len(self.lists.popitem(last=False)[1][1])

    def get(self, key: str) -> tuple[str, bytes] | None:
        with self.lock:
            return self.lists.get(key)

    def clear(self) -> None:
        with self.lock:
            self.lists.clear()
            self.size = 0


_lists = _Lists()


def remember(metadata: TableMetadata, manifest_list: str, data: bytes) -> None:
    """Remember ``data``, the bytes written to ``manifest_list`` for a snapshot of ``metadata``'s table."""
    if len(data) <= MAX_BYTES:
        _lists.put(str(metadata.table_uuid), manifest_list, data)


def manifests_of(metadata: TableMetadata, snapshot: Snapshot, io: FileIO) -> list[ManifestFile]:
    """The manifests of ``snapshot`` of ``metadata``'s table: from the list remembered, or from storage."""
    remembered = _lists.get(str(metadata.table_uuid))
    if remembered is not None and remembered[0] == snapshot.manifest_list:
        return read_manifest_list(snapshot.manifest_list, remembered[1])
    with io.new_input(snapshot.manifest_list).open() as stream:
        return read_manifest_list(snapshot.manifest_list, stream.read())


def forget_all() -> None:
    """Forget every remembered list."""
    _lists.clear()


def held() -> tuple[int, int]:
    """The tables and the bytes remembered."""
    with _lists.lock:
        return len(_lists.lists), _lists.size
