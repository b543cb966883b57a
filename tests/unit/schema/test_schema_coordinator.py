"""The schema coordinator's retries: each attempt re-checks the table, none sleeps after the last."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.update import AddSchemaUpdate
from pyiceberg.types import StringType
from pyspark.sql import types as st

from icesink.config import CommitConfig
from icesink.errors import CommitConflictError
from icesink.schema.coordinator import SchemaCheck, SchemaCoordinator

WIDER = st.StructType([st.StructField("id", st.LongType()), st.StructField("extra", st.StringType())])


def sql_table(tmp_path: Path) -> tuple[SqlCatalog, Table]:
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    return catalog, catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))


def refuse_schema_commits(catalog: SqlCatalog, times: int, before_refusing: Any = None) -> list[int]:
    """Make the catalog refuse the next ``times`` schema commits as lost races."""
    refused: list[int] = []
    commit_table = catalog.commit_table

    def commit(table: Table, requirements: Any, updates: Any) -> Any:
        if any(isinstance(u, AddSchemaUpdate) for u in updates) and len(refused) < times:
            refused.append(1)
            if before_refusing is not None:
                before_refusing()
            raise CommitFailedException("schema changed concurrently")
        return commit_table(table, requirements, updates)

    catalog.commit_table = commit  # type: ignore[method-assign]
    return refused


def test_no_sleep_after_the_last_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, table = sql_table(tmp_path)
    refuse_schema_commits(catalog, times=10)
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    retry = CommitConfig(retries=2, min_wait_ms=1, max_wait_ms=4)
    with pytest.raises(CommitConflictError, match="after 3 attempts"):
        SchemaCoordinator("db.t").evolve(table, WIDER, retry=retry)
    assert len(sleeps) == 2  # between the three attempts, never after the last


def test_a_retry_finds_the_change_another_writer_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = sql_table(tmp_path)
    other = catalog.load_table("db.t")

    def other_writer_adds_the_column() -> None:
        with other.update_schema() as update:
            update.add_column("extra", StringType())

    refused = refuse_schema_commits(catalog, times=1, before_refusing=other_writer_adds_the_column)
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    outcome = SchemaCoordinator("db.t").evolve(table, WIDER, retry=CommitConfig(retries=3, min_wait_ms=1))
    assert refused == [1]
    assert outcome.check is SchemaCheck.ALREADY_APPLIED
    assert outcome.conflicts == 1
    assert [f.name for f in catalog.load_table("db.t").schema().fields] == ["id", "extra"]
