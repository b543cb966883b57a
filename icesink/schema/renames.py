"""Renamed columns: a batch field that says which table column it was, kept with its data.

Iceberg identifies a column by its field id, not its name, so a column renamed in the
table keeps every value written under its old name. A batch says that a field is a
renamed column with the Spark field metadata :data:`RENAMED_FROM` (a name, or a list of
the names it had, oldest first or in any order)::

    StructField("customer_id", LongType(), True, {"icesink.renamed-from": ["cust_id"]})

on a top-level field or on a member of a struct (at any depth; the names are those of the
same struct). Any source can set it: the Kafka job does for Avro fields with ``aliases``.
A field may instead (or too) carry a source id (:mod:`icesink.schema.source_ids`: the Kafka
job's Protobuf field numbers), which the column keeps: a field whose source id is a
column's of another name is that column renamed, as below. For each such field of
a batch, matched against the table's fields of the same struct (names as the sink matches
them, ignoring case unless ``schema.case-sensitive``):

- the table has a column of one of those names (not offered by the batch under its own
  name) and none of the field's name: :class:`RenameColumn`, a schema change the
  :class:`~icesink.schema.coordinator.SchemaCoordinator` commits under the table's lock
  like the others (same field id: the rows written before read under the new name);
- the table has a column of the field's name and none of the old ones: renamed already
  (by an earlier batch, a replay, another writer): nothing to do;
- the table has neither: the field is a new column, as any other;
- the table has a column of the field's name *and* another of an old name: the batch
  cannot say which is which. That is a :class:`RenameConflict`: nothing is changed, and
  every row of the batch goes to the dead-letter table with the reason
  ``rename_conflict`` and the :class:`~icesink.errors.RenameConflictError` naming both
  columns and the fix, so no row is lost and the stream goes on;
- the table has columns of two of the old names (and none of the new one): the batch
  fails with that error (two columns cannot become one).

A field that the batch also offers under its old name (``old`` and ``new`` renamed from
``old`` side by side) is not a rename: the old column keeps its values and ``new`` is a
new column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pyiceberg.types import NestedField
from pyspark.sql import types as st

from icesink.errors import RenameConflictError
from icesink.schema.source_ids import RecordSourceId, doc_source_id, doc_with_source_id, source_id

RENAMED_FROM = "icesink.renamed-from"
"""Spark field metadata: the names a batch field had in the table (a string or a list of strings)."""

_FIX = (
    "drop or rename one of the two columns in the table (ALTER TABLE ... DROP/RENAME COLUMN), "
    f"or remove {RENAMED_FROM} (the source's alias) from the field; then replay the dead letters"
)


def renamed_from(field: st.StructField) -> tuple[str, ...]:
    """The names ``field`` had, from its :data:`RENAMED_FROM` metadata (empty without it)."""
    value = (field.metadata or {}).get(RENAMED_FROM)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def with_renamed_from(field: st.StructField, names: Sequence[str]) -> st.StructField:
    """``field`` with :data:`RENAMED_FROM` set to ``names`` (its other metadata kept)."""
    metadata = {**(field.metadata or {}), RENAMED_FROM: list(names)}
    return st.StructField(field.name, field.dataType, field.nullable, metadata)


@dataclass(frozen=True)
class RenameColumn:
    """Rename a column of the table, keeping its field id (and so its data).

    Attributes:
        parent: Full Iceberg path of the struct holding it, in the table's current names.
        old: Its name in the table.
        new: The name the batch gives it.
    """

    kind: ClassVar[Literal["rename_column"]] = "rename_column"
    parent: tuple[str, ...]
    old: str
    new: str

    @property
    def path(self) -> tuple[str, ...]:
        return (*self.parent, self.old)

    def __str__(self) -> str:
        return f"rename column {'.'.join(self.path)} to {self.new}"


@dataclass(frozen=True)
class RenameConflict:
    """A batch field renamed from a column, to the name of another column of the table.

    Attributes:
        parent: Path of the struct (table names).
        name: The field's name, a column of the table already.
        others: The table's columns of the field's old names.
    """

    parent: tuple[str, ...]
    name: str
    others: tuple[str, ...]

    def error(self, table: str | None) -> RenameConflictError:
        """The error naming both columns and the fix."""
        where = ".".join(self.parent)
        column = ".".join((*self.parent, self.name))
        others = ", ".join(repr(".".join((*self.parent, o)) if where else o) for o in self.others)
        return RenameConflictError(
            f"batch column {column!r} is renamed from {others} ({RENAMED_FROM}), but the table has "
            f"both {column!r} and {others}: the batch's rows go to the dead-letter table",
            table=table,
            hint=_FIX,
        )


@dataclass(frozen=True)
class StructRenames:
    """What the renamed fields of one struct of a batch come to (:func:`match_renamed`).

    Attributes:
        renames: The columns to rename, and the source ids to keep on columns.
        matched: Table field index -> batch field index, with the renamed fields.
        extra: Batch field indexes that are new columns.
        conflicts: Batch field index -> its conflict.
    """

    renames: tuple[RenameColumn | RecordSourceId, ...]
    matched: dict[int, int]
    extra: list[int]
    conflicts: dict[int, RenameConflict]


def match_renamed(
    table_fields: Sequence[NestedField],
    batch_fields: Sequence[st.StructField],
    matched: dict[int, int],
    extra: list[int],
    path: tuple[str, ...],
    case_sensitive: bool,
    table: str | None = None,
) -> StructRenames:
    """The renames of one struct, given its fields matched by name (see the module).

    A field's source id (:mod:`icesink.schema.source_ids`) is its identity first: the column
    that keeps it is the field, renamed if its name differs; then its old names.

    Args:
        table_fields: The table's fields of the struct.
        batch_fields: The batch's fields of the struct.
        matched: Table field index -> batch field index, matched by name.
        extra: Batch field indexes no table field has the name of.
        path: The struct's path (table names).
        case_sensitive: Whether names match in case.
        table: For the error.

    Raises:
        RenameConflictError: A new field's old names are two columns of the table.
    """
    if not any(renamed_from(f) or source_id(f) for f in batch_fields):
        return StructRenames((), matched, extra, {})
    lookup = _Lookup(table_fields, case_sensitive)
    offered = set(matched)  # table columns the batch offers under their own name
    renames: list[RenameColumn | RecordSourceId] = []
    all_matched = dict(matched)
    new_columns: list[int] = []
    for b in extra:
        hits = lookup.identified(batch_fields[b], exclude=offered | set(all_matched))
        if not hits:
            new_columns.append(b)
            continue
        if len(hits) > 1:
            conflict = RenameConflict(path, batch_fields[b].name, tuple(table_fields[t].name for t in hits))
            raise conflict.error(table)
        (t,) = hits
        renames.append(RenameColumn(path, table_fields[t].name, batch_fields[b].name))
        all_matched[t] = b
    conflicts = {}
    for t, b in matched.items():
        hits = [h for h in lookup.identified(batch_fields[b], exclude=offered) if h != t]
        if hits:
            others = tuple(table_fields[h].name for h in hits)
            conflicts[b] = RenameConflict(path, table_fields[t].name, others)
    for t, b in sorted(all_matched.items()):
        sid = source_id(batch_fields[b])
        doc = table_fields[t].doc
        if sid is not None and b not in conflicts and doc_source_id(doc) is None:
            renames.append(RecordSourceId((*path, table_fields[t].name), sid, doc_with_source_id(doc, sid)))
    return StructRenames(tuple(renames), all_matched, new_columns, conflicts)


class _Lookup:
    """Table field indexes by source id, by name: the exact name, else (ignoring case) the one
    that matches."""

    def __init__(self, fields: Sequence[NestedField], case_sensitive: bool) -> None:
        self._by_source_id = {sid: t for t, f in enumerate(fields) if (sid := doc_source_id(f.doc))}
        self._exact = {f.name: t for t, f in enumerate(fields)}
        self._folded: dict[str, list[int]] = {}
        if not case_sensitive:
            for t, f in enumerate(fields):
                self._folded.setdefault(f.name.lower(), []).append(t)

    def identified(self, field: st.StructField, exclude: set[int]) -> list[int]:
        """The columns ``field`` is: the one keeping its source id, else those of its old names."""
        sid = source_id(field)
        t = None if sid is None else self._by_source_id.get(sid)
        if t is not None:
            return [] if t in exclude else [t]
        return self.indexes(renamed_from(field), exclude)

    def indexes(self, names: Sequence[str], exclude: set[int]) -> list[int]:
        found: list[int] = []
        for name in names:
            t = self._exact.get(name)
            if t is None:
                folded = self._folded.get(name.lower(), [])
                t = folded[0] if len(folded) == 1 else None
            if t is not None and t not in exclude and t not in found:
                found.append(t)
        return found
