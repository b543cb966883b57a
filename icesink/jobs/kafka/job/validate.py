"""The job's configuration validated as a whole, and its errors worded for the file's keys.

:func:`validate` checks the model, then what the model alone cannot: the routing against
the decoding, the sink's own options, the Python source's client properties. Every error
is a :class:`~icesink.ConfigError` naming the key, the value (credentials masked) and
what is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr, ValidationError

from icesink import ConfigError, SinkConfig, hidden
from icesink.jobs.config_env import expand_env
from icesink.jobs.kafka.job.config import JobConfig
from icesink.jobs.kafka.job.kafka_settings import KafkaSettings
from icesink.jobs.kafka.job.routing import check_routing
from icesink.jobs.kafka.source.kafka_errors import require_client
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions, check_client_config

# Spark Kafka source option -> the key of this file, for messages.
_OPTION_KEYS = {
    "kafka.bootstrap.servers": "kafka.bootstrap-servers",
    "subscribe": "kafka.topics",
    "subscribePattern": "kafka.topic-pattern",
    "startingOffsets": "kafka.starting-offsets",
    "maxOffsetsPerTrigger": "kafka.max-offsets-per-trigger",
    "minPartitions": "kafka.min-partitions",
    "maxPartitions": "kafka.max-partitions",
    "failOnDataLoss": "kafka.fail-on-data-loss",
    "brokerTimeoutMs": "kafka.broker-timeout-s",
}


def validate(data: Mapping[str, Any]) -> JobConfig:
    """Validate a configuration mapping (the YAML file's content, flags applied).

    Raises:
        ConfigError: Naming the key, the value and what is accepted.
    """
    try:
        config = JobConfig.model_validate(expand_env(data))
    except ValidationError as e:
        raise _config_error(e) from e
    check_routing(config.sink, config.value.metadata_columns)
    _check_sink(config)
    if config.kafka.source != "jvm":
        _check_python_source(config)
    return config


def _config_error(error: ValidationError) -> ConfigError:
    lines = []
    for item in error.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(top level)"
        value = item.get("input")
        if item["type"] == "extra_forbidden":
            lines.append(f"unknown key {key!r}")
        elif item["type"] == "missing":
            lines.append(f"key {key!r} is required")
        else:
            message = str(item["msg"]).removeprefix("Value error, ")
            if isinstance(value, Mapping):  # a whole section: its values may be secrets
                lines.append(f"key {key!r}: {message}")
            else:
                lines.append(f"key {key!r} has value {_shown(key, value)}: {message}")
    return ConfigError(
        "invalid configuration: " + "; ".join(lines),
        hint="see the keys in docs/options.md, 'Kafka job options'",
    )


def _check_sink(config: JobConfig) -> None:
    try:
        SinkConfig.from_options(config.sink_options())
    except ConfigError as e:
        raise ConfigError(f"invalid configuration: sink: {e.message}", hint=e.hint) from e


def _check_python_source(config: JobConfig) -> None:
    require_client()  # without the kafka extra: an error naming it, not a key
    try:
        check_client_config(KafkaSourceOptions.from_options(config.kafka.source_options("python"), "stream"))
    except ConfigError as e:
        option = str(e.context.get("option", ""))
        key = _OPTION_KEYS.get(option) or _client_key(config.kafka, e.message)
        raise ConfigError(f"invalid configuration: key {key!r}: {e.message}", hint=e.hint) from e


def _client_key(kafka: KafkaSettings, message: str) -> str:
    """The key holding the client property librdkafka names in ``message``."""
    for name in sorted(kafka.options, key=len, reverse=True):
        if f'"{name}"' in message or f"{name} " in message:
            return f"kafka.options.{name}"
    for name in kafka.security.client_options("python"):
        if name in message:
            return "kafka.security"
    return "kafka.options"


def _shown(key: str, value: Any) -> str:
    if any(word in key for word in ("password", "secret")) or isinstance(hidden(key, str(value)), SecretStr):
        return "'**********'"
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "...'"
