"""Synthetic data files for the commit benchmarks: entries a commit never opens, and a history of them.

A real file written by the sink's own writer (:func:`_template_file`) is the template;
:func:`_synthetic_files` copies its entry under fresh paths, :func:`fill_history` adds
one-file snapshots of them until a table keeps as many as asked.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata

from benchmarks._write_specs import table_write_spec
from icesink._pyiceberg import commit_table_updates
from icesink.commit.snapshot import SnapshotProducer
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.manifest_entry import (
    EntryEncoding,
    data_file_from_message,
    encoded_entry,
    manifest_codec,
    sync_marker,
)
from icesink.write.messages import DataFileMessage
from icesink.write.task import DataTaskWriter

# ``--partitioned``: a wide commit's file i is in bucket i of id (mod BUCKETS).
BUCKETS = 16384


def _synthetic_files(
    table: Table, template: DataFileMessage, count: int, tag: str, encode: bool = True
) -> list[DataFileMessage]:
    """``count`` file entries like ``template`` under fresh paths (never opened by a commit).

    With ``encode``, each carries its manifest entry as a write task encodes it (the
    write's sync marker from ``tag``); without, the committer encodes the entries.
    """
    folder = f"{table.location()}/data/{tag}"
    plain = template  # its statistics in the message, no entry
    messages = [
        replace(plain, path=f"{folder}/f{i:06d}.parquet", partition=(i % BUCKETS,) if plain.partition else ())
        for i in range(count)
    ]
    if not encode:
        return messages
    codec = manifest_codec(table.metadata.properties)
    encoding = EntryEncoding(table.spec(), table.schema(), codec, sync_marker(tag))
    return [encoding.with_entry(m) for m in messages]


def _template_file(table: Table, root: Path) -> DataFileMessage:
    """A real file of ``table``'s columns: an id, a string, then doubles (the wide commits' columns)."""
    spec = table_write_spec(
        table,
        "template",
        target_file_size_bytes=1 << 20,
        row_group_size_bytes=1 << 20,
        memory_budget_bytes=64 << 20,
        name="bench.compare",
    )
    file_schema = iceberg_to_arrow_schema(table.schema())
    doubles = [pa.array([i * 0.5 + c for i in range(100)]) for c in range(len(file_schema) - 2)]
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(100)), pa.array([str(i) for i in range(100)]), *doubles], schema=file_schema
    )
    written = DataTaskWriter(spec, 0, 0).write_all(iter([rows]))[0]
    codec = manifest_codec(table.metadata.properties)
    return EntryEncoding(table.spec(), table.schema(), codec, b"").without_entry(written)


def fill_history(table: Table, template: DataFileMessage, target: int, per_call: int = 100) -> None:
    """Add one-file append snapshots to ``table`` until it keeps ``target``, ``per_call`` per catalog call.

    Each snapshot adds one synthetic entry like ``template`` (never opened) and is built by
    the sink's producer on the metadata the previous one made (applied locally), so the
    history is what single commits leave, only quicker made.
    """
    table.refresh()
    while len(table.snapshots()) < target:
        base = table.metadata
        updates: list[TableUpdate] = []
        first: tuple[TableRequirement, ...] | None = None
        for _ in range(min(per_call, target - len(base.snapshots))):
            producer = SnapshotProducer(table, Operation.APPEND)
            message = _synthetic_files(table, template, 1, f"fill{len(base.snapshots)}")[0]
            producer.add_file(data_file_from_message(message), encoded_entry(message))
            pending = producer.build(base)
            first = first or pending.requirements
            updates += pending.updates
            base = update_table_metadata(base, pending.updates)
        commit_table_updates(table, tuple(updates), first or ())
