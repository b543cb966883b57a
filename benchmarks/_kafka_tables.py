"""The Kafka benchmarks' tables read back: their current snapshot, every message once, their files' format.

One SQLite catalog and warehouse per benchmark run holds a table per run, the job's and Kafka
Connect's alike (``benchmarks/kafka_connect.py``, ``benchmarks/kafka_job_ab.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CATALOG = "default"
NAMESPACE = "bench"


def catalog_of(root: Path) -> Any:
    """pyiceberg's SQL catalog on the run's SQLite file: the job's, and Iceberg Java's JdbcCatalog's."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(CATALOG, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")


def committed(catalog: Any, table: str) -> dict[str, Any] | None:
    """The table's current snapshot: rows, data files, their bytes and snapshots; ``None`` before one."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        loaded = catalog.load_table(table)
    except NoSuchTableError:
        return None
    snapshot = loaded.current_snapshot()
    if snapshot is None:
        return None
    summary = snapshot.summary
    return {
        "rows": int(summary["total-records"]),
        "data_files": int(summary["total-data-files"]),
        "data_bytes": int(summary["total-files-size"]),
        "snapshots": len(loaded.metadata.snapshots),
    }


def file_format(catalog: Any, table: str) -> dict[str, Any]:
    """How one data file of ``table``'s current snapshot is written: its writer, codecs and row groups."""
    import pyarrow.parquet as pq

    loaded = catalog.load_table(table)
    path = next(iter(loaded.scan().plan_files())).file.file_path
    with loaded.io.new_input(path).open() as stream:
        metadata = pq.ParquetFile(stream).metadata
    codecs = {metadata.row_group(0).column(i).compression for i in range(metadata.num_columns)}
    row_groups = metadata.num_row_groups
    return {"created_by": metadata.created_by, "codecs": sorted(codecs), "row_groups": row_groups}


def check_rows(catalog: Any, table: str, messages: int) -> None:
    """Fail unless ``table`` holds each message's ``event_id`` exactly once."""
    import pyarrow.compute as pc

    ids = catalog.load_table(table).scan(selected_fields=("event_id",)).to_arrow()["event_id"]
    distinct = pc.count_distinct(ids).as_py()
    if len(ids) != messages or distinct != messages:
        raise RuntimeError(
            f"{table} holds {len(ids):,} rows, {distinct:,} distinct messages, not {messages:,}"
        )
