"""Schema registry helpers for tests: registering, Confluent's wire format, a registry wanting a password.

:func:`register` registers a schema over the Confluent-compatible API, as a producer's
serializer does; :func:`framed` makes a value in Confluent's wire format; :func:`avro_framed`
has confluent-kafka's ``AvroSerializer`` register a schema and frame rows. The registry of
the tests is a real one, Apicurio Registry (:mod:`tests.support.apicurio_registry`, fixture
``schema_registry``).

:class:`PasswordRegistry` is a stand-in, in the test process, for the one thing that registry
cannot do here: basic authentication. Apicurio Registry checks credentials only through an
OpenID Connect server (Keycloak: basic authentication is its client-credentials grant), which
nothing on this machine provides. It serves ``GET /schemas/ids/<id>`` on 127.0.0.1 to the
given users only (401 otherwise; ``{"schema", "schemaType", "references"}``, 404 with
``error_code`` 40403 for an id it does not hold), what the job's client asks; schemas are
put in with :meth:`PasswordRegistry.add`. Being a thread of the test process, it ends with it.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_BY_ID = "/schemas/ids/"


def register(
    url: str,
    subject: str,
    schema: str | Mapping[str, Any],
    schema_type: str = "AVRO",
    references: Sequence[Mapping[str, Any]] = (),
) -> int:
    """Register ``schema`` under ``subject`` of the registry at ``url`` (its Confluent API's root); its id.

    ``references``: ``{"name", "subject", "version"}`` of the schemas it imports.
    """
    text = schema if isinstance(schema, str) else json.dumps(schema)
    body = json.dumps({"schema": text, "schemaType": schema_type, "references": list(references)}).encode()
    request = urllib.request.Request(
        f"{url}/subjects/{urllib.parse.quote(subject, safe='')}/versions",
        data=body,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["id"])


def framed(schema_id: int, payload: bytes) -> bytes:
    """A value in Confluent's wire format: magic byte 0, the schema id, the payload."""
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def avro_framed(
    url: str, topic: str, schema: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]
) -> list[bytes]:
    """``rows`` as confluent-kafka's ``AvroSerializer`` produces them to ``topic`` (``<topic>-value``)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(dict(row), context) for row in rows]


class PasswordRegistry:
    """The stand-in registry wanting basic authentication (see the module); ``url`` once started.

    Args:
        users: User names and their passwords.
    """

    def __init__(self, users: Mapping[str, str]) -> None:
        self._schemas: dict[int, tuple[str, str]] = {}  # id: text, type
        self._users = {f"{u}:{p}" for u, p in users.items()}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if not self._allowed():
                    return self._answer(401, {"error_code": 401, "message": "Unauthorized"})
                if not path.startswith(_BY_ID):
                    return self._answer(404, {"error_code": 404, "message": "not found"})
                with registry._lock:
                    found = registry._schemas.get(int(path[len(_BY_ID) :]))
                if found is None:
                    return self._answer(404, {"error_code": 40403, "message": "Schema not found"})
                return self._answer(200, {"schema": found[0], "schemaType": found[1], "references": []})

            def _allowed(self) -> bool:
                given = self.headers.get("Authorization", "")
                if not given.startswith("Basic "):
                    return False
                return base64.b64decode(given[len("Basic ") :]).decode() in registry._users

            def _answer(self, status: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="schema-registry", daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def add(self, schema: str, schema_type: str) -> int:
        """Hold ``schema`` of ``schema_type`` (``AVRO``, ``JSON``, ``PROTOBUF``); its id."""
        with self._lock:
            schema_id = len(self._schemas) + 1
            self._schemas[schema_id] = (schema, schema_type)
            return schema_id
