"""The route.* options: validated at construction, with errors naming the option and the fix."""

from __future__ import annotations

import pytest

from icesink.batch.dead_letters import dead_letter_table_name
from icesink.config import DistributionMode, SinkConfig
from icesink.config_route import DEFAULT_MAX_TABLES, RouteBy
from icesink.destinations.table_options import TableOptions
from icesink.errors import ConfigError

ROUTED = {"route.by": "field", "route.field": "type", "route.table-template": "ev.{value}"}


def test_routed_options_parse_and_make_table_optional() -> None:
    config = SinkConfig.from_options(
        {**ROUTED, "route.table-options": '{"ev.a*": {"partition-by": "id"}, "ev.*": {}}'}
    )
    assert config.route.by is RouteBy.FIELD and config.table == ""
    assert [p for p, _ in config.route.table_options] == ["ev.a*", "ev.*"]  # order kept
    assert dead_letter_table_name(config) == "ev.routed__dlq"


def test_table_is_still_required_without_routing() -> None:
    with pytest.raises(ConfigError, match="option 'table' is not set"):
        SinkConfig.from_options({})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"route.by": "field", "route.table-template": "ev.{value}"}, "'route.field' is not set"),
        ({"route.by": "topic"}, "neither 'route.table-template' nor 'route.tables'"),
        ({"route.by": "topic", "route.table-template": "ev.all"}, "without '{value}' or '{topic}'"),
        ({"route.by": "topic", "route.table-template": "{topic}_x"}, "not 'namespace.name'"),
        ({"route.by": "topic", "route.table-template": f"ev.{'t' * 125}{{topic}}"}, "leaves no room"),
        ({"route.by": "topic", "route.tables": f'{{"a": "ev.{"t" * 126}"}}'}, "longer than 128 bytes"),
        ({"route.by": "topic", "route.table-template": "ev.{topic}", "route.max-tables": "0"}, "max-tables"),
        ({"route.by": "sideways"}, "'route.by'"),
        ({"route.by": "topic", "route.tables": "[1]"}, "must be a JSON object"),
        ({"route.by": "topic", "route.tables": '{"a": "nope"}'}, "not qualified table names"),
        ({"table": "db.t", "route.field": "type"}, "'route.by' is 'none'"),
        ({"table": "db.t", "route.max-tables": "5"}, r"\['route.max-tables'\] are set"),
    ],
)
def test_bad_route_options_fail_at_construction(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("{", r"\{")):
        SinkConfig.from_options(options)


@pytest.mark.parametrize(
    ("table_options", "message"),
    [
        ('{"ev .x": {}}', "pattern 'ev .x'"),
        ('{"ev.[ab": {}}', "unbalanced"),
        ('{"ev.*": {"write.colour": "red"}}', r"\['write.colour'\]"),
        ('{"ev.*": {"write.target-file-size-bytes": "big"}}', "write.target-file-size-bytes 'big'"),
        ('{"ev.*": {"partition-by": "day(ts), day(ts)"}}', "pattern 'ev.\\*': partition-by"),
        ('{"ev.*": {"write.mode": "merge"}}', "write.mode 'merge'"),
    ],
)
def test_bad_table_options_name_the_pattern_and_the_key(table_options: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SinkConfig.from_options({**ROUTED, "route.table-options": table_options})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"distribution-mode": "range"}, r"invalid value 'range' for option 'distribution-mode'.*bucket"),
        (
            {"route.table-options": '{"ev.o*": {"write.mode": "upsert"}}'},
            r"pattern 'ev.o\*' upserts \(write.mode=upsert\) without upsert.key-columns",
        ),
        ({"route.table-options": '{"ev.*": {"upsert.key-columns": "id"}}'}, "its write.mode is 'append'"),
        (
            {"route.table-options": '{"ev.*": {"write.mode": "upsert", "upsert.key-columns": "_op"}}'},
            r"names \['_op'\], which is the op or order column",
        ),
        (
            {"route.table-options": '{"ev.*": {"write.mode": "upsert", "upsert.key-columns": "id,,x"}}'},
            r"upsert.key-columns 'id,,x' is not a list of column names",
        ),
    ],
)
def test_what_routing_cannot_do_is_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SinkConfig.from_options({**ROUTED, **options})


