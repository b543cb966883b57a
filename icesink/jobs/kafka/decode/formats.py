"""The registry formats by ``value.format``: which registry format reads them (its driver step)."""

from __future__ import annotations

from icesink import ConfigError
from icesink.jobs.kafka.decode.avro_values import AvroValues
from icesink.jobs.kafka.decode.json_schema_values import JsonSchemaValues
from icesink.jobs.kafka.decode.protobuf_values import ProtobufValues
from icesink.jobs.kafka.decode.registry import SchemaRegistry
from icesink.jobs.kafka.decode.registry_values import RegistryFormat, RegistryValues

_FORMATS: dict[str, type[RegistryFormat]] = {
    "avro": AvroValues,
    "debezium-avro": AvroValues,
    "json-schema": JsonSchemaValues,
    "protobuf": ProtobufValues,
}


def registry_values(value_format: str, registry: SchemaRegistry | None) -> RegistryValues | None:
    """The driver step of a registry format; ``None`` for the other formats.

    Raises:
        ConfigError: A registry format without a registry.
    """
    chosen = _FORMATS.get(value_format)
    if chosen is None:
        return None
    if registry is None:
        raise ConfigError(
            f"value.format {value_format!r} needs a schema registry, and none is set",
            hint="set value.schema-registry.url, e.g. http://registry:8081",
        )
    return RegistryValues(registry, chosen())
