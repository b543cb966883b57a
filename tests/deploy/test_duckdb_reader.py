"""DuckDB reads what pyiceberg wrote: on a local warehouse and on SeaweedFS's S3."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DoubleType, LongType, NestedField, TimestampType

from tests.support.duckdb_reader import S3Settings, read_iceberg_with_duckdb
from tests.support.seaweedfs import REGION, SeaweedFS

pytestmark = pytest.mark.deploy

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "at", TimestampType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="at_day"))


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "at": pa.array([i * 3_600_000_000 * 7 for i in ids], pa.timestamp("us")),
            "amount": pa.array([i / 4 for i in ids], pa.float64()),
        }
    )


def write_two_appends(catalog: Catalog) -> str:
    namespace = f"duck_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.t", SCHEMA, partition_spec=SPEC)
    table.append(rows(0, 40))
    table.append(rows(40, 60))
    return table.metadata_location


def test_reads_a_local_table(tmp_path: Path) -> None:
    catalog = load_catalog(
        "local", type="sql", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path / 'wh'}"
    )
    metadata_location = write_two_appends(catalog)

    assert read_iceberg_with_duckdb(metadata_location).sort_by("id").equals(rows(0, 100))


@pytest.mark.parametrize("catalog_kind", ["rest", "sql"])
def test_reads_a_table_on_s3(seaweedfs: SeaweedFS, tmp_path: Path, catalog_kind: str) -> None:
    if catalog_kind == "rest":
        properties = seaweedfs.rest_catalog_properties()
    else:
        properties = seaweedfs.sql_catalog_properties(
            f"sqlite:///{tmp_path / 'c.db'}", f"duck-{tmp_path.name}"
        )
    metadata_location = write_two_appends(load_catalog(catalog_kind, **properties))
    s3 = S3Settings(seaweedfs.s3_endpoint, seaweedfs.access_key, seaweedfs.secret_key, REGION)

    assert metadata_location.startswith("s3://")
    assert read_iceberg_with_duckdb(metadata_location, s3).sort_by("id").equals(rows(0, 100))