def test_a_routed_sink_takes_the_commit_cadence() -> None:
    config = SinkConfig.from_options({**ROUTED, "commit.max-batches": "3", "commit.interval-s": "60"})
    assert (config.commit.max_batches, config.commit.interval_s) == (3, 60)


def test_routed_tables_take_the_sinks_distribution_mode_and_hash_without_a_bucket_term() -> None:
    table_options = '{"ev.b*": {"partition-by": "bucket(4, id)"}, "ev.d*": {"partition-by": "day(ts)"}}'
    unset = TableOptions(SinkConfig.from_options({**ROUTED, "route.table-options": table_options}))
    assert unset.config_for("ev.buys").write.distribution_mode is None  # none for routed writes
    options = {"distribution-mode": "bucket", "route.table-options": table_options}
    tables = TableOptions(SinkConfig.from_options({**ROUTED, **options}))
    assert tables.config_for("ev.buys").write.distribution_mode is DistributionMode.BUCKET
    # Without a bucket term a table would be refused when created under bucket: it is hashed instead.
    assert tables.config_for("ev.days").write.distribution_mode is DistributionMode.HASH
    assert tables.config_for("ev.other").write.distribution_mode is DistributionMode.HASH
    hashed = TableOptions(SinkConfig.from_options({**ROUTED, "distribution-mode": "hash"}))
    assert hashed.config_for("ev.x").write.distribution_mode is DistributionMode.HASH


def test_upserted_routed_tables_take_the_sink_keys_or_their_own() -> None:
    table_options = '{"ev.o*": {"upsert.key-columns": "order_id"}, "ev.log": {"write.mode": "append"}}'
    options = {"write.mode": "upsert", "upsert.key-columns": "id", "route.table-options": table_options}
    tables = TableOptions(SinkConfig.from_options({**ROUTED, **options}))
    assert tables.config_for("ev.orders").upsert.key_columns == ("order_id",)
    assert tables.config_for("ev.users").upsert.key_columns == ("id",)
    assert tables.config_for("ev.users").upsert.enabled and not tables.config_for("ev.log").upsert.enabled


def test_a_pattern_s_write_mode_is_read_as_the_check_reads_it_whatever_its_case() -> None:
    table_options = '{"ev.*": {"write.mode": "Upsert", "upsert.key-columns": " tenant , id "}}'
    tables = TableOptions(SinkConfig.from_options({**ROUTED, "route.table-options": table_options}))
    assert tables.config_for("ev.users").upsert.enabled
    assert tables.config_for("ev.users").upsert.key_columns == ("tenant", "id")


def test_template_namespace_with_the_value_needs_a_dead_letter_table() -> None:
    config = SinkConfig.from_options({"route.by": "topic", "route.table-template": "{topic}.events"})
    with pytest.raises(ConfigError, match=r"dead-letter\.table"):
        dead_letter_table_name(config)


def test_table_options_first_matching_pattern_wins() -> None:
    config = SinkConfig.from_options(
        {
            **ROUTED,
            "write.target-file-size-bytes": "1048576",
            "route.table-options": '{"ev.orders*": {"partition-by": "id", '
            '"write.target-file-size-bytes": "4096", "table-property.owner": "shop"}, '
            '"ev.*": {"write.parquet.compression-codec": "SNAPPY"}}',
        }
    )
    options = TableOptions(config)
    orders = options.config_for("ev.orders_eu")
    assert orders.table == "ev.orders_eu" and orders.partition_by == "id"
    assert orders.write.target_file_size_bytes == 4096
    assert orders.table_properties == {"owner": "shop"}
    assert not orders.route.enabled
    other = options.config_for("ev.clicks")
    assert other.partition_by is None and other.write.compression_codec == "snappy"
    assert other.write.target_file_size_bytes == 1048576


def test_a_template_of_the_value_alone_and_max_tables_are_accepted() -> None:
    config = SinkConfig.from_options(
        {**ROUTED, "route.table-template": "{value}", "dead-letter.table": "ev.dlq", "ROUTE.MAX-TABLES": "7"}
    )
    assert config.route.table_template == "{value}" and config.route.max_tables == 7
    assert SinkConfig.from_options(ROUTED).route.max_tables == DEFAULT_MAX_TABLES
    with pytest.raises(ConfigError, match=r"needs 'dead-letter\.table'"):
        dead_letter_table_name(SinkConfig.from_options({**ROUTED, "route.table-template": "{value}"}))
