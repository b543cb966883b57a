"""A snapshot's summary: pyiceberg's counts of the files, rows and partitions it changes.

pyiceberg's ``SnapshotSummaryCollector`` names each file's partition with
``PartitionSpec.partition_to_path``, which builds the spec's partition type (pydantic
models) anew for every file: a commit of 16,384 files in as many partitions spent over
a second there. :class:`SummaryCollector` is that collector with the partition type built
once per spec and each partition's path once per value; the summary is the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote_plus

from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.transforms import Transform
from pyiceberg.types import IcebergType


class SummaryCollector(SnapshotSummaryCollector):
    """pyiceberg's summary collector, each partition's path computed once."""

    def __init__(self, partition_summary_limit: int = 0) -> None:
        super().__init__(partition_summary_limit=partition_summary_limit)
        self._fields: dict[int, list[tuple[str, Transform[Any, Any], IcebergType]]] = {}
        self._paths: dict[tuple[int, tuple[Any, ...]], str] = {}

    def update_partition_metrics(
        self, partition_spec: PartitionSpec, file: DataFile, is_add_file: bool, schema: Schema
    ) -> None:
        """Count ``file`` as added to (or removed from) its partition."""
        metrics = self.partition_metrics[self._path(partition_spec, file, schema)]
        if is_add_file:
            metrics.add_file(file)
        else:
            metrics.remove_file(file)

    def _path(self, spec: PartitionSpec, file: DataFile, schema: Schema) -> str:
        """What ``spec.partition_to_path(file.partition, schema)`` returns, from the caches."""
        values = tuple(file.partition[i] for i in range(len(spec.fields)))
        key = (spec.spec_id, values)
        path = self._paths.get(key)
        if path is None:
            fields = self._fields.get(spec.spec_id)
            if fields is None:
                types = [f.field_type for f in spec.partition_type(schema).fields]
                fields = [(_quoted(f.name), f.transform, t) for f, t in zip(spec.fields, types, strict=True)]
                self._fields[spec.spec_id] = fields
            path = self._paths[key] = "/".join(
                f"{name}={_quoted(transform.to_human_string(field_type, value=value))}"
                for (name, transform, field_type), value in zip(fields, values, strict=True)
            )
        return path


def _quoted(text: str) -> str:
    """``quote_plus(text, safe="")``, which leaves these characters as they are."""
    return text if _UNQUOTED.fullmatch(text) else quote_plus(text, safe="")


_UNQUOTED = re.compile(r"[A-Za-z0-9_.\-~]*")


def snapshot_summary(
    base: TableMetadata,
    parent: Snapshot | None,
    operation: Operation,
    changes: tuple[Iterable[DataFile], Iterable[DataFile]],
    properties: Mapping[str, str],
) -> Summary:
    """The summary of a snapshot of ``operation`` on ``base`` adding and removing ``changes``' files.

    Args:
        base: The metadata the snapshot is built on (its properties, schema and specs).
        parent: The snapshot's parent, whose totals the summary carries on.
        operation: ``append``, ``overwrite`` or ``replace``.
        changes: The files added, and the files removed.
        properties: Extra summary entries.
    """
    limit = int(
        base.properties.get(
            TableProperties.WRITE_PARTITION_SUMMARY_LIMIT,
            TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT,
        )
    )
    collector = SummaryCollector(partition_summary_limit=limit)
    schema, specs = base.schema(), base.specs()
    added, removed = changes
    for data_file in added:
        collector.add_file(data_file, schema=schema, partition_spec=specs[data_file.spec_id])
    for data_file in removed:
        collector.remove_file(data_file, schema=schema, partition_spec=specs[data_file.spec_id])
    # pyiceberg totals up append, overwrite and delete only; a replace adds up the same way.
    counted = Operation.OVERWRITE if operation == Operation.REPLACE else operation
    summary = update_snapshot_summaries(
        Summary(operation=counted, **collector.build(), **properties),
        previous_summary=parent.summary if parent else None,
    )
    if counted is operation:
        return summary
    return Summary(operation=operation, **summary.additional_properties)
