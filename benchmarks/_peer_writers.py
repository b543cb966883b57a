"""The writers of :mod:`benchmarks.peers` that :mod:`benchmarks._contenders` lacks: Iceberg's own Spark sink.

:func:`run_iceberg` streams the reference workload through Iceberg Java's Spark streaming
sink (``writeStream.format("iceberg")``, ``fanout-enabled=true``) into a table that
pyiceberg creates in the SQL catalog on SQLite, with icesink's schema and partition spec
and the table property ``write.distribution-mode``; Java's ``JdbcCatalog`` commits to the
same rows pyiceberg reads. :func:`iceberg_conf` is what a session needs for it: Iceberg's
Spark runtime and the SQLite JDBC driver from the folder ``make env`` fills.
:func:`read_seconds` times a DuckDB full scan of a write's data files.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from pyiceberg.catalog import load_catalog

from benchmarks._contenders import (
    TABLE,
    Contender,
    RunResult,
    _check_rows,
    _iceberg_files,
    _run_query,
)
from benchmarks._stream import Stream
from benchmarks.read_speed import read_with_duckdb
from icesink.partitioning import build_partition_spec, parse_partition_by
from icesink.type_mapping import spark_to_iceberg_schema

CATALOG = "bench"
"""The catalog's name (as icesink's runs name theirs): pyiceberg's SQL catalog rows of this name are
Java's ``JdbcCatalog``'s, and the Spark catalog of this name is Java's."""
DISTRIBUTION_MODES = ("none", "hash", "range")
"""Iceberg's ``write.distribution-mode`` values."""


def iceberg_conf(jars: Path) -> dict[str, str]:
    """A session's settings for Iceberg's Spark runtime and the SQLite JDBC driver in ``jars``."""
    wanted = [*jars.glob("iceberg-spark-runtime-*.jar"), *jars.glob("sqlite-jdbc-*.jar")]
    if len(wanted) != 2:
        raise SystemExit(
            f"Iceberg's Spark runtime and the SQLite JDBC driver are not in {jars}: run make env"
        )
    return {"spark.jars": ",".join(str(jar) for jar in sorted(wanted))}


def catalog_conf(run_dir: Path) -> dict[str, str]:
    """The Spark catalog :data:`CATALOG`: Iceberg's ``JdbcCatalog`` on ``run_dir``'s SQLite file."""
    prefix = f"spark.sql.catalog.{CATALOG}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{run_dir}/catalog.db",
        f"{prefix}.warehouse": f"file://{run_dir}/warehouse",
        f"{prefix}.cache-enabled": "false",
    }


def run_iceberg(mode: str) -> Contender:
    """Iceberg's Spark streaming sink with ``write.distribution-mode`` = ``mode`` and fanout writers."""
    if mode not in DISTRIBUTION_MODES:
        raise ValueError(f"distribution mode {mode!r} is not one of {DISTRIBUTION_MODES}")

    def run(stream: Stream, run_dir: Path, jvm_pid: int) -> RunResult:
        name = f"iceberg-{mode}"
        df = stream.read()
        catalog = load_catalog(
            CATALOG,
            type="sql",
            uri=f"sqlite:///{run_dir}/catalog.db",
            warehouse=f"file://{run_dir}/warehouse",
        )
        catalog.create_namespace(TABLE.split(".")[0])
        schema = spark_to_iceberg_schema(df.schema)
        spec = build_partition_spec(parse_partition_by(stream.layout.partition_by), schema)
        catalog.create_table(
            TABLE, schema=schema, partition_spec=spec, properties={"write.distribution-mode": mode}
        )
        for key, value in catalog_conf(run_dir).items():
            stream.spark.conf.set(key, value)
        # Into the table through its catalog (toTable): the distribution's partition transforms
        # are Iceberg's functions of that catalog, which a path-based write cannot resolve.
        writer = df.writeStream.format("iceberg").outputMode("append").option("fanout-enabled", "true")
        # A range distribution reads each batch twice: a sample for the ranges, then the rows.
        scans = 2 if mode == "range" else 1
        query = _run_query(stream, name, writer, run_dir, jvm_pid, table=f"{CATALOG}.{TABLE}", scans=scans)
        rows, files = _iceberg_files(catalog.load_table(TABLE))
        _check_rows(name, rows, stream)
        return RunResult(name, query.seconds, rows, query.probe, files, trigger_ms=query.trigger_ms)

    return run


def data_files(run_dir: Path, contender: str) -> list[Path]:
    """The data files a run wrote: the Iceberg table's current files, or the Parquet sink's output."""
    if contender.startswith("parquet"):
        output = run_dir / "output"
        return sorted(p for p in output.rglob("*.parquet") if "_spark_metadata" not in p.parts)
    catalog = load_catalog(
        CATALOG, type="sql", uri=f"sqlite:///{run_dir}/catalog.db", warehouse=f"file://{run_dir}/warehouse"
    )
    paths = catalog.load_table(TABLE).inspect.files().column("file_path").to_pylist()
    return [Path(str(p).removeprefix("file://").removeprefix("file:")) for p in paths]


def read_seconds(files: list[Path], repeats: int) -> float:
    """The median time of ``repeats`` DuckDB full scans of ``files`` (every column aggregated)."""
    return statistics.median(read_with_duckdb(files) for _ in range(repeats))
