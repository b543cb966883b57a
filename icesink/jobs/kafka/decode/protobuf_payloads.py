"""Executor side of Protobuf values framed for a schema registry: each payload read as JSON.

After the 5-byte header (:mod:`icesink.jobs.kafka.decode.framing`), Confluent's Protobuf
framing has the message indexes: zigzag varints, a count then that many indexes, which name
the message in the schema's file (the first index a top-level message, each next one a message
nested in it); a count of 0 (a single byte 0) means the first message. Then the message.

:class:`ProtobufReader` reads a payload with the schema's compiled ``FileDescriptorSet``
(the driver compiles it, :mod:`icesink.jobs.kafka.decode.protobuf_values`) through protobuf's
``message_factory`` and ``json_format.MessageToDict`` with the ``.proto`` field names. Fields
without presence are written with their default (a proto3 ``int32 qty = 2`` of 0 is 0, not
null); unset ``optional`` and message fields are absent (null). 64-bit integers are JSON
numbers (ProtoJSON writes them as strings), enums their names, bytes base64,
``google.protobuf.Timestamp`` an RFC 3339 string. A payload that cannot be read raises
:class:`ValueError` with the reason its value's dead letter gets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from icesink.jobs.kafka.decode.framing import HEADER_BYTES

_INT64_TYPES = frozenset(
    {3, 4, 6, 16, 18}
)  # int64, uint64, fixed64, sfixed64, sint64 (FieldDescriptor.TYPE_*)
_INT64_WRAPPERS = frozenset({"google.protobuf.Int64Value", "google.protobuf.UInt64Value"})
_WELL_KNOWN = "google.protobuf."  # Struct, Any, ...: their JSON is not their fields
_MAX_INDEXES = 64


def message_indexes(payload: bytes) -> tuple[list[int], int]:
    """The message indexes at the start of ``payload`` and where the message starts.

    Raises:
        ValueError: The indexes are cut short or not a count and indexes.
    """
    count, position = _zigzag(payload, 0)
    if count == 0:
        return [0], position
    if not 0 < count <= _MAX_INDEXES:
        raise ValueError(f"a message index count of {count}")
    indexes = []
    for _ in range(count):
        index, position = _zigzag(payload, position)
        if index < 0:
            raise ValueError(f"a negative message index {index}")
        indexes.append(index)
    return indexes, position


def _zigzag(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("the value ends inside its message indexes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise ValueError("a message index longer than a 64-bit varint")


class ProtobufReader:
    """Reads the payloads of Protobuf values as JSON (see the module).

    Args:
        file_sets: Per schema id, its compiled ``FileDescriptorSet`` (serialized); the
            schema's own file is the set's last one.
    """

    def __init__(self, file_sets: Mapping[int, bytes]) -> None:
        self._file_sets = dict(file_sets)
        self._files: dict[int, tuple[Any, Any]] = {}  # schema id: (its pool, its file's proto)
        self._classes: dict[tuple[int, tuple[int, ...]], Any] = {}

    def to_json(self, schema_id: int, payload: bytes) -> bytes:
        """The message of ``payload`` (message indexes and message) as a JSON object.

        Raises:
            ValueError: Bad message indexes, or bytes that are not the message.
        """
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        indexes, start = message_indexes(payload)
        message_class = self._message_class(schema_id, tuple(indexes))
        message = message_class()
        try:
            message.ParseFromString(payload[start:])
        except DecodeError as e:
            raise ValueError(f"not a Protobuf {message_class.DESCRIPTOR.full_name}: {e}") from e
        as_dict = json_format.MessageToDict(
            message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        return json.dumps(_numbers(as_dict, message.DESCRIPTOR)).encode()

    def _message_class(self, schema_id: int, indexes: tuple[int, ...]) -> Any:
        found = self._classes.get((schema_id, indexes))
        if found is None:
            pool, file = self._file(schema_id)
            found = _class_of(pool, file, indexes)
            self._classes[(schema_id, indexes)] = found
        return found

    def _file(self, schema_id: int) -> tuple[Any, Any]:
        if schema_id not in self._files:
            from google.protobuf import descriptor_pb2, descriptor_pool

            file_set = descriptor_pb2.FileDescriptorSet.FromString(self._file_sets[schema_id])
            pool = descriptor_pool.DescriptorPool()
            for file in file_set.file:  # dependencies first, as protoc writes them
                pool.Add(file)
            self._files[schema_id] = (pool, file_set.file[-1])
        return self._files[schema_id]


def _class_of(pool: Any, file: Any, indexes: tuple[int, ...]) -> Any:
    """The message class the indexes name in ``file`` (a ``FileDescriptorProto``)."""
    from google.protobuf import message_factory

    names = [file.package] if file.package else []
    messages = file.message_type
    for depth, index in enumerate(indexes):
        if index >= len(messages):
            where = "top-level" if depth == 0 else f"nested in {'.'.join(names)}"
            raise ValueError(
                f"message index {list(indexes)}: the schema has {len(messages)} {where} messages, "
                f"no message {index}"
            )
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(".".join(names)))


def _numbers(value: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    """``value`` (a message as ProtoJSON) with its 64-bit integers as numbers, nested ones too."""
    for field in descriptor.fields:
        if field.name not in value:
            continue
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            entry = message.fields_by_name["value"]
            value[field.name] = {k: _field(v, entry) for k, v in value[field.name].items()}
        elif field.is_repeated:
            value[field.name] = [_field(v, field) for v in value[field.name]]
        else:
            value[field.name] = _field(value[field.name], field)
    return value


def _field(value: Any, field: Any) -> Any:
    message = field.message_type
    if value is None:
        return None
    if field.type in _INT64_TYPES or (message is not None and message.full_name in _INT64_WRAPPERS):
        return int(value)
    if message is not None and isinstance(value, dict) and not message.full_name.startswith(_WELL_KNOWN):
        return _numbers(value, message)
    return value


def read_payloads(
    reader: ProtobufReader, values: pa.Array, payloads: pa.Array, reasons: dict[int, str]
) -> pa.Array:
    """``payloads`` (of :func:`~icesink.jobs.kafka.decode.framing.unframe`) as JSON.

    The payloads ``reasons`` rejects already stay as they are; one that cannot be read
    becomes empty and gets its reason in ``reasons``.
    """
    out: list[bytes | None] = []
    for position, (value, payload) in enumerate(zip(values.to_pylist(), payloads.to_pylist(), strict=True)):
        if payload is None or position in reasons:
            out.append(payload)
            continue
        schema_id = int.from_bytes(value[1:HEADER_BYTES], "big")
        try:
            out.append(reader.to_json(schema_id, payload))
        except ValueError as e:
            reasons[position] = f"not a Protobuf value of schema id {schema_id}: {e}"
            out.append(b"")
        except Exception as e:  # one value's fault (an Any of a type the schema lacks) fails no task
            reasons[position] = f"not a Protobuf value of schema id {schema_id}: {type(e).__name__}: {e}"
            out.append(b"")
    return pa.array(out, pa.binary())
