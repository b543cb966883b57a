"""A schema registry's schemas by id, through the Confluent-compatible REST API, cached per id.

``GET <url>/schemas/ids/<id>`` answers ``{"schema": "...", "schemaType": "AVRO" | "JSON" |
"PROTOBUF"}`` (no ``schemaType`` means Avro). Confluent Schema Registry serves it at its root,
Apicurio Registry under ``/apis/ccompat/v7``, Karapace at its root: ``url`` is that prefix.
A schema id names one schema forever, so an answer is kept for the life of the process; an
unknown id is asked again in a later batch (a producer may register it meanwhile). Every call
waits at most ``timeout_s``: a silent or failing registry fails the batch with
``ICESINK-SCHEMA-REGISTRY`` naming it, and the query's restarts retry it.

Driver side only (the executors get the ids the registry knows, :mod:`streaming_jobs.kafka.decode.spec`).
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass

from icesink import SinkError

DEFAULT_TIMEOUT_S = 10.0
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"


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
        text: The schema itself (Avro's JSON, a JSON Schema, a ``.proto`` file).
    """

    schema_id: int
    schema_type: str
    text: str


class SchemaRegistry:
    """Reads schemas by id from a Confluent-compatible registry (see the module).

    Args:
        url: The API's root, e.g. ``http://registry:8081`` or ``http://apicurio:8080/apis/ccompat/v7``.
        timeout_s: The longest wait for one answer.
        username: Basic authentication's user, if any.
        password: Basic authentication's password.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        username: str | None = None,
        password: str = "",
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._auth = (
            None if username is None else base64.b64encode(f"{username}:{password}".encode()).decode()
        )
        self._known: dict[int, RegisteredSchema] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        """Picklable (the lock is made anew): a sink holding it may be pickled to a Spark Connect server."""
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def schemas(self, schema_ids: Iterable[int]) -> dict[int, RegisteredSchema]:
        """The registry's schemas of ``schema_ids``; ids it does not know are left out.

        Raises:
            SchemaRegistryError: The registry did not answer in time, or answered an error.
        """
        found = {}
        for schema_id in sorted(set(schema_ids)):
            with self._lock:
                schema = self._known.get(schema_id)
            if schema is None:
                schema = self._fetch(schema_id)
            if schema is not None:
                with self._lock:
                    self._known[schema_id] = schema
                found[schema_id] = schema
        return found

    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        request = urllib.request.Request(f"{self.url}/schemas/ids/{schema_id}")
        request.add_header("Accept", "application/vnd.schemaregistry.v1+json, application/json")
        if self._auth is not None:
            request.add_header("Authorization", f"Basic {self._auth}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise SchemaRegistryError(
                f"the schema registry answered HTTP {e.code} for schema id {schema_id}",
                hint="check value.schema-registry.url (the Confluent-compatible API's root) and credentials",
                url=self.url,
            ) from e
        except (OSError, ValueError) as e:
            raise SchemaRegistryError(
                f"could not read schema id {schema_id} from the schema registry in {self.timeout_s} s: {e}",
                hint="check that the registry is up and value.schema-registry.url points at it",
                url=self.url,
            ) from e
        if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
            raise SchemaRegistryError(
                f"the schema registry's answer for schema id {schema_id} has no schema: {str(answer)[:200]}",
                hint="value.schema-registry.url must be the root of a Confluent-compatible API",
                url=self.url,
            )
        return RegisteredSchema(schema_id, str(answer.get("schemaType") or AVRO), answer["schema"])
