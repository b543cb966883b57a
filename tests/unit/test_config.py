from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from icesink.config import DistributionMode, SinkConfig
from icesink.errors import ConfigError, PartitionSpecError


def test_options_are_case_insensitive() -> None:
    config = SinkConfig.from_options(
        {
            "TABLE": "db.t",
            "Catalog.Type": "sql",
            "catalog.URI": "sqlite:///x.db",
            "Write.Target-File-Size-Bytes": "1048576",
            "Distribution-Mode": "hash",
        }
    )
    assert config.table == "db.t"
    assert config.catalog.plain_properties() == {"type": "sql", "uri": "sqlite:///x.db"}
    assert config.write.target_file_size_bytes == 1048576
    assert config.write.distribution_mode is DistributionMode.HASH


def test_unknown_option_names_key_value_and_accepted() -> None:
    with pytest.raises(ConfigError) as info:
        SinkConfig.from_options({"table": "db.t", "target-size": "5"})
    text = str(info.value)
    assert "ICESINK-CONFIG" in text and "'target-size'" in text and "'5'" in text
    assert "write.target-file-size-bytes" in text


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("write.target-file-size-bytes", "-1", "greater than or equal"),
        ("distribution-mode", "round-robin", "bucket"),
        ("write.parquet.compression-codec", "lzo", "zstd"),
        ("table", "no_namespace", "namespace.table"),
        ("commit.retry.num-retries", "many", "integer"),
    ],
)
def test_bad_values_are_named(key: str, value: str, expected: str) -> None:
    options = {"table": "db.t", key: value}
    with pytest.raises(ConfigError) as info:
        SinkConfig.from_options(options)
    text = str(info.value)
    assert key in text and repr(value) in text and expected in text


def test_secrets_are_hidden() -> None:
    config = SinkConfig.from_options({"table": "db.t", "catalog.s3.secret-access-key": "hunter2"})
    assert isinstance(config.catalog.properties["s3.secret-access-key"], SecretStr)
    assert "hunter2" not in repr(config)
    assert config.catalog.plain_properties()["s3.secret-access-key"] == "hunter2"


def test_config_is_frozen_and_strict() -> None:
    config = SinkConfig(table="db.t")
    with pytest.raises(ValidationError):
        config.table = "db.u"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        SinkConfig(table="db.t", surprise=1)  # type: ignore[call-arg]


def test_table_properties_pass_through() -> None:
    config = SinkConfig.from_options(
        {"table": "db.t", "table-property.write.metadata.metrics.default": "full"}
    )
    assert config.table_properties == {"write.metadata.metrics.default": "full"}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"partition-by": "bucket(0, id)"}, ["'partition-by'", "'bucket(0, id)'", "bucket(16, column)"]),
        ({"partition-by": "truncate(-1, name)"}, ["'partition-by'", "'truncate(-1, name)'"]),
        ({"partition-by": "id, id"}, ["'partition-by'", "'id, id'", "more than once"]),
        ({"partition-by": "bucket(4, id), bucket(8, ID)"}, ["'partition-by'", "id_bucket", "more than once"]),
        ({"partition-by": "day(ts), hour(ts)"}, ["'partition-by'", "'day(ts), hour(ts)'", "one of"]),
        ({"partition-by": "nosuch(id)"}, ["'partition-by'", "'nosuch(id)'", "bucket(N, col)"]),
    ],
)
def test_bad_partitioning_fails_when_the_config_is_built(options: dict[str, str], named: list[str]) -> None:
    with pytest.raises(PartitionSpecError) as info:
        SinkConfig.from_options({"table": "db.t", **options})
    for text in named:
        assert text in str(info.value), str(info.value)
    with pytest.raises(PartitionSpecError):
        SinkConfig(table="db.t", partition_by=options["partition-by"])


def test_partition_terms_differing_in_case_are_apart_when_case_sensitive() -> None:
    config = SinkConfig.from_options(
        {"table": "db.t", "partition-by": "id, ID", "schema.case-sensitive": "true"}
    )
    assert config.partition_by == "id, ID"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"commit.retry.min-wait-ms": "5000", "commit.retry.max-wait-ms": "100"},
            ["'commit.retry.min-wait-ms'", "5000", "'commit.retry.max-wait-ms'", "100", "<="],
        ),
        ({"commit.interval-s": "inf"}, ["'commit.interval-s'", "'inf'", "finite"]),
        ({"commit.interval-s": "nan"}, ["'commit.interval-s'", "'nan'", "finite"]),
        ({"commit.interval-s": "0"}, ["'commit.interval-s'", "'0'", "greater than 0"]),
        (
            {"write.parquet.row-group-size-bytes": "2097152", "write.target-file-size-bytes": "1048576"},
            ["'write.parquet.row-group-size-bytes'", "2097152", "'write.target-file-size-bytes'", "1048576"],
        ),
        (
            {"write.parquet.row-group-size-bytes": str(1024**3)},
            ["'write.parquet.row-group-size-bytes'", str(1024**3), str(512 * 1024**2)],
        ),
        (
            {"distribution-mode": "bucket", "partition-by": "day(ts), id"},
            ["'distribution-mode'", "'bucket'", "'day(ts), id'", "hash"],
        ),
    ],
)
def test_cross_field_checks_name_both_keys(options: dict[str, str], named: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        SinkConfig.from_options({"table": "db.t", **options})
    text = str(info.value)
    assert text.startswith("ICESINK-CONFIG:") and "hint: " in text, text
    for part in named:
        assert part in text, text


def test_consistent_settings_are_accepted() -> None:
    config = SinkConfig.from_options(
        {
            "table": "db.t",
            "commit.retry.min-wait-ms": "100",
            "commit.retry.max-wait-ms": "100",
            "commit.interval-s": "0.5",
            "write.target-file-size-bytes": "1048576",  # tiny targets keep the default row group size
            "distribution-mode": "bucket",
            "partition-by": "day(ts), bucket(4, id)",
        }
    )
    assert config.commit.interval_s == 0.5 and config.write.row_group_size_bytes > 1048576
