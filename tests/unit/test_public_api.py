"""``icesink`` is the public API: each of its names is the library's object, imported on use."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import icesink
import icesink.sources


def test_every_public_name_is_the_library_object() -> None:
    for face in (icesink, icesink.sources):
        assert sorted(face.__all__) == sorted(face._EXPORTS), face.__name__
        for name in face.__all__:
            module = importlib.import_module(face._EXPORTS[name])
            assert getattr(face, name) is getattr(module, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        icesink.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match=r"'icesink\.sources' has no attribute 'no_such_name'"):
        icesink.sources.no_such_name  # noqa: B018


def test_importing_icesink_and_its_sources_face_loads_no_driver_module() -> None:
    script = (
        "import sys, icesink, icesink.sources\n"
        "faces = ('icesink.sources', 'icesink._lazy')\n"
        "loaded = [m for m in sys.modules if m.startswith(('icesink.', 'pyiceberg', 'pyspark'))]\n"
        "print(sorted(m for m in loaded if m not in faces))"
    )
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root)}  # this checkout's icesink
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=environment, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
