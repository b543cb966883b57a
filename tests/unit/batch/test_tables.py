"""One table or many, opened in one place: created, owned, checked and prepared (SQLite catalog, no Spark)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyspark.sql import types as st

from icesink import catalog as catalogs
from icesink.batch.key import BatchKey
from icesink.batch.states import SinkParts, TableStates
from icesink.batch.tables import Tables
from icesink.config import SinkConfig
from icesink.destinations.owners import ROUTE_VALUE_PROPERTY
from icesink.destinations.table_options import TableOptions
from icesink.errors import KeyedTableError
from icesink.metrics import SinkMetrics

ROWS = st.StructType([st.StructField("id", st.LongType()), st.StructField("kind", st.StringType())])
KEYED = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "kind", StringType(), required=False),
    identifier_field_ids=[1],
)


def _config(tmp_path: Path, **options: str) -> SinkConfig:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    return SinkConfig.from_options(
        {
            "catalog.name": "unit",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.warehouse": f"file://{warehouse}",
            "sink-id": "unit-sink",
            **options,
        }
    )


def _tables(config: SinkConfig) -> Tables:
    catalog = catalogs.open_catalog(config)
    metrics = SinkMetrics()
    parts = SinkParts(config, catalog, metrics, TableStates(metrics))
    config_for: Callable[[str], SinkConfig] = (
        TableOptions(config).config_for if config.route.enabled else lambda name: config
    )
    return Tables(parts, config_for, ("db.dead_letters",))


def _routed(tmp_path: Path) -> SinkConfig:
    return _config(
        tmp_path, **{"route.by": "field", "route.field": "kind", "route.table-template": "ev.{value}"}
    )


def test_the_one_table_is_created_without_an_owner_and_prepared_for_new_columns(tmp_path: Path) -> None:
    config = _config(tmp_path, table="db.t")
    tables = _tables(config)

    created = tables.prepare_table("db.t", ROWS)
    wider = st.StructType([*ROWS.fields, st.StructField("note", st.StringType())])
    evolved = tables.prepare_table("db.t", wider)

    assert [f.name for f in created.schema().fields] == ["id", "kind"]
    assert ROUTE_VALUE_PROPERTY not in created.metadata.properties
    assert [f.name for f in evolved.schema().fields] == ["id", "kind", "note"]
    table, refused = tables.open("db.t", config, ROWS)
    assert table is not None and refused == {}
    assert [f.name for f in table.schema().fields] == ["id", "kind", "note"]


def test_a_template_table_holds_its_first_value_and_refuses_another(tmp_path: Path) -> None:
    config = _routed(tmp_path)
    tables = _tables(config)

    table, refused = tables.open("ev.a", config.model_copy(update={"table": "ev.a"}), ROWS, ("a",))
    again, other = tables.open("ev.a", config.model_copy(update={"table": "ev.a"}), ROWS, ("b",))

    assert table is not None and refused == {}
    assert table.metadata.properties[ROUTE_VALUE_PROPERTY] == "a"
    assert again is not None and list(other) == ["b"]


@pytest.mark.parametrize("routed", [False, True], ids=["one table", "routed"])
def test_an_appending_sink_refuses_a_keyed_table_before_anything_is_written(
    tmp_path: Path, routed: bool
) -> None:
    config = _routed(tmp_path) if routed else _config(tmp_path, table="db.keyed")
    catalog = catalogs.open_catalog(config)
    catalog.create_namespace("db")
    keyed = catalog.create_table("db.keyed", schema=KEYED)
    tables = _tables(config)

    with pytest.raises(KeyedTableError, match="has identifier fields"):
        tables.batch_of("db.keyed", config, keyed, BatchKey.new("unit-sink", 0), None)
