"""Iceberg Java as a second reader of icesink's tables: the reader process and its client.

:class:`IcebergJavaReader` starts :mod:`tests.support.iceberg_java.reader_server` in the
virtual environment ``make env`` makes for it (:data:`HOME`: the pyspark of the runtime's
Spark, the Makefile's ``ICEBERG_JAVA_PYSPARK``, and, in ``jars/``, Iceberg's Spark runtime
and the SQLite and PostgreSQL JDBC drivers of ``pom.xml`` beside this module). :meth:`IcebergJavaReader.sql`
runs Spark SQL against the same SQL catalog (SQLite or PostgreSQL) and warehouse a test's sink writes, through
Iceberg's ``JdbcCatalog`` (which reads pyiceberg's ``iceberg_tables`` rows as its own), and
returns the result as an Arrow table.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.processes import ServerProcess, port_open
from tests.support.spark_process import JVM_START_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[3]
HOME = ROOT / ".venv" / "share" / "icesink" / "iceberg-java"
"""What ``make env`` makes: ``venv/`` (pyspark for the runtime's Spark) and ``jars/``."""
REQUEST_TIMEOUT_S = 300.0
"""A request's bounded wait: a query of a small table answers in about a second."""


def home() -> Path:
    """The installed reader's folder; skip the test when ``make env`` has not made it, fail in CI."""
    python, jars = HOME / "venv" / "bin" / "python", HOME / "jars"
    if python.exists() and any(jars.glob("iceberg-spark-runtime-*.jar")):
        return HOME
    message = f"Iceberg Java's reader is not installed in {HOME}; run make env"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def jdbc_catalog(catalog_options: Mapping[str, str]) -> dict[str, str]:
    """Iceberg Java's view of a sink's SQL catalog: its name, JDBC URI, warehouse and login.

    The sink's catalog is pyiceberg's SQL catalog on SQLite (``sqlite:///<file>``) or on
    PostgreSQL (``postgresql+psycopg2://<user>:<password>@<host>:<port>/<database>``); Java's
    ``JdbcCatalog`` reads the same rows through the SQLite or PostgreSQL JDBC driver.
    """
    uri = catalog_options["catalog.uri"]
    catalog = {"name": catalog_options["catalog.name"], "warehouse": catalog_options["catalog.warehouse"]}
    if uri.startswith("sqlite:///"):
        return {**catalog, "uri": "jdbc:sqlite:" + uri.removeprefix("sqlite://")}
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme.split("+")[0] != "postgresql" or parsed.username is None:
        raise ValueError(
            f"only SQLite and PostgreSQL catalogs are read by Iceberg Java here, not {parsed.scheme}"
        )
    return {
        **catalog,
        "uri": f"jdbc:postgresql://{parsed.hostname}:{parsed.port}{parsed.path}",
        "jdbc.user": urllib.parse.unquote(parsed.username),
        "jdbc.password": urllib.parse.unquote(parsed.password or ""),
    }


def java_catalog(catalog_options: Mapping[str, str]) -> dict[str, str]:
    """Iceberg Java's view of a sink's catalog: a SQL catalog's (:func:`jdbc_catalog`) or a REST catalog's.

    A REST catalog's tables live on S3: Java reads them through ``S3FileIO`` (Iceberg's AWS
    bundle in ``jars/``), at the sink's ``s3.*`` endpoint and keys, path-style.
    """
    if catalog_options.get("catalog.type") != "rest":
        return jdbc_catalog(catalog_options)
    catalog = {key.removeprefix("catalog."): value for key, value in catalog_options.items()}
    return {
        **{key: catalog[key] for key in ("name", "type", "uri", "warehouse", "credential") if key in catalog},
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": catalog["s3.endpoint"],
        "s3.access-key-id": catalog["s3.access-key-id"],
        "s3.secret-access-key": catalog["s3.secret-access-key"],
        "s3.path-style-access": "true",
        "client.region": catalog.get("s3.region", "us-east-1"),
    }


class IcebergJavaError(RuntimeError):
    """Iceberg Java (or Spark) refused a request; the message carries the Java error."""


class IcebergJavaReader(ServerProcess):
    """One Spark with Iceberg's runtime in its own JVM and Python, answering SQL on a loopback port."""

    name = "iceberg-java"
    port_names = ("sql",)
    start_timeout_s = JVM_START_TIMEOUT_S

    def __init__(self, workdir: Path, install: Path | None = None) -> None:
        super().__init__(workdir)
        self.install = install or home()

    def _command(self) -> list[str]:
        script = Path(__file__).with_name("reader_server.py")
        return [
            str(self.install / "venv" / "bin" / "python"),
            str(script),
            *("--port", str(self.port), "--jars", str(self.install / "jars")),
            *("--scratch", str(self.workdir / "local")),
        ]

    def _environment(self) -> Mapping[str, str]:
        python = str(self.install / "venv" / "bin" / "python")
        scratch = self.workdir / "local"
        scratch.mkdir(exist_ok=True)
        keep = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
        keep.pop("PYTHONPATH", None)  # the project's tree must not shadow that venv's packages
        return {
            **keep,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(scratch),
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": python,
        }

    def _ready(self) -> bool:
        return port_open(self.port)

    def sql(self, query: str, catalog_options: Mapping[str, str] | None = None) -> pa.Table:
        """The result of Spark SQL ``query``, the sink's SQL catalog (its ``catalog.*`` options) a catalog.

        The catalog is named as the sink's ``catalog.name``: ``SELECT * FROM <name>.<ns>.<table>``.

        Raises:
            IcebergJavaError: Java refused the query (the message says why).
        """
        request = {"sql": query, "catalog": java_catalog(catalog_options) if catalog_options else None}
        with socket.create_connection(("127.0.0.1", self.port), timeout=REQUEST_TIMEOUT_S) as connection:
            stream = connection.makefile("rwb")
            stream.write(json.dumps(request).encode() + b"\n")
            stream.flush()
            header = json.loads(stream.readline())
            if not header["ok"]:
                raise IcebergJavaError(f"Iceberg Java refused {query!r}:\n{header['error']}")
            body = stream.read(header["bytes"])
        return pa.ipc.open_stream(body).read_all()
