"""SeaweedFS as the object store and Iceberg REST catalog of record: what pyiceberg can do there."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow.fs import FileSelector
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import ForbiddenError, OAuthError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from tests.support.seaweedfs import TABLE_BUCKET, WAREHOUSE_BUCKET, SeaweedFS

pytestmark = pytest.mark.deploy

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"),
    PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
)


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "region": pa.array([f"r{i % 3}" for i in ids])})


def create_partitioned_table(catalog: Catalog) -> Table:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    return catalog.create_table(f"{namespace}.events", SCHEMA, partition_spec=SPEC)


def read_back(catalog: Catalog, table: Table) -> pa.Table:
    return catalog.load_table(table.name()).scan().to_arrow().sort_by("id")


@pytest.mark.parametrize("sigv4", [False, True], ids=["oauth2", "sigv4"])
def test_rest_catalog_appends_and_reads_back(seaweedfs: SeaweedFS, sigv4: bool) -> None:
    catalog = load_catalog("rest", **seaweedfs.rest_catalog_properties(sigv4=sigv4))
    table = create_partitioned_table(catalog)
    table.append(rows(0, 300))
    table.append(rows(300, 200))

    assert read_back(catalog, table).equals(rows(0, 500))
    assert table.location().startswith(f"s3://{TABLE_BUCKET}/")
    reloaded = catalog.load_table(table.name())
    assert [s.summary.operation.value for s in reloaded.snapshots() if s.summary] == ["append", "append"]
    data_files = [task.file for task in reloaded.scan().plan_files()]
    assert sum(f.record_count for f in data_files) == 500
    assert {f.partition[0] for f in data_files} == {"r0", "r1", "r2"}
    assert all(f.file_path.startswith(f"{table.location()}/data/region=") for f in data_files)


@pytest.mark.parametrize(
    ("sigv4", "refusal"), [(False, OAuthError), (True, ForbiddenError)], ids=["oauth2", "sigv4"]
)
def test_rest_catalog_refuses_a_wrong_secret(
    seaweedfs: SeaweedFS, sigv4: bool, refusal: type[Exception]
) -> None:
    properties = seaweedfs.rest_catalog_properties(sigv4=sigv4)
    wrong = f"{seaweedfs.secret_key}x"
    properties = {k: v.replace(seaweedfs.secret_key, wrong) for k, v in properties.items()}

    with pytest.raises(refusal) as refused:
        catalog = load_catalog("rest", **properties)
        catalog.list_namespaces()

    assert wrong not in str(refused.value)


def test_sql_catalog_keeps_its_warehouse_in_the_plain_bucket(seaweedfs: SeaweedFS, tmp_path: Path) -> None:
    prefix = f"sql-{uuid.uuid4().hex[:8]}"
    properties = seaweedfs.sql_catalog_properties(f"sqlite:///{tmp_path / 'catalog.db'}", prefix)
    catalog = load_catalog("sql", **properties)
    table = create_partitioned_table(catalog)
    table.append(rows(0, 100))

    assert read_back(catalog, table).equals(rows(0, 100))
    assert table.location().startswith(f"s3://{WAREHOUSE_BUCKET}/{prefix}/")
    listing = seaweedfs.filesystem().get_file_info(
        FileSelector(f"{WAREHOUSE_BUCKET}/{prefix}", recursive=True)
    )
    keys = [info.path for info in listing if info.is_file]
    assert any(k.endswith(".parquet") for k in keys)
    assert any(k.endswith(".metadata.json") for k in keys)


@pytest.mark.parametrize(
    "relative_key",
    ["metadata/icesink-attempts/sink/1.json", "metadata/icesink-staged/sink/7/files.json", "data/notes.json"],
)
def test_table_bucket_refuses_keys_that_are_not_iceberg_files(
    seaweedfs: SeaweedFS, relative_key: str
) -> None:
    catalog = load_catalog("rest", **seaweedfs.rest_catalog_properties())
    table = create_partitioned_table(catalog)
    table.append(rows(0, 10))
    filesystem = seaweedfs.filesystem()
    table_prefix = table.location().removeprefix("s3://")
    in_table = f"{table_prefix}/{relative_key}"
    in_plain_bucket = f"{WAREHOUSE_BUCKET}/refusal-check/{uuid.uuid4().hex}/{relative_key}"

    with pytest.raises(OSError, match="ACCESS_DENIED"), filesystem.open_output_stream(in_table) as out:
        out.write(b"{}")
    with filesystem.open_output_stream(in_plain_bucket) as out:
        out.write(b"{}")

    with pytest.raises(OSError, match="ACCESS_DENIED"):  # even asking for it is refused
        filesystem.get_file_info(in_table)
    table_keys = [i.path for i in filesystem.get_file_info(FileSelector(table_prefix, recursive=True))]
    assert not any(key.endswith(relative_key) for key in table_keys)
    assert filesystem.get_file_info(in_plain_bucket).size == 2
    assert read_back(catalog, table).equals(rows(0, 10))


def test_s3_requests_are_counted_by_bucket_and_type(seaweedfs: SeaweedFS) -> None:
    fs = seaweedfs.filesystem()
    prefix = f"{WAREHOUSE_BUCKET}/counted-{uuid.uuid4().hex[:8]}"
    before = seaweedfs.s3_request_counts()
    for name in ("a", "b", "c"):
        with fs.open_output_stream(f"{prefix}/{name}.bin") as out:
            out.write(b"x" * 10)
    listed = fs.get_file_info(FileSelector(prefix, recursive=True))
    after = seaweedfs.s3_request_counts()

    grown = {key: n - before.get(key, 0) for key, n in after.items() if n != before.get(key, 0)}
    assert len(listed) == 3
    assert grown[(WAREHOUSE_BUCKET, "PUT")] == 3
    assert grown[(WAREHOUSE_BUCKET, "LIST")] >= 1
    assert all(bucket == WAREHOUSE_BUCKET for bucket, _ in grown)
