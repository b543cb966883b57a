"""The ``maintenance.*`` options: their defaults, the table properties they fall back to, bad values."""

from __future__ import annotations

import pytest

from icesink.config import SinkConfig
from icesink.config_maintenance import (
    DEFAULT_MAX_SNAPSHOT_AGE_S,
    DEFAULT_MIN_SNAPSHOTS_TO_KEEP,
    MAINTENANCE_PROPERTY,
    MaintenanceConfig,
)
from icesink.errors import ConfigError


def test_by_default_only_tables_the_sink_created_are_maintained() -> None:
    config = SinkConfig.from_options({"table": "db.t"}).maintenance
    assert config.enabled_for({MAINTENANCE_PROPERTY: "true"})
    assert not config.enabled_for({})
    off = SinkConfig.from_options({"table": "db.t", "maintenance.enabled": "false"}).maintenance
    assert not off.enabled_for({MAINTENANCE_PROPERTY: "true"})
    on = SinkConfig.from_options({"table": "db.t", "MAINTENANCE.ENABLED": "true"}).maintenance
    assert on.enabled_for({})


def test_retention_from_the_option_then_the_table_property_then_the_default() -> None:
    default = MaintenanceConfig()
    assert default.snapshot_age_s({}) == DEFAULT_MAX_SNAPSHOT_AGE_S == 5 * 24 * 3600
    assert default.snapshots_to_keep({}) == DEFAULT_MIN_SNAPSHOTS_TO_KEEP
    iceberg = {"history.expire.max-snapshot-age-ms": "60000", "history.expire.min-snapshots-to-keep": "3"}
    assert default.snapshot_age_s(iceberg) == 60 and default.snapshots_to_keep(iceberg) == 3
    options = {
        "table": "db.t",
        "maintenance.expire.max-snapshot-age-s": "7200",
        "maintenance.expire.min-snapshots-to-keep": "5",
        "maintenance.compact.min-delete-files": "4",
        "maintenance.compact.min-small-files": "8",
        "maintenance.budget-s": "2.5",
        "maintenance.orphan.older-than-s": "86400",
        "maintenance.orphan.interval-s": "600",
    }
    config = SinkConfig.from_options(options).maintenance
    assert config.snapshot_age_s(iceberg) == 7200 and config.snapshots_to_keep(iceberg) == 5
    assert (config.min_delete_files, config.min_small_files, config.budget_s) == (4, 8, 2.5)
    assert (config.orphan_older_than_s, config.orphan_interval_s) == (86400, 600)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maintenance.orphan.older-than-s", "60"),  # another process's batch may still be writing
        ("maintenance.budget-s", "-1"),
        ("maintenance.compact.min-delete-files", "0"),
        ("maintenance.enabled", "sometimes"),
    ],
)
def test_bad_values_name_the_option(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"invalid value '{value}' for option '{key}'"):
        SinkConfig.from_options({"table": "db.t", key: value})
