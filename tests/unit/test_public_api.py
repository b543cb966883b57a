"""``icesink`` is the public API: each of its names is the library's object, imported on use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import icesink


def test_every_public_name_is_the_library_object() -> None:
    for name in icesink.__all__:
        module = importlib.import_module(icesink._EXPORTS[name])
        assert getattr(icesink, name) is getattr(module, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        icesink.no_such_name  # noqa: B018


def test_importing_icesink_loads_no_driver_module() -> None:
    script = (
        "import sys, icesink\n"
        "print(sorted(m for m in sys.modules if m.startswith(('sink', 'pyiceberg', 'pyspark'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
