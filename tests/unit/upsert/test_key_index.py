"""The upsert key index on a SQLite catalog, in this process: the rows it gives, kept, caught up, rebuilt.

Every test reads the table back (pyiceberg, DuckDB for one) and compares it with a model
of the changes; the index's own files are checked through the table metadata.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icesink.maintenance import compact, expire_snapshots, remove_orphan_files
from icesink.upsert.key_index import is_index_path, read_footer
from icesink.upsert.key_index_update import KeyIndexStore
from icesink.upsert.key_index_view import DEFAULT_MAX_LINKS
from tests.support.duckdb_reader import read_iceberg_with_duckdb
from tests.support.upserts import (
    BUCKETS,
    CHANGE_BATCHES,
    State,
    UpsertDriver,
    changes,
    create_table,
    expected_state,
    rows_of,
    sql_catalog,
)


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    return sql_catalog(tmp_path)


def _empty() -> State:
    return {}


def _store(table: Table) -> KeyIndexStore:
    return KeyIndexStore(table.io, ["id"], ".".join(table.name()), 64 * 1024 * 1024)


def _random_batch(rng: random.Random, seq: int, keys: int = 60, size: int = 25) -> pa.Table:
    rows: list[tuple[int | None, str | None, int | None, str | None, int | None]] = []
    for _ in range(size):
        key = rng.randrange(keys)
        if rng.random() < 0.2:
            rows.append((key, None, None, "d", seq))
        else:
            rows.append((key, f"k{key}s{seq}", rng.randrange(1000), "u", seq))
    return changes(*rows)


def _apply(driver: UpsertDriver, state: State, batch: pa.Table) -> None:
    driver.apply(batch)
    expected_state(state, batch)


def _index_files(table: Table) -> list[str]:
    table.refresh()
    return [s.statistics_path for s in table.metadata.statistics if is_index_path(s.statistics_path)]


def test_upserts_through_the_index_give_the_rows_of_the_data_file_lookup(catalog: Catalog) -> None:
    with_index, without = create_table(catalog, "db.with_index"), create_table(catalog, "db.without")
    store = _store(with_index)
    indexed, plain = UpsertDriver(with_index, index=store), UpsertDriver(without)
    rng = random.Random(7)
    state: State = {}
    batches = [*CHANGE_BATCHES, *(_random_batch(rng, 10 + n) for n in range(6))]
    for batch in batches:
        outcome = indexed.apply(batch)
        assert outcome.report.files_read == 0  # the index, not the data files
        plain.apply(batch)
        expected_state(state, batch)
    assert rows_of(with_index.scan().to_arrow()) == state == rows_of(without.scan().to_arrow())
    assert rows_of(read_iceberg_with_duckdb(with_index.metadata_location)) == state  # its statistics ignored
    with_index.refresh()
    current = with_index.metadata.current_snapshot_id
    assert [s.snapshot_id for s in with_index.metadata.statistics if is_index_path(s.statistics_path)][
        -1
    ] == current  # committed with the batch's snapshot
    assert store.take_counts().rebuilds == 0  # an empty table's index starts empty


def _two_stores_agree(table: Table, state: State, rng: random.Random, seq: int) -> KeyIndexStore:
    """A new store (a restarted sink) upserts more batches; the table holds the model's rows."""
    store = _store(table)
    driver = UpsertDriver(table, index=store, sink_id="s2")
    for n in range(3):
        _apply(driver, state, _random_batch(rng, seq + n))
    assert rows_of(table.scan().to_arrow()) == state
    return store


def _seed(table: Table, state: State, rng: random.Random, batches: int = 4) -> None:
    driver = UpsertDriver(table, index=_store(table))
    for n in range(batches):
        _apply(driver, state, _random_batch(rng, n))


