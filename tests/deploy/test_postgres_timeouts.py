"""A PostgreSQL catalog's connections carry the bounded waits of timeout.*; a statement past them is a
catalog error naming the server."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from icesink.bounded_waits import server_errors
from icesink.catalog import close_catalog, open_catalog
from icesink.config import SinkConfig
from icesink.errors import CatalogError
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.deploy


def test_a_postgresql_catalog_statement_past_the_bound_is_a_catalog_error(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    options = {
        "table": "db.t",
        "catalog.name": "bounded",
        "catalog.uri": postgres.sqlalchemy_uri(),
        "catalog.warehouse": f"file://{tmp_path}",
        "timeout.connect-s": "3",
        "timeout.catalog-request-s": "1",
    }
    config = SinkConfig.from_options(options)
    catalog = open_catalog(config)
    try:
        engine = catalog.engine  # type: ignore[attr-defined]
        assert engine.url.query["connect_timeout"] == "3"
        with engine.connect() as connection:
            assert connection.execute(text("SHOW statement_timeout")).scalar() == "1s"
        cancelled = "canceling statement due to statement timeout"
        with (
            pytest.raises(CatalogError, match=cancelled) as raised,
            server_errors(config, table="db.t"),
            engine.connect() as connection,
        ):
            connection.execute(text("SELECT pg_sleep(30)"))
        assert f"catalog 'bounded' at {config.catalog.redact(postgres.sqlalchemy_uri())}" in str(raised.value)
    finally:
        close_catalog(catalog)
