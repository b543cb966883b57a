"""An upserting sink with a compaction and an appending sink on its table, between and during batches.

The interleaving is fixed by the ``commit.before`` failpoint: from inside the upsert
batch's commit, after its lookup has written the position deletes, another thread
appends rows of other keys through a second sink (append mode), then another thread
compacts the table. The compaction removes the data files the deletes point at, so the
batch's commit must notice the conflict, redo its lookup in the compacted files and
commit again. Between batches, a compaction runs in another thread too.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icesink import IcebergSink, compact, failpoints
from icesink.maintenance import CompactionReport
from tests.integration.test_upsert_sink import State, assert_reads, upsert_options
from tests.support.scripts import script_result, start_script
from tests.support.tables import catalog_from_options
from tests.support.upserts import CHANGE_BATCHES, create_table, expected_state, rows_of, sql_catalog

APPENDED_PER_CALL = 8


def _in_thread(work: Callable[[], Any]) -> Any:
    """Run ``work`` in another thread, wait for it, and return its result (or raise its error)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as e:  # handed to the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=run, name="concurrent-writer")
    thread.start()
    thread.join(timeout=600)
    assert not thread.is_alive(), "the concurrent writer did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


class Appender:
    """A second sink, append mode, writing rows of keys the change batches never use (1000 and up).

    The table is keyed: the sink is told to append to it all the same (the keys are new).
    """

    def __init__(self, spark: Any, catalog_options: dict[str, str], state: State) -> None:
        options = {**catalog_options, "table": "db.items", "sink-id": "appender"}
        self.sink = IcebergSink.from_options({**options, "write.allow-append-to-keyed-table": "true"})
        self._spark = spark
        self._state = state
        self._batch_id = 0

    def append(self) -> None:
        first = 1000 + self._batch_id * APPENDED_PER_CALL
        keys = range(first, first + APPENDED_PER_CALL)
        rows = [{"id": k, "name": f"a{k}", "v": k} for k in keys]
        self.sink(self._spark.createDataFrame(pa.Table.from_pylist(rows)), self._batch_id)
        self._batch_id += 1
        self._state.update({k: (f"a{k}", k) for k in keys})


def _delete_file_paths(table: Table) -> list[str]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        e.data_file.file_path
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.data_file.content == DataFileContent.POSITION_DELETES
    ]


def test_upserts_with_a_concurrent_compaction_and_appender_end_exact(
    spark: Any, catalog_options: dict[str, str], tmp_path: Path
) -> None:
    # The compactions are this test's own: the sink's maintenance would add snapshots of its own.
    options = upsert_options(catalog_options, **{"sink-id": "upserts", "maintenance.enabled": "false"})
    upserts = IcebergSink.from_options(options)
    state: State = {}
    upserts(spark.createDataFrame(CHANGE_BATCHES[0]), 0)
    expected_state(state, CHANGE_BATCHES[0])
    table = upserts.catalog.load_table("db.items")
    appender = Appender(spark, catalog_options, state)
    compactions: list[CompactionReport] = []

    def append_then_compact(point: str) -> None:
        """Inside the upsert's commit: new small files of other keys, then a rewrite of every partition."""
        _in_thread(appender.append)
        compactions.append(_in_thread(lambda: compact(upserts.catalog.load_table("db.items"))))

    for batch_id, batch in enumerate(CHANGE_BATCHES[1:], start=1):
        _in_thread(appender.append)  # between batches: more small files of other keys
        failpoints.arm("commit.before", "call", call=append_then_compact)
        try:
            upserts(spark.createDataFrame(batch), batch_id)
        finally:
            failpoints.disarm_all()
        expected_state(state, batch)
        table.refresh()
        summary = table.current_snapshot().summary  # type: ignore[union-attr]
        assert summary is not None and summary["icesink.batch-ids"] == str(batch_id)
        assert compactions[-1].partitions >= 1 and not compactions[-1].given_up
        # The first lookup's deletes pointed at files the compaction removed: redone, committed.
        # The compaction removed every earlier delete file: the live ones are the batch's.
        deletes = _delete_file_paths(table)
        assert deletes and all("-r1-deletes-" in p for p in deletes), deletes
        assert_reads(table, state)
        compactions.append(_in_thread(lambda: compact(upserts.catalog.load_table("db.items"))))
        assert not compactions[-1].given_up
        assert_reads(table, state)

    appended = {k for k in state if k >= 1000}  # every appended row is read back by assert_reads
    assert len(appended) == APPENDED_PER_CALL * 2 * (len(CHANGE_BATCHES) - 1)


