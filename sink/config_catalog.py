"""The catalog section of the sink's configuration (``catalog.name``, ``catalog.*``).

Every ``catalog.*`` option but ``catalog.name`` is a property for pyiceberg's
``load_catalog``; credentials among them are kept as ``SecretStr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from sink.secrets import hidden, redact

DEFAULT_CATALOG_NAME = "default"


class CatalogConfig(BaseModel):
    """Which Iceberg catalog to use: every ``catalog.*`` option goes to pyiceberg's ``load_catalog``.

    Attributes:
        name: The catalog's name (``catalog.name``).
        properties: The other ``catalog.*`` options, ``type``/``uri``/``warehouse`` among them.
            Credentials are kept as ``SecretStr``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = DEFAULT_CATALOG_NAME
    properties: dict[str, str | SecretStr] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _hide_secrets(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {str(k): hidden(str(k), v) if isinstance(v, str) else v for k, v in value.items()}

    def redact(self, text: str) -> str:
        """``text`` (an error message, say) with every secret of these properties masked."""
        return redact(text, self.properties.values())

    def plain_properties(self) -> dict[str, str]:
        """The properties with secrets revealed, for pyiceberg."""
        return {
            k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in self.properties.items()
        }
