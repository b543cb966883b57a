"""Apicurio Registry for tests: a real schema registry on loopback, through its Confluent-compatible API.

Apicurio Registry 2.4.2.Final, which ``make env`` builds from Maven Central's artifacts into
:func:`icesink.jobs.jvm_jars.apicurio_registry_folder` (``jvm/apicurio-registry/pom.xml`` says
why that version), runs as one JVM on a free port of 127.0.0.1 with its default in-memory
storage (H2): each start is empty. :attr:`ApicurioRegistry.url` is the root of its Confluent
API (``/apis/ccompat/v7``), what producers, confluent-kafka's ``SchemaRegistryClient`` and the
job's ``value.schema-registry.url`` are given. A test without the build skips (fails in CI).

As a producer sees it, it differs from Confluent's registry in one way that matters here: it
ignores ``schemaType`` when a schema is registered and tells the type from the text, so a JSON
Schema needs ``properties`` or ``$schema`` (a bare ``{"type": "object"}`` is refused with
HTTP 422, error code 42201). Ids are content ids: the same text under two subjects gets one
id, as in Confluent's registry. The process is a
:class:`~icesink.jobs.local_servers.processes.ServerProcess`: stopped at the end, and killed by
the kernel if the process that started it dies first.
"""

from __future__ import annotations

import os
import re
import shutil
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from icesink.jobs.jvm_jars import COMPLETE_MARKER, apicurio_registry_folder
from icesink.jobs.local_servers.spark_home import JVM_START_TIMEOUT_S
from tests.support.processes import ServerProcess, http_get
from tests.support.schema_registry import register

CONFLUENT_API = "/apis/ccompat/v7"
_BY_ID_COUNT = re.compile(
    r'^rest_requests_count_total\{method="GET",path="' + re.escape(CONFLUENT_API) + r'/schemas/ids/\{id\}",'
    r"[^}]*\}\s+(?P<count>[0-9.]+)$",
    re.MULTILINE,
)


def apicurio_application() -> Path:
    """Apicurio Registry's ``quarkus-run.jar``; skips the test when ``make env`` did not build it."""
    folder = apicurio_registry_folder()
    if (folder / COMPLETE_MARKER).is_file():
        return folder / "quarkus-run.jar"
    message = f"Apicurio Registry is not built in {folder}; make env builds it"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class ApicurioRegistry(ServerProcess):
    """One Apicurio Registry (see the module), its output in ``workdir``.

    Args:
        workdir: Folder for the process's output.
    """

    name = "apicurio-registry"
    start_timeout_s = JVM_START_TIMEOUT_S

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.application = apicurio_application()
        self.java = shutil.which("java") or "java"

    @property
    def url(self) -> str:
        """The root of the Confluent-compatible API (``http://127.0.0.1:PORT/apis/ccompat/v7``)."""
        return f"http://127.0.0.1:{self.port}{CONFLUENT_API}"

    def _command(self) -> Sequence[str]:
        return [
            self.java,
            "-Xmx384m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts sooner; the tests ask little of it
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            "-jar",
            str(self.application),
        ]

    def _ready(self) -> bool:
        return http_get(f"{self.url}/subjects").strip().startswith("[")

    @property
    def requests_by_id(self) -> int:
        """``GET /schemas/ids/<id>`` requests served so far (answered or not), from the registry's metrics."""
        metrics = http_get(f"http://127.0.0.1:{self.port}/metrics")
        return sum(int(float(m["count"])) for m in _BY_ID_COUNT.finditer(metrics))

    def register(
        self,
        subject: str,
        schema: str | Mapping[str, Any],
        schema_type: str = "AVRO",
        references: Sequence[Mapping[str, Any]] = (),
    ) -> int:
        """Register ``schema`` under ``subject`` as a producer's serializer does; its id."""
        return register(self.url, subject, schema, schema_type, references)

    def delete_version(self, subject: str, version: int) -> None:
        """Delete ``subject``'s ``version`` for good (disabled first, then removed, as the API wants)."""
        path = f"{self.url}/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
        for query in ("", "?permanent=true"):
            with urllib.request.urlopen(urllib.request.Request(path + query, method="DELETE"), timeout=30):
                pass
