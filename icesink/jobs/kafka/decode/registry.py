"""A schema registry's schemas by id, read with confluent-kafka's ``SchemaRegistryClient``.

``GET <url>/schemas/ids/<id>`` answers the schema, its ``schemaType`` (``AVRO``, ``JSON``,
``PROTOBUF``; none means Avro) and its references. Confluent Schema Registry serves it at its
root, Apicurio Registry under ``/apis/ccompat/v7``, Karapace at its root: ``url`` is that
prefix. The client keeps each schema it read for the life of the process (a schema id names
one schema forever); an unknown id is asked again in a later batch (a producer may register it
meanwhile). Both answer an unknown id with HTTP 404 and error code 40403; Apicurio Registry
also answers 404 (error code 40402, "No version ... found") for an id it holds whose schema
references a version since deleted, where Confluent's registry answers the schema and its
references (and its reference lookup then answers 404): either way the id's values become
dead letters, the first as an unknown id (logged with the registry's message), the second
with the compiler's word on the missing import. Each request waits at most ``timeout_s`` and is
retried ``max_retries`` times with the client's backoff; a silent or failing registry then
fails the batch with ``ICESINK-SCHEMA-REGISTRY`` naming it, and the query's restarts retry it.

:class:`SchemaRegistry` is what Spark needs of the client: it pickles as its settings (a sink
holding it may be pickled to a Spark Connect server) and makes the client where it is used.
Driver side only (the executors get what they need of each schema in
:class:`~icesink.jobs.kafka.decode.spec.DecodeSpec`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from icesink import SinkError

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_RETRIES = 2
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
T = TypeVar("T")
UNKNOWN_SCHEMA = 40403
"""The error code of a registry's 404 for an id it does not hold (Confluent's and Apicurio's)."""
logger = logging.getLogger(__name__)


class SchemaRegistryError(SinkError):
    """The schema registry could not be reached or answered something else than a schema."""

    code = "SCHEMA-REGISTRY"
    retryable = True


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema of the registry.

    Attributes:
        schema_id: Its id (the one framed values carry).
        schema_type: ``AVRO``, ``JSON`` or ``PROTOBUF``.
        text: The schema itself (Avro's JSON, a JSON Schema, a ``.proto`` file or, as
            confluent-kafka's Protobuf serializer registers it, a base64 ``FileDescriptorProto``).
        references: The schemas it references (a ``.proto`` file's imports of other subjects),
            theirs too, each before those that reference it: ``(name, text)``; a reference the
            registry does not hold is left out (the schema then does not compile).
    """

    schema_id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str], ...] = ()


class SchemaRegistry:
    """Reads schemas by id from a Confluent-compatible registry (see the module).

    Args:
        url: The API's root, e.g. ``http://registry:8081`` or ``http://apicurio:8080/apis/ccompat/v7``.
        timeout_s: The longest wait for one answer.
        username: Basic authentication's user, if any.
        password: Basic authentication's password.
        max_retries: Further tries of a request that timed out or got a retriable answer (5xx, 429).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        username: str | None = None,
        password: str = "",
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._user_info = None if username is None else f"{username}:{password}"
        self._client: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        """The settings only: the client (an HTTP session) and the lock are made anew."""
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.url!r}, timeout_s={self.timeout_s})"

    def schemas(self, schema_ids: Iterable[int]) -> dict[int, RegisteredSchema]:
        """The registry's schemas of ``schema_ids``; ids it does not know are left out.

        Raises:
            SchemaRegistryError: The registry did not answer in time, or answered an error.
        """
        found = {}
        for schema_id in sorted(set(schema_ids)):
            schema = self._fetch(schema_id)
            if schema is not None:
                found[schema_id] = schema
        return found

    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        try:
            schema = self._guarded(schema_id, lambda: self._session().get_schema(schema_id))
        except SchemaRegistryError as e:
            cause = e.__cause__
            if isinstance(cause, ClientError) and cause.http_status_code == 404:
                if cause.error_code != UNKNOWN_SCHEMA:  # Apicurio: a version it references is gone
                    logger.warning(
                        "the schema registry holds no readable schema of id %s (HTTP 404, error code %s): "
                        "%s; its values become dead letters",
                        schema_id,
                        cause.error_code,
                        cause.error_message,
                    )
                return None  # an unknown id: asked again in a later batch
            raise
        if not isinstance(schema.schema_str, str):
            raise SchemaRegistryError(
                f"the schema registry's answer for schema id {schema_id} has no schema",
                hint="value.schema-registry.url must be the root of a Confluent-compatible API",
                url=self.url,
            )
        references = self._guarded(schema_id, lambda: self._references(schema, set()))
        return RegisteredSchema(schema_id, str(schema.schema_type or AVRO), schema.schema_str, references)

    def _references(self, schema: Any, seen: set[str]) -> tuple[tuple[str, str], ...]:
        """The schemas ``schema`` references, recursively, each after those it references."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        found: list[tuple[str, str]] = []
        for reference in schema.references or ():
            if reference.name in seen:
                continue
            seen.add(reference.name)
            try:
                version = self._session().get_version(reference.subject, reference.version)
            except ClientError as e:
                if e.http_status_code == 404:
                    continue  # the schema does not compile, and its values say why
                raise
            found.extend(self._references(version.schema, seen))
            found.append((str(reference.name), str(version.schema.schema_str)))
        return tuple(found)

    def _guarded(self, schema_id: int, call: Callable[[], T]) -> T:
        """``call()``, its failures as :class:`SchemaRegistryError`."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        try:
            return call()
        except ClientError as e:
            raise SchemaRegistryError(
                f"the schema registry answered HTTP {e.http_status_code} for schema id {schema_id}: "
                f"{e.error_message}",
                hint="check value.schema-registry.url (the Confluent-compatible API's root) and credentials",
                url=self.url,
            ) from e
        except Exception as e:  # the client's HTTP errors (timeouts, refused connections), bad JSON
            raise SchemaRegistryError(
                f"could not read schema id {schema_id} from the schema registry (a wait of at most "
                f"{self.timeout_s} s, {self.max_retries} retries): {type(e).__name__}: {e}",
                hint="check that the registry is up and value.schema-registry.url points at it",
                url=self.url,
            ) from e

    def _session(self) -> Any:
        """The client, made on first use (its cache keeps the schemas read)."""
        with self._lock:
            if self._client is None:
                from confluent_kafka.schema_registry import SchemaRegistryClient

                conf: dict[str, Any] = {
                    "url": self.url,
                    "timeout": self.timeout_s,
                    "max.retries": self.max_retries,
                }
                if self._user_info is not None:
                    conf["basic.auth.user.info"] = self._user_info
                self._client = SchemaRegistryClient(conf)
            return self._client
