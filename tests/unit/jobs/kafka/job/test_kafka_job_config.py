"""The Kafka-to-Iceberg job's configuration: YAML and flags, checked before Spark starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from icesink.errors import ConfigError
from icesink.jobs.kafka.decode import ValueFormat
from icesink.jobs.kafka.job.cli import load_config
from icesink.jobs.kafka.job.config import DEFAULT_METRICS_PORT, JobConfig
from icesink.jobs.kafka.job.kafka_settings import SOURCE_TASKS_PER_CORE
from icesink.jobs.kafka.job.main import main
from icesink.jobs.kafka.job.validate import validate

MINIMAL: dict[str, Any] = {
    "kafka": {"bootstrap-servers": "broker:9092", "topics": ["orders"]},
    "sink": {"table": "db.orders", "catalog.type": "sql", "catalog.uri": "sqlite:////tmp/c.db"},
    "checkpoint-location": "/tmp/ck",
}


def write(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def with_(overrides: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(MINIMAL))
    for key, value in overrides.items():
        node = data
        *parents, last = key.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return data


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        validate(data)
    return str(info.value)


def test_defaults_of_a_minimal_file(tmp_path: Path) -> None:
    config = load_config(["--config", write(tmp_path, MINIMAL)])
    assert config.sink_options()["metrics.port"] == str(DEFAULT_METRICS_PORT)  # metrics on by default
    assert config.value.format is ValueFormat.JSON and config.value.metadata_columns
    assert not config.trigger.available_now and config.trigger.interval is None
    assert config.kafka.source == "auto"
    assert config.kafka.source_options("python") == {
        "kafka.bootstrap.servers": "broker:9092",
        "subscribe": "orders",
        "startingOffsets": "latest",
        "failOnDataLoss": "true",
        "kafka.security.protocol": "PLAINTEXT",
        "brokerTimeoutMs": "30000",  # a missing broker fails the query within a minute
        "kafkaConsumer.pollTimeoutMs": "30000",
    }


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, with_({"kafka/max-offsets-per-trigger": 10, "trigger/interval": "1 minute"}))
    config = load_config(
        [
            "--config",
            path,
            "--max-offsets-per-trigger",
            "500",
            "--available-now",
            "--topic-pattern",
            "orders\\..*",
            "--set",
            "kafka.topics=null",
            "--sink-option",
            "write.target-file-size-bytes=1048576",
            "--metrics-port",
            "0",
            "--set",
            "kafka.options.fetch.max.bytes=1048576",
            "--set",
            "sink.partition-by=day(ts)",
            "--starting-offsets",
            '{"orders": {"0": 5}}',
        ]
    )
    assert config.kafka.max_offsets_per_trigger == 500
    assert config.trigger.available_now and config.trigger.interval is None
    assert config.kafka.topic_pattern == "orders\\..*" and config.kafka.topics is None
    options = config.sink_options()
    assert options["write.target-file-size-bytes"] == "1048576"
    assert options["metrics.port"] == "0"
    assert options["partition-by"] == "day(ts)"
    source = config.kafka.source_options("python")
    assert source["kafka.fetch.max.bytes"] == "1048576"
    assert source["subscribePattern"] == "orders\\..*"
    assert json.loads(source["startingOffsets"]) == {"orders": {"0": 5}}


def test_flags_alone_are_enough() -> None:
    config = load_config(
        [
            "--bootstrap-servers",
            "b:9092",
            "--topics",
            "a, b",
            "--table",
            "db.t",
            "--checkpoint-location",
            "/ck",
            "--trigger-interval",
            "500 ms",
            "--value-format",
            "debezium-json",
            "--no-metadata-columns",
        ]
    )
    assert config.kafka.topics == ["a", "b"]
    assert config.trigger.interval == "500 milliseconds"
    assert config.value.format is ValueFormat.DEBEZIUM_JSON and not config.value.metadata_columns


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kafka/bootstrp-servers": "x"}, "unknown key 'kafka.bootstrp-servers'"),
        ({"kafka/max-offsets-per-trigger": 0}, "key 'kafka.max-offsets-per-trigger' has value 0"),
        ({"kafka/topic-pattern": "x"}, "set exactly one of 'topics' and 'topic-pattern'"),
        (
            {"kafka/topic-pattern": "(", "kafka/topics": None},
            "key 'kafka.topic-pattern' has value '(': not a regular",
        ),
        ({"kafka/topics": ["bad topic"]}, "not valid topic names: ['bad topic']"),
        ({"kafka/starting-offsets": "{oops"}, "key 'kafka.starting-offsets': option 'startingOffsets'"),
        ({"kafka/source": "jni"}, "key 'kafka.source' has value 'jni'"),
        ({"kafka/options": {"kafka.fetch.max.bytes": 1}}, "without the 'kafka.' prefix"),
        ({"kafka/options": {"no.such.property": 1}}, "key 'kafka.options.no.such.property'"),
        (
            {"kafka/security": {"protocol": "SSL", "ssl-ca-location": "/no/ca.pem"}},
            "key 'kafka.security'",
        ),
        ({"value/format": "thrift"}, "key 'value.format' has value 'thrift'"),
        ({"value/format": "protobuf"}, "format 'protobuf' needs schema-registry.url"),
        ({"value/format": "avro"}, "format 'avro' needs schema-registry.url"),
        ({"value/schema-registry": {"url": "registry:8081"}}, "not an http:// or https:// URL"),
        ({"value/schema": "id integr"}, "key 'value.schema' has value 'id integr': not a Spark DDL schema"),
        ({"trigger/interval": "soon"}, "key 'trigger.interval' has value 'soon': not an interval"),
        ({"trigger/interval": "1 s", "trigger/available-now": True}, "either 'interval' or 'available-now'"),
        ({"sink/metrics.port": "http"}, "sink: invalid value 'http' for option 'metrics.port'"),
        ({"sink/write.bogus": 1}, "sink: unknown option 'write.bogus'"),
        ({"sink/table": "no_namespace"}, "sink: invalid value 'no_namespace' for option 'table'"),
        ({"checkpoint-location": ""}, "key 'checkpoint-location' has value ''"),
        ({"spark/mastr": "local"}, "unknown key 'spark.mastr'"),
    ],
)
def test_bad_values_name_the_key(overrides: dict[str, Any], message: str) -> None:
    assert message in error_of(with_(overrides))


def test_missing_keys_are_named() -> None:
    message = error_of({"kafka": {"topics": ["a"]}})
    for key in ("kafka.bootstrap-servers", "sink", "checkpoint-location"):
        assert f"key {key!r} is required" in message


def test_security_settings_for_both_clients() -> None:
    config = validate(
        with_(
            {
                "kafka/security": {
                    "protocol": "SASL_SSL",
                    "sasl-mechanism": "SCRAM-SHA-512",
                    "sasl-username": "ingest",
                    "sasl-password": 'pa"ss',
                    "ssl-ca-location": "/etc/ca.pem",
                },
                "kafka/source": "jvm",  # the Python client would check that the CA file exists
            }
        )
    )
    python = config.kafka.source_options("python")
    assert python["kafka.sasl.mechanisms"] == "SCRAM-SHA-512"
    assert python["kafka.sasl.password"] == 'pa"ss'
    assert python["kafka.ssl.ca.location"] == "/etc/ca.pem"
    jvm = config.kafka.source_options("jvm")
    assert jvm["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert jvm["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="ingest" password="pa\\"ss";'
    )
    assert jvm["kafka.ssl.truststore.type"] == "PEM"
    assert 'pa"ss' not in repr(config.kafka.security)  # a SecretStr


def test_the_python_source_packs_its_ranges_into_two_tasks_per_core_unless_told() -> None:
    config = validate(MINIMAL)
    assert config.kafka.source_options("python", cores=4)["maxPartitions"] == str(SOURCE_TASKS_PER_CORE * 4)
    assert "maxPartitions" not in config.kafka.source_options(
        "jvm", cores=4
    )  # the connector has no such option
    at_least = validate(with_({"kafka/min-partitions": 20}))
    assert at_least.kafka.source_options("python", cores=4)["maxPartitions"] == "20"  # never below min
    explicit = validate(with_({"kafka/max-partitions": 3}))
    assert explicit.kafka.source_options("python", cores=4)["maxPartitions"] == "3"

    assert "min-partitions (9) is greater than max-partitions (3)" in error_of(
        with_({"kafka/max-partitions": 3, "kafka/min-partitions": 9})
    )
    assert "max-partitions (3) applies to the Python source only" in error_of(
        with_({"kafka/max-partitions": 3, "kafka/source": "jvm"})
    )


def test_secrets_never_appear_in_errors() -> None:
    message = error_of(with_({"kafka/security": {"protocol": "SASL_SSL", "sasl-password": "hunter2"}}))
    assert "needs sasl-mechanism" in message
    assert "hunter2" not in message


def test_a_fixed_schema_turns_schema_evolution_off_unless_set() -> None:
    fixed = validate(with_({"value/schema": "id BIGINT, name STRING"}))
    assert fixed.sink_options()["schema.evolution"] == "off"
    assert fixed.value.decode_options().fixed_schema is not None
    chosen = validate(with_({"value/schema": "id BIGINT", "sink/schema.evolution": "add-columns-and-widen"}))
    assert chosen.sink_options()["schema.evolution"] == "add-columns-and-widen"


def test_upserting_turns_the_metadata_columns_off_unless_set(tmp_path: Path) -> None:
    upsert = {"sink/write.mode": "upsert", "sink/upsert.key-columns": "id"}
    assert not validate(with_(upsert)).value.decode_options().metadata_columns
    assert validate(with_({**upsert, "value/metadata-columns": True})).value.metadata_columns
    assert validate(with_({"sink/write.mode": "append"})).value.metadata_columns
    flags = load_config(["--config", write(tmp_path, MINIMAL), "--upsert-key", "id"])
    assert flags.sink_options()["write.mode"] == "upsert" and not flags.value.metadata_columns


def test_the_decoding_tasks_write_the_rows_unless_told_not_to(tmp_path: Path) -> None:
    assert load_config(["--config", write(tmp_path, MINIMAL)]).kafka.write_in_source
    assert not validate(with_({"kafka/write-in-source": False})).kafka.write_in_source
    assert "write-in-source" in error_of(with_({"kafka/write-in-source": "sometimes"}))


def test_metrics_can_be_turned_off() -> None:
    config = validate(with_({"sink/metrics.port": None}))
    assert config.sink_options()["metrics.port"] is None


def test_yaml_errors_and_non_mappings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kafka: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(["--config", str(bad)])
    bad.write_text("- a list")
    with pytest.raises(ConfigError, match="not a mapping"):
        load_config(["--config", str(bad)])
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(["--config", str(tmp_path / "missing.yaml")])


def test_main_fails_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import icesink.jobs.kafka.job.main as job

    monkeypatch.setattr(job, "run", lambda *args: pytest.fail("the job went on to start Spark"))
    code = main(["--config", write(tmp_path, with_({"kafka/max-offsets-per-trigger": -1}))])
    assert code == 2
    assert "kafka.max-offsets-per-trigger" in capsys.readouterr().err


def test_without_the_kafka_extra_the_job_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import icesink.jobs.kafka.job.main as job

    monkeypatch.setattr(job, "run", lambda *args: pytest.fail("the job went on to start Spark"))
    for name in [m for m in sys.modules if m.split(".")[0] == "confluent_kafka"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # as if not installed: import fails
    assert main(["--config", write(tmp_path, MINIMAL)]) == 2
    err = capsys.readouterr().err
    assert "ICESINK-CONFIG" in err and "pip install 'icesink[kafka]'" in err, err
    assert "kafka.source: jvm" in err
    assert validate(with_({"kafka/source": "jvm"})).kafka.source == "jvm"  # Spark's connector needs none


def test_the_config_is_frozen() -> None:
    config = validate(MINIMAL)
    assert isinstance(config, JobConfig)
    with pytest.raises(ValueError, match="frozen"):
        config.checkpoint_location = "/elsewhere"  # type: ignore[misc]


def test_a_registry_format_takes_the_registry_from_the_file_or_the_flag(tmp_path: Path) -> None:
    registry = {
        "url": "http://registry:8081/",
        "timeout-s": 3,
        "basic-auth-user": "u",
        "basic-auth-password": "pw1",
    }
    data = with_({"value/format": "avro", "value/schema-registry": registry})
    config = load_config(["--config", write(tmp_path, data)])
    options = config.value.decode_options()
    assert options.format is ValueFormat.AVRO and options.registry is not None
    assert (options.registry.url, options.registry.timeout_s) == ("http://registry:8081", 3)
    assert "pw1" not in repr(config)
    flags = ["--config", write(tmp_path, MINIMAL), "--value-format", "json-schema"]
    flagged = load_config([*flags, "--schema-registry-url", "https://r:8081"])
    assert flagged.value.schema_registry is not None and flagged.value.schema_registry.url == "https://r:8081"
