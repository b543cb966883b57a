"""The live entries of manifests read before, kept by path: a manifest never changes once written.

A rewrite (the sink's maintenance: its plan, a compaction, a delete file merge, and the commit of
each) reads every manifest of the current snapshot to find a partition's files, and a stream's
table has a hundred or more: each read decodes the manifest's Avro schema and resolves a reader
for it before its few entries, about 6 ms a manifest, so that a maintenance unit spent most of
its time reading the same manifests again (``benchmarks/LOG.md``, "2026-12-02: the sink's
maintenance at a constant cost"). Iceberg's manifests are immutable, so their entries are kept here
by path (Iceberg Java keeps their bytes the same way, ``io.manifest.cache-enabled``), and only the
manifests new since are read.

The entries kept are pyiceberg's objects, shared by every caller: read them, never change them
(a manifest writer's ``existing`` and ``delete`` copy what they are given). At most
:data:`MAX_ENTRIES` entries are kept together; the manifests read least recently are forgotten
first, and a manifest larger than that is read every time, as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestFile

MAX_ENTRIES = 5_000
"""Live entries kept together, at most: a data file's entry, statistics and all, holds about 3 KB
for a table of 3 columns (more with more columns), so tens of MB at most; an upserted table that
its maintenance keeps compact has a few hundred."""


class _Entries:
    """Live entries by manifest path, least recently read first, and their count."""

    def __init__(self) -> None:
        self.manifests: OrderedDict[str, tuple[ManifestEntry, ...]] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def get(self, path: str) -> tuple[ManifestEntry, ...] | None:
        with self.lock:
            found = self.manifests.get(path)
            if found is not None:
                self.manifests.move_to_end(path)
            return found

    def put(self, path: str, entries: tuple[ManifestEntry, ...]) -> None:
        if len(entries) > MAX_ENTRIES:
            return
        with self.lock:
            if path in self.manifests:
                return
            self.manifests[path] = entries
            self.size += len(entries)
            while self.size > MAX_ENTRIES:
                self.size -= len(self.manifests.popitem(last=False)[1])

    def clear(self) -> None:
        with self.lock:
            self.manifests.clear()
            self.size = 0


_entries = _Entries()


def live_entries(io: FileIO, manifest: ManifestFile) -> tuple[ManifestEntry, ...]:
    """The live (added and existing) entries of ``manifest``: kept, or read and kept."""
    found = _entries.get(manifest.manifest_path)
    if found is None:
        found = tuple(manifest.fetch_manifest_entry(io, discard_deleted=True))
        _entries.put(manifest.manifest_path, found)
    return found


def forget_all() -> None:
    """Forget every manifest's entries."""
    _entries.clear()


def held() -> tuple[int, int]:
    """The manifests and the entries kept."""
    with _entries.lock:
        return len(_entries.manifests), _entries.size
