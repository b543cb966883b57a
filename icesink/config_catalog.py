"""The catalog section of the sink's configuration (``catalog.name``, ``catalog.*``).

Every ``catalog.*`` option but ``catalog.name`` is a property for pyiceberg's
``load_catalog``; credentials among them are kept as ``SecretStr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from icesink.catalog_keys import accepted_keys, catalog_type, did_you_mean, unknown_keys
from icesink.errors import ConfigError
from icesink.secrets import hidden, redact

DEFAULT_CATALOG_NAME = "default"


class CatalogConfig(BaseModel):
    """Which Iceberg catalog to use: every ``catalog.*`` option goes to pyiceberg's ``load_catalog``.

    Attributes:
        name: The catalog's name (``catalog.name``); the SQL catalog keys tables by it.
        properties: The other ``catalog.*`` options, for pyiceberg's ``load_catalog`` (``type``,
            ``uri``, ``warehouse``, ``s3.*``, ...): keys the chosen catalog type or its file IO
            reads (a misspelled key fails at start-up with "did you mean"). Keys naming a
            credential (password, secret, token, credential, access-key, session-key) and the
            password inside a URI are kept secret: masked in errors, logs and ``repr()``.
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

    @model_validator(mode="after")
    def _known_keys(self) -> CatalogConfig:
        """Every property is one the catalog's type or its FileIOs read (see :mod:`icesink.catalog_keys`)."""
        plain = self.plain_properties()
        kind = catalog_type(plain, plain.get("type"), plain.get("uri"))
        unknown = unknown_keys(plain, kind) if kind is not None else []
        if unknown:
            key = unknown[0]
            suggestion = did_you_mean(key, accepted_keys(kind or ""), "catalog.")
            raise ConfigError(
                f"unknown option 'catalog.{key}': a {kind} catalog and its file IO do not read {key!r}",
                hint=(suggestion + " " if suggestion else "")
                + "catalog.* options are pyiceberg's catalog and FileIO properties (type, uri, warehouse, "
                "s3.*, ...); a catalog of your own takes any with catalog.py-catalog-impl",
            )
        return self

    def redact(self, text: str) -> str:
        """``text`` (an error message, say) with every secret of these properties masked."""
        return redact(text, self.properties.values())

    def plain_properties(self) -> dict[str, str]:
        """The properties with secrets revealed, for pyiceberg."""
        return {
            k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in self.properties.items()
        }
