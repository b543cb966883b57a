"""The options of normalization, evolution and dead letters: parsed, defaulted, refused with a reason."""

from __future__ import annotations

import pytest

from icesink.batch.dead_letters import dead_letter_table_name
from icesink.config import BadRecordPolicy, SchemaEvolution, SinkConfig
from icesink.errors import ConfigError
from icesink.normalize import NormalizeOptions


def test_defaults() -> None:
    config = SinkConfig.from_options({"table": "db.events"})
    assert config.table_schema.evolution is SchemaEvolution.ADD_COLUMNS_AND_WIDEN
    assert config.table_schema.case_sensitive is False
    assert config.dead_letter.on_bad_record is BadRecordPolicy.DLQ
    assert dead_letter_table_name(config) == "db.events__dlq"
    options = NormalizeOptions.from_config(config, dead_letter_table_name(config))
    assert options == NormalizeOptions("db.events", False, BadRecordPolicy.DLQ, "db.events__dlq", True)


def test_options_parsed_case_insensitively() -> None:
    config = SinkConfig.from_options(
        {
            "table": "db.events",
            "Schema.Evolution": "off",
            "schema.case-sensitive": "true",
            "ON-BAD-RECORD": "fail",
            "dead-letter.table": "quarantine.events",
        }
    )
    assert config.table_schema.evolution is SchemaEvolution.OFF
    assert config.table_schema.case_sensitive is True
    assert config.dead_letter.on_bad_record is BadRecordPolicy.FAIL
    assert dead_letter_table_name(config) == "quarantine.events"
    assert NormalizeOptions.from_config(config, "quarantine.events").evolution_enabled is False


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("schema.evolution", "sometimes", "['add-columns-and-widen', 'off']"),
        ("on-bad-record", "drop", "['dlq', 'fail']"),
        ("schema.case-sensitive", "maybe", "true or false"),
        ("dead-letter.table", "no_namespace", "namespace.table"),
    ],
)
def test_bad_values_name_key_value_and_accepted(key: str, value: str, accepted: str) -> None:
    with pytest.raises(ConfigError) as info:
        SinkConfig.from_options({"table": "db.events", key: value})
    text = str(info.value)
    assert f"'{key}'" in text and repr(value) in text and accepted in text, text


def test_dead_letter_table_cannot_be_the_table_itself() -> None:
    from icesink.batch.dead_letters import DeadLetterQueue
    from icesink.metrics import SinkMetrics

    config = SinkConfig.from_options({"table": "db.events", "dead-letter.table": "DB.Events"})
    with pytest.raises(ConfigError, match=r"dead-letter\.table 'DB\.Events' is the sink's own table"):
        DeadLetterQueue(config, catalog=None, metrics=SinkMetrics())  # type: ignore[arg-type]
