"""The package that reaches into pyiceberg's internals (its REST catalog's: :mod:`icesink._pyiceberg.rest`).

pyiceberg (0.12) has no public API for some of what a distributed writer needs:
Parquet footer statistics in Iceberg form, the partition value representation and
the schema conversion from Arrow without ids, manifests of delete files, a commit of
prepared metadata updates, the SQL catalog's table row (:mod:`icesink._pyiceberg.sql`).
Everything of that kind is imported here, so a
pyiceberg upgrade that moves them breaks in one place.
"""

from __future__ import annotations

import datetime
import warnings
from dataclasses import dataclass, replace
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent, ManifestWriterV2
from pyiceberg.partitioning import _to_partition_representation
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableRequirement,
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)
from pyiceberg.types import BinaryType, IcebergType, StringType
from pyiceberg.utils.datetime import datetime_to_millis


@dataclass(frozen=True)
class StatisticsPlan:
    """Which statistics each column gets (metrics modes) and the Parquet column of each field.

    The same for every file of a schema and table properties; building it walks the whole
    schema, which costs more than reading a small file's footer, so a task builds it once.
    """

    columns: dict[int, Any]
    parquet_columns: dict[str, int]


def statistics_plan(schema: Schema, table_properties: dict[str, str]) -> StatisticsPlan:
    """The :class:`StatisticsPlan` of files of ``schema`` in a table with ``table_properties``."""
    # pyiceberg.io.pyarrow (with pyarrow.dataset and pandas) is imported where used, at a
    # write task's first rows (icesink.write.preload), never by a task without rows.
    from pyiceberg.io.pyarrow import compute_statistics_plan, parquet_path_to_id_mapping

    columns = compute_statistics_plan(schema, table_properties)
    _bounds_for_dotted_names(schema, table_properties, columns)
    return StatisticsPlan(columns, parquet_path_to_id_mapping(schema))


def _bounds_for_dotted_names(schema: Schema, properties: dict[str, str], columns: dict[int, Any]) -> None:
    """Give top-level columns named with a dot (``a.b``) the metrics mode of any other top-level column.

    pyiceberg takes a dot in a column's name for nesting and keeps only counts for it.
    """
    from pyiceberg.io.pyarrow import MetricModeTypes, MetricsMode, match_metrics_mode
    from pyiceberg.table import TableProperties

    default = properties.get(
        TableProperties.DEFAULT_WRITE_METRICS_MODE, TableProperties.DEFAULT_WRITE_METRICS_MODE_DEFAULT
    )
    for field in schema.fields:
        if "." not in field.name or field.field_id not in columns:
            continue
        key = f"{TableProperties.METRICS_MODE_COLUMN_CONF_PREFIX}.{field.name}"
        mode = match_metrics_mode(properties.get(key, default))
        if mode.type == MetricModeTypes.TRUNCATE and not isinstance(
            field.field_type, StringType | BinaryType
        ):
            mode = MetricsMode(MetricModeTypes.FULL)
        columns[field.field_id] = replace(columns[field.field_id], mode=mode)


def footer_statistics(metadata: pq.FileMetaData, plan: StatisticsPlan) -> dict[str, Any]:
    """Iceberg data-file statistics from a Parquet footer, serialized as pyiceberg's ``DataFile`` takes them.

    Returns:
        ``record_count``, ``column_sizes``, ``value_counts``, ``null_value_counts``,
        ``nan_value_counts``, ``lower_bounds``, ``upper_bounds`` (bytes in Iceberg's
        single-value serialization) and ``split_offsets``.
    """
    from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata

    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=metadata,
        stats_columns=plan.columns,
        parquet_column_mapping=plan.parquet_columns,
    )
    return stats.to_serialized_dict()


def partition_representation(source_type: IcebergType, value: Any) -> Any:
    """Iceberg's internal representation of a partition value (dates as days, timestamps as micros)."""
    return _to_partition_representation(source_type, value)


def file_exists(io: FileIO, location: str) -> bool:
    """Whether the file at ``location`` exists.

    ``FsspecFileIO`` asks fsspec's local file system about a ``file://`` URI without
    removing the scheme, and so finds no local file: such a location is asked as a path.
    """
    if type(io).__name__ == "FsspecFileIO" and location.startswith("file:"):
        from urllib.parse import urlparse

        return io.new_input(urlparse(location).path).exists()
    return io.new_input(location).exists()


def list_files(io: FileIO, location: str) -> list[str]:
    """Every file below ``location``, as full URIs, through the FileIO's own file system."""
    return [path for path, _ in list_files_with_mtime(io, location)]


def list_files_with_mtime(io: FileIO, location: str) -> list[tuple[str, datetime.datetime | None]]:
    """Every file below ``location`` with its modification time (``None`` where unknown).

    Lists through the FileIO's own file system: pyiceberg's ``PyArrowFileIO`` or ``FsspecFileIO``.

    Raises:
        TypeError: ``io`` is another FileIO, which cannot list.
    """
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if isinstance(io, PyArrowFileIO):
        return _list_pyarrow(io, location)
    if type(io).__name__ == "FsspecFileIO":  # its module needs fsspec: imported only when used
        return _list_fsspec(io, location)
    raise TypeError(
        f"cannot list {location!r} through {type(io).__name__}: listing needs PyArrowFileIO or "
        "FsspecFileIO (set the catalog property 'py-io-impl' to "
        "'pyiceberg.io.pyarrow.PyArrowFileIO')"
    )


