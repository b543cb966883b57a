"""One sink, many tables: rows routed by a field or topic, each table evolving on its own, exactly once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from tests.support.tables import catalog_from_options, check_data_files, table_rows

EVENTS = st.StructType(
    [
        st.StructField("id", st.LongType()),
        st.StructField("type", st.StringType()),
        st.StructField("x", st.StringType()),
        st.StructField("page", st.StringType()),
        st.StructField("amount", st.DoubleType()),
    ]
)
# Each event type fills its own columns; the others stay null in its rows.
COLUMNS = {"click": ("x",), "view": ("page",), "buy": ("amount",)}


def _event(k: int, kind: str) -> dict[str, Any]:
    row: dict[str, Any] = {"id": k, "type": kind, "x": None, "page": None, "amount": None}
    if kind == "click":
        row["x"] = str(k)
    elif kind == "view":
        row["page"] = f"/p/{k}"
    elif kind == "buy":
        row["amount"] = k + 0.5
    return row


def _events(spark: SparkSession, kinds: list[str], per_kind: int, start: int = 0) -> DataFrame:
    rows = [_event(start + i * len(kinds) + j, kind) for i in range(per_kind) for j, kind in enumerate(kinds)]
    return spark.createDataFrame(rows, EVENTS)


def _sink(catalog_options: dict[str, str], **options: str) -> IcebergSink:
    return IcebergSink.from_options(
        {
            **catalog_options,
            "sink-id": "routed",
            "route.by": "field",
            "route.field": "type",
            "route.table-template": "ev.{value}",
            **options,
        }
    )


def _columns(catalog: Catalog, name: str) -> list[str]:
    return [f.name for f in catalog.load_table(name).schema().fields]


def _spark_jobs(spark: SparkSession, call: Callable[[], None]) -> int:
    """Spark jobs ``call`` runs on this thread (counted through its job group)."""
    group = f"routed-{uuid.uuid4().hex[:8]}"
    context = spark.sparkContext
    context.setJobGroup(group, "count the jobs of one routed batch")
    try:
        call()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(context.statusTracker().getJobIdsForGroup(group))


def test_rows_go_to_their_own_tables_with_their_own_columns(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    with _sink(catalog_options, **{"write.target-file-size-bytes": "4096"}) as sink:
        sink(_events(spark, ["click", "view", "buy"], 50), 0)
    catalog = catalog_from_options(catalog_options)
    for kind, own in COLUMNS.items():
        table = catalog.load_table(f"ev.{kind}")
        assert _columns(catalog, f"ev.{kind}") == ["id", "type", *own]
        rows = table_rows(table)
        assert sorted(r["id"] for r in rows) == [3 * i + list(COLUMNS).index(kind) for i in range(50)]
        assert {r["type"] for r in rows} == {kind}
        assert all(r[own[0]] is not None for r in rows)
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        summary = snapshot.summary
        assert summary["icesink.sink-id"] == "routed" and summary["icesink.batch-ids"] == "0"
        check_data_files(table)
    assert not catalog.table_exists("ev.routed__dlq")
