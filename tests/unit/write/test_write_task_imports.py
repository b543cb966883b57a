"""What a write task imports in Spark's Python workers: the writer, not the catalog's database layer.

Every module a task imports is paid for in each worker's memory (the memory budget test
bounds a task's peak RSS); SQLAlchemy alone is over a hundred modules. And in time: a new
job's workers import them during its first batch, pyiceberg's Arrow file IO with pandas
(through ``pyarrow.dataset``) alone for over half a second, so they are loaded when a
task's first rows need them, and a task without rows (one for every empty input split)
never loads them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, TimestamptzType
from pyspark import cloudpickle

from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.allocator import POOL_ENV
from icesink.write.task import write_function
from tests.unit.writer_fixtures import task_spec

ROOT = Path(__file__).resolve().parents[3]
_DRIVER_ONLY = ("sqlalchemy", "pyiceberg.catalog.sql")
# Loaded at a task's first rows: pyiceberg's Arrow file IO and statistics, and what it imports.
_AT_FIRST_ROWS = ("pyiceberg.io.pyarrow", "pandas")


def _loaded_after(imports: str) -> set[str]:
    script = f"import sys\n{imports}\nprint(' '.join(sorted(sys.modules)))"
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_write_task_modules_leave_the_sql_catalog_to_the_driver() -> None:
    loaded = _loaded_after("import icesink.write.task, icesink.write.routed_task, icesink.upsert.lookup")
    assert "icesink.write.task" in loaded and "icesink._pyiceberg" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "sqlalchemy" or m in _DRIVER_ONLY]


def test_the_check_sees_the_sql_catalog() -> None:
    loaded = _loaded_after("import icesink.commit.metadata_cache, pyiceberg.catalog.sql")
    assert "sqlalchemy" in loaded and "pyiceberg.catalog.sql" in loaded


def test_the_write_task_modules_leave_the_arrow_file_io_to_the_first_rows() -> None:
    loaded = _loaded_after("import icesink.write.task, icesink.write.routed_task, icesink.upsert.lookup")
    assert not [m for m in loaded if m in _AT_FIRST_ROWS]


_TASK = """
import pickle, sys
import pyarrow as pa
import pytest

def run(rows):
    with open(sys.argv[1], "rb") as f:  # as a Spark worker gets the mapInArrow function
        function = pickle.load(f)
    out = pa.Table.from_batches(list(function(iter(rows))))
    loaded = [m for m in ("pyiceberg.io.pyarrow", "pandas") if m in sys.modules]
    pool = pa.default_memory_pool().backend_name
    print(" ".join(loaded) or "-", "|", out.column(0).to_pylist()[0][:20], "|", pool)

run([])
with pa.ipc.open_file(sys.argv[2]) as rows:
    run([rows.get_batch(0)])
"""


def _run_task(tmp_path: Path, env: dict[str, str] | None = None) -> list[list[str]]:
    """Run a pickled write task in a new process, once without rows and once with two;
    for each run, what it had loaded, the start of its first message, and Arrow's pool."""
    tmp_path.mkdir(exist_ok=True)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestamptzType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="d"))
    function = write_function(task_spec(tmp_path / "data", "db.t", schema, spec, "sink-b0-attempt"))
    (tmp_path / "function.pickle").write_bytes(cloudpickle.dumps(function))
    arrow_schema = iceberg_to_arrow_schema(schema)
    rows = pa.RecordBatch.from_pydict(
        {"id": [1, 2], "ts": pa.array([0, 86_400_000_000], arrow_schema.field("ts").type)},
        schema=arrow_schema,
    )
    with pa.ipc.new_file(tmp_path / "rows.arrow", arrow_schema) as out:
        out.write_batch(rows)
    command = [sys.executable, "-c", _TASK, str(tmp_path / "function.pickle"), str(tmp_path / "rows.arrow")]
    environment = {k: v for k, v in os.environ.items() if k != POOL_ENV} | (env or {})
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, env=environment)
    return [line.split(" | ") for line in done.stdout.splitlines()]


def test_a_write_task_without_rows_never_loads_the_arrow_file_io(tmp_path: Path) -> None:
    (empty, *_), (with_rows, *_) = _run_task(tmp_path)
    assert empty == "-"  # no rows: nothing of the file IO loaded
    assert set(with_rows.split()) == set(_AT_FIRST_ROWS), with_rows
    assert len(list((tmp_path / "data").rglob("*.parquet"))) == 2  # two days, one file each


def test_a_write_task_allocates_from_jemalloc_unless_the_environment_names_a_pool(tmp_path: Path) -> None:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow was built without jemalloc")
    assert [pool for *_, pool in _run_task(tmp_path / "default")] == ["jemalloc", "jemalloc"]
    chosen = _run_task(tmp_path / "system", {POOL_ENV: "system"})
    assert [pool for *_, pool in chosen] == ["system", "system"]
