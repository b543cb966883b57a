"""catalog.* keys are checked against what the catalog type and its FileIOs read, with "did you mean"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from icesink.config import SinkConfig
from icesink.errors import ConfigError
from icesink.jobs.local_servers.seaweedfs import SeaweedFS

ROOT = Path(__file__).resolve().parents[2]
SQL = {
    "table": "db.t",
    "catalog.type": "sql",
    "catalog.uri": "sqlite:///x.db",
    "catalog.warehouse": "file:///w",
}


def test_a_misspelled_catalog_key_is_refused_with_the_closest_names() -> None:
    options = {**SQL, "catalog.warehose": "file:///w2"}
    with pytest.raises(ConfigError) as raised:
        SinkConfig.from_options(options)
    text = str(raised.value)
    assert "ICESINK-CONFIG" in text and "'catalog.warehose'" in text
    assert "did you mean 'catalog.warehouse'" in text
    assert "state-location" not in text


def test_keys_are_those_of_the_chosen_catalog_type() -> None:
    rest = {"table": "db.t", "catalog.uri": "http://127.0.0.1:8181", "catalog.credential": "a:b"}
    SinkConfig.from_options({**rest, "catalog.header.x-tenant": "t1", "catalog.rest.sigv4-enabled": "true"})
    # The SQL catalog reads pool_pre_ping.
    with pytest.raises(ConfigError, match=r"a sql catalog .* do not read 'pool-pre-ping'") as raised:
        SinkConfig.from_options({**SQL, "catalog.pool-pre-ping": "true"})
    assert "did you mean 'catalog.pool_pre_ping'" in str(raised.value)
    with pytest.raises(ConfigError, match=r"'catalog\.header\.x-tenant'"):
        SinkConfig.from_options({**SQL, "catalog.header.x-tenant": "t1"})  # headers are a REST catalog's


def test_a_catalog_of_its_own_takes_any_key() -> None:
    options = {"table": "db.t", "catalog.py-catalog-impl": "my.Catalog", "catalog.anything": "x"}
    assert SinkConfig.from_options(options).catalog.properties["anything"] == "x"


def test_every_catalog_key_the_tests_and_jobs_use_is_accepted(tmp_path: Path) -> None:
    used: set[str] = set()
    for folder in ("tests", "icesink/jobs", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            used.update(re.findall(r'"catalog\.([a-z][a-z0-9._-]*)"', path.read_text(encoding="utf-8")))
    used -= {
        "name",
        "db",
        "warehose",
        "pool-pre-ping",
        "anything",
        "header.x-tenant",
    }  # above: refused on purpose
    assert {"uri", "warehouse", "s3.endpoint", "credential", "py-io-impl"} <= used
    for kind, uri in (("sql", "sqlite:///x.db"), ("rest", "http://127.0.0.1:1")):
        keys = used - {"type", "uri"}
        SinkConfig.from_options({"table": "db.t", "catalog.type": kind, "catalog.uri": uri, **_values(keys)})
    server = SeaweedFS(tmp_path, binary="weed", access_key="key", secret_key="secret")  # not started
    server.ports = {"s3": 1, "iceberg": 2}
    for properties in (
        server.rest_catalog_properties(),
        server.rest_catalog_properties(sigv4=True),
        server.sql_catalog_properties("sqlite:///x.db", "prefix"),
    ):
        SinkConfig.from_options({"table": "db.t", **{f"catalog.{k}": v for k, v in properties.items()}})


def _values(keys: set[str]) -> dict[str, str]:
    return {f"catalog.{key}": "1" for key in keys}


def test_an_unknown_sink_option_suggests_the_closest_names_only() -> None:
    with pytest.raises(ConfigError) as raised:
        SinkConfig.from_options({"table": "db.t", "commit.interval": "60"})
    text = str(raised.value)
    assert "did you mean 'commit.interval-s'" in text
    assert "metrics.pushgateway-job" not in text  # not every option
