"""Iceberg Java on Spark, answering SQL over loopback: the tests' second reader of icesink's tables.

This script runs in its own virtual environment (``.venv/share/icesink/iceberg-java/venv``,
made by ``make env``), whose pyspark is the Spark that Iceberg's runtime jar is built for;
it imports only the standard library and that pyspark, never the project. One SparkSession
(``local[2]``) with Iceberg's SQL extensions (``CALL <catalog>.system...``, ``system.bucket``)
serves every request of a test run.

Protocol (one request per connection): the client sends one JSON line
``{"catalog": {"name", "uri", "warehouse", ...}, "sql": "..."}`` (more keys of
``catalog``, such as ``jdbc.user``, are the catalog's properties too); the server answers one JSON
line, ``{"ok": true, "bytes": N}`` followed by N bytes of an Arrow IPC stream of the result,
or ``{"ok": false, "error": "..."}``. Each catalog (its name and properties) gets a
session of its own (``newSession()``: its own catalogs, the same SparkContext), where the
Spark catalog of that name is Iceberg's ``SparkCatalog`` over a ``JdbcCatalog`` of the
same name: the rows pyiceberg's SQL catalog keeps for that name are Java's rows too. Its
table cache is off, so a snapshot pyiceberg commits between two requests is seen by the
second.

Usage: ``python reader_server.py --port P --jars DIR --scratch DIR``.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import SparkSession

ERROR_CHARS = 4000
"""How much of an error's message travels back."""


def build_session(jars: Path, scratch: Path) -> SparkSession:
    """The one local session, with Iceberg's runtime and the JDBC drivers on its class path."""
    paths = ",".join(str(jar) for jar in sorted(jars.glob("*.jar")))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("icesink-iceberg-java-reader")
        .config("spark.jars", paths)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(scratch / "spark-warehouse"))
        .config("spark.local.dir", str(scratch))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


class Reader:
    """Sessions by catalog, and the answer to one request."""

    def __init__(self, root: SparkSession) -> None:
        self.root = root
        self.sessions: dict[tuple[tuple[str, str], ...], SparkSession] = {}

    def session(self, catalog: dict[str, str]) -> SparkSession:
        key = tuple(sorted(catalog.items()))
        if key not in self.sessions:
            session = self.root.newSession()
            prefix = f"spark.sql.catalog.{catalog['name']}"
            settings = {
                "": "org.apache.iceberg.spark.SparkCatalog",
                ".type": "jdbc",
                ".cache-enabled": "false",
                **{"." + name: value for name, value in catalog.items() if name != "name"},
            }
            for suffix, value in settings.items():
                session.conf.set(prefix + suffix, value)
            self.sessions[key] = session
        return self.sessions[key]

    def answer(self, request: dict[str, Any]) -> bytes:
        """The Arrow IPC stream of the request's result."""
        session = self.session(request["catalog"]) if request.get("catalog") else self.root
        table = session.sql(request["sql"]).toArrow()
        import pyarrow as pa

        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()


def serve(reader: Reader, port: int) -> None:
    """Answer requests one at a time until killed (the test process's fixture stops it)."""
    with socket.create_server(("127.0.0.1", port)) as server:
        while True:
            connection, _ = server.accept()
            with connection, connection.makefile("rwb") as stream:
                line = stream.readline()
                try:
                    body = reader.answer(json.loads(line))
                    header: dict[str, Any] = {"ok": True, "bytes": len(body)}
                except Exception as e:  # a bad query is the client's error to see, not the end
                    body = b""
                    header = {"ok": False, "error": f"{type(e).__name__}: {e}"[:ERROR_CHARS]}
                stream.write(json.dumps(header).encode() + b"\n" + body)
                stream.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jars", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True, help="Spark's scratch space and warehouse")
    args = parser.parse_args(argv)
    runtimes = sorted(args.jars.glob("iceberg-spark-runtime-*_*.jar"))
    spark = runtimes[0].name.removeprefix("iceberg-spark-runtime-").split("_")[0] if runtimes else "?"
    if not pyspark.__version__.startswith(spark + "."):
        print(
            f"pyspark {pyspark.__version__} is not the Spark {spark} of Iceberg's runtime in {args.jars};"
            " run make env",
            file=sys.stderr,
        )
        return 2
    reader = Reader(build_session(args.jars, args.scratch))
    reader.root.sql("SELECT 1").toArrow()  # ready means a query has run
    serve(reader, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
