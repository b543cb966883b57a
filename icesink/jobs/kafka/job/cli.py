"""The command line of the Kafka-to-Iceberg job: ``--config FILE`` and flags, which override it.

Named flags cover the common keys (``--bootstrap-servers``, ``--topics``,
``--max-offsets-per-trigger``, ``--available-now``, ``--table``, the routing flags
``--route-by``, ``--route-field``, ``--table-template``, ``--route-tables``, ...); ``--set KEY=VALUE``
sets any key of :mod:`icesink.jobs.kafka.job.config` (the value read as YAML), and
``--sink-option``, ``--kafka-option``, ``--spark-conf`` add to those mappings.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from icesink import ConfigError
from icesink.jobs.kafka.job.config import JobConfig
from icesink.jobs.kafka.job.routing import ROUTE_FLAGS
from icesink.jobs.kafka.job.validate import validate


def load_config(argv: Sequence[str] | None = None) -> JobConfig:
    """The job's configuration from ``--config FILE`` and the flags (which win); see :func:`parser`.

    Raises:
        ConfigError: Naming the key, the value and what is accepted.
    """
    args = parser().parse_args(argv)
    data: dict[str, Any] = _read_yaml(Path(args.config)) if args.config else {}
    for path, value in _flag_values(args):
        _set(data, path, value)
    return validate(data)


def parser() -> argparse.ArgumentParser:
    """The command line: ``--config`` and flags for the common keys; ``--set KEY=VALUE`` for any key."""
    p = argparse.ArgumentParser(
        prog="icesink-kafka-to-iceberg",
        description="Stream Kafka topics into an Apache Iceberg table, exactly once.",
    )
    p.add_argument("--config", metavar="FILE", help="YAML configuration (flags override it)")
    p.add_argument("--bootstrap-servers", help="kafka.bootstrap-servers")
    p.add_argument("--topics", help="kafka.topics, comma separated")
    p.add_argument("--topic-pattern", help="kafka.topic-pattern")
    p.add_argument("--starting-offsets", help="kafka.starting-offsets: earliest, latest or JSON")
    p.add_argument("--max-offsets-per-trigger", help="kafka.max-offsets-per-trigger")
    p.add_argument("--source", help="kafka.source: auto, jvm or python")
    p.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE", help="kafka.options")
    p.add_argument(
        "--value-format",
        help="value.format: json, debezium-json, avro, debezium-avro, json-schema or protobuf",
    )
    p.add_argument("--schema-registry-url", metavar="URL", help="value.schema-registry.url")
    p.add_argument("--value-schema", metavar="DDL", help="value.schema, e.g. 'id BIGINT, name STRING'")
    p.add_argument("--no-metadata-columns", action="store_true", help="value.metadata-columns: false")
    p.add_argument("--table", help="sink.table, e.g. analytics.orders")
    p.add_argument(
        "--upsert-key",
        metavar="COLS",
        help="upsert by these key columns (sink write.mode=upsert, upsert.key-columns=COLS)",
    )
    p.add_argument(
        "--route-by",
        choices=("topic", "field", "none"),
        help="sink route.by: one table per topic, per value of --route-field, or the one --table",
    )
    p.add_argument("--route-field", metavar="COLUMN", help="sink route.field: the column naming the table")
    p.add_argument(
        "--table-template", metavar="TEMPLATE", help="sink route.table-template, e.g. 'raw.{topic}'"
    )
    p.add_argument(
        "--route-tables", metavar="JSON", help='sink route.tables, e.g. \'{"click": "events.clicks"}\''
    )
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE", help="a sink option")
    p.add_argument("--metrics-port", help="sink metrics.port (default 9408; 0: any free port)")
    p.add_argument("--trigger-interval", help="trigger.interval, e.g. '30 seconds'")
    p.add_argument(
        "--available-now", action="store_true", help="trigger.available-now: read what is there, stop"
    )
    p.add_argument("--checkpoint-location", help="checkpoint-location")
    p.add_argument("--query-name", help="query-name")
    p.add_argument(
        "--max-restarts", type=int, help="max-restarts: a failed query starts again from its checkpoint"
    )
    p.add_argument("--master", help="spark.master, e.g. local[4]")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="spark.conf")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="any key, e.g. kafka.min-partitions=8"
    )
    return p


def _flag_values(args: argparse.Namespace) -> list[tuple[list[str], Any]]:
    """(path, value) of every flag given, in the order they apply."""
    simple = {
        "bootstrap_servers": ["kafka", "bootstrap-servers"],
        "topics": ["kafka", "topics"],
        "topic_pattern": ["kafka", "topic-pattern"],
        "starting_offsets": ["kafka", "starting-offsets"],
        "max_offsets_per_trigger": ["kafka", "max-offsets-per-trigger"],
        "source": ["kafka", "source"],
        "value_format": ["value", "format"],
        "value_schema": ["value", "schema"],
        "schema_registry_url": ["value", "schema-registry", "url"],
        "table": ["sink", "table"],
        "metrics_port": ["sink", "metrics.port"],
        "checkpoint_location": ["checkpoint-location"],
        "query_name": ["query-name"],
        "max_restarts": ["max-restarts"],
        "master": ["spark", "master"],
    }
    values: list[tuple[list[str], Any]] = []
    for name, path in simple.items():
        value = getattr(args, name)
        if value is not None:
            values.append((path, value))
    for name, key in ROUTE_FLAGS.items():
        if getattr(args, name) is not None:
            values.append((["sink", key], getattr(args, name)))
    if args.upsert_key is not None:
        values += [(["sink", "write.mode"], "upsert"), (["sink", "upsert.key-columns"], args.upsert_key)]
    if args.no_metadata_columns:
        values.append((["value", "metadata-columns"], False))
    if args.trigger_interval is not None:
        values += [(["trigger", "interval"], args.trigger_interval), (["trigger", "available-now"], False)]
    if args.available_now:
        values += [(["trigger", "available-now"], True), (["trigger", "interval"], None)]
    for flag, prefix in (
        ("kafka_option", ["kafka", "options"]),
        ("sink_option", ["sink"]),
        ("spark_conf", ["spark", "conf"]),
    ):
        for item in getattr(args, flag):
            key, value = _key_value(item, "--" + flag.replace("_", "-"))
            values.append(([*prefix, key], value))
    for item in args.set:
        key, value = _key_value(item, "--set")
        values.append((_path(key), yaml.safe_load(value) if value.strip() else value))
    return values


def _path(key: str) -> list[str]:
    """A dotted key as a path; the keys under sink, kafka.options and spark.conf contain dots themselves."""
    parts = key.split(".")
    for prefix in (["sink"], ["kafka", "options"], ["spark", "conf"]):
        if parts[: len(prefix)] == prefix and len(parts) > len(prefix):
            return [*prefix, ".".join(parts[len(prefix) :])]
    return parts


def _set(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for index, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(
                f"key {'.'.join(path[: index + 1])!r} holds {child!r}, not a mapping",
                hint=f"cannot set {'.'.join(path)}",
            )
        node = child
    node[path[-1]] = value


def _key_value(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{flag} {item!r} is not KEY=VALUE", hint=f"e.g. {flag} metrics.port=9408")
    return key.strip(), value


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read the configuration file {str(path)!r}: {e}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"the configuration file {str(path)!r} is not valid YAML: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"the configuration file {str(path)!r} holds a {type(data).__name__}, not a mapping"
        )
    return data
