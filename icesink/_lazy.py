"""Names of a public module imported on first use (PEP 562), for :mod:`icesink` and :mod:`icesink.sources`.

A Spark worker imports ``icesink`` on its way to the write task's modules; a public face
that imported what it names would load the driver's catalog, commit and metrics code there
too. So a public module lists, for each name, the module that defines it, and imports that
module when the name is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(module: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module``: each name of ``exports`` from the module it maps to."""

    def getattr_(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(importlib.import_module(source), name)

    return getattr_
