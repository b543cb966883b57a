"""Protobuf values framed for a schema registry (``protobuf``): the driver compiles their schemas.

A registry holds a Protobuf schema as ``.proto`` text (Confluent's and Apicurio's answer by
id), or as a base64 ``FileDescriptorProto`` (what confluent-kafka's Python serializer
registers, and what a registry that keeps it so answers). The text is compiled with protoc
(``python -m grpc_tools.protoc``, the ``kafka`` extra's ``grpcio-tools``) into a
``FileDescriptorSet`` with its imports of Protobuf's well-known types
(``google/protobuf/timestamp.proto``, ...); the executors read each payload with it
(:mod:`icesink.jobs.kafka.decode.protobuf_payloads`), in the decoding task, as JSON.

A schema that imports other subjects' schemas (schema references) is compiled with them, as
the registry gives them (:attr:`~icesink.jobs.kafka.decode.registry.RegisteredSchema.references`).
The values of a schema protoc cannot compile (an import the registry does not reference, say)
become dead letters whose reason is protoc's. A schema is compiled once per id for the life of
the job. A field's number is its identity: a field renamed in a new version keeps its column
(:mod:`icesink.jobs.kafka.decode.protobuf_numbers`).
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
from typing import Any

from pyspark.sql import DataFrame

from icesink.jobs.kafka.decode.protobuf_numbers import ProtobufNumbers
from icesink.jobs.kafka.decode.registry import PROTOBUF, RegisteredSchema
from icesink.jobs.kafka.decode.spec import FieldRenames, FieldSourceIds

logger = logging.getLogger(__name__)
FRAMING = "protobuf"
PROTOC_TIMEOUT_S = 120.0
_WELL_KNOWN = "google/protobuf/"
_SCHEMA_FILE = "icesink_registry_schema.proto"  # a name no reference takes


class ProtobufValues:
    """Protobuf values; a :class:`~icesink.jobs.kafka.decode.registry_values.RegistryFormat`."""

    schema_type = PROTOBUF
    framing = FRAMING

    def __init__(self) -> None:
        self._compiled: dict[int, bytes | str] = {}
        self._numbers = ProtobufNumbers()
        self._for_task: dict[int, bytes | str] = {}

    def to_json(self, batch_df: DataFrame, schemas: Mapping[int, RegisteredSchema]) -> DataFrame:
        """``batch_df`` as it is: the decoding task reads the payloads (see the module)."""
        return batch_df

    def task_schemas(self, schemas: Mapping[int, RegisteredSchema]) -> dict[int, bytes | str]:
        """Per schema id, its ``FileDescriptorSet`` (serialized; its fields under the newest names of
        their numbers), or why its values are not read."""
        for schema_id, schema in schemas.items():
            if schema_id not in self._compiled:
                try:
                    self._compiled[schema_id] = file_descriptor_set(schema)
                except ValueError as e:
                    logger.warning("schema id %s: its values become dead letters: %s", schema_id, e)
                    self._compiled[schema_id] = str(e)
                compiled = self._compiled[schema_id]
                if isinstance(compiled, bytes):
                    self._numbers.learn(schema_id, compiled)
        self._for_task = {
            i: compiled if isinstance(compiled := self._compiled[i], str) else self._numbers.renamed(compiled)
            for i in schemas
        }
        return dict(self._for_task)

    def renamed_fields(self, schemas: Mapping[int, RegisteredSchema]) -> FieldRenames:
        """None: a field's number is its identity (:meth:`source_ids`)."""
        return ()

    def source_ids(self, schemas: Mapping[int, RegisteredSchema]) -> FieldSourceIds:
        """The field numbers of ``schemas``' values (after :meth:`task_schemas`), as ``protobuf:<n>``."""
        found: dict[tuple[str, ...], str] = {}
        for schema_id in sorted(schemas):
            compiled = self._for_task.get(schema_id)
            if isinstance(compiled, bytes):
                found.update(self._numbers.source_ids(compiled))
        return tuple(sorted(found.items()))


def file_descriptor_set(schema: RegisteredSchema) -> bytes:
    """The schema compiled: a serialized ``FileDescriptorSet``, its own file last.

    Raises:
        ValueError: It does not compile (or an import is neither referenced nor well-known).
    """
    described = _described(schema)
    if described is not None:
        return described
    return _compiled(schema)


def _descriptor(text: str) -> Any:
    """A base64 ``FileDescriptorProto``'s message; ``None`` when ``text`` is not one."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    return file if file.name else None


def _described(schema: RegisteredSchema) -> bytes | None:
    """A base64 ``FileDescriptorProto`` as a set with its imports; ``None`` for ``.proto`` text."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    own = _descriptor(schema.text)
    if own is None:
        return None
    referenced = dict(schema.references)
    file_set = descriptor_pb2.FileDescriptorSet()
    added: set[str] = set()

    def add(file: Any) -> None:
        for dependency in file.dependency:
            if dependency in added:
                continue
            if dependency.startswith(_WELL_KNOWN):
                importlib.import_module("google.protobuf." + Path(dependency).stem + "_pb2")
                well_known = descriptor_pb2.FileDescriptorProto()
                descriptor_pool.Default().FindFileByName(dependency).CopyToProto(well_known)
                add(well_known)
                continue
            imported = _descriptor(referenced.get(dependency, ""))
            if imported is None:
                raise ValueError(
                    f"the Protobuf schema imports {dependency}, which the registry does not give "
                    "as a reference of it in the same form (a base64 FileDescriptorProto)"
                )
            add(imported)
        if file.name not in added:
            added.add(file.name)
            file_set.file.append(file)

    add(own)
    return bytes(file_set.SerializeToString())


def _compiled(schema: RegisteredSchema) -> bytes:
    """``.proto`` text compiled by protoc, with its references and the well-known types it imports."""
    with tempfile.TemporaryDirectory(prefix="icesink-proto-") as folder:
        for name, text in schema.references:
            path = Path(folder, name)
            if not path.resolve().is_relative_to(Path(folder).resolve()):
                raise ValueError(f"the Protobuf schema references {name!r}, a name outside its folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (Path(folder) / _SCHEMA_FILE).write_text(schema.text)
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