def test_a_lost_index_is_rebuilt_from_the_data_files(catalog: Catalog) -> None:
    table = create_table(catalog)
    rng, state = random.Random(1), _empty()
    _seed(table, state, rng)
    assert _index_files(table)
    for statistics in list(table.metadata.statistics):  # one a commit: pyiceberg keeps only the last
        with table.update_statistics() as update:
            update.remove_statistics(statistics.snapshot_id)
    assert not _index_files(table)
    store = _two_stores_agree(table, state, rng, 100)
    assert store.take_counts().rebuilds == 1


def test_a_corrupt_index_is_rebuilt_and_the_batch_goes_on(catalog: Catalog) -> None:
    table = create_table(catalog)
    rng, state = random.Random(2), _empty()
    _seed(table, state, rng)
    for path in _index_files(table):  # every blob's bytes overwritten, the footer kept
        local = Path(path.removeprefix("file://"))
        data = bytearray(local.read_bytes())
        data[4:200] = b"\x00" * 196
        local.write_bytes(bytes(data))
    store = _two_stores_agree(table, state, rng, 100)
    assert store.take_counts().rebuilds == 1


def test_an_index_of_an_unknown_format_version_is_rebuilt(catalog: Catalog) -> None:
    table = create_table(catalog)
    rng, state = random.Random(3), _empty()
    _seed(table, state, rng, batches=2)
    for path in _index_files(table):
        local = Path(path.removeprefix("file://"))
        version = b'"icesink.key-index.format-version":'
        local.write_bytes(local.read_bytes().replace(version + b'"1"', version + b'"9"'))
    store = _two_stores_agree(table, state, rng, 100)
    assert store.take_counts().rebuilds == 1


def test_compaction_and_a_pyiceberg_delete_are_caught_up(catalog: Catalog) -> None:
    """Files the index points at rewritten by others (compaction, a copy-on-write delete), then upserts."""
    table = create_table(catalog)
    rng, state = random.Random(4), _empty()
    store = _store(table)
    driver = UpsertDriver(table, index=store)
    for n in range(4):
        _apply(driver, state, _random_batch(rng, n))
    assert compact(table, min_files=1).partitions > 0
    for n in range(4, 7):
        _apply(driver, state, _random_batch(rng, n))
    table.delete("id < 10")  # pyiceberg rewrites the files holding them
    state = {k: v for k, v in state.items() if k >= 10}
    for n in range(7, 10):
        _apply(driver, state, _random_batch(rng, n))
    assert rows_of(table.scan().to_arrow()) == state
    counts = store.take_counts()
    assert counts.rebuilds == 0
    assert counts.catchup_files > 0


def test_another_writers_position_deletes_are_caught_up(catalog: Catalog) -> None:
    table = create_table(catalog)
    rng, state = random.Random(5), _empty()
    store = _store(table)
    driver = UpsertDriver(table, index=store)
    other = UpsertDriver(table, sink_id="other")  # reads the data files, no index
    for n in range(3):
        _apply(driver, state, _random_batch(rng, n))
    deletes = changes(*[(k, None, None, "d", 50) for k in sorted(state)[:10]])
    other.apply(deletes)
    expected_state(state, deletes)
    for n in range(3, 6):  # the deleted keys come back through the index's sink
        _apply(driver, state, _random_batch(rng, 60 + n))
    assert rows_of(table.scan().to_arrow()) == state
    assert store.take_counts().catchup_files > 0


def _chains(table: Table) -> dict[tuple[int, tuple[int, ...]], list[str]]:
    """The newest index file's chain of every partition, as the files its links are in."""
    table.refresh()
    newest = [s for s in table.metadata.statistics if is_index_path(s.statistics_path)][-1]
    footer = read_footer(table.io, newest.statistics_path, newest.file_size_in_bytes)
    return {p: [ref.path for ref in chain] for p, chain in footer.chains.items()}


