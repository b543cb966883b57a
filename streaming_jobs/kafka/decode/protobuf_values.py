"""Protobuf values framed for a schema registry (``protobuf``): the driver compiles their schemas.

A registry holds a Protobuf schema as ``.proto`` text (Confluent's and Apicurio's answer by
id), or as a base64 ``FileDescriptorProto`` (what confluent-kafka's Python serializer
registers, and what a registry that keeps it so answers). The text is compiled with protoc
(``python -m grpc_tools.protoc``, the ``kafka`` extra's ``grpcio-tools``) into a
``FileDescriptorSet`` with its imports of Protobuf's well-known types
(``google/protobuf/timestamp.proto``, ...); the executors read each payload with it
(:mod:`streaming_jobs.kafka.decode.protobuf_payloads`), in the decoding task, as JSON.

A schema that imports other subjects' schemas (schema references) is not read: its values
become dead letters whose reason says so, as do those of a schema protoc cannot compile.
A schema is compiled once per id for the life of the job.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import logging
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import DataFrame

from streaming_jobs.kafka.decode.registry import PROTOBUF, RegisteredSchema

logger = logging.getLogger(__name__)
FRAMING = "protobuf"
PROTOC_TIMEOUT_S = 120.0
_WELL_KNOWN = "google/protobuf/"
_SCHEMA_FILE = "schema.proto"


class ProtobufValues:
    """Protobuf values; a :class:`~streaming_jobs.kafka.decode.registry_values.RegistryFormat`."""

    schema_type = PROTOBUF
    framing = FRAMING

    def __init__(self) -> None:
        self._compiled: dict[int, bytes | str] = {}

    def to_json(self, batch_df: DataFrame, schemas: Mapping[int, RegisteredSchema]) -> DataFrame:
        """``batch_df`` as it is: the decoding task reads the payloads (see the module)."""
        return batch_df

    def task_schemas(self, schemas: Mapping[int, RegisteredSchema]) -> dict[int, bytes | str]:
        """Per schema id, its ``FileDescriptorSet`` (serialized), or why its values are not read."""
        for schema_id, schema in schemas.items():
            if schema_id not in self._compiled:
                try:
                    self._compiled[schema_id] = file_descriptor_set(schema)
                except ValueError as e:
                    logger.warning("schema id %s: its values become dead letters: %s", schema_id, e)
                    self._compiled[schema_id] = str(e)
        return {i: self._compiled[i] for i in schemas}


def file_descriptor_set(schema: RegisteredSchema) -> bytes:
    """The schema compiled: a serialized ``FileDescriptorSet``, its own file last.

    Raises:
        ValueError: It references other schemas, or does not compile.
    """
    if schema.references:
        raise ValueError(
            f"the Protobuf schema imports {', '.join(schema.references)} from other subjects (schema "
            "references), which the Kafka job does not read: register the messages in one .proto file"
        )
    described = _described(schema.text)
    if described is not None:
        return described
    return _compiled(schema.text)


def _described(text: str) -> bytes | None:
    """A base64 ``FileDescriptorProto`` as a set with its well-known imports; ``None`` for other text."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message import DecodeError

    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not file.name:
        return None
    file_set = descriptor_pb2.FileDescriptorSet()
    for dependency in file.dependency:
        if not dependency.startswith(_WELL_KNOWN):
            raise ValueError(
                f"the Protobuf schema imports {dependency}, another subject's schema, which the Kafka "
                "job does not read: register the messages in one .proto file"
            )
        importlib.import_module("google.protobuf." + Path(dependency).stem + "_pb2")
        descriptor_pool.Default().FindFileByName(dependency).CopyToProto(file_set.file.add())
    file_set.file.append(file)
    return bytes(file_set.SerializeToString())


def _compiled(text: str) -> bytes:
    """``.proto`` text compiled by protoc, with its imports of the well-known types."""
    with tempfile.TemporaryDirectory(prefix="icesink-proto-") as folder:
        (Path(folder) / _SCHEMA_FILE).write_text(text)
        out = Path(folder) / "schema.desc"
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{folder}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            _SCHEMA_FILE,
        ]
        try:
            done = subprocess.run(
                command, check=False, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_S
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ValueError(f"protoc could not run: {e}") from e
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout).split())[:500]
            raise ValueError(f"protoc could not compile the Protobuf schema: {said}")
        return out.read_bytes()
