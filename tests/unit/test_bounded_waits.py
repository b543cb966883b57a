"""A silent or unreachable catalog or object store fails within the bound, with a coded error naming it.

The servers here accept connections and never answer (as a server stopped with SIGSTOP
does), or refuse them; each test's pytest timeout is far below "for ever" and above the
bound, so a wait that is not bounded fails the test instead of hanging it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from requests.exceptions import ReadTimeout

from icesink.bounded_waits import catalog_properties, server_errors
from icesink.catalog import executor_io_properties, open_catalog
from icesink.commit.state import ATTEMPTS, state_folder
from icesink.config import SinkConfig
from icesink.errors import CatalogError, CommitError, ConfigError, StorageError, WriteError
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.task import write_function
from tests.support.silent_server import SilentServer
from tests.unit.writer_fixtures import task_spec

FAST = {"timeout.connect-s": "1", "timeout.catalog-request-s": "1", "timeout.storage-request-s": "1"}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timeout(30)
def test_a_silent_rest_catalog_fails_opening_with_a_catalog_error_naming_it() -> None:
    with SilentServer() as server:
        options = {"table": "db.t", "catalog.type": "rest", "catalog.uri": f"http://{server.address}", **FAST}
        with pytest.raises(CatalogError) as raised:
            open_catalog(SinkConfig.from_options(options))
    assert f"http://{server.address}" in str(raised.value)
    assert "ReadTimeout" in str(raised.value) or "timed out" in str(raised.value)


@pytest.mark.timeout(30)
def test_an_unreachable_rest_catalog_is_a_catalog_error_naming_it() -> None:
    uri = f"http://127.0.0.1:{_closed_port()}"
    config = SinkConfig.from_options({"table": "db.t", "catalog.uri": uri, **FAST})
    with pytest.raises(CatalogError, match="ICESINK-CATALOG") as raised:
        open_catalog(config)
    assert uri in str(raised.value)


def _sql_config(tmp_path: Path, endpoint: str) -> SinkConfig:
    return SinkConfig.from_options(
        {
            "table": "db.t",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'c.db'}",
            "catalog.warehouse": f"file://{tmp_path}/warehouse",
            "catalog.s3.endpoint": f"http://{endpoint}",
            "catalog.s3.access-key-id": "key",
            "catalog.s3.secret-access-key": "secret",
            "catalog.s3.region": "us-east-1",
            "state-location": "s3://state-bucket/icesink",
            **FAST,
        }
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("silent", [True, False], ids=["silent", "refusing"])
def test_storage_of_the_attempt_records_fails_with_a_storage_error_naming_it(
    tmp_path: Path, silent: bool
) -> None:
    with SilentServer() as server:
        endpoint = server.address if silent else f"127.0.0.1:{_closed_port()}"
        config = _sql_config(tmp_path, endpoint)
        (tmp_path / "warehouse").mkdir()
        catalog = open_catalog(config)
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", Schema(NestedField(1, "id", LongType())))
        folder = state_folder(config, table, "sink-1", ATTEMPTS)
        with pytest.raises(StorageError) as raised, server_errors(config, table="db.t", batch_id=0):
            folder.write("0.json", b"{}")
    assert f"object store at http://{endpoint}" in str(raised.value)
    assert raised.value.context == {"table": "db.t", "batch_id": 0}


def test_the_bounds_reach_every_file_io_and_a_postgresql_uri(tmp_path: Path) -> None:
    config = _sql_config(tmp_path, "127.0.0.1:1")
    (tmp_path / "warehouse").mkdir()
    catalog = load_catalog("unit", **catalog_properties(config))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", Schema(NestedField(1, "id", LongType())))
    for properties in (table.io.properties, executor_io_properties(config, table)):  # driver, write tasks
        assert properties["s3.connect-timeout"] == "1"
        assert properties["s3.request-timeout"] == "1"
    postgres = SinkConfig.from_options(
        {"table": "db.t", "catalog.uri": "postgresql+psycopg2://u:p@127.0.0.1:5432/c", **FAST}
    )
    uri = catalog_properties(postgres)["uri"]
    assert "connect_timeout=2" in uri  # libpq takes whole seconds, 2 at least
    assert "options=-c+statement_timeout%3D1000" in uri


def test_bounds_the_user_set_are_kept() -> None:
    config = SinkConfig.from_options(
        {
            "table": "db.t",
            "catalog.uri": "postgresql://u:p@127.0.0.1:5432/c?connect_timeout=7",
            "catalog.s3.request-timeout": "120",
        }
    )
    properties = catalog_properties(config)
    assert properties["s3.request-timeout"] == "120"
    assert properties["s3.connect-timeout"] == "10"  # the default
    assert "connect_timeout=7" in properties["uri"] and "connect_timeout=10" not in properties["uri"]


def test_a_write_task_whose_storage_fails_raises_a_storage_error_the_driver_names(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file where the data folder goes")  # every file open fails
    schema = Schema(NestedField(1, "id", LongType()))
    spec = task_spec(tmp_path / "data", "db.t", schema, PartitionSpec(), "sink-b1-attempt")
    rows = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int64())], schema=iceberg_to_arrow_schema(schema))
    with pytest.raises(StorageError) as in_task:
        list(write_function(spec)(iter([rows])))
    assert isinstance(in_task.value.__cause__, OSError)
    # On the driver the task's error arrives as text inside Spark's; the server is named there.
    config = _sql_config(tmp_path, "127.0.0.1:1")
    spark_error = RuntimeError(f"Python worker failed: Traceback ...\n{in_task.value}")
    named_server = r"object store at http://127\.0\.0\.1:1"
    with pytest.raises(StorageError, match=named_server) as named, server_errors(config, batch_id=1):
        raise WriteError("write job of batch 1 failed") from spark_error
    assert "write job of batch 1 failed" in str(named.value)


@pytest.mark.parametrize(
    "cause", [ConnectionError("reset after the commit was sent"), ReadTimeout("read timed out")]
)
def test_a_commit_whose_answer_was_lost_keeps_its_code(tmp_path: Path, cause: Exception) -> None:
    config = _sql_config(tmp_path, "127.0.0.1:1")
    unknown = CommitError("commit failed with an unknown outcome", table="db.t")
    with pytest.raises(CommitError, match="unknown outcome"), server_errors(config):
        raise unknown from cause


def test_an_error_of_sparks_own_socket_is_not_the_object_stores(tmp_path: Path) -> None:
    config = _sql_config(tmp_path, "127.0.0.1:1")
    with pytest.raises(ConnectionRefusedError), server_errors(config):
        raise ConnectionRefusedError("py4j gateway")


@pytest.mark.parametrize("value", ["abc", "0", "inf"])
def test_a_bad_bound_names_the_option_and_what_it_takes(value: str) -> None:
    with pytest.raises(ConfigError, match=r"'timeout\.connect-s'.*finite number of seconds above 0"):
        SinkConfig.from_options({"table": "db.t", "timeout.connect-s": value})
