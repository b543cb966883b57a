"""A write task's Arrow memory stays within its budget: its writers' rows and its input in flight together.

The task runs in a process of its own, reading its rows from a memory-mapped Arrow file
(reading allocates nothing), so that Arrow's allocation peak in that process is the task's.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icesink.type_mapping import iceberg_to_arrow_schema
from tests.unit.writer_fixtures import task_spec

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024
VALUES = 64
ROWS = 600_000  # about 28 MiB of Arrow data
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "part", LongType(), required=False),
    NestedField(3, "x", DoubleType(), required=False),
    NestedField(4, "s", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))

_TASK = """
import json, pickle, sys
import pyarrow as pa
from icesink.write.task import DataTaskWriter

spec = pickle.loads(open(sys.argv[1], "rb").read())
stream = pa.ipc.open_file(pa.memory_map(sys.argv[2]))
messages = DataTaskWriter(spec, 0, 0).write_all(stream.get_batch(i) for i in range(stream.num_record_batches))
rows = sum(m.record_count for m in messages)
print(json.dumps({"peak": pa.default_memory_pool().max_memory(), "rows": rows}))
"""


def _write_rows(path: Path) -> None:
    schema = iceberg_to_arrow_schema(SCHEMA)
    rng = np.random.default_rng(0)
    with pa.ipc.new_file(str(path), schema) as rows:
        for start in range(0, ROWS, 10_000):  # Spark's batches of 10,000 rows
            ids = np.arange(start, start + 10_000)
            columns = [ids, ids % VALUES, rng.random(len(ids)), [f"v{i:020d}" for i in ids]]
            rows.write_batch(pa.record_batch([pa.array(c) for c in columns], schema=schema))


def test_a_task_allocates_no_more_than_its_budget_and_what_encoding_two_files_takes(tmp_path: Path) -> None:
    # 28 MiB of rows over 64 values through a 16 MiB budget: the writers must close files
    # early, and the chunks in flight (the one being split, its sorted copy, the copies
    # the writers make when they merge their pieces) count against the same budget.
    budget = 16 * MiB
    _write_rows(tmp_path / "rows.arrow")
    spec = task_spec(tmp_path / "data", "db.t", SCHEMA, SPEC, "p", memory_budget_bytes=budget)
    (tmp_path / "spec.pickle").write_bytes(pickle.dumps(spec))

    command = [sys.executable, "-c", _TASK, str(tmp_path / "spec.pickle"), str(tmp_path / "rows.arrow")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    task = json.loads(done.stdout.strip().splitlines()[-1])

    assert task["rows"] == ROWS
    # Beyond the budget: the Parquet writers of the two files encoded at once (their
    # pages and compression buffers), about 2 MiB here. Before the input in flight was
    # counted, the peak was 8.4 MiB over the budget.
    assert task["peak"] <= budget + 4 * MiB, f"Arrow peak {task['peak'] / MiB:.1f} MiB"
