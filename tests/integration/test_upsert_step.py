"""What the sink refuses around upserts before writing: appends to a keyed table, batches without keys."""

from __future__ import annotations

from typing import Any

import pytest

from icesink import ConfigError, IcebergSink
from icesink.errors import UpsertError
from tests.integration.test_upsert_sink import upsert_options
from tests.support.tables import catalog_from_options
from tests.support.upserts import UpsertDriver, changes, create_table, rows_of


def _rows(keys: range, name: str, **more: Any) -> list[dict[str, Any]]:
    return [{"id": k, "name": f"{name}{k}", "v": k, **more} for k in keys]


def _appender_options(catalog_options: dict[str, str], routed: bool, **more: str) -> dict[str, str]:
    if routed:
        routing = {"route.by": "field", "route.field": "kind", "route.table-template": "db.{value}"}
        return {**catalog_options, "sink-id": "appender", **routing, **more}
    return {**catalog_options, "table": "db.items", "sink-id": "appender", **more}


@pytest.mark.parametrize("routed", [False, True], ids=["one-table", "routed"])
def test_an_append_sink_is_refused_on_an_upserted_table_unless_told_to_append(
    spark: Any, catalog_options: dict[str, str], routed: bool
) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace_if_not_exists("db")
    table = create_table(catalog)  # keyed by id
    UpsertDriver(table).apply(changes(*[(k, f"u{k}", k, "c", 0) for k in range(200)]))
    table.refresh()
    snapshots = len(table.snapshots())
    appended = spark.createDataFrame(_rows(range(200), "a", **({"kind": "items"} if routed else {})))

    appender = IcebergSink.from_options(_appender_options(catalog_options, routed))
    with pytest.raises(ConfigError) as raised:
        appender(appended, 0)
    message = str(raised.value)
    assert message.startswith("ICESINK-KEYED-TABLE: table db.items has identifier fields ['id']")
    assert "write.mode=upsert and upsert.key-columns=id" in message
    assert "write.allow-append-to-keyed-table=true" in message
    table.refresh()
    assert len(table.snapshots()) == snapshots  # nothing written, no column added
    assert rows_of(table.scan().to_arrow()) == {k: (f"u{k}", k) for k in range(200)}

    allowed = _appender_options(catalog_options, routed, **{"write.allow-append-to-keyed-table": "true"})
    IcebergSink.from_options(allowed)(appended, 0)  # told to: the rows are appended as they are
    table.refresh()
    assert table.scan().to_arrow().num_rows == 400


def test_the_keyed_table_option_takes_true_or_false(catalog_options: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"'write.allow-append-to-keyed-table'.*use true or false"):
        IcebergSink.from_options(
            {**catalog_options, "table": "db.items", "write.allow-append-to-keyed-table": "sometimes"}
        )


def test_an_upsert_batch_without_its_key_column_names_the_column_and_the_option(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace_if_not_exists("db")
    UpsertDriver(create_table(catalog), sink_id="loader").apply(
        changes(*[(k, f"u{k}", k, "c", 0) for k in range(10)])
    )
    upserts = IcebergSink.from_options(upsert_options(catalog_options))
    keyless = spark.createDataFrame([{"name": "x", "v": 1, "_op": "u", "seq": 1}])

    with pytest.raises(UpsertError) as raised:
        upserts(keyless, 0)
    message = str(raised.value)
    assert message.startswith(
        "ICESINK-UPSERT: the batch has no key column ['id'] of option 'upsert.key-columns'"
    )
    assert "its columns are ['_op', 'name', 'seq', 'v']" in message and "hint: " in message
    table = catalog.load_table("db.items")
    assert rows_of(table.scan().to_arrow()) == {k: (f"u{k}", k) for k in range(10)}
    # the stream goes on: the same sink takes the next batch that has its keys
    upserts(spark.createDataFrame(_rows(range(5), "v", _op="u", seq=1)), 1)
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == {k: (f"v{k}" if k < 5 else f"u{k}", k) for k in range(10)}
