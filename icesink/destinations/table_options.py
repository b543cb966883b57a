"""Each routed table's own configuration: the sink's, with ``route.table-options`` applied.

The patterns are tried in the order given (``fnmatch``, case-insensitive on the table
name); the first that matches supplies the overrides. The result is an ordinary
single-table :class:`~icesink.config.SinkConfig`, so creating, evolving, writing and
committing a routed table is what the sink does for its one table. ``write.mode`` and
``upsert.key-columns`` make a table upserted (:mod:`icesink.batch.changes`); the op and
order columns are the sink's. Under ``distribution-mode=bucket`` a table whose
``partition-by`` has no bucket term is given ``hash`` (it is created as it is partitioned,
and the routed shuffle, :mod:`icesink.route.routed_shuffle`, sends its rows by partition tuple).
"""

from __future__ import annotations

import fnmatch
import threading

from pyiceberg.transforms import BucketTransform

from icesink.config import DistributionMode, SinkConfig
from icesink.config_route import TABLE_PROPERTY_PREFIX, RouteConfig
from icesink.config_upsert import with_table_options
from icesink.partitioning import parse_partition_by

_WRITE_FIELDS = {
    "write.target-file-size-bytes": "target_file_size_bytes",
    "write.parquet.row-group-size-bytes": "row_group_size_bytes",
    "write.parquet.compression-codec": "compression_codec",
}


class TableOptions:
    """The configuration of each routed table (one instance per sink; results are cached).

    Args:
        config: The routed sink's configuration.
    """

    def __init__(self, config: SinkConfig) -> None:
        self._config = config
        self._cache: dict[str, SinkConfig] = {}
        self._lock = threading.Lock()

    def overrides(self, table: str) -> dict[str, str]:
        """The overrides of the first pattern matching ``table`` (empty when none does)."""
        for pattern, options in self._config.route.table_options:
            if fnmatch.fnmatchcase(table.lower(), pattern.lower()):
                return options
        return {}

    def config_for(self, table: str) -> SinkConfig:
        """The single-table configuration of ``table``."""
        with self._lock:
            config = self._cache.get(table)
            if config is None:
                config = self._cache[table] = self._build(table)
            return config

    def _build(self, table: str) -> SinkConfig:
        base = self._config
        options = self.overrides(table)
        write: dict[str, object] = {
            field: int(options[key]) if key.endswith("-bytes") else options[key].lower()
            for key, field in _WRITE_FIELDS.items()
            if key in options
        }
        bucket_mode = base.write.distribution_mode is DistributionMode.BUCKET
        if bucket_mode and not _has_bucket(options.get("partition-by", base.partition_by)):
            # Not created unpartitioned only to be refused: its rows go by partition tuple (or one task).
            write["distribution_mode"] = DistributionMode.HASH
        properties = {
            key[len(TABLE_PROPERTY_PREFIX) :]: value
            for key, value in options.items()
            if key.startswith(TABLE_PROPERTY_PREFIX)
        }
        update: dict[str, object] = {
            "table": table,
            "route": RouteConfig(),
            "write": base.write.model_copy(update=write),
            "table_properties": {**base.table_properties, **properties},
        }
        if "partition-by" in options:
            update["partition_by"] = options["partition-by"]
        update["upsert"] = with_table_options(base.upsert, options)
        return base.model_copy(update=update)


def _has_bucket(partition_by: str | None) -> bool:
    """Whether ``partition-by`` (already checked when the sink was built) has a bucket term."""
    return any(isinstance(t.transform, BucketTransform) for t in parse_partition_by(partition_by))
