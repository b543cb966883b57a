"""Commits on the metadata in hand through SeaweedFS's REST catalog, read back fresh by pyiceberg and DuckDB.

On the REST catalog the sink learns the table's current metadata file from a load of the
referenced snapshots only, and keeps the updates it applied itself when the server's
answer to a commit says the same (:mod:`icesink._pyiceberg.rest`): every test checks the
metadata in hand against a fresh load and the rows against what was committed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from icesink import catalog as catalogs
from icesink._pyiceberg import rest as pyiceberg_rest
from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.commit import metadata_cache
from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from icesink.config import CommitConfig
from tests.support.duckdb_reader import S3Settings, read_iceberg_with_duckdb
from tests.support.seaweedfs import REGION, SeaweedFS
from tests.unit.commit_fixtures import SINK_ID, concurrent_appends, write_attempt

pytestmark = pytest.mark.deploy

RETRIES = CommitConfig(retries=2, min_wait_ms=1, max_wait_ms=2)


def rest_table(server: SeaweedFS) -> tuple[Catalog, Table]:
    """``<fresh namespace>.t`` (``id long, v string``) in the REST catalog, made as the sink makes tables."""
    catalog = load_catalog("rest", **server.rest_catalog_properties())
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    return catalog, catalog.create_table(f"{namespace}.t", schema=schema, properties=CREATED_TABLE_PROPERTIES)


def commit(committer: Committer, batch_id: int) -> None:
    ids = range(batch_id * 10, batch_id * 10 + 10)
    batch = write_attempt(committer.table, batch_id, f"a{batch_id}", ids)
    committer.commit_batches([batch], BatchRange(batch_id, batch_id))


def fresh(server: SeaweedFS, table: Table) -> Table:
    """The table loaded by pyiceberg through a catalog of its own (nothing in hand)."""
    return load_catalog("other", **server.rest_catalog_properties()).load_table(table.name())


def ids_read_by_both(server: SeaweedFS, table: Table) -> list[int]:
    ours = sorted(table.scan().to_arrow().column("id").to_pylist())
    s3 = S3Settings(server.s3_endpoint, server.access_key, server.secret_key, REGION)
    duck = sorted(read_iceberg_with_duckdb(table.metadata_location, s3).column("id").to_pylist())
    assert ours == duck
    return ours


def spy_agreement(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each commit's answer agreed with the updates applied in hand (the real check, recorded)."""
    seen: list[bool] = []
    real = pyiceberg_rest.agrees

    def recording(*args: Any) -> bool:
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(pyiceberg_rest, "agrees", recording)
    return seen


def spy_full_loads(monkeypatch: pytest.MonkeyPatch, catalog: Catalog) -> list[str]:
    loads: list[str] = []
    real = catalog.load_table

    def counting(identifier: Any) -> Table:
        loads.append(str(identifier))
        return real(identifier)

    monkeypatch.setattr(catalog, "load_table", counting)
    return loads


def test_commits_keep_the_servers_metadata_without_parsing_it(
    seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = rest_table(seaweedfs)
    agreed = spy_agreement(monkeypatch)
    loads = spy_full_loads(monkeypatch, catalog)
    committer = Committer(table, SINK_ID, RETRIES)
    for b in range(4):  # as the sink does: load the table, commit the batch
        committer.table = catalogs.load_table(catalog, ".".join(table.name())) or table
        commit(committer, b)

    assert agreed == [True] * 4
    assert len(loads) <= 1  # the sink's first load at most; then only the referenced snapshots are asked
    loaded = fresh(seaweedfs, table)
    assert committer.table.metadata_location == loaded.metadata_location
    assert committer.table.metadata == loaded.metadata
    assert ids_read_by_both(seaweedfs, loaded) == list(range(40))
    assert loaded.properties[f"icesink.sink.{SINK_ID}.last-batch-id"] == "3"


def test_a_table_moved_by_another_writer_is_loaded_in_full(
    seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = rest_table(seaweedfs)
    committer = Committer(table, SINK_ID, RETRIES)
    commit(committer, 0)
    append, appended = concurrent_appends(table)
    append()
    loads = spy_full_loads(monkeypatch, catalog)

    metadata_cache.refresh(committer.table)

    assert len(loads) == 1
    assert committer.table.metadata == fresh(seaweedfs, table).metadata
    commit(committer, 1)
    loaded = fresh(seaweedfs, table)
    assert committer.table.metadata == loaded.metadata
    assert ids_read_by_both(seaweedfs, loaded) == sorted([*appended, *range(20)])


def test_a_commit_refused_by_the_server_is_retried_on_the_metadata_loaded_again(
    seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, table = rest_table(seaweedfs)
    committer = Committer(table, SINK_ID, RETRIES)
    commit(committer, 0)
    append, appended = concurrent_appends(table)
    once = [append]
    real: Callable[..., str] = pyiceberg_rest._post_commit

    def another_writer_first(*args: Any) -> str:
        while once:  # between the sink's refresh and its request: the server refuses it (409)
            once.pop()()
        return real(*args)

    monkeypatch.setattr(pyiceberg_rest, "_post_commit", another_writer_first)
    batch = write_attempt(committer.table, 1, "a1", range(10, 20))

    outcome = committer.commit_batches([batch], BatchRange(1, 1))

    assert (outcome.attempts, outcome.conflicts) == (2, 1)
    loaded = fresh(seaweedfs, table)
    assert committer.table.metadata == loaded.metadata
    assert ids_read_by_both(seaweedfs, loaded) == sorted([*appended, *range(20)])
