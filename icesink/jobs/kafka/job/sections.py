"""The base of the job's configuration sections: frozen, unknown keys refused, kebab-case keys.

:func:`scalar` turns a YAML value into the string that Spark-style options take.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


def kebab(name: str) -> str:
    """A field's key in the file: ``max_restarts`` is ``max-restarts``."""
    return name.replace("_", "-")


class Section(BaseModel):
    """One section of the job's configuration (or the whole of it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=kebab, populate_by_name=False)


def scalar(value: Any) -> str:
    """A YAML scalar (or a nested value, as JSON) as the string Spark-style options take."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping | list):
        return json.dumps(value)
    return str(value)
