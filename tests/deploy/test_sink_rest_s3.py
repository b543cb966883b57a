"""The sink through SeaweedFS's Iceberg REST catalog, its tables in the table bucket, its state in plain S3.

Every test reads the table back (rows exactly once), checks that each data file in the
table's folder is referenced and that no key other than an Iceberg file was written
under the table's location.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyspark.sql import SparkSession

from icesink import IcebergSink
from icesink.catalog import executor_io_properties
from icesink.commit import committer
from icesink.config import SinkConfig
from tests.support.duckdb_reader import S3Settings, read_iceberg_with_duckdb
from tests.support.s3_tables import check_table_folders, keys_under
from tests.support.seaweedfs import REGION, WAREHOUSE_BUCKET, SeaweedFS
from tests.support.tables import row_multiset, table_rows

pytestmark = pytest.mark.deploy


class Stream:
    """A namespace of the REST catalog, the sink's options for one table in it, and an input folder."""

    def __init__(self, server: SeaweedFS, tmp_path: Path, *, sigv4: bool = False) -> None:
        self.server = server
        self.namespace = f"ns_{uuid.uuid4().hex[:8]}"
        self.properties = server.rest_catalog_properties(sigv4=sigv4)
        self.catalog: Catalog = load_catalog("rest", **self.properties)
        self.catalog.create_namespace(self.namespace)
        self.table = f"{self.namespace}.events"
        self.state = f"s3://{WAREHOUSE_BUCKET}/icesink-state/{self.namespace}"
        self.tmp_path = tmp_path
        self.files = 0

    def options(self, **more: str) -> dict[str, str]:
        return {
            "table": self.table,
            "catalog.name": "rest",
            **{f"catalog.{k}": v for k, v in self.properties.items()},
            "state-location": self.state,
            "partition-by": "region,bucket(4, id)",
            **more,
        }

    def add_file(self, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
        folder = self.tmp_path / "input"
        folder.mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema), folder / f"part-{self.files:04d}.parquet")
        self.files += 1

    def run(self, spark: SparkSession, sink: IcebergSink, schema: str, checkpoint: str = "cp") -> None:
        """Stream the input folder (one file per batch) into ``sink`` until its end."""
        query = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(self.tmp_path / "input"))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(self.tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        sink.flush()

    def loaded(self) -> Any:
        return self.catalog.load_table(self.table)


BASE = pa.schema([("id", pa.int64()), ("name", pa.string()), ("region", pa.string())])
WIDER = BASE.append(pa.field("score", pa.float64()))


def rows(start: int, count: int, *, score: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"id": i, "name": f"n{i}", "region": f"r{i % 3}"} for i in range(start, start + count)
    ]
    if score:
        for row in out:
            row["score"] = row["id"] / 2
    return out


@pytest.fixture()
def stream(seaweedfs: SeaweedFS, tmp_path: Path) -> Iterator[Stream]:
    yield Stream(seaweedfs, tmp_path)


def test_stream_creates_evolves_and_commits_then_reads_back_with_duckdb(
    spark: SparkSession, stream: Stream
) -> None:
    stream.add_file(rows(0, 50), BASE)
    stream.add_file(rows(50, 50), BASE)
    stream.run(
        spark,
        IcebergSink.from_options(stream.options(**{"sink-id": "ingest"})),
        "id long, name string, region string",
    )
    stream.add_file(rows(100, 50, score=True), WIDER)
    stream.run(
        spark,
        IcebergSink.from_options(stream.options(**{"sink-id": "ingest"})),
        "id long, name string, region string, score double",
    )

    table = stream.loaded()
    expected = [{**r, "score": None} for r in rows(0, 100)] + rows(100, 50, score=True)
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    assert [f.name for f in table.schema().fields] == ["id", "name", "region", "score"]
    assert [s.summary.operation.value for s in table.snapshots() if s.summary] == ["append"] * 3
    assert table.location().startswith("s3://iceberg-tables/")
    check_table_folders(stream.server, table)
    s3 = S3Settings(stream.server.s3_endpoint, stream.server.access_key, stream.server.secret_key, REGION)
    by_duckdb = read_iceberg_with_duckdb(table.metadata_location, s3).to_pylist()
    assert row_multiset(by_duckdb) == row_multiset(expected)
    assert not keys_under(stream.server, stream.state + "/")  # attempt records cleaned up


def test_staged_batches_survive_a_restart_and_commit_once(spark: SparkSession, stream: Stream) -> None:
    options = stream.options(**{"sink-id": "cadence", "commit.max-batches": "2"})
    first = IcebergSink.from_options(options)
    batches = [rows(40 * b, 40) for b in range(3)]
    for batch_id, batch in enumerate(batches):
        first(spark.createDataFrame(batch, "id long, name string, region string"), batch_id)
    table = stream.loaded()
    assert row_multiset(table_rows(table)) == row_multiset(batches[0] + batches[1])
    assert keys_under(stream.server, f"{stream.state}/{stream.table}/cadence/staged")  # batch 2 waits in S3

    restarted = IcebergSink.from_options(options)  # a new run: the staged batch is resumed
    restarted(spark.createDataFrame(batches[2], "id long, name string, region string"), 2)  # replayed
    late = rows(500, 10)
    restarted(spark.createDataFrame(late, "id long, name string, region string"), 3)
    restarted.flush()

    table = stream.loaded()
    assert row_multiset(table_rows(table)) == row_multiset([*batches[0], *batches[1], *batches[2], *late])
    check_table_folders(stream.server, table)
    assert not keys_under(stream.server, f"{stream.state}/{stream.table}/cadence/staged")


