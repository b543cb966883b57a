"""What a write task imports in Spark's Python workers: the writer, not the catalog's database layer.

Every module a task imports is paid for in each worker's memory (the memory budget test
bounds a task's peak RSS); SQLAlchemy alone is over a hundred modules. And in time: a new
job's workers import them during its first batch, pyiceberg's Arrow file IO with pandas
(through ``pyarrow.dataset``) alone for over half a second, so they are loaded when a
task's first rows need them, and a task without rows (one for every empty input split)
never loads them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, TimestamptzType
from pyspark import cloudpickle

from sink.type_mapping import iceberg_to_arrow_schema
from sink.write.task import write_function
from tests.unit.writer_fixtures import task_spec

ROOT = Path(__file__).resolve().parents[2]
_DRIVER_ONLY = ("sqlalchemy", "pyiceberg.catalog.sql")
# Loaded at a task's first rows: pyiceberg's Arrow file IO and statistics, and what it imports.
_AT_FIRST_ROWS = ("pyiceberg.io.pyarrow", "pandas")


def _loaded_after(imports: str) -> set[str]:
    script = f"import sys\n{imports}\nprint(' '.join(sorted(sys.modules)))"
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_write_task_modules_leave_the_sql_catalog_to_the_driver() -> None:
    loaded = _loaded_after("import sink.write.task, sink.write.routed_task, sink.upsert.lookup")
    assert "sink.write.task" in loaded and "sink._pyiceberg" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "sqlalchemy" or m in _DRIVER_ONLY]


def test_the_check_sees_the_sql_catalog() -> None:
    loaded = _loaded_after("import sink.commit.metadata_cache, pyiceberg.catalog.sql")
    assert "sqlalchemy" in loaded and "pyiceberg.catalog.sql" in loaded


def test_the_write_task_modules_leave_the_arrow_file_io_to_the_first_rows() -> None:
    loaded = _loaded_after("import sink.write.task, sink.write.routed_task, sink.upsert.lookup")
    assert not [m for m in loaded if m in _AT_FIRST_ROWS]


_TASK = """
import pickle, sys
import pyarrow as pa

def run(rows):
    with open(sys.argv[1], "rb") as f:  # as a Spark worker gets the mapInArrow function
        function = pickle.load(f)
    out = pa.Table.from_batches(list(function(iter(rows))))
    loaded = [m for m in ("pyiceberg.io.pyarrow", "pandas") if m in sys.modules]
    print(" ".join(loaded) or "-", "|", out.column(0).to_pylist()[0])

run([])
with pa.ipc.open_file(sys.argv[2]) as rows:
    run([rows.get_batch(0)])
"""


def test_a_write_task_without_rows_never_loads_the_arrow_file_io(tmp_path: Path) -> None:
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
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    empty, with_rows = (line.split(" | ")[0] for line in done.stdout.splitlines())
    assert empty == "-", done.stdout  # no rows: nothing of the file IO loaded
    assert set(with_rows.split()) == set(_AT_FIRST_ROWS), done.stdout
    assert len(list((tmp_path / "data").rglob("*.parquet"))) == 2  # two days, one file each
