"""The background import of the write's heavy modules (``icesink/write/preload.py``)."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from icesink.write import preload


@pytest.fixture
def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module not yet loaded that records the thread importing it; the preload's only module."""
    name = f"preload_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text("import threading\nTHREAD = threading.current_thread().name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(preload, "MODULES", (name,))
    monkeypatch.setattr(preload, "_started", threading.Event())
    yield name
    sys.modules.pop(name, None)


def _batch(rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(range(rows), pa.int64())], names=["n"])


def test_the_first_rows_start_the_import_on_a_thread_of_its_own(probe_module: str) -> None:
    batches = [_batch(0), _batch(3), _batch(2)]
    iterator = preload.preloading(iter(batches))
    assert next(iterator).num_rows == 0
    assert not preload._started.is_set()  # no rows yet: nothing imported
    assert [b.num_rows for b in iterator] == [3, 2]  # every batch, as it was
    assert preload._started.is_set()
    module = __import__(probe_module)  # waits for the preload's import if it is still running
    assert module.THREAD == "icesink-preload"
    assert not preload.preload()  # once per process


def test_a_task_without_rows_imports_nothing(probe_module: str) -> None:
    assert [b.num_rows for b in preload.preloading(iter([_batch(0)]))] == [0]
    assert list(preload.preloading(iter([]))) == []
    assert not preload._started.is_set()
    assert probe_module not in sys.modules
