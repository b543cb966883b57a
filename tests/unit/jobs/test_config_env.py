"""Environment references (``${env:NAME}``) in the Kafka job's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from icesink.errors import ConfigError
from icesink.jobs.config_env import expand_env
from icesink.jobs.kafka.job.cli import load_config

ENV = {"S3_SECRET": "s3cr3t-value", "PG_PASSWORD": "p@ss"}


def test_whole_values_parts_of_values_and_nested_values_are_replaced() -> None:
    data = {
        "sink": {
            "catalog.s3.secret-access-key": "${env:S3_SECRET}",
            "catalog.uri": "postgresql+psycopg2://ingest:${env:PG_PASSWORD}@db/catalog",
            "partition-by": "day(ts)",
            "metrics.port": None,
        },
        "kafka": {"topics": ["a-${env:PG_PASSWORD}", "b"], "max-offsets-per-trigger": 10},
    }
    assert expand_env(data, ENV) == {
        "sink": {
            "catalog.s3.secret-access-key": "s3cr3t-value",
            "catalog.uri": "postgresql+psycopg2://ingest:p@ss@db/catalog",
            "partition-by": "day(ts)",
            "metrics.port": None,
        },
        "kafka": {"topics": ["a-p@ss", "b"], "max-offsets-per-trigger": 10},
    }


def test_a_doubled_dollar_keeps_the_reference_literally() -> None:
    assert expand_env({"k": "$${env:S3_SECRET} and ${env:S3_SECRET}"}, ENV) == {
        "k": "${env:S3_SECRET} and s3cr3t-value"
    }


def test_an_unset_variable_names_the_key_and_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"'sink.catalog.credential'.*'ICEBERG_CREDENTIAL'.*not set"):
        expand_env({"sink": {"catalog.credential": "${env:ICEBERG_CREDENTIAL}"}}, ENV)


def test_the_job_reads_references_from_its_file_and_its_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ICEBERG_CREDENTIAL", "client:secret-from-env")
    monkeypatch.setenv("TEST_S3_KEY", "key-from-env")
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap-servers": "broker:9092", "topics": ["orders"]},
                "sink": {
                    "table": "db.orders",
                    "catalog.type": "sql",
                    "catalog.uri": "sqlite:////tmp/c.db",
                    "catalog.credential": "${env:TEST_ICEBERG_CREDENTIAL}",
                },
                "checkpoint-location": "/tmp/ck",
            }
        )
    )
    config = load_config(
        ["--config", str(path), "--sink-option", "catalog.s3.access-key-id=${env:TEST_S3_KEY}"]
    )
    options = config.sink_options()
    assert options["catalog.credential"] == "client:secret-from-env"
    assert options["catalog.s3.access-key-id"] == "key-from-env"
    assert "secret-from-env" not in repr(config)
