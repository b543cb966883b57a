"""Spark-style string options (``write.target-file-size-bytes``) sorted into the config's tree.

:meth:`icesink.config.SinkConfig.from_options` validates what this returns; here the keys
are matched, case-insensitively, to the sections and fields of the model, and each
field remembers the key it came from so that a bad value is reported under that key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icesink.catalog_keys import did_you_mean
from icesink.errors import ConfigError

# Option key (lower case) -> (section, field). Iceberg property names where one exists.
_OPTION_FIELDS: dict[str, tuple[str | None, str]] = {
    "table": (None, "table"),
    "partition-by": (None, "partition_by"),
    "sink-id": (None, "sink_id"),
    "state-location": (None, "state_location"),
    "write.target-file-size-bytes": ("write", "target_file_size_bytes"),
    "write.parquet.row-group-size-bytes": ("write", "row_group_size_bytes"),
    "write.parquet.compression-codec": ("write", "compression_codec"),
    "write.fanout.memory-budget-bytes": ("write", "memory_budget_bytes"),
    "distribution-mode": ("write", "distribution_mode"),
    "write.distribution-mode": ("write", "distribution_mode"),
    "commit.retry.num-retries": ("commit", "retries"),
    "metrics.port": ("metrics", "port"),
    "metrics.host": ("metrics", "host"),
    "metrics.pushgateway-url": ("metrics", "pushgateway_url"),
    "metrics.pushgateway-job": ("metrics", "pushgateway_job"),
    "metrics.max-tables": ("metrics", "max_tables"),
    "commit.retry.min-wait-ms": ("commit", "min_wait_ms"),
    "schema.evolution": ("table_schema", "evolution"),
    "schema.case-sensitive": ("table_schema", "case_sensitive"),
    "on-bad-record": ("dead_letter", "on_bad_record"),
    "dead-letter.table": ("dead_letter", "table"),
    "commit.retry.max-wait-ms": ("commit", "max_wait_ms"),
    "commit.target-bytes": ("commit", "target_bytes"),
    "commit.interval-s": ("commit", "interval_s"),
    "commit.max-batches": ("commit", "max_batches"),
    "write.mode": ("upsert", "mode"),
    "upsert.key-columns": ("upsert", "key_columns"),
    "upsert.op-column": ("upsert", "op_column"),
    "upsert.order-column": ("upsert", "order_column"),
    "upsert.lookup-driver-max-files": ("upsert", "lookup_driver_max_files"),
    "upsert.key-index": ("upsert", "key_index"),
    "upsert.key-index-cache-bytes": ("upsert", "key_index_cache_bytes"),
    "write.allow-append-to-keyed-table": ("upsert", "allow_append_to_keyed_table"),
    "route.by": ("route", "by"),
    "route.field": ("route", "field"),
    "route.table-template": ("route", "table_template"),
    "route.tables": ("route", "tables"),
    "route.table-options": ("route", "table_options"),
    "route.max-tables": ("route", "max_tables"),
    "timeout.connect-s": ("timeouts", "connect_s"),
    "timeout.catalog-request-s": ("timeouts", "catalog_request_s"),
    "timeout.storage-request-s": ("timeouts", "storage_request_s"),
    "maintenance.enabled": ("maintenance", "enabled"),
    "maintenance.budget-s": ("maintenance", "budget_s"),
    "maintenance.compact.min-delete-files": ("maintenance", "min_delete_files"),
    "maintenance.compact.min-small-files": ("maintenance", "min_small_files"),
    "maintenance.compact.max-delete-files": ("maintenance", "max_delete_files"),
    "maintenance.compact.delete-ratio-threshold": ("maintenance", "delete_ratio_threshold"),
    "maintenance.compact.partitions-per-batch": ("maintenance", "partitions_per_batch"),
    "maintenance.expire.max-snapshot-age-s": ("maintenance", "max_snapshot_age_s"),
    "maintenance.expire.min-snapshots-to-keep": ("maintenance", "min_snapshots_to_keep"),
    "maintenance.orphan.older-than-s": ("maintenance", "orphan_older_than_s"),
    "maintenance.orphan.interval-s": ("maintenance", "orphan_interval_s"),
}
_EXAMPLES = ("table", "partition-by", "write.target-file-size-bytes", "commit.interval-s")


def option_tree(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """``options`` as the nested data of :class:`~icesink.config.SinkConfig`, and where each value came from.

    Returns:
        The data to validate, and each field's location (as pydantic reports it) -> the
        option key as written.

    Raises:
        ConfigError: An option no field takes, with the accepted options.
    """
    data: dict[str, Any] = {}
    origin: dict[tuple[str, ...], str] = {}
    catalog_props: dict[str, str] = {}
    table_props: dict[str, str] = {}
    for raw_key, raw_value in options.items():
        key = str(raw_key).strip().lower()
        value = raw_value if raw_value is None else str(raw_value)
        if key == "catalog.name":
            data.setdefault("catalog", {})["name"] = value
            origin[("catalog", "name")] = raw_key
        elif key.startswith("catalog."):
            # pyiceberg property names are lower case (uri, warehouse, s3.access-key-id, ...)
            catalog_props[key.removeprefix("catalog.")] = value or ""
        elif key.startswith("table-property."):
            table_props[str(raw_key).strip()[len("table-property.") :]] = value or ""
        elif key in _OPTION_FIELDS:
            section, field = _OPTION_FIELDS[key]
            if section is None:
                data[field] = value
                origin[(field,)] = raw_key
            else:
                data.setdefault(section, {})[field] = value
                origin[(section, field)] = raw_key
        else:
            suggestion = did_you_mean(key, [*_OPTION_FIELDS, "catalog.name"])
            raise ConfigError(
                f"unknown option {raw_key!r} (value {raw_value!r})",
                hint=(suggestion + " " if suggestion else "")
                + f"options are the sink's own (e.g. {', '.join(_EXAMPLES)}) and catalog.*, table-property.*",
            )
    if catalog_props:
        data.setdefault("catalog", {})["properties"] = catalog_props
    if table_props:
        data["table_properties"] = table_props
    return data, origin


def option_fields() -> dict[str, tuple[str | None, str]]:
    """Each option key (lower case) -> ``(section, field)`` of the config model; for the option reference."""
    return dict(_OPTION_FIELDS)
