"""The executor side of a routed write (``icesink/write/routed_task.py``), run in process: no Spark needed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType
from pyspark.sql import types as st

from icesink.config import SinkConfig
from icesink.destinations.resolve import route_column
from icesink.write.layout import BucketLayout
from icesink.write.routed_task import DestinationSpec, RoutedTaskWriter, RoutedWriteSpec
from icesink.write.spec import WriteSpec
from tests.unit.writer_fixtures import task_spec

CLICKS = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "x", LongType(), required=False)
)
VIEWS = Schema(
    NestedField(1, "page", StringType(), required=False), NestedField(2, "id", LongType(), required=False)
)
BY_PAGE = PartitionSpec(
    PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="page")
)


def _spec(tmp_path: Path, table: str, schema: Schema, spec: PartitionSpec) -> WriteSpec:
    return task_spec(tmp_path / table / "data", table, schema, spec, "sink-b3-attempt")


def _input() -> pa.RecordBatch:
    """``[dest_index, bad, slot id, slot x, slot page]``: clicks are 0, views 1, -1 unroutable."""
    return pa.RecordBatch.from_pydict(
        {
            "dest": pa.array([0, 1, 0, 1, -1, 1, 0], pa.int32()),
            "bad": [False, False, True, False, True, False, False],
            "id": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
            "x": pa.array([10, None, 30, None, None, None, 70], pa.int64()),
            "page": [None, "/a", None, "/b", None, "/a", None],
        }
    )


def test_each_destination_gets_its_rows_in_its_table_schema_through_one_fanout(tmp_path: Path) -> None:
    spec = RoutedWriteSpec(
        (
            DestinationSpec(0, _spec(tmp_path, "ev.clicks", CLICKS, PartitionSpec()), (2, 3)),
            DestinationSpec(1, _spec(tmp_path, "ev.views", VIEWS, BY_PAGE), (4, 2)),
        ),
        memory_budget_bytes=32 << 20,
    )
    writer = RoutedTaskWriter(spec, task_id=2, attempt=0)
    messages = [m for part in writer.stream(iter([_input()])) for m in part]
    assert writer.report.input_rows == 7 and writer.report.bad_rows == 2
    by_table: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        assert m.path.startswith(f"file://{tmp_path / m.table / 'data'}/")
        by_table.setdefault(m.table, []).extend(pq.read_table(m.path.removeprefix("file://")).to_pylist())
    assert sorted(by_table["ev.clicks"], key=lambda r: r["id"]) == [{"id": 1, "x": 10}, {"id": 7, "x": 70}]
    assert sorted(by_table["ev.views"], key=lambda r: r["id"]) == [
        {"page": "/a", "id": 2},
        {"page": "/b", "id": 4},
        {"page": "/a", "id": 6},
    ]
    views = [m for m in messages if m.table == "ev.views"]
    assert sorted(m.partition for m in views) == [("/a",), ("/b",)]  # partition values computed in the task
    assert {m.open_writers_peak for m in messages} == {3}  # one fanout: 1 clicks writer + 2 views writers


def test_route_column_prefers_the_kafka_topic_column_and_names_the_missing_one() -> None:

    from icesink.errors import ConfigError

    topic = SinkConfig.from_options({"route.by": "topic", "route.table-template": "raw.{topic}"}).route
    schema = st.StructType([st.StructField(n, st.StringType()) for n in ("value", "topic", "_kafka_topic")])
    assert route_column(schema, topic, case_sensitive=False) == 2
    assert route_column(st.StructType(schema.fields[:2]), topic, case_sensitive=False) == 1
    field = SinkConfig.from_options(
        {"route.by": "field", "route.field": "Kind", "route.table-template": "ev.{value}"}
    ).route
    with pytest.raises(ConfigError, match="no column 'Kind'"):
        route_column(schema, field, case_sensitive=False)


BY_K_BUCKET = PartitionSpec(
    PartitionField(source_id=1, field_id=1000, transform=BucketTransform(4), name="k_bucket")
)
BY_S = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="s"))
KS = Schema(
    NestedField(1, "k", IntegerType(), required=False), NestedField(2, "s", StringType(), required=False)
)


def _unit(dest: int, ks: list[int], ss: list[str]) -> pa.RecordBatch:
    """Rows of one shuffle partition: ``[dest, bad, slot k, slot s]``."""
    return pa.RecordBatch.from_pydict(
        {
            "dest": pa.array([dest] * len(ks), pa.int32()),
            "bad": [False] * len(ks),
            "k": pa.array(ks, pa.int32()),
            "s": ss,
        }
    )


@pytest.mark.parametrize(("sequential", "peak"), [(True, 4), (False, 6)])
def test_a_task_reading_table_buckets_in_a_row_finishes_each_before_the_next(
    tmp_path: Path, sequential: bool, peak: int
) -> None:
    """Three buckets of one table, then the three values of another: 4 writers open at most, not 6."""
    bucket = BucketTransform(4).transform(IntegerType())
    ks = {b: [k for k in range(200) if bucket(k) == b][:5] for b in range(3)}
    layout = BucketLayout.for_spec(BY_K_BUCKET, KS) if sequential else None
    spec = RoutedWriteSpec(
        (
            DestinationSpec(0, _spec(tmp_path, "ev.a", KS, BY_K_BUCKET), (2, 3)),
            DestinationSpec(1, _spec(tmp_path, "ev.b", KS, BY_S), (2, 3)),
        ),
        memory_budget_bytes=32 << 20,
        sequential=sequential,
    )
    if layout is not None:  # as the routed bucket shuffle gives it (icesink.route.routed_shuffle)
        first = dataclasses.replace(spec.destinations[0].spec, sequential_buckets=layout)
        spec = dataclasses.replace(
            spec, destinations=(dataclasses.replace(spec.destinations[0], spec=first), spec.destinations[1])
        )
    writer = RoutedTaskWriter(spec, task_id=0, attempt=0)
    for b in range(3):
        writer.write_chunk(_unit(0, ks[b], ["x"] * 5))
    writer.write_chunk(_unit(1, [1, 2, 3, 4, 5, 6], ["p", "q", "r", "p", "q", "r"]))
    messages = writer.close()
    assert {m.open_writers_peak for m in messages} == {peak}
    assert sorted((m.table, m.partition, m.record_count) for m in messages) == [
        *[("ev.a", (b,), 5) for b in range(3)],
        *[("ev.b", (s,), 2) for s in "pqr"],
    ]  # one file per value either way
