"""Catalog access on the driver: load the catalog, load or create the table."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping, Sequence

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyspark.sql import types as st

from icesink._pyiceberg.rest import BoundedRestCatalog
from icesink.bounded_waits import catalog_properties, rest_timeout
from icesink.commit import metadata_cache
from icesink.config import DistributionMode, SinkConfig
from icesink.config_maintenance import MAINTENANCE_PROPERTY
from icesink.errors import CatalogError, ConfigError
from icesink.partitioning import build_partition_spec, parse_partition_by
from icesink.schema.names import check_new_table_names
from icesink.schema.source_ids import with_source_id_docs
from icesink.type_mapping import spark_to_iceberg_schema

logger = logging.getLogger(__name__)

# Properties of tables the sink creates: small, self-cleaning metadata for long streams.
CREATED_TABLE_PROPERTIES = {
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


# Times the catalog is loaded when another process is creating its tables (see _load_catalog).
CATALOG_LOAD_ATTEMPTS = 3

# Catalog properties no FileIO reads: the REST catalog's OAuth2 client credential.
_CATALOG_ONLY_PROPERTIES = frozenset({"credential"})


def executor_io_properties(config: SinkConfig, table: Table) -> dict[str, str]:
    """The FileIO properties executors get to write ``table``'s files: storage settings only.

    The catalog's options and those of the table's FileIO (what the catalog vended),
    keeping only string values outside the catalog's own credential: pyiceberg's REST
    catalog puts its auth manager among its properties, an object holding the catalog's
    HTTP session and OAuth2 token, which must not be pickled into every task (executors
    never talk to the catalog).
    """
    merged = {**catalog_properties(config), **table.io.properties}
    return {k: v for k, v in merged.items() if isinstance(v, str) and k not in _CATALOG_ONLY_PROPERTIES}


def open_catalog(config: SinkConfig) -> Catalog:
    """Load the configured catalog and check it answers.

    Raises:
        CatalogError: The catalog cannot be loaded or does not answer; names the catalog.
    """
    properties = catalog_properties(config)  # with the bounded waits of timeout.*
    try:
        catalog = _load_catalog(config.catalog.name, properties, rest_timeout(config))
        namespace = config.table.rsplit(".", 1)[0] if config.table else None  # routed: no one table
        if namespace is None:
            catalog.list_namespaces()
        elif catalog.namespace_exists(namespace):
            catalog.list_tables(namespace)
    except Exception as e:
        cause = RedactedError.of(e, config.catalog.redact)
    else:
        return catalog
    # Raised outside the handler: the original error (its text may hold a password) is
    # neither the cause nor the context, only its redacted copy is.
    shown = {k: str(v) for k, v in config.catalog.properties.items()}  # secrets masked
    raise CatalogError(
        f"cannot load catalog {config.catalog.name!r} with properties {shown}: {cause}",
        hint="check catalog.type, catalog.uri and catalog.warehouse (e.g. catalog.type=sql, "
        "catalog.uri=sqlite:////path/catalog.db, catalog.warehouse=file:///path/warehouse)",
    ) from cause


def _load_catalog(name: str, properties: dict[str, str], timeout: tuple[float, float]) -> Catalog:
    """``load_catalog``, again when another process created a new SQL catalog's tables meanwhile.

    A REST catalog is a :class:`~icesink._pyiceberg.rest.BoundedRestCatalog` (requests bounded
    by ``timeout``).

    A SQL catalog creates its tables the first time it is opened, each after checking
    that it is missing: two jobs opening a new catalog at once can both find a table
    missing, and the second ``CREATE TABLE`` fails. Opened again, the catalog finds them.
    """
    attempts = 1
    while True:
        try:
            if _is_rest(properties):
                return BoundedRestCatalog(name, timeout, **properties)
            return load_catalog(name, **properties)
        except Exception as e:
            if attempts == CATALOG_LOAD_ATTEMPTS or "already exists" not in str(e):
                raise
            logger.info("catalog %r: another process created its tables meanwhile; loading again", name)
            attempts += 1


def _is_rest(properties: dict[str, str]) -> bool:
    """Whether ``load_catalog`` would make a REST catalog of ``properties`` (as it infers the type)."""
    if "py-catalog-impl" in properties:
        return False
    kind = properties.get("type")
    return kind.lower() == "rest" if kind else properties.get("uri", "").startswith("http")


class RedactedError(Exception):
    """Stands in for an error whose text may hold a credential: its type, text and traceback, redacted."""

    @classmethod
    def of(cls, error: BaseException, redact: Callable[[str], str]) -> RedactedError:
        """A redacted copy of ``error``; its formatted traceback (whole chain) goes with it."""
        details = redact("".join(traceback.format_exception(error)).rstrip())
        copy = cls(redact(f"{type(error).__name__}: {error}"))
        copy.add_note(f"original error, redacted:\n{details}")
        return copy


def load_table(catalog: Catalog, identifier: str) -> Table | None:
    """The table, or ``None`` when it does not exist."""
    try:
        return metadata_cache.load_table(catalog, identifier)  # parsed again only when it moved
    except NoSuchTableError:
        return None


def create_table(catalog: Catalog, config: SinkConfig, spark_schema: st.StructType) -> Table:
    """Create the table from a batch's Spark schema and ``partition-by`` (atomic, race-safe).

    When another writer creates the table first, that table is loaded and used.

    Raises:
        PartitionSpecError: ``partition-by`` names a missing column or an impossible transform.
        ConfigError: ``distribution-mode=bucket`` for a table without partition fields.
        SchemaError: A name repeats in the batch, or (unless ``schema.case-sensitive``) two
            differ only in case.
    """
    check_new_table_names(spark_schema, config.table_schema.case_sensitive, config.table)
    schema = with_source_id_docs(spark_to_iceberg_schema(spark_schema), spark_schema)
    if config.upsert.enabled:  # position deletes need format v2; the keys identify a row
        schema = _with_identifier_fields(schema, config.upsert.key_columns, config.table)
    spec = build_partition_spec(parse_partition_by(config.partition_by), schema)
    if config.write.distribution_mode is DistributionMode.BUCKET and not spec.fields:
        raise ConfigError(
            "invalid value 'bucket' for option 'distribution-mode': the new table has no partition-by, "
            "so no bucket to shuffle by",
            table=config.table,
            hint="set partition-by with a bucket(N, col) term, or leave distribution-mode unset",
        )
    properties = {**CREATED_TABLE_PROPERTIES, MAINTENANCE_PROPERTY: "true", **config.table_properties}
    if config.upsert.enabled:
        properties["format-version"] = "2"
    return _create(catalog, config.table, schema, spec, properties)


def load_or_create(
    catalog: Catalog, name: str, schema: Schema, spec: PartitionSpec, properties: Mapping[str, str]
) -> Table:
    """Table ``name``, created with this schema, spec and properties when missing (a fixed-schema table's)."""
    table = load_table(catalog, name)
    return table if table is not None else _create(catalog, name, schema, spec, properties)


def _create(
    catalog: Catalog, name: str, schema: Schema, spec: PartitionSpec, properties: Mapping[str, str]
) -> Table:
    """Create table ``name`` and its namespace; the table another writer created first, if one did."""
    ensure_namespace(catalog, name.rsplit(".", 1)[0])
    try:
        table = catalog.create_table(name, schema=schema, partition_spec=spec, properties=dict(properties))
    except TableAlreadyExistsError:
        return catalog.load_table(name)
    logger.info("created table %s (spec %s, schema id %s)", name, spec, table.schema().schema_id)
    return table


def _with_identifier_fields(schema: Schema, key_columns: Sequence[str], table: str) -> Schema:
    """``schema`` with the key columns required and as its identifier fields."""
    names = {field.name: field for field in schema.fields}
    missing = [name for name in key_columns if name not in names]
    if missing:
        raise ConfigError(
            f"upsert.key-columns names {missing}, not columns of the stream ({sorted(names)})",
            table=table,
            hint="set upsert.key-columns to top-level columns of the stream",
        )
    fields = [f.model_copy(update={"required": True}) if f.name in key_columns else f for f in schema.fields]
    ids = [names[name].field_id for name in key_columns]
    return Schema(*fields, schema_id=schema.schema_id, identifier_field_ids=ids)


def ensure_namespace(catalog: Catalog, namespace: str) -> None:
    """Create ``namespace`` unless it exists; safe when another writer creates it at the same time.

    Catalogs report that race in their own ways (the SQL catalog with its database's
    unique-constraint error), so any failure after which the namespace exists is the race.
    """
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise


def close_catalog(catalog: Catalog) -> None:
    """Release what ``catalog`` holds (the SQL catalog's connection pool); it is not used again."""
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        engine.dispose()
