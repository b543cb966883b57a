"""Building blocks of the commit unit tests: a SQLite catalog, batch attempts written for real."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyarrow import fs as pafs
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table
from pyiceberg.table.update import AddSnapshotUpdate

from icesink._pyiceberg import sql as pyiceberg_sql
from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.commit.recovery import attempt_location
from icesink.commit.staging import StagedBatch
from icesink.config import CatalogConfig, CommitConfig, SinkConfig
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter

SINK_ID = "unit"
TABLE = "db.t"
FAST_RETRIES = CommitConfig(retries=2, min_wait_ms=1, max_wait_ms=2)


def sink_config(tmp_path: Path, **fields: Any) -> SinkConfig:
    """A config naming a SQLite catalog and a local warehouse in ``tmp_path``."""
    properties = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"file://{tmp_path / 'warehouse'}",
    }
    return SinkConfig(table=TABLE, catalog=CatalogConfig(name="unit", properties=properties), **fields)


def make_table(config: SinkConfig) -> tuple[Catalog, Table]:
    """The table ``db.t`` (``id long, v string``), created the way the sink creates tables."""
    Path(config.catalog.plain_properties()["warehouse"].removeprefix("file://")).mkdir(
        parents=True, exist_ok=True
    )
    catalog = load_catalog(config.catalog.name, **config.catalog.plain_properties())
    catalog.create_namespace_if_not_exists("db")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    return catalog, catalog.create_table(TABLE, schema=schema, properties=CREATED_TABLE_PROPERTIES)


def write_attempt(
    table: Table, batch_id: int, attempt: str, ids: range, *, task_attempt: int = 0, sink_id: str = SINK_ID
) -> StagedBatch:
    """Write ``ids`` as one Spark task of a batch attempt would, under the attempt's own folder."""
    prefix = f"{sink_id}-b{batch_id}-{attempt}"
    spec = WriteSpec(
        table=TABLE,
        schema=table.schema(),
        partition_spec=table.spec(),
        data_location=attempt_location(f"{table.location()}/data", prefix),
        io_properties=dict(table.io.properties),
        table_properties=dict(table.metadata.properties),
        file_prefix=prefix,
        target_file_size_bytes=1 << 20,
        row_group_size_bytes=1 << 20,
        memory_budget_bytes=64 << 20,
        compression="zstd",
        num_data_columns=2,
    )
    rows = pa.RecordBatch.from_arrays(
        [pa.array(list(ids), pa.int64()), pa.array([str(i) for i in ids])],
        schema=iceberg_to_arrow_schema(table.schema()),
    )
    files = DataTaskWriter(spec, 0, task_attempt).write_all(iter([rows]))
    return StagedBatch(batch_id, attempt, tuple(files), location=spec.data_location)


def data_files_on_disk(table: Table) -> set[str]:
    return {f"file://{p}" for p in Path(table.location().removeprefix("file://"), "data").rglob("*.parquet")}


def sound_ids(table: Table) -> list[int]:
    """The table's ids, after checking its referenced files exist and nothing else is in ``data/``."""
    table.refresh()
    referenced = {task.file.file_path for task in table.scan().plan_files()}
    assert {p for p in referenced if not Path(p.removeprefix("file://")).exists()} == set()
    assert data_files_on_disk(table) == referenced, "unreferenced data files left behind"
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def before_each_data_commit(
    monkeypatch: pytest.MonkeyPatch, catalog: Catalog, action: Callable[[], object]
) -> None:
    """Run ``action`` (another writer's commit) just before each data commit through ``catalog``.

    The sink commits to a SQL catalog with :func:`icesink._pyiceberg.sql.sql_commit_table`, to
    others but REST with the catalog's ``commit_table``: both are hooked (REST commits go
    through :mod:`icesink._pyiceberg.rest`, hooked in ``tests/deploy/test_metadata_cache_rest.py``).
    """

    def hooked(real: Callable[..., Any]) -> Callable[..., Any]:
        def commit(table: Table, requirements: Any, updates: Any) -> Any:
            if table.catalog is catalog and any(isinstance(u, AddSnapshotUpdate) for u in updates):
                action()
            return real(table, requirements, updates)

        return commit

    monkeypatch.setattr(catalog, "commit_table", hooked(catalog.commit_table))
    monkeypatch.setattr(pyiceberg_sql, "sql_commit_table", hooked(pyiceberg_sql.sql_commit_table))


def concurrent_appends(table: Table) -> tuple[Callable[[], None], list[int]]:
    """Another writer appending three rows (negative ids, other columns null) per call, and its ids."""
    other = type(table.catalog)(table.catalog.name, **table.catalog.properties)
    ids = itertools.count(-1, -1)
    appended: list[int] = []

    def append() -> None:
        new = [next(ids) for _ in range(3)]
        target = other.load_table(table.name())
        target.append(pa.Table.from_pylist([{"id": i} for i in new], schema=target.schema().as_arrow()))
        appended.extend(new)

    return append, appended


class CountingHandler(pafs.FileSystemHandler):
    """A pyarrow file system that counts the requests object storage would see.

    A listing is one request per 1,000 entries returned (one LIST page), at least one;
    every stat, open and delete is one request.
    """

    def __init__(self, inner: pafs.FileSystem) -> None:
        self.inner = inner
        self.requests = 0
        self.entries_listed = 0

    def _count(self, n: int = 1) -> None:
        self.requests += n

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return self.inner.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        self._count(len(paths))
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        infos = self.inner.get_file_info(selector)
        self.entries_listed += len(infos)
        self._count(max(1, math.ceil(len(infos) / 1000)))
        return infos

    def create_dir(self, path: str, recursive: bool) -> None:
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self._count()
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._count()
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError

    def delete_file(self, path: str) -> None:
        self._count()
        self.inner.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._count()
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._count()
        self.inner.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        self._count()
        return self.inner.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        self._count()
        return self.inner.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        self._count()
        self.inner.create_dir(path.rsplit("/", 1)[0], recursive=True)  # object storage has no folders
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        self._count()
        return self.inner.open_append_stream(path, metadata=metadata)


class CountingFileIO(PyArrowFileIO):
    """pyiceberg's PyArrowFileIO whose local file system goes through a :class:`CountingHandler`."""

    def __init__(self, properties: dict[str, str] | None = None) -> None:
        super().__init__(properties or {})
        self.handler = CountingHandler(pafs.LocalFileSystem())
        counting = pafs.PyFileSystem(self.handler)
        self.fs_by_scheme = lambda scheme, netloc: counting  # pyiceberg sets it per instance too


def counted(io: CountingFileIO, action: Callable[[], Any]) -> tuple[int, int]:
    """(requests, entries listed) that ``action`` issued through ``io``."""
    before = (io.handler.requests, io.handler.entries_listed)
    action()
    return io.handler.requests - before[0], io.handler.entries_listed - before[1]
