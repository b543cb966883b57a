"""Renamed Avro fields: a field's ``aliases`` name the fields it was, in the table too.

Avro says a field was renamed by listing its old names in ``aliases`` (``{"name":
"customer_id", "type": "long", "aliases": ["cust_id"]}``), and a reader resolves an older
writer's ``cust_id`` to its ``customer_id``. The job does the same with the schemas it has
seen (:class:`AvroAliases`, for the life of the job):

- each writer schema is read with a reader schema whose fields take the names of the newest
  schema that aliases them (:meth:`AvroAliases.reader`): a value of version 1 in the same
  batch as (or after) version 2 gives ``customer_id`` too, not a column ``cust_id``;
- the rows' field ``customer_id`` carries its aliases as ``icesink.renamed-from``
  (:meth:`AvroAliases.renamed`), and the sink renames the table's column ``cust_id`` to it,
  keeping its field id and values (:mod:`icesink.schema.renames`: once, a replay or a later
  batch finds it done; a table that has both names sends the batch's rows to the dead-letter
  table, naming both).

Fields of records nested in records (or in a union with ``null``) are followed; fields of
records inside arrays and maps are not renamed. A Debezium envelope's row image
(``before``/``after``, ``debezium-avro``) is the row: its fields are the rows' top-level ones.

A job restarted with only values of the older version in its first batches writes them under
the old name, as a new column (it has not seen the aliases yet): producers that moved to the
new version stay on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from icesink.jobs.kafka.decode.spec import FieldRenames

Path = tuple[str, ...]


class AvroAliases:
    """The field aliases of the Avro schemas seen (see the module)."""

    def __init__(self) -> None:
        self._new_names: dict[Path, dict[str, str]] = {}  # struct path: old name -> new name
        self._given_by: dict[tuple[Path, str], int] = {}  # (struct path, old name): schema id
        self._learned: set[int] = set()

    def learn(self, schema_id: int, text: str) -> None:
        """Take the aliases of schema ``schema_id`` (its ``text``); of two schemas aliasing one
        name, the newer (higher id) names the field."""
        if schema_id in self._learned:
            return
        self._learned.add(schema_id)
        record = _record(text)
        if record is None:
            return
        for path, field in _fields(record, ()):
            aliases = field.get("aliases")
            if not isinstance(aliases, list):
                continue
            for alias in aliases:
                if not isinstance(alias, str) or alias == field["name"]:
                    continue
                if self._given_by.get((path, alias), -1) < schema_id:
                    self._new_names.setdefault(path, {})[alias] = field["name"]
                    self._given_by[(path, alias)] = schema_id

    def renamed(self) -> FieldRenames:
        """Each field the aliases rename, with the names it had (followed through chains)."""
        found: dict[Path, list[str]] = {}
        for path, names in self._new_names.items():
            for old in names:
                found.setdefault((*path, self.current(path, old)), []).append(old)
        return tuple((path, tuple(sorted(olds))) for path, olds in sorted(found.items()))

    def current(self, path: Path, name: str) -> str:
        """The newest name of field ``name`` of the struct at ``path``."""
        names = self._new_names.get(path, {})
        seen = {name}
        while name in names and names[name] not in seen:
            name = names[name]
            seen.add(name)
        return name

    def reader(self, record: dict[str, Any]) -> dict[str, Any]:
        """The writer's ``record`` schema with its fields given their newest names, the old names as
        aliases (Avro's resolution then reads the writer's fields into them)."""
        return self._renamed_record(record, ())

    def _renamed_record(self, record: dict[str, Any], path: Path) -> dict[str, Any]:
        own = {f.get("name") for f in record["fields"] if isinstance(f, dict)}
        fields = []
        for field in record["fields"]:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                fields.append(field)
                continue
            name = self.current(path, field["name"])
            renamed = dict(field)
            if name != field["name"] and name not in own:
                renamed.update(name=name, aliases=[field["name"], *field.get("aliases", [])])
            renamed["type"] = self._renamed_type(field["type"], (*path, renamed["name"]))
            fields.append(renamed)
        return {**record, "fields": fields}

    def _renamed_type(self, avro_type: Any, path: Path) -> Any:
        if _is_record(avro_type):
            return self._renamed_record(avro_type, path)
        if isinstance(avro_type, list):
            return [self._renamed_type(t, path) if _is_record(t) else t for t in avro_type]
        return avro_type


def _record(text: str) -> dict[str, Any] | None:
    try:
        schema = json.loads(text)
    except ValueError:
        return None
    return schema if _is_record(schema) else None


def _is_record(avro_type: Any) -> bool:
    return (
        isinstance(avro_type, dict)
        and avro_type.get("type") == "record"
        and isinstance(avro_type.get("fields"), list)
    )


def _fields(record: dict[str, Any], path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every named field of ``record`` and of the records nested in it, with its struct's path."""
    for field in record["fields"]:
        if not isinstance(field, dict) or not isinstance(field.get("name"), str):
            continue
        yield path, field
        types = field["type"] if isinstance(field.get("type"), list) else [field.get("type")]
        for nested in types:
            if isinstance(nested, dict) and _is_record(nested):
                yield from _fields(nested, (*path, field["name"]))
