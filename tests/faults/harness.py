"""Inject one fault into a run of small batches, restart where Spark would, check every row.

A :class:`Fault` names a failpoint of :mod:`icesink.failpoints` (or the catalog going down
at one, a storm of conflicting commits, or the process dying there), a write mode and the
batch it hits. :func:`run_with_fault` drives the sink directly, as ``foreachBatch`` does:
batch after batch, and when a batch fails, a new sink (the restarted query, same sink id)
replays it. The sink maintains its table in the stream after every commit (compaction and
snapshot expiry at their lowest thresholds). Then a last orphan-file run, and :func:`check`
reads both tables back: each row the batches leave in the table (in upsert mode, each key's
last good change) exactly once, each bad row once in the dead-letter table.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import sqlalchemy
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st
from sqlalchemy import event

from icesink import IcebergSink, failpoints
from icesink.maintenance import referenced_files, remove_orphan_files
from tests.support.tables import catalog_from_options

BATCHES = 3
ROWS = 20  # per batch; every 10th row has a value the table's int column cannot take
TABLE = "db.faults"
DEAD_LETTERS = f"{TABLE}__dlq"
RETRIES = 1
NOW = dt.timedelta(0)  # maintenance takes every unreferenced file, however new

BATCH_POINTS = (
    "normalize",
    "schema",
    "route",
    "deadletter",
    "stage",
    "commit.before",
    "commit.lost",
    "commit.after",
)
EXECUTOR_POINTS = ("write.task", "storage.write")
CATALOG_POINTS = ("schema", "stage", "commit.before", "commit.after")
MODES = ("append", "staged", "upsert", "upsert-staged")
NOT_IN_MODE = {"upsert": ("stage", "commit.lost"), "upsert-staged": ("commit.lost",)}
"""Points a mode never reaches: a row delta commits without the append's commit.lost, and
without a cadence nothing is staged."""
IN_STREAM_MAINTENANCE = "maintenance.commit"
"""The sink's own compaction commits here, after the batch's commit (the last batch's: the
first to find enough files in every mode)."""


class Crash(BaseException):
    """The process dies at the failpoint: nothing after it runs, no ``except Exception`` sees it."""


def crash(point: str) -> None:
    raise Crash(point)


class Refusals:
    """Raises at the failpoint, counting: a fault the sink survives without a restart (maintenance's)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, point: str) -> None:
        self.count += 1
        raise failpoints.InjectedFault(f"injected fault at {point}")


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Attributes:
        kind: ``raise`` (an exception at ``point``), ``exit`` (the process of a write
            task ends), ``crash`` (the sink's process dies at ``point``: a new sink goes
            on), ``catalog-down`` (every catalog call fails from ``point`` until the
            restart), ``conflicts`` (a concurrent appender wins every commit attempt),
            ``maintenance`` (the last orphan-file run fails before deleting).
        point: The failpoint.
        mode: ``append`` (a commit per batch), ``staged`` (commits of up to 3 batches),
            ``upsert`` (a row delta per batch, keys changed again by the next batch) or
            ``upsert-staged`` (row deltas of up to 3 batches).
        batch: The batch the fault hits.
    """

    kind: str
    point: str
    mode: str
    batch: int

    @property
    def name(self) -> str:
        return f"{self.kind}@{self.point}-{self.mode}-b{self.batch}"


def matrix() -> list[Fault]:
    """Every fault the harness knows, in both modes, at every batch."""
    kinds = [("raise", p) for p in BATCH_POINTS + EXECUTOR_POINTS]
    kinds += [("exit", "write.task")]
    kinds += [("catalog-down", p) for p in CATALOG_POINTS]
    kinds += [("conflicts", "commit.before"), ("maintenance", "maintenance")]
    faults = [Fault(k, p, m, b) for k, p in kinds for m in MODES for b in range(BATCHES)]
    faults += [
        Fault(k, IN_STREAM_MAINTENANCE, m, _first_rewrite(m)) for k in ("raise", "crash") for m in MODES
    ]
    return [f for f in faults if f.point not in NOT_IN_MODE.get(f.mode, ())]


def _first_rewrite(mode: str) -> int:
    """The batch after whose commit the sink's maintenance first rewrites files: an appended table
    is due at its second small file (batch 1), and is not planned again until two more came in;
    an upserted one at every batch with deletes; a staged one at its cadence's commit (the last)."""
    return 1 if mode == "append" else BATCHES - 1


def seeded_selection(seed: int, n: int) -> list[Fault]:
    """``n`` faults of :func:`matrix`, every kind and point at least once where ``n`` allows."""
    rng = random.Random(seed)
    faults = matrix()
    rng.shuffle(faults)
    chosen: dict[tuple[str, str], Fault] = {}
    for fault in faults:
        chosen.setdefault((fault.kind, fault.point), fault)
    rest = [f for f in faults if f not in chosen.values()]
    return sorted([*chosen.values(), *rest][:n], key=lambda f: f.name)


SCHEMA = st.StructType([st.StructField("id", st.LongType(), False), st.StructField("n", st.IntegerType())])


def rows_of(batch_id: int, mode: str) -> list[tuple[int, str]]:
    """Batch ``batch_id``'s ``(id, n)``; upserts change the upper half of the previous batch's keys again.

    ``n`` arrives as text; every 10th row's cannot be an int (a dead letter, named by its batch).
    """
    first = batch_id * ROWS - (ROWS // 2 if mode.startswith("upsert") and batch_id else 0)
    ids = range(first, (batch_id + 1) * ROWS)
    return [(i, f"bad{batch_id}" if i % 10 == 3 else str(i * 10 + batch_id)) for i in ids]


def frame(spark: SparkSession, batch_id: int, mode: str) -> DataFrame:
    """Batch ``batch_id`` (see :func:`rows_of`); batch 2 brings a new column (a schema change)."""
    df = spark.createDataFrame(rows_of(batch_id, mode), "id long, n string").coalesce(1)
    return df.selectExpr("*", "'e' AS extra") if batch_id >= 2 else df


class CatalogOutage:
    """Every SQL statement of this process fails while :attr:`down` (the catalog's database is gone)."""

    def __init__(self) -> None:
        self.down = False
        self.outages = 0
        event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", self._refuse)

    def _refuse(self, *_args: Any) -> None:
        if self.down:
            raise sqlalchemy.exc.OperationalError("catalog", {}, Exception("unable to open database file"))

    def go_down(self, _point: str) -> None:
        self.down = True
        self.outages += 1

    def close(self) -> None:
        self.down = False
        event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", self._refuse)


class ConflictStorm:
    """Another writer appends rows before every commit attempt of the sink: every attempt conflicts."""

    def __init__(self, options: dict[str, str]) -> None:
        self._catalog = catalog_from_options(options)
        self._ids = itertools.count(-1, -1)
        self.appended: list[int] = []

    def append(self, _point: str) -> None:
        table = self._catalog.load_table(TABLE)
        ids = [next(self._ids) for _ in range(2)]
        rows = pa.table({"id": ids}, schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
        table.append(rows)
        self.appended.extend(ids)


@dataclass
class Outcome:
    """What a run checked."""

    fault: Fault
    faults_fired: int = 0
    restarts: int = 0
    rows_checked: int = 0
    lost: list[object] = field(default_factory=list)
    duplicated: list[object] = field(default_factory=list)
    missing_files: list[str] = field(default_factory=list)
    unreferenced_files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "fault": self.fault.name,
            "fired": self.faults_fired,
            "restarts": self.restarts,
            "rows": self.rows_checked,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "missing_files": len(self.missing_files),
            "unreferenced_files": len(self.unreferenced_files),
        }


def options_for(catalog_options: dict[str, str], mode: str) -> dict[str, str]:
    options = {
        **catalog_options,
        "table": TABLE,
        "sink-id": "faults",
        "commit.retry.num-retries": str(RETRIES),
        "commit.retry.min-wait-ms": "1",
        "commit.retry.max-wait-ms": "2",
        # the sink's own maintenance after every commit: compaction and expiry at their lowest thresholds
        "maintenance.compact.min-small-files": "2",
        "maintenance.compact.min-delete-files": "1",
        "maintenance.expire.max-snapshot-age-s": "0",
        "maintenance.expire.min-snapshots-to-keep": "1",
    }
    if mode.endswith("staged"):
        options["commit.max-batches"] = "3"
    if mode.startswith("upsert"):
        options |= {"write.mode": "upsert", "upsert.key-columns": "id"}
    return options


def arm(fault: Fault, outage: CatalogOutage, storm: ConflictStorm, refusals: Refusals) -> None:
    if fault.kind == "raise" and fault.point == IN_STREAM_MAINTENANCE:
        failpoints.arm(fault.point, "call", call=refusals)
    elif fault.kind == "catalog-down":
        failpoints.arm(fault.point, "call", call=outage.go_down)
    elif fault.kind == "conflicts":
        failpoints.arm(fault.point, "call", call=storm.append, times=100)  # every attempt of the batch
    elif fault.kind == "crash":
        failpoints.arm(fault.point, "call", call=crash)
    elif fault.kind in ("raise", "exit"):
        failpoints.arm(fault.point, fault.kind)


def run_with_fault(spark: SparkSession, catalog_options: dict[str, str], fault: Fault) -> Outcome:
    """Run the batches with ``fault`` injected, restart after it, maintain, and check."""
    options = options_for(catalog_options, fault.mode)
    outcome = Outcome(fault)
    IcebergSink.from_options(options).prepare(SCHEMA)  # the table's n is an int
    storm = ConflictStorm(options)
    outage = CatalogOutage()
    refusals = Refusals()
    try:
        sink = IcebergSink.from_options(options)
        for batch_id in range(BATCHES):
            if batch_id == fault.batch:
                arm(fault, outage, storm, refusals)
            try:
                sink(frame(spark, batch_id, fault.mode), batch_id)
            except (Exception, Crash):
                outcome.restarts += 1
                failpoints.disarm_all()
                outage.down = False  # the catalog is back
                sink = IcebergSink.from_options(options)  # the restarted query replays the batch
                sink(frame(spark, batch_id, fault.mode), batch_id)
            failpoints.disarm_all()
        outcome.restarts += finish(spark, sink, options, outage)
    finally:
        failpoints.disarm_all()
        outage.close()
    # raised and exits each cost a restart; an outage, a storm or in-stream maintenance's
    # failure may be survived without one
    called = outage.outages + (1 if storm.appended else 0) + refusals.count
    survivable = ("catalog-down", "conflicts") if fault.point != IN_STREAM_MAINTENANCE else ("raise",)
    outcome.faults_fired = called if fault.kind in survivable else outcome.restarts
    catalog = catalog_from_options(options)
    outcome.faults_fired += maintain(catalog, fault)
    check(catalog, outcome, fault.mode, storm.appended)
    return outcome


def finish(spark: SparkSession, sink: IcebergSink, options: dict[str, str], outage: CatalogOutage) -> int:
    """The end of the query: close the sink; when that fails, the next run's first (empty) batch commits."""
    try:
        sink.close()
        return 0
    except Exception:
        outage.down = False
        with IcebergSink.from_options(options) as restarted:
            restarted(spark.createDataFrame([], "id long, n string"), BATCHES)
        return 1


def maintain(catalog: Catalog, fault: Fault) -> int:
    """The maintenance run (``remove_orphan_files``, ``older_than=0``); rerun when it was made to fail."""
    fired = 0
    for name in (TABLE, DEAD_LETTERS):
        if fault.kind == "maintenance" and name == TABLE:
            failpoints.arm("maintenance")
            try:
                remove_orphan_files(catalog.load_table(name), older_than=NOW)
            except failpoints.InjectedFault:
                fired += 1
            failpoints.disarm_all()
        remove_orphan_files(catalog.load_table(name), older_than=NOW)
    return fired


def expected_rows(
    mode: str, appended: list[int]
) -> tuple[Counter[tuple[int, Any]], Counter[tuple[int, Any]]]:
    """The ``(id, n)`` rows the table should hold and the dead-letter table should hold."""
    table: Counter[tuple[int, Any]] = Counter((i, None) for i in appended)
    dead: Counter[tuple[int, Any]] = Counter()
    last: dict[int, int] = {}
    for batch_id in range(BATCHES):
        for i, n in rows_of(batch_id, mode):
            if n.startswith("bad"):
                dead[(i, n)] += 1
            elif mode.startswith("upsert"):
                last[i] = int(n)  # the key's last good change
            else:
                table[(i, int(n))] += 1
    table.update((i, n) for i, n in last.items())
    return table, dead


def check(catalog: Catalog, outcome: Outcome, mode: str, appended: list[int]) -> None:
    """Each row the table should hold once, each bad row once as a dead letter; files and folders agree."""
    table, dead = catalog.load_table(TABLE), catalog.load_table(DEAD_LETTERS)
    rows = table.scan(selected_fields=("id", "n")).to_arrow()
    found = Counter(zip(rows.column("id").to_pylist(), rows.column("n").to_pylist(), strict=True))
    letters = [json.loads(row) for row in dead.scan().to_arrow().column("original_row").to_pylist()]
    found_dead = Counter((d["id"], d["n"]) for d in letters)
    want, want_dead = expected_rows(mode, appended)
    outcome.rows_checked = want.total() + want_dead.total()
    for got, expected in ((found, want), (found_dead, want_dead)):
        outcome.lost += sorted(r for r in expected if got[r] == 0)
        outcome.duplicated += sorted(r for r, n in got.items() if n > 1)
        outcome.lost += sorted(r for r in got if r not in expected)  # rows from nowhere count as wrong too
    for t in (table, dead):
        referenced = referenced_data_files(t)
        outcome.missing_files += sorted(p for p in referenced if not Path(_local(p)).exists())
        outcome.unreferenced_files += sorted(p for p in data_files_on_disk(t) if p not in referenced)


def referenced_data_files(table: Table) -> set[str]:
    return {p for p in referenced_files(table) if "/data/" in p}


def data_files_on_disk(table: Table) -> Iterator[str]:
    data = Path(_local(table.location())) / "data"
    return (f"file://{p}" for p in data.rglob("*") if p.is_file())


def _local(uri: str) -> str:
    return uri.removeprefix("file://")
