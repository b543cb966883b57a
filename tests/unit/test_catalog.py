"""Creating the namespace is safe when another writer creates it at the same moment."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icesink import catalog as catalogs
from icesink.catalog import ensure_namespace


def _catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("test", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")


def test_losing_the_race_to_create_the_namespace_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = _catalog(tmp_path)
    create = catalog.create_namespace_if_not_exists

    def racing(namespace: str) -> None:  # the other writer wins between the check and the insert
        create(namespace)
        raise RuntimeError("UNIQUE constraint failed: iceberg_namespace_properties")

    monkeypatch.setattr(catalog, "create_namespace_if_not_exists", racing)
    ensure_namespace(catalog, "db")
    assert catalog.namespace_exists("db")


def test_a_failure_that_leaves_no_namespace_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = _catalog(tmp_path)

    def failing(namespace: str) -> None:
        raise PermissionError(f"cannot create {namespace}")

    monkeypatch.setattr(catalog, "create_namespace_if_not_exists", failing)
    with pytest.raises(PermissionError, match="cannot create db"):
        ensure_namespace(catalog, "db")


SECRETS = ("s3cr3t@pw", "k3y-S3CRET-value", "t0ken-S3CRET")
SECRET_OPTIONS = {
    "table": "db.t",
    "catalog.type": "sql",
    # the password is percent-encoded in the URI: its decoded form must not leak either
    "catalog.uri": "postgresql+psycopg2://ingest:s3cr3t%40pw@127.0.0.1:1/warehouse",
    "catalog.warehouse": "file:///tmp/warehouse",
    "catalog.s3.secret-access-key": "k3y-S3CRET-value",
    "catalog.token": "t0ken-S3CRET",
}


def _texts_of(error: BaseException) -> list[str]:
    """Everything an operator could see of ``error``: its chain, reprs and formatted traceback."""
    texts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    current: BaseException | None = error
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        texts += [str(current), repr(current), repr(current.args), repr(vars(current))]
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return texts


def _assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        for secret in (*SECRETS, "s3cr3t%40pw"):
            assert secret not in text, text


@pytest.mark.parametrize("driver_echoes_uri", [False, True])
def test_no_secret_in_errors_logs_reprs_or_metrics_when_the_catalog_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, driver_echoes_uri: bool
) -> None:
    from prometheus_client import generate_latest

    from icesink import IcebergSink
    from icesink.config import SinkConfig
    from icesink.errors import CatalogError
    from icesink.metrics import SinkMetrics

    if driver_echoes_uri:  # some database drivers quote their connection string in their errors

        def load_catalog(name: str, **properties: str) -> None:
            try:
                raise OSError(f"password authentication failed for {properties['uri']}")
            except OSError as e:
                raise RuntimeError(f"cannot connect: {properties}") from e

        monkeypatch.setattr(catalogs, "load_catalog", load_catalog)
    metrics = SinkMetrics()
    caplog.set_level(logging.DEBUG)
    with pytest.raises(CatalogError) as info:
        IcebergSink.from_options(SECRET_OPTIONS, metrics=metrics)
    error = info.value
    text = str(error)
    assert "cannot load catalog 'default'" in text and "127.0.0.1:1" in text and "ingest" in text, text
    logging.getLogger("test").exception("the sink could not start", exc_info=error)
    config = SinkConfig.from_options(SECRET_OPTIONS)
    texts = _texts_of(error)
    texts += [
        r.getMessage() + "".join(traceback.format_exception(*r.exc_info))
        for r in caplog.records
        if r.exc_info
    ]
    texts += [r.getMessage() for r in caplog.records]
    texts += [
        repr(config),
        str(config),
        repr(config.catalog),
        config.model_dump_json(),
        str(config.model_dump()),
    ]
    texts.append(generate_latest(metrics.registry).decode())
    assert len(caplog.records) >= 1
    _assert_no_secret(texts)
    assert config.catalog.plain_properties()["uri"] == SECRET_OPTIONS["catalog.uri"]  # pyiceberg gets it all
    if driver_echoes_uri:
        assert "password authentication failed for" in "".join(texts)  # the cause is kept, redacted


def test_a_new_sql_catalog_whose_tables_another_process_creates_meanwhile_opens(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import IcebergTables, SqlCatalogBaseTable
    from sqlalchemy import create_engine, event
    from sqlalchemy.sql.schema import Table as SqlTable

    from icesink.config import SinkConfig

    uri = f"sqlite:///{tmp_path / 'new.db'}"
    other = create_engine(uri)

    def the_other_process_first(target: SqlTable, connection: object, **kwargs: object) -> None:
        # Between this process's check that the table is missing and its CREATE TABLE.
        SqlCatalogBaseTable.metadata.create_all(other)

    table = IcebergTables.__table__
    event.listen(table, "before_create", the_other_process_first, once=True)
    try:
        config = SinkConfig.from_options(
            {
                "table": "db.t",
                "catalog.type": "sql",
                "catalog.uri": uri,
                "catalog.warehouse": f"file://{tmp_path}",
            }
        )
        catalog = catalogs.open_catalog(config)
    finally:
        if event.contains(table, "before_create", the_other_process_first):
            event.remove(table, "before_create", the_other_process_first)
    catalog.create_namespace("db")
    assert catalog.list_namespaces() == [("db",)]
