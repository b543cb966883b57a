"""Destination values -> table names: sanitizing, templates, collisions and route.tables."""

from __future__ import annotations

import pytest

from icesink.config import SinkConfig
from icesink.config_route import MAX_TABLE_NAME_BYTES
from icesink.destinations.naming import DestinationNames, from_template, sanitize
from icesink.errors import ConfigError


def _names(**options: str) -> DestinationNames:
    config = SinkConfig.from_options({"route.by": "topic", **options})
    return DestinationNames(config.route)


@pytest.mark.parametrize(
    ("value", "part"),
    [
        ("orders", "orders"),
        ("Orders-EU.v2", "orders_eu_v2"),
        ("1st", "t_1st"),
        ("a b/c", "a_b_c"),
        ("ÄÖ", "__"),
        ("_x", "_x"),
    ],
)
def test_sanitize_is_lower_case_identifier_part(value: str, part: str) -> None:
    assert sanitize(value) == part
    assert sanitize(value) == sanitize(value)  # deterministic


def test_sanitize_refuses_an_empty_value() -> None:
    with pytest.raises(ConfigError, match="empty destination value"):
        sanitize("")


def test_an_empty_value_is_unroutable_not_an_error() -> None:
    names = _names(**{"route.table-template": "raw.{topic}"})
    assert names.tables_of(["orders", ""]) == {"orders": "raw.orders", "": None}
    assert names.describe_unroutable("") == "the destination value is empty"


def test_template_puts_the_part_in_place_of_value_or_topic() -> None:
    assert from_template("raw.{topic}", "Web-Clicks") == "raw.web_clicks"
    assert from_template("events.{value}_v1", "9lives") == "events.t_9lives_v1"


def test_values_making_one_name_get_it_the_owner_check_decides() -> None:
    names = _names(**{"route.table-template": "raw.{topic}"})
    assert names.tables_of(["orders.eu", "orders-eu"]) == {
        "orders.eu": "raw.orders_eu",
        "orders-eu": "raw.orders_eu",
    }


def test_a_value_naming_the_dead_letter_table_is_unroutable() -> None:
    config = SinkConfig.from_options({"route.by": "topic", "route.table-template": "raw.{topic}"})
    names = DestinationNames(config.route, reserved=("raw.routed__dlq",))
    assert names.tables_of(["orders", "Routed--DLQ"]) == {"orders": "raw.orders", "Routed--DLQ": None}
    assert (
        "'Routed--DLQ' makes table 'raw.routed__dlq', the sink's dead-letter table"
        in names.describe_unroutable("Routed--DLQ")
    )


@pytest.mark.parametrize(
    ("template", "value"),
    [("raw.{topic}", "x" * 124), ("raw.{topic}_v1", "x" * 121), ("{value}", "ns." + "x" * 125)],
)
def test_a_table_name_is_at_most_128_bytes(template: str, value: str) -> None:
    names = _names(**{"route.table-template": template})
    too_long = value + "x"
    tables = names.tables_of([value, too_long])
    assert len(str(tables[value]).encode()) == MAX_TABLE_NAME_BYTES
    assert tables[too_long] is None
    assert "over the 128 a routed table's name may have" in names.describe_unroutable(too_long)


def test_the_value_alone_names_namespace_and_table_each_part_sanitized() -> None:
    names = _names(**{"route.table-template": "{value}"})
    assert names.tables_of(["ev.clicks", "Web-2.Page Views", "1a.b"]) == {
        "ev.clicks": "ev.clicks",
        "Web-2.Page Views": "web_2.page_views",
        "1a.b": "t_1a.b",
    }
    assert names.tables_of(["clicks", "a.b.c", "a."]) == {"clicks": None, "a.b.c": None, "a.": None}
    assert "is not a table name 'namespace.table'" in names.describe_unroutable("a.b.c")


def test_route_tables_maps_listed_values_and_leaves_the_rest_unroutable() -> None:
    names = _names(**{"route.tables": '{"click": "ev.clicks", "tap": "ev.clicks"}'})
    assert names.tables_of(["click", "tap", "other", None]) == {
        "click": "ev.clicks",
        "tap": "ev.clicks",
        "other": None,
        None: None,
    }
    assert "route.tables" in names.describe_unroutable("other")