REPO = Path(__file__).resolve().parents[2]
WRITER_JOB = REPO / "tests" / "support" / "upsert_writer_job.py"


def test_two_upserting_processes_inserting_the_same_new_keys_store_each_key_once(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}"}
    fifos = {name: tmp_path / name for name in ("to_outside", "to_inside")}
    for fifo in fifos.values():
        os.mkfifo(fifo)
    rounds, keys = 3, 200
    shared = {
        "catalog_name": table.catalog.name,
        "catalog": catalog,
        "table": "db.items",
        "rounds": rounds,
        "keys": keys,
    }
    shared.update({name: str(path) for name, path in fifos.items()})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [
        # the script imports tests.support: the checkout on its path, as the other scripts of tests
        start_script(WRITER_JOB, {**shared, "sink_id": sink_id, "role": role}, env=env)
        for sink_id, role in (("A", "inside"), ("B", "outside"))
    ]
    inside, _ = (script_result(p, timeout_s=240) for p in processes)

    rows = table.catalog.load_table("db.items").scan().to_arrow()
    ids = rows.column("id").to_pylist()
    assert (len(ids), len(set(ids))) == (rounds * keys, rounds * keys), "keys stored twice"
    # A committed last every round: its rows stay, B's were deleted by A's redone lookup
    assert rows_of(rows) == {k: (f"A{k}", k // keys) for k in range(rounds * keys)}
    assert inside["redos"] == [1] * rounds


def _new_keys(spark: Any, keys: range, name: str, routed: bool) -> Any:
    """A batch inserting ``keys`` (named ``name<key>``); routed: to the table of its ``kind`` column."""
    rows = [{"id": k, "name": f"{name}{k}", "v": k, "_op": "c", "seq": 0} for k in keys]
    return spark.createDataFrame([{**r, "kind": "items"} if routed else r for r in rows])


def _sink_options(catalog_options: dict[str, str], sink_id: str, routed: bool) -> dict[str, str]:
    options = upsert_options(catalog_options, **{"sink-id": sink_id})
    if not routed:
        return options
    del options["table"], options["write.mode"], options["upsert.key-columns"]
    per_table = {"db.items": {"write.mode": "upsert", "upsert.key-columns": "id"}}
    return {
        **options,
        "route.by": "field",
        "route.field": "kind",
        "route.table-template": "db.{value}",
        "route.table-options": json.dumps(per_table),
    }


@pytest.mark.parametrize("routed", [False, True], ids=["one-table", "routed"])
def test_two_upserting_sinks_inserting_the_same_new_keys_store_each_key_once(
    spark: Any, catalog_options: dict[str, str], routed: bool
) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace_if_not_exists("db")
    table = create_table(catalog)  # keyed by id, bucket(4, id)
    a = IcebergSink.from_options(_sink_options(catalog_options, "A", routed))
    b = IcebergSink.from_options(_sink_options(catalog_options, "B", routed))
    keys = range(300)
    # B's batch of the same new keys commits inside A's commit: A's lookup did not see B's rows
    failpoints.arm("commit.before", "call", call=lambda _point: b(_new_keys(spark, keys, "b", routed), 0))
    try:
        a(_new_keys(spark, keys, "a", routed), 0)
    finally:
        failpoints.disarm_all()

    table.refresh()
    rows = table.scan().to_arrow()
    ids = rows.column("id").to_pylist()
    assert (len(ids), len(set(ids))) == (300, 300), "keys stored twice"
    assert rows_of(rows) == {k: (f"a{k}", k) for k in keys}  # A committed last: its rows stay
    assert [s.summary["icesink.sink-id"] for s in table.snapshots() if s.summary] == ["B", "A"]
