"""icesink.commit.summary: the same summary as pyiceberg's collector, partition paths cached."""

from __future__ import annotations

import itertools

from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import SnapshotSummaryCollector
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, LongType, NestedField, StringType

from icesink.commit.summary import SummaryCollector

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "kind", StringType(), required=False),
    NestedField(3, "day", DateType(), required=False),
)
SPECS = {
    0: PartitionSpec(spec_id=0),
    1: PartitionSpec(
        PartitionField(1, 1000, BucketTransform(8), "id_bucket"),
        PartitionField(2, 1001, IdentityTransform(), "kind"),
        PartitionField(3, 1002, DayTransform(), "day_day"),
        PartitionField(2, 1003, TruncateTransform(2), "kind/trunc"),
        spec_id=1,
    ),
}
KINDS = ["a b", "x/y=z", "null", None, "é%", ""]


def data_file(n: int, spec_id: int, content: DataFileContent = DataFileContent.DATA) -> DataFile:
    kind = KINDS[n % len(KINDS)]
    partition = (
        Record()
        if spec_id == 0
        else Record(
            n % 8, kind, None if n % 5 == 0 else 19000 + n % 3, kind[:2] if kind is not None else None
        )
    )
    data_file = DataFile.from_args(
        content=content,
        file_path=f"f{n}.parquet",
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=10 + n,
        file_size_in_bytes=1000 + n,
    )
    data_file.spec_id = spec_id
    return data_file


def test_the_summary_is_pyicebergs_with_every_partition_named_alike() -> None:
    ours, theirs = SummaryCollector(partition_summary_limit=1000), SnapshotSummaryCollector(1000)
    contents = itertools.cycle([DataFileContent.DATA, DataFileContent.DATA, DataFileContent.POSITION_DELETES])
    for n, content in zip(range(300), contents, strict=False):
        file = data_file(n, spec_id=n % 2 if content == DataFileContent.DATA else 1, content=content)
        for collector in (ours, theirs):
            if n % 7 == 0:
                collector.remove_file(file, SCHEMA, SPECS[file.spec_id])
            else:
                collector.add_file(file, SCHEMA, SPECS[file.spec_id])
    built = ours.build()
    assert int(built["changed-partition-count"]) > 20
    assert sum(key.startswith("partitions.") for key in built) == int(built["changed-partition-count"])
    assert built == theirs.build()