def test_partitions_changed_in_every_batch_get_their_full_blobs_spread_over_the_commits(
    catalog: Catalog,
) -> None:
    """Every partition changed by every batch: no chain grows past its most links, and the
    full blobs are spread, a share of the partitions per commit, not all in one commit."""
    table = create_table(catalog)
    rng, state = random.Random(6), _empty()
    driver = UpsertDriver(table, index=_store(table))
    lengths, full = [], []
    for n in range(3 * DEFAULT_MAX_LINKS):
        _apply(driver, state, _random_batch(rng, n, keys=400, size=400))  # every bucket, every batch
        chains = _chains(table)
        assert len(chains) == BUCKETS
        newest = _index_files(table)[-1]
        lengths.append(max(len(c) for c in chains.values()))
        full.append(sum(1 for c in chains.values() if c == [newest]))  # a full blob written by this commit
    share = -(-BUCKETS // DEFAULT_MAX_LINKS)
    assert max(lengths) <= DEFAULT_MAX_LINKS
    assert full[0] == BUCKETS  # the first commit: every partition new to the index, in full
    assert max(full[1:]) == share  # then a share of them, batch after batch
    assert sum(full[1:]) >= (len(full) - 1 - DEFAULT_MAX_LINKS) * share
    assert rows_of(table.scan().to_arrow()) == state
    store = _store(table)  # a restarted sink reads the index the commits left
    _apply(UpsertDriver(table, index=store, sink_id="s2"), state, _random_batch(rng, 99, keys=400))
    assert rows_of(table.scan().to_arrow()) == state
    assert store.take_counts().rebuilds == 0


def test_links_of_expired_snapshots_are_written_again_not_rebuilt(catalog: Catalog) -> None:
    """Snapshots expired with their statistics files: the next index holds those partitions in full."""
    table = create_table(catalog)
    rng, state = random.Random(8), _empty()
    store = _store(table)
    driver = UpsertDriver(table, index=store)
    for n in range(4):
        _apply(driver, state, _random_batch(rng, n))
    expire_snapshots(table, retain_last=1)
    table.refresh()
    assert len(_index_files(table)) == 1
    only_one = changes((0, "one", 1, "u", 10))  # one partition changed
    _apply(driver, state, only_one)
    registered = set(_index_files(table))
    assert all(path in registered for chain in _chains(table).values() for path in chain)
    for n in range(5, 8):
        _apply(driver, state, _random_batch(rng, n))
    assert rows_of(table.scan().to_arrow()) == state
    assert store.take_counts().rebuilds == 0


def test_maintenance_deletes_the_index_files_no_index_names_and_keeps_the_rest(catalog: Catalog) -> None:
    table = create_table(catalog)
    rng, state = random.Random(9), _empty()
    driver = UpsertDriver(table, index=_store(table))
    folder = Path(table.location().removeprefix("file://")) / "metadata"

    def files() -> set[str]:
        return {p.name for p in folder.glob("icesink-key-index-*.stats")}

    for n in range(2):  # every partition changed each time: chains of two links, one in each file
        _apply(driver, state, _random_batch(rng, n, size=60))
    assert all(len(chain) == 2 for chain in _chains(table).values())
    written = files()
    expire_snapshots(table, retain_last=1)  # the older one unregistered, still named by the newest
    assert files() == written
    (second,) = {path.rsplit("/", 1)[-1] for path in _index_files(table)}
    _apply(driver, state, _random_batch(rng, 3, size=60))  # their partitions written again, in full
    (newest,) = {path.rsplit("/", 1)[-1] for chain in _chains(table).values() for path in chain}
    expire_snapshots(table, retain_last=1)  # the second file's snapshot expired: nothing names it
    assert files() == written - {second} | {newest}
    remove_orphan_files(table, older_than=dt.timedelta(0))  # the first: named by nothing left
    assert files() == {newest}
    store = _store(table)  # a restarted sink reads what is left
    _apply(UpsertDriver(table, index=store, sink_id="s2"), state, _random_batch(rng, 9))
    assert rows_of(table.scan().to_arrow()) == state
    assert store.take_counts().rebuilds == 0
