"""Protobuf field numbers as identities: a field renamed in a new schema version keeps its column.

On the wire a Protobuf field is its number; its name is only the schema's. The job keeps, for
each message of the schemas it has seen (for the life of the job), each number's name in the
newest schema (the highest id) that has it (:class:`ProtobufNumbers`):

- each schema's compiled ``FileDescriptorSet`` goes to the decoding task with its fields
  renamed to those newest names (:meth:`ProtobufNumbers.renamed`), so a value of version 1 in
  the same batch as (or after) version 2 gives version 2's names: the bytes do not change,
  only the names protobuf's JSON printer writes;
- the rows' fields carry their number as ``icesink.source-id`` (``protobuf:<number>``;
  :meth:`ProtobufNumbers.source_ids`), and the sink keeps it in the column's doc
  (:mod:`icesink.schema.source_ids`): a later field of that number under another name is the
  column renamed, keeping its field id and values, also after the job restarts. That doc is
  the durable number -> column map: it is written by the schema commit that makes (or first
  sees) the column, travels with the column through renames, and needs no store of its own.

The numbers of the fields of the schema's first message (the one a value without message
indexes is) and of the messages nested in it are kept as source ids; a column written before
the job kept numbers learns its number from the first batch that has the field by its name.

The newest names are those of the schemas seen since the job started: after a restart, a
batch holding only values of an older version than the one that named the column renames
it back to the older name (no value is lost, the field id stays), and the next batch of the
newer version renames it forward again.
"""

from __future__ import annotations

from typing import Any

from icesink.jobs.kafka.decode.spec import FieldSourceIds

SOURCE_PREFIX = "protobuf:"
_WELL_KNOWN = "google.protobuf."  # Timestamp, wrappers...: their JSON is not their fields
_LABEL_REPEATED = 3
_TYPE_MESSAGE = 11


class ProtobufNumbers:
    """The newest name of each field number of each message seen (see the module)."""

    def __init__(self) -> None:
        self._newest: dict[str, dict[int, tuple[int, str]]] = {}  # message: number -> (schema id, name)

    def learn(self, schema_id: int, file_set: bytes) -> None:
        """Take the field names of a compiled schema's own file; a newer schema id's names win."""
        for full_name, message in _messages(_own_file(file_set)):
            numbers = self._newest.setdefault(full_name, {})
            for field in message.field:
                if numbers.get(field.number, (-1, ""))[0] < schema_id:
                    numbers[field.number] = (schema_id, field.name)

    def renamed(self, file_set: bytes) -> bytes:
        """The compiled schema with its fields under the newest names of their numbers."""
        parsed = _parsed(file_set)
        changed = False
        for full_name, message in _messages(parsed.file[-1]):
            numbers = self._newest.get(full_name, {})
            names = {f.name for f in message.field}
            for field in message.field:
                newest = numbers.get(field.number, (0, field.name))[1]
                if newest != field.name and newest not in names:
                    field.name = newest
                    field.json_name = newest
                    changed = True
        return bytes(parsed.SerializeToString()) if changed else file_set

    def source_ids(self, file_set: bytes) -> FieldSourceIds:
        """The field numbers of the schema's first message and the messages nested in it, by path."""
        parsed = _parsed(file_set)
        by_name = {full: m for file in parsed.file for full, m in _messages(file)}
        own = parsed.file[-1]
        if not own.message_type:
            return ()
        first = f"{own.package}.{own.message_type[0].name}" if own.package else own.message_type[0].name
        return tuple(_numbered(by_name, first, (), set()))


def _numbered(by_name: dict[str, Any], message: str, path: tuple[str, ...], seen: set[str]) -> Any:
    if message in seen or message not in by_name:
        return
    seen = seen | {message}
    for field in by_name[message].field:
        yield (*path, field.name), f"{SOURCE_PREFIX}{field.number}"
        nested = field.type_name.lstrip(".")
        is_message = field.type == _TYPE_MESSAGE and not nested.startswith(_WELL_KNOWN)
        if is_message and field.label != _LABEL_REPEATED:  # repeated: a list, or a map
            yield from _numbered(by_name, nested, (*path, field.name), seen)


def _parsed(file_set: bytes) -> Any:
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FileDescriptorSet.FromString(file_set)


def _own_file(file_set: bytes) -> Any:
    return _parsed(file_set).file[-1]


def _messages(file: Any) -> list[tuple[str, Any]]:
    """Every message of ``file`` (nested ones too), with its full name."""
    found: list[tuple[str, Any]] = []

    def walk(messages: Any, prefix: str) -> None:
        for message in messages:
            full_name = f"{prefix}.{message.name}" if prefix else message.name
            found.append((full_name, message))
            walk(message.nested_type, full_name)

    walk(file.message_type, file.package)
    return found