def _list_pyarrow(io: FileIO, location: str) -> list[tuple[str, datetime.datetime | None]]:
    from pyarrow.fs import FileSelector, FileType
    from pyiceberg.io.pyarrow import PyArrowFileIO

    assert isinstance(io, PyArrowFileIO)
    scheme, netloc, path = PyArrowFileIO.parse_location(location, io.properties)
    fs = io.fs_by_scheme(scheme, netloc)
    infos = fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
    prefix = f"{scheme}://"
    return [(prefix + info.path, info.mtime) for info in infos if info.type == FileType.File]


def _list_fsspec(io: FileIO, location: str) -> list[tuple[str, datetime.datetime | None]]:
    from urllib.parse import urlparse

    from pyiceberg.io.fsspec import FsspecFileIO

    assert isinstance(io, FsspecFileIO)
    uri = urlparse(location)
    if uri.scheme in ("", "file"):
        fs, path, prefix = io.get_fs("file"), uri.path, "file://"
    else:
        fs, path, prefix = io.get_fs(uri.scheme, uri.hostname), f"{uri.netloc}{uri.path}", f"{uri.scheme}://"
    if not fs.exists(path):
        return []
    found = fs.find(path, detail=True)
    return [
        (prefix + _no_scheme(name).lstrip("/") if prefix != "file://" else prefix + name, _mtime(info))
        for name, info in found.items()
        if info.get("type") != "directory"
    ]


def _no_scheme(path: str) -> str:
    return path.split("://", 1)[-1]


def _mtime(info: dict[str, Any]) -> datetime.datetime | None:
    """The modification time of an fsspec listing entry (local files and S3 name it differently)."""
    value = info.get("LastModified", info.get("mtime"))
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    if isinstance(value, int | float):
        return datetime.datetime.fromtimestamp(value, tz=datetime.UTC)
    return None


class DeleteManifestWriter(ManifestWriterV2):
    """A format v2 manifest of delete files (content ``deletes``).

    pyiceberg 0.12 writes data manifests only: its v2 writer states content ``data`` in
    both the manifest's Avro metadata and its manifest-list entry. This one states
    ``deletes``, which readers need to tell delete files from data files.
    """

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_table_updates(
    table: Table, updates: tuple[TableUpdate, ...], requirements: tuple[TableRequirement, ...]
) -> None:
    """Commit prepared metadata updates in one catalog call, without a pyiceberg transaction.

    A transaction applies its updates to a deep copy of the table metadata at every step;
    a commit built from the metadata once needs none of that. Like a transaction's
    commit, the table object takes the new metadata, and old metadata files are deleted
    where the table's properties ask for it. On a SQL catalog whose database counts
    updated rows the commit works on the metadata in hand (:func:`sql_commit_table`);
    other catalogs commit through their own ``commit_table``.

    Raises:
        CommitFailedException: A requirement no longer holds (a concurrent commit).
    """
    from icesink._pyiceberg.sql import sql_catalog, sql_commit_table

    if sql_catalog(table.catalog) is None:
        table._do_commit(updates=updates, requirements=requirements)
        return
    base = table.metadata
    response = sql_commit_table(table, requirements, updates)
    try:
        table.catalog._delete_old_metadata(table.io, base, response.metadata)
    except Exception as e:  # as pyiceberg: the commit stands
        warnings.warn(f"Failed to delete old metadata after commit: {e}", stacklevel=2)
    table.metadata, table.metadata_location = response.metadata, response.metadata_location


def table_of_metadata(
    catalog: Catalog, identifier: tuple[str, ...], metadata: TableMetadata, location: str
) -> Table:
    """A table object on metadata already parsed from ``location``, as the catalog's own load makes it."""
    io = catalog._load_file_io(metadata.properties, location)
    return Table(identifier=identifier, metadata=metadata, metadata_location=location, io=io, catalog=catalog)


def updated_metadata(
    base: TableMetadata, updates: tuple[TableUpdate, ...], base_location: str
) -> TableMetadata:
    """``base`` with ``updates`` applied as pyiceberg's ``update_table_metadata`` does, without its deep copy.

    Each step makes a shallow copy; nothing is shared that any step changes in place
    (the models are frozen), so the final deep copy of the whole history is not needed.
    Returns ``base`` itself when the updates change nothing.
    """
    context = _TableMetadataUpdateContext()
    metadata = base
    for step in updates:
        metadata = _apply_table_update(step, metadata, context)
    if not context.has_changes():
        return base
    metadata = _update_table_metadata_log(metadata, base_location, base.last_updated_ms)
    if metadata.last_updated_ms == base.last_updated_ms:
        now = datetime_to_millis(datetime.datetime.now().astimezone())
        metadata = metadata.model_copy(update={"last_updated_ms": now})
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    return metadata
