"""Checks of tables the sink wrote through the REST catalog onto SeaweedFS's table bucket."""

from __future__ import annotations

from pyarrow.fs import FileSelector
from pyiceberg.table import Table

from tests.support.seaweedfs import SeaweedFS

ICEBERG_SUFFIXES = (".parquet", ".avro", ".metadata.json", ".stats")


def keys_under(server: SeaweedFS, location: str) -> list[str]:
    """Every key below ``location`` (``s3://bucket/prefix``), as ``s3://`` URIs."""
    listing = server.filesystem().get_file_info(
        FileSelector(location.removeprefix("s3://").rstrip("/"), recursive=True, allow_not_found=True)
    )
    return sorted(f"s3://{info.path}" for info in listing if info.is_file)


def check_table_folders(server: SeaweedFS, table: Table) -> None:
    """Only Iceberg files in the table's location, and every data file referenced by the current snapshot.

    Valid for tables the sink only appended to (every file ever committed is still current).
    """
    keys = keys_under(server, table.location())
    assert all(key.endswith(ICEBERG_SUFFIXES) for key in keys), keys
    data = {key for key in keys if key.startswith(f"{table.location().rstrip('/')}/data/")}
    referenced = {task.file.file_path for task in table.scan().plan_files()}
    assert data == referenced, (sorted(data - referenced), sorted(referenced - data))
