from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from sink.config import DistributionMode, SinkConfig
from sink.errors import ConfigError


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
