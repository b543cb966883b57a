"""A frozen or refusing SeaweedFS (REST catalog and S3) fails a batch with a coded error naming it; the
stream then goes on, every row exactly once.

The servers are frozen and refused through a proxy of this test's in front of the
session's SeaweedFS (shared with other tests, so never stopped itself): frozen, the proxy
accepts connections and reads requests but answers nothing, as a server stopped with
SIGSTOP does; refusing, its port is closed. The waits are set short (``timeout.*``); the
test's own timeout is far below "for ever", so a wait that is not bounded fails it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.support.seaweedfs import WAREHOUSE_BUCKET, SeaweedFS
from tests.support.silent_server import SilentServer
from tests.support.tables import row_multiset, table_rows

pytestmark = pytest.mark.deploy

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
WAITS = {"timeout.connect-s": "1", "timeout.catalog-request-s": "2", "timeout.storage-request-s": "1"}


def _rows(start: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in range(start, start + count)]


class _Input:
    """An input folder streamed one file per batch into a sink, from one checkpoint."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder, self.checkpoint, self.files = tmp_path / "input", tmp_path / "cp", 0
        self.folder.mkdir()

    def add(self, rows: list[dict[str, Any]]) -> None:
        pq.write_table(pa.Table.from_pylist(rows, SCHEMA), self.folder / f"part-{self.files:04d}.parquet")
        self.files += 1

    def run(self, spark: SparkSession, sink: IcebergSink) -> None:
        query = (
            spark.readStream.schema("id long, name string")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(self.folder))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    def failure(self, spark: SparkSession, sink: IcebergSink) -> str:
        with pytest.raises(StreamingQueryException) as raised:
            self.run(spark, sink)
        return str(raised.value)


@pytest.mark.timeout(300)
def test_a_frozen_or_refusing_server_fails_the_batch_with_its_coded_error_and_the_stream_goes_on(
    spark: SparkSession, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    properties = seaweedfs.rest_catalog_properties()
    rest = SilentServer(target=properties["uri"].removeprefix("http://"))
    s3 = SilentServer(target=properties["s3.endpoint"].removeprefix("http://"))
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog = load_catalog("direct", **properties)  # the test's own reads go straight to the server
    catalog.create_namespace(namespace)
    through_proxies = {**properties, "uri": f"http://{rest.address}", "s3.endpoint": f"http://{s3.address}"}
    options = {
        "table": f"{namespace}.events",
        "catalog.name": "rest",
        **{f"catalog.{k}": v for k, v in through_proxies.items()},
        "state-location": f"s3://{WAREHOUSE_BUCKET}/icesink-state/{namespace}",
        **WAITS,
    }
    stream = _Input(tmp_path)
    with rest, s3:
        sink = IcebergSink.from_options(options)
        stream.add(_rows(0, 10))
        stream.run(spark, sink)

        rest.freeze()  # SeaweedFS stopped: both its ports silent
        s3.freeze()
        stream.add(_rows(10, 10))
        text = stream.failure(spark, sink)
        assert "ICESINK-CATALOG" in text and f"http://{rest.address}" in text and "ReadTimeout" in text
        rest.thaw()
        s3.thaw()

        s3.refuse()  # S3 down at the batch's attempt record; the catalog answers
        text = stream.failure(spark, sink)
        assert "ICESINK-STORAGE" in text and f"object store at http://{s3.address}" in text
        s3.thaw()

        rest.refuse()  # the catalog down at the batch's start
        text = stream.failure(spark, sink)
        assert "ICESINK-CATALOG" in text and f"http://{rest.address}" in text and "ConnectionError" in text
        rest.thaw()

        stream.add(_rows(20, 10))
        stream.run(spark, sink)  # the same sink goes on from the checkpoint
        sink.close()
    table = catalog.load_table(f"{namespace}.events")
    assert row_multiset(table_rows(table)) == row_multiset(_rows(0, 30))
    assert len(table.snapshots()) == 3  # one per batch: none committed twice
