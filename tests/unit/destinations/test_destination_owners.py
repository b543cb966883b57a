"""The value a routed table holds, and the tables a template may make, on a real SQLite catalog."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from icesink.config import SinkConfig
from icesink.destinations.owners import ROUTE_VALUE_PROPERTY, TableBudget, check_owner
from tests.support.tables import catalog_from_options

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def _table(catalog: Catalog, name: str, **properties: str) -> Table:
    catalog.create_namespace_if_not_exists(name.rsplit(".", 1)[0])
    return catalog.create_table(name, schema=SCHEMA, properties=properties)


def _budget(catalog: Catalog, template: str, max_tables: int) -> TableBudget:
    options = {"route.by": "topic", "route.table-template": template, "route.max-tables": str(max_tables)}
    return TableBudget(SinkConfig.from_options(options).route, catalog, reserved=("ev.routed__dlq",))


def test_a_table_without_a_value_is_claimed_by_the_first_value_then_refuses_the_others(
    catalog_options: dict[str, str],
) -> None:
    catalog = catalog_from_options(catalog_options)
    table = _table(catalog, "ev.pay_in")  # made before tables recorded their value
    table, refused = check_owner(table, "ev.pay_in", ["pay.in", "pay-in"])
    assert catalog.load_table("ev.pay_in").metadata.properties[ROUTE_VALUE_PROPERTY] == "pay-in"
    assert list(refused) == ["pay.in"]
    assert "values 'pay.in' and 'pay-in' both make table ev.pay_in" in refused["pay.in"]
    stale = catalog.load_table("ev.pay_in")
    _, later = check_owner(stale, "ev.pay_in", ["pay-in", "PAY_IN"])
    assert list(later) == ["PAY_IN"]


def test_a_claim_racing_another_claim_takes_the_winners_value(catalog_options: dict[str, str]) -> None:
    catalog = catalog_from_options(catalog_options)
    stale = _table(catalog, "ev.a_b")
    check_owner(catalog.load_table("ev.a_b"), "ev.a_b", ["a/b"])  # another sink claims it first
    table, refused = check_owner(stale, "ev.a_b", ["a.b"])  # its commit conflicts: refreshed, refused
    assert table.metadata.properties[ROUTE_VALUE_PROPERTY] == "a/b"
    assert list(refused) == ["a.b"]


def test_the_budget_counts_the_templates_tables_in_the_catalog(catalog_options: dict[str, str]) -> None:
    catalog = catalog_from_options(catalog_options)
    for name in ("ev.a_v1", "ev.b_v1", "ev.other", "ev.routed__dlq", "xx.c_v1"):
        _table(catalog, name)
    budget = _budget(catalog, "ev.{value}_v1", 3)  # a_v1 and b_v1 count, nothing else
    assert budget.reserve("ev.a_v1")  # exists: no new table
    assert budget.reserve("ev.c_v1")
    assert not budget.reserve("ev.d_v1")
    budget.release("ev.c_v1")  # its creation failed
    assert budget.reserve("ev.d_v1")
    assert "past the 3 tables route.table-template 'ev.{value}_v1' may make" in budget.refusal("e", "ev.e_v1")


def test_the_budget_of_a_whole_name_template_counts_every_namespace(catalog_options: dict[str, str]) -> None:
    catalog = catalog_from_options(catalog_options)
    for name in ("ev.clicks", "web.views", "ev.routed__dlq"):
        _table(catalog, name)
    budget = _budget(catalog, "{value}", 3)
    assert budget.reserve("shop.orders")
    assert not budget.reserve("shop.refunds")
    assert budget.reserve("web.views")
