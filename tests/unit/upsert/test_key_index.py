"""The upsert key index on a SQLite catalog, in this process: the rows it gives, kept, caught up, rebuilt.

Every test reads the table back (pyiceberg, DuckDB for one) and compares it with a model
of the changes; the index's own files are checked through the table metadata.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icesink.maintenance import compact
from icesink.upsert.key_index import is_index_path
from icesink.upsert.key_index_update import KeyIndexStore
from tests.support.upserts import (
    CHANGE_BATCHES,
    UpsertDriver,
    changes,
    create_table,
    expected_state,
    rows_of,
    sql_catalog,
)

State = dict[int, tuple[str | None, int | None]]


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
