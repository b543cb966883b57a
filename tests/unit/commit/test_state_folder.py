"""A sink's bookkeeping records are written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesink.commit.state import StateFolder


@pytest.mark.parametrize("prefix", ["", "file://"])
def test_a_write_cut_short_leaves_the_previous_record_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    folder = StateFolder(PyArrowFileIO(), f"{prefix}{tmp_path}/staged")
    folder.write("000000000004.json", b'{"batch_id": 4}')

    def killed(*args: Any) -> None:  # the process dies after the new bytes, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        folder.write("000000000004.json", b'{"batch_id": 4, "more": true}')
    with pytest.raises(KeyboardInterrupt):
        folder.write("000000000005.json", b'{"batch_id": 5}')
    monkeypatch.undo()
    records = folder.records()
    assert [r.rsplit("/", 1)[-1] for r in records] == ["000000000004.json"]  # no half-written record listed
    assert folder.read(records[0]) == b'{"batch_id": 4}'
    folder.write("000000000005.json", b'{"batch_id": 5}')
    assert folder.read(folder.path("000000000005.json")) == b'{"batch_id": 5}'
