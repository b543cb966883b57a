"""Creating the namespace is safe when another writer creates it at the same moment."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from sink.catalog import ensure_namespace


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
