"""Where a sink keeps its own durable bookkeeping: attempt records and staged batches.

Never among a table's files: catalogs such as S3 Tables accept only Iceberg's own files
inside a table's location. The records of a sink live under
``<state-location>/<table>/<sink id>/attempts/`` and ``.../staged/``, written through a
FileIO built for that location with the catalog's properties.

``state-location`` defaults, when the catalog's warehouse is a local folder, to
``<warehouse>/_icesink_state`` (beside the tables, in none of them). A streaming query's
checkpoint location would be the natural home, but Spark does not hand it to a
``foreachBatch`` function (only the query id and batch id travel with the batch), so
any other warehouse requires the option.

Tables written by earlier versions keep such records under ``<table>/metadata/icesink-*``;
:func:`migrate_legacy` moves them here once, when the sink first settles a sink id.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

from pyiceberg.io import FileIO, load_file_io
from pyiceberg.table import Table

from icesink._pyiceberg import list_files
from icesink.bounded_waits import catalog_properties
from icesink.config import SinkConfig
from icesink.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_STATE_FOLDER = "_icesink_state"
ATTEMPTS = "attempts"
STAGED = "staged"
_LEGACY_FOLDERS = {ATTEMPTS: "icesink-attempts", STAGED: "icesink-staged"}


def state_location(config: SinkConfig) -> str:
    """The root of the sink's bookkeeping (``state-location``, or its local default).

    Raises:
        ConfigError: ``state-location`` is unset and the warehouse is not a local folder.
    """
    if config.state_location:
        return config.state_location.rstrip("/")
    warehouse = config.catalog.plain_properties().get("warehouse", "")
    if warehouse and _local_path(warehouse) is not None:
        return f"{warehouse.rstrip('/')}/{DEFAULT_STATE_FOLDER}"
    raise ConfigError(
        f"no 'state-location' and the catalog's warehouse {warehouse or '(unset)'!r} is not a local folder",
        hint="set 'state-location' to a folder the driver can write, outside every table's location, "
        "e.g. 's3://my-bucket/icesink-state' (the sink keeps its attempt records and staged batches there)",
    )


@dataclass(frozen=True)
class StateFolder:
    """One folder of a sink's bookkeeping: small JSON records, one per batch.

    Attributes:
        io: A FileIO for the folder's location.
        location: The folder (``<state-location>/<table>/<sink id>/<kind>``).
    """

    io: FileIO
    location: str

    def path(self, name: str) -> str:
        """The full path of record ``name``."""
        return f"{self.location}/{name}"

    def write(self, name: str, data: bytes) -> None:
        """Write (or replace) record ``name``, whole or not at all.

        An object store puts a whole object; a local file is written beside the record and renamed
        over it, so a process killed mid-write (a routed batch stages its tables in parallel) leaves
        the previous record or none, never a truncated one that a restart could not read.
        """
        path = self.path(name)
        local = _local_path(path)
        if local is None:
            with self.io.new_output(path).create(overwrite=True) as out:
                out.write(data)
            return
        os.makedirs(os.path.dirname(local), exist_ok=True)
        partial = f"{local}.{uuid.uuid4().hex[:12]}.partial"
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, local)

    def read(self, path: str) -> bytes:
        """The content of the record at ``path``."""
        with self.io.new_input(path).open() as stream:
            return stream.read()

    def delete(self, name: str) -> None:
        """Forget record ``name`` (no error when it is gone)."""
        with contextlib.suppress(FileNotFoundError):
            self.io.delete(self.path(name))

    def records(self) -> list[str]:
        """Paths of the JSON records in the folder, sorted (one listing of the folder only)."""
        return sorted(path for path in list_files(self.io, self.location) if path.endswith(".json"))


def state_folder(config: SinkConfig, table: Table, sink_id: str, kind: str) -> StateFolder:
    """The folder of ``kind`` (:data:`ATTEMPTS` or :data:`STAGED`) of ``sink_id`` on ``table``.

    Raises:
        ConfigError: No state location can be found, or it lies inside the table's location.
    """
    root = state_location(config)
    table_name = ".".join(table.name())
    location = f"{root}/{table_name}/{sink_id}/{kind}"
    table_location = table.location().rstrip("/") + "/"
    if _normalized(location).startswith(_normalized(table_location)):
        raise ConfigError(
            f"state-location {root!r} lies inside the location {table.location()!r} of table {table_name}",
            hint="set 'state-location' to a folder outside every table's location",
        )
    return StateFolder(_file_io(tuple(sorted(catalog_properties(config).items())), root), location)


def migrate_legacy(table: Table, sink_id: str, kind: str, folder: StateFolder) -> int:
    """Move records of ``sink_id`` kept in ``<table>/metadata/icesink-<kind>/`` to ``folder``.

    Returns:
        How many records were moved (0 when the table has none, or its storage cannot list).
    """
    legacy = f"{table.location().rstrip('/')}/metadata/{_LEGACY_FOLDERS[kind]}/{sink_id}"
    try:
        paths = [p for p in list_files(table.io, legacy) if p.endswith(".json")]
    except (OSError, TypeError) as e:  # storage that cannot list holds no records of ours
        logger.debug("no %s records of sink %s under %s: %s", kind, sink_id, legacy, e)
        return 0
    for path in paths:
        with table.io.new_input(path).open() as stream:
            folder.write(path.rsplit("/", 1)[-1], stream.read())
        table.io.delete(path)
    if paths:
        logger.info(
            "moved %s %s records of sink %s on %s from %s to %s",
            len(paths),
            kind,
            sink_id,
            ".".join(table.name()),
            legacy,
            folder.location,
        )
    return len(paths)


@functools.lru_cache(maxsize=32)
def _file_io(properties: tuple[tuple[str, str], ...], location: str) -> FileIO:
    return load_file_io(dict(properties), location)


def _normalized(location: str) -> str:
    """``location`` with ``file:`` and a plain path written alike."""
    local = _local_path(location)
    return "file://" + local if local is not None else location


def _local_path(location: str) -> str | None:
    """The local file system path of ``location`` (a plain path or ``file:``), else ``None``."""
    parsed = urlparse(location)
    return parsed.path if parsed.scheme in ("", "file") else None
