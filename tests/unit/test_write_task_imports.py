"""What a write task imports in Spark's Python workers: the writer, not the catalog's database layer.

Every module a task imports is paid for in each worker's memory (the memory budget test
bounds a task's peak RSS); SQLAlchemy alone is over a hundred modules.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_DRIVER_ONLY = ("sqlalchemy", "pyiceberg.catalog.sql")


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
