"""Destination values -> table names: sanitizing, templates, collisions and route.tables."""

from __future__ import annotations

import pytest

from sink.config import SinkConfig
from sink.destinations.naming import DestinationNames, from_template, sanitize
from sink.errors import ConfigError


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


def test_template_puts_the_part_in_place_of_value_or_topic() -> None:
    assert from_template("raw.{topic}", "Web-Clicks") == "raw.web_clicks"
    assert from_template("events.{value}_v1", "9lives") == "events.t_9lives_v1"


def test_two_values_of_one_batch_making_one_name_is_an_error_naming_both() -> None:
    names = _names(**{"route.table-template": "raw.{topic}"})
    with pytest.raises(ConfigError) as error:
        names.tables_of(["orders.eu", "orders-eu"])
    message = str(error.value)
    assert "'orders.eu'" in message and "'orders-eu'" in message and "raw.orders_eu" in message
    assert "route.tables" in message


def test_a_collision_with_a_value_of_an_earlier_batch_is_an_error() -> None:
    names = _names(**{"route.table-template": "raw.{topic}"})
    assert names.tables_of(["Orders"]) == {"Orders": "raw.orders"}
    assert names.tables_of(["Orders", None]) == {"Orders": "raw.orders", None: None}
    with pytest.raises(ConfigError, match=r"'Orders' and 'orders' both make table 'raw\.orders'"):
        names.tables_of(["orders"])


def test_no_value_may_name_the_dead_letter_table() -> None:
    config = SinkConfig.from_options({"route.by": "topic", "route.table-template": "raw.{topic}"})
    names = DestinationNames(config.route, reserved=("raw.routed__dlq",))
    with pytest.raises(ConfigError, match="dead-letter table"):
        names.tables_of(["orders", "Routed--DLQ"])


def test_route_tables_maps_listed_values_and_leaves_the_rest_unroutable() -> None:
    names = _names(**{"route.tables": '{"click": "ev.clicks", "tap": "ev.clicks"}'})
    assert names.tables_of(["click", "tap", "other", None]) == {
        "click": "ev.clicks",
        "tap": "ev.clicks",
        "other": None,
        None: None,
    }
    assert "route.tables" in names.describe_unroutable("other")
