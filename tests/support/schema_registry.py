"""A schema registry for tests: the part of the Confluent-compatible API producers and the job use.

A stand-in, in the test process: no Confluent-compatible registry server installs from the
package registries this project reaches (Apicurio Registry's application on Maven Central
lacks artifacts of its own build at every version tried, and none is on PyPI, npm, the Go
proxy or crates). It serves, on 127.0.0.1, ``POST /subjects/<subject>/versions`` (register:
the same schema text, type and references get the same id, as in Confluent's registry),
``GET /schemas/ids/<id>`` (``{"schema", "schemaType", "references"}``, 404 with ``error_code``
40403 for an id it does not hold) and ``GET /subjects/<subject>/versions/<version>`` (how a
reference is read), query strings ignored: what confluent-kafka's ``SchemaRegistryClient`` and
its serializers ask. Given ``users``, it wants basic authentication (401 otherwise).
Being a thread of the test process, it ends with it.

:func:`framed` makes a value in Confluent's wire format; :func:`avro_framed` has
confluent-kafka's ``AvroSerializer`` register a schema and frame rows, as a producer does.
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

_PREFIX = "/subjects/"
_BY_ID = "/schemas/ids/"


class SchemaRegistryServer:
    """The stand-in registry (see the module); ``url`` once started."""

    def __init__(self, folder: object = None, users: Mapping[str, str] | None = None) -> None:
        self._schemas: dict[int, tuple[str, str, str]] = {}  # id: text, type, references as JSON
        self._versions: dict[str, list[int]] = {}  # subject: the ids of its versions 1, 2, ...
        self._users = {f"{u}:{p}" for u, p in (users or {}).items()}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.requests_by_id = 0  # GET /schemas/ids/... served: the job's cache keeps it low

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
                if path.startswith(_PREFIX) and "/versions/" in path:
                    subject, version = path[len(_PREFIX) :].split("/versions/")
                    subject = urllib.parse.unquote(subject)
                    schema_id = registry.version(subject, version)
                    found = None if schema_id is None else registry.lookup(schema_id)
                    if found is None:
                        return self._answer(404, {"error_code": 40402, "message": "Version not found"})
                    extra = {"subject": subject, "version": int(version), "id": schema_id}
                    return self._answer(200, {**found, **extra})
                if not path.startswith(_BY_ID):
                    return self._answer(404, {"error_code": 404, "message": "not found"})
                found = registry.lookup(int(path[len(_BY_ID) :]))
                if found is None:
                    return self._answer(404, {"error_code": 40403, "message": "Schema not found"})
                return self._answer(200, found)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                path = self.path.split("?", 1)[0]
                if not self._allowed():
                    return self._answer(401, {"error_code": 401, "message": "Unauthorized"})
                if not (path.startswith(_PREFIX) and path.endswith("/versions")):
                    return self._answer(404, {"error_code": 404, "message": "not found"})
                schema_id = registry.add(
                    body["schema"], body.get("schemaType", "AVRO"), body.get("references", [])
                )
                subject = urllib.parse.unquote(path[len(_PREFIX) : -len("/versions")])
                with registry._lock:
                    versions = registry._versions.setdefault(subject, [])
                    if schema_id not in versions:
                        versions.append(schema_id)
                return self._answer(200, {"id": schema_id})

            def _allowed(self) -> bool:
                if not registry._users:
                    return True
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

    def add(self, schema: str, schema_type: str, references: Sequence[Mapping[str, Any]] = ()) -> int:
        known = (schema, schema_type, json.dumps(list(references)))
        with self._lock:
            for schema_id, held in self._schemas.items():
                if held == known:
                    return schema_id
            schema_id = len(self._schemas) + 1
            self._schemas[schema_id] = known
            return schema_id

    def lookup(self, schema_id: int) -> dict[str, Any] | None:
        with self._lock:
            self.requests_by_id += 1
            found = self._schemas.get(schema_id)
        if found is None:
            return None
        return {"schema": found[0], "schemaType": found[1], "references": json.loads(found[2])}

    def version(self, subject: str, version: str) -> int | None:
        with self._lock:
            versions = self._versions.get(subject, [])
            number = len(versions) if version == "latest" else int(version)
            return versions[number - 1] if 0 < number <= len(versions) else None

    def register(
        self,
        subject: str,
        schema: str | Mapping[str, Any],
        schema_type: str = "AVRO",
        references: Sequence[Mapping[str, Any]] = (),
    ) -> int:
        """Register ``schema`` under ``subject`` over HTTP, as a producer's serializer does; its id.

        ``references``: ``{"name", "subject", "version"}`` of the schemas it imports.
        """
        text = schema if isinstance(schema, str) else json.dumps(schema)
        body = json.dumps(
            {"schema": text, "schemaType": schema_type, "references": list(references)}
        ).encode()
        request = urllib.request.Request(
            f"{self.url}{_PREFIX}{urllib.parse.quote(subject, safe='')}/versions",
            data=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
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