def test_a_crashed_attempt_is_settled_by_the_next_run(
    spark: SparkSession, stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = stream.options(**{"sink-id": "crashy"})
    batch = rows(0, 60)
    real_commit = committer.Committer.commit_batches

    def crash(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise SystemExit("the driver died before its commit")

    monkeypatch.setattr(committer.Committer, "commit_batches", crash)
    with pytest.raises(SystemExit):
        IcebergSink.from_options(options)(
            spark.createDataFrame(batch, "id long, name string, region string"), 0
        )
    monkeypatch.setattr(committer.Committer, "commit_batches", real_commit)
    written = [k for k in keys_under(stream.server, stream.loaded().location()) if k.endswith(".parquet")]
    assert written  # the crashed attempt left its data files behind

    restarted = IcebergSink.from_options(options)
    restarted(spark.createDataFrame(batch, "id long, name string, region string"), 0)  # Spark replays it

    table = stream.loaded()
    assert row_multiset(table_rows(table)) == row_multiset(batch)
    assert len(table.snapshots()) == 1
    check_table_folders(stream.server, table)


def test_bad_rows_go_to_the_dead_letter_table_in_the_catalog(spark: SparkSession, stream: Stream) -> None:
    sink = IcebergSink.from_options(stream.options(**{"sink-id": "dlq"}))
    good = rows(0, 20)
    sink(spark.createDataFrame(good, "id long, name string, region string"), 0)
    sent = [{"id": str(r["id"]), "name": r["name"], "region": r["region"]} for r in rows(20, 5)]
    sent.append({"id": "not-a-number", "name": "bad", "region": "r0"})
    sink(spark.createDataFrame(sent, "id string, name string, region string"), 1)

    table = stream.loaded()
    assert row_multiset(table_rows(table)) == row_multiset(good + rows(20, 5))
    dead = table_rows(stream.catalog.load_table(f"{stream.table}__dlq"))
    assert [(d["column"], d["value"]) for d in dead] == [("id", "not-a-number")]
    check_table_folders(stream.server, table)
    check_table_folders(stream.server, stream.catalog.load_table(f"{stream.table}__dlq"))


def test_maintenance_expires_snapshots_and_removes_orphans_on_s3(spark: SparkSession, stream: Stream) -> None:
    import datetime as dt

    from icesink import expire_snapshots, remove_orphan_files

    sink = IcebergSink.from_options(stream.options(**{"sink-id": "maint"}))
    for batch_id in range(3):
        sink(spark.createDataFrame(rows(30 * batch_id, 30), "id long, name string, region string"), batch_id)
    table = stream.loaded()
    orphan = f"{table.location()}/data/region=r0/orphan-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(orphan).create() as out:
        out.write(pq_bytes(rows(900, 3)))

    expired = expire_snapshots(stream.loaded(), retain_last=1)
    removed = remove_orphan_files(stream.loaded(), older_than=dt.timedelta(0))

    table = stream.loaded()
    assert len(table.snapshots()) == 1
    assert expired is not None and removed is not None
    assert orphan not in keys_under(stream.server, table.location())
    assert row_multiset(table_rows(table)) == row_multiset(rows(0, 90))
    check_table_folders(stream.server, table)


def pq_bytes(data: list[dict[str, Any]]) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(data, BASE), sink)
    return bytes(sink.getvalue().to_pybytes())


def test_sigv4_signed_catalog_through_the_sink_options(
    spark: SparkSession, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    stream = Stream(seaweedfs, tmp_path, sigv4=True)
    assert "credential" not in stream.properties and stream.properties["rest.sigv4-enabled"] == "true"
    stream.add_file(rows(0, 30), BASE)
    stream.run(
        spark,
        IcebergSink.from_options(stream.options(**{"sink-id": "signed"})),
        "id long, name string, region string",
    )

    table = stream.loaded()
    assert row_multiset(table_rows(table)) == row_multiset(rows(0, 30))
    check_table_folders(seaweedfs, table)


def test_write_tasks_get_storage_properties_only_never_the_catalogs_session(stream: Stream) -> None:
    config = SinkConfig.from_options(stream.options())
    table = stream.catalog.create_table(stream.table, pa.schema([("id", pa.int64())]))
    assert any(not isinstance(v, str) for v in table.io.properties.values())  # the REST auth manager

    shipped = executor_io_properties(config, table)

    assert all(isinstance(v, str) for v in shipped.values())
    assert "credential" not in shipped
    assert b"requests" not in pickle.dumps(shipped)  # no HTTP session (token, cookies, hooks)
    assert {k: shipped[k] for k in ("s3.endpoint", "s3.access-key-id", "s3.secret-access-key")} == {
        k: stream.properties[k] for k in ("s3.endpoint", "s3.access-key-id", "s3.secret-access-key")
    }
