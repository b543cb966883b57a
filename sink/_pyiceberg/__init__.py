"""The package that reaches into pyiceberg's internals (its REST catalog's: :mod:`sink._pyiceberg.rest`).

pyiceberg (0.12) has no public API for some of what a distributed writer needs:
Parquet footer statistics in Iceberg form, the partition value representation and
the schema conversion from Arrow without ids, manifests of delete files, a commit of
prepared metadata updates, the SQL catalog's table row (a commit on metadata already
parsed, swapped in by compare-and-swap). Everything of that kind is imported here, so a
pyiceberg upgrade that moves them breaks in one place.
"""

from __future__ import annotations

import contextlib
import datetime
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent, ManifestWriterV2
from pyiceberg.partitioning import _to_partition_representation
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.locations import load_location_provider
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

if TYPE_CHECKING:  # the SQL catalog and SQLAlchemy are imported where used: the write tasks need neither
    from pyiceberg.catalog.sql import SqlCatalog


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
    # write task's first rows (sink.write.preload), never by a task without rows.
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


def sql_catalog(catalog: Catalog) -> SqlCatalog | None:
    """``catalog`` when it is a SQL catalog whose database reports updated rows (compare-and-swap)."""
    from pyiceberg.catalog.sql import SqlCatalog

    if isinstance(catalog, SqlCatalog) and catalog.engine.dialect.supports_sane_rowcount:
        return catalog
    return None


def _table_row(catalog: SqlCatalog, identifier: tuple[str, ...]) -> list[Any]:
    """The conditions selecting the catalog row of the table ``identifier``."""
    from pyiceberg.catalog.sql import IcebergTables

    return [
        IcebergTables.catalog_name == catalog.name,
        IcebergTables.table_namespace == Catalog.namespace_to_string(Catalog.namespace_from(identifier)),
        IcebergTables.table_name == Catalog.table_name_from(identifier),
    ]


def sql_metadata_location(catalog: SqlCatalog, identifier: tuple[str, ...]) -> str | None:
    """The current metadata location of the table ``identifier`` (``None``: no such table).

    One indexed query, where loading the table parses its whole metadata file.
    """
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    query = select(IcebergTables.metadata_location).where(*_table_row(catalog, identifier))
    with Session(catalog.engine) as session:
        return session.execute(query).scalar_one_or_none()


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


def sql_commit_table(
    table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
) -> CommitTableResponse:
    """What ``SqlCatalog.commit_table`` does, on the table's metadata instead of the catalog's reloaded copy.

    The requirements are checked against the table's metadata, the new metadata file
    (next version number, new uuid, the table's location provider) is written, and the
    catalog row moves to it only if it still names the table's metadata file: a
    concurrent commit makes the swap fail, and the caller refreshes and retries.

    Raises:
        CommitFailedException: A requirement does not hold, or the table moved meanwhile.
    """
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    catalog = sql_catalog(table.catalog)
    assert catalog is not None
    base, base_location = table.metadata, table.metadata_location
    for requirement in requirements:
        requirement.validate(base)
    metadata = updated_metadata(base, updates, base_location)
    if metadata is base:
        return CommitTableResponse(metadata=base, metadata_location=base_location)
    version = catalog._parse_metadata_version(base_location) + 1
    provider = load_location_provider(metadata.location, metadata.properties)
    location = provider.new_table_metadata_file_location(version)
    io = catalog._load_file_io(properties=metadata.properties, location=location)
    catalog._write_metadata(metadata=metadata, io=io, metadata_path=location)
    swap = (
        update(IcebergTables)
        .where(*_table_row(catalog, table.name()), IcebergTables.metadata_location == base_location)
        .values(metadata_location=location, previous_metadata_location=base_location)
    )
    with Session(catalog.engine) as session:
        swapped = session.execute(swap).rowcount  # type: ignore[attr-defined]
        session.commit()
    if swapped < 1:
        with contextlib.suppress(OSError):
            io.delete(location)  # no catalog row names it
        raise CommitFailedException(f"Table has been updated by another process: {'.'.join(table.name())}")
    return CommitTableResponse(metadata=metadata, metadata_location=location)
