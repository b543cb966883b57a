"""The upsert key index files that table maintenance may delete.

A snapshot's key index file (:mod:`icesink.upsert.key_index`) is registered as its
statistics file and names, per partition, the files holding the blobs of its chain,
which may be the files of earlier snapshots. Snapshot expiry unregisters the files of
the snapshots it expires; those still named by a remaining index stay until the sink
writes those partitions again, after which orphan removal deletes them. An index that
cannot be read keeps every file.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyiceberg.table import Table

from icesink.upsert.key_index import IndexFormatError, is_index_path, read_footer


def live_index_files(table: Table) -> set[str] | None:
    """The registered key index files and the files their chains name (``None``: one is unreadable)."""
    live: set[str] = set()
    for statistics in table.metadata.statistics:
        if not is_index_path(statistics.statistics_path):
            continue
        live.add(statistics.statistics_path)
        try:
            footer = read_footer(table.io, statistics.statistics_path, statistics.file_size_in_bytes)
        except IndexFormatError:
            return None
        live |= {ref.path for chain in footer.chains.values() for ref in chain}
    return live


def unused_index_files(table: Table, unregistered: Iterable[str]) -> set[str]:
    """The key index files among ``unregistered`` (those of expired snapshots) that no index names."""
    candidates = {path for path in unregistered if is_index_path(path)}
    if not candidates:
        return set()
    live = live_index_files(table)
    return set() if live is None else candidates - live


def orphaned_index_files(table: Table, paths: Iterable[str]) -> list[str]:
    """The key index files among ``paths`` (old enough to go) that no registered index names."""
    candidates = sorted(path for path in paths if is_index_path(path))
    if not candidates:
        return []
    live = live_index_files(table)
    return [] if live is None else [path for path in candidates if path not in live]
