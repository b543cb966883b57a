"""The icesink library: one package or module per step of a micro-batch.

Users import the public API from :mod:`icesink` (``from icesink import IcebergSink``);
the modules here are its implementation (``docs/architecture.md`` maps them). The names
below stay importable from ``sink`` for code written against it.

They are imported on first use: Spark's Python workers import only the executor modules
(``sink.write``), not the driver's catalog, commit and metrics code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sink.config import CommitConfig, DistributionMode, SinkConfig, WriteConfig
    from sink.config_catalog import CatalogConfig
    from sink.errors import SinkError
    from sink.sink import IcebergSink

_EXPORTS = {
    "CatalogConfig": "sink.config_catalog",
    "CommitConfig": "sink.config",
    "DistributionMode": "sink.config",
    "SinkConfig": "sink.config",
    "WriteConfig": "sink.config",
    "SinkError": "sink.errors",
    "IcebergSink": "sink.sink",
}
__all__ = [
    "CatalogConfig",
    "CommitConfig",
    "DistributionMode",
    "IcebergSink",
    "SinkConfig",
    "SinkError",
    "WriteConfig",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sink' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
