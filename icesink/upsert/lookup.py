"""Executor side of the lookup: find the rows holding a batch's keys, write their position deletes.

One :class:`~icesink.upsert.messages.LookupTask` per data file. The task reads only the key
columns of the file (found by field id, so renamed columns still match), row group by
row group, skipping groups whose statistics exclude every key; numbers the rows by their
position in the file; and keeps those whose key is one of the task's keys and that no
earlier position delete removed.

A Spark task of the lookup runs many lookup tasks and writes ONE position delete file
per partition (spec and values) it found rows in, holding the positions of every data
file of that partition it matched, sorted by path then position, as Iceberg Java's
writers do. The driver hands each Spark task the lookup tasks of whole partitions
(:mod:`icesink.upsert.lookup_slices`), so a batch writes at most
one delete file per partition touched, not one per data file: delete files grow with
batches x partitions, not batches x files.

The reader trade-off: a delete file that refers to several data files is
partition-scoped. A reader applies it to every data file of its partition (of an older
sequence number; readers that check the ``file_path`` bounds, to those between them),
reads all of its rows and keeps those of the data file at hand, where a file-scoped
delete file (one data file, equal bounds) is matched to its data file only. Fewer,
larger delete files mean fewer files to open and fewer manifest entries, at the price
of reading the positions of other data files of the partition; compaction removes both
kinds.

The driver runs the tasks with :func:`run_lookup` (one Spark job through ``mapInArrow``;
:func:`run_lookups` for several tables in one job) or, for a small plan, in its own
process with :func:`run_lookup_locally`.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO, load_file_io

from icesink.upsert.deleted_positions import DeletedPositions
from icesink.upsert.lookup_slices import KEY_SET, TASK, by_partition, deal_partitions, wire_rows
from icesink.upsert.messages import LookupReport, LookupTask
from icesink.write.messages import DataFileMessage, decode_keys
from icesink.write.position_deletes import PositionDeleteWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LookupSpec:
    """What every lookup task of a batch shares, shipped from the driver.

    Attributes:
        table: Table identifier, for messages.
        io_properties: Catalog/FileIO properties to open the file system on the executor.
        file_prefix: Start of every delete file name, unique per batch attempt.
        compression: Parquet codec of the delete files.
        location: The folder of every delete file (the batch attempt's own, so crash
            recovery finds them by one listing); ``None``: next to each data file.
    """

    table: str
    io_properties: dict[str, str]
    file_prefix: str
    compression: str = "zstd"
    location: str | None = None


@dataclass(frozen=True)
class LookupResult:
    """The delete files a lookup wrote, and what its tasks read."""

    delete_files: list[DataFileMessage]
    report: LookupReport


def find_rows(
    task: LookupTask, io: FileIO, deleted: DeletedPositions | None = None
) -> tuple[pa.Table, LookupReport]:
    """The live rows of the task's data file holding one of its keys.

    Args:
        task: The data file and the keys it can hold.
        io: The table's file system.
        deleted: The delete files read so far by this Spark task (a new one: none).

    Returns:
        ``file_path``, ``pos`` and the key columns of every match (position order), and
        what was read.
    """
    names = task.keys.column_names
    with io.new_input(task.data_file).open() as stream:
        parquet = pq.ParquetFile(stream)
        columns = columns_by_field_id(parquet.schema_arrow, task.key_field_ids, task.data_file)
        pieces: list[pa.Table] = []
        offset = rows_read = skipped = 0
        for group in range(parquet.metadata.num_row_groups):
            group_rows = parquet.metadata.row_group(group).num_rows
            if _group_excludes_keys(parquet.metadata.row_group(group), columns, task.keys):
                skipped += 1
            else:
                part = parquet.read_row_group(
                    group, columns=[parquet.schema_arrow.field(c).name for c in columns]
                )
                part = part.rename_columns(names).append_column(
                    "pos", pa.array(range(offset, offset + group_rows), pa.int64())
                )
                pieces.append(part)
                rows_read += group_rows
            offset += group_rows
    matched = _matches(pieces, task.keys)
    if matched.num_rows and task.delete_files:
        gone = (deleted or DeletedPositions(io)).of(task)
        matched = matched.filter(pc.invert(pc.is_in(matched.column("pos"), value_set=gone)))
    matched = matched.sort_by("pos")
    paths = pa.array([task.data_file] * matched.num_rows, pa.string())
    result = pa.table(
        [paths, matched.column("pos"), *(matched.column(n) for n in names)],
        names=["file_path", "pos", *names],
    )
    return result, LookupReport(1, rows_read, result.num_rows, skipped)


def lookup_and_write(
    tasks: Iterable[LookupTask], spec: LookupSpec, io: FileIO
) -> tuple[list[DataFileMessage], LookupReport]:
    """:func:`find_rows` for every task, then one position delete file per partition of the matches.

    Returns:
        The delete files written (none for a partition without a match), each named for
        the first task of its partition, and what the tasks read.
    """
    writers: dict[tuple[int, tuple[Any, ...]], PositionDeleteWriter] = {}
    report = LookupReport()
    deleted = DeletedPositions(io)
    for task in tasks:
        rows, task_report = find_rows(task, io, deleted)
        report += task_report
        if rows.num_rows == 0:
            continue
        writer = writers.get((task.spec_id, task.partition))
        if writer is None:
            folder = spec.location.rstrip("/") if spec.location else posixpath.dirname(task.data_file)
            writer = writers[(task.spec_id, task.partition)] = PositionDeleteWriter(
                io,
                f"{folder}/{spec.file_prefix}-deletes-{task.index:05d}.parquet",
                task.partition,
                task.spec_id,
                spec.compression,
            )
        writer.write(rows.select(["file_path", "pos"]).combine_chunks().to_batches()[0])
    messages: list[DataFileMessage] = []
    for writer in writers.values():
        writer.close()
        message = writer.result()
        messages += [message] if message is not None else []
    return messages, report


def run_lookup_locally(tasks: Iterable[LookupTask], spec: LookupSpec) -> LookupResult:
    """Run the tasks one after the other in this process (small plans, tests): one task of the lookup."""
    files, report = lookup_and_write(sorted(tasks, key=by_partition), spec, load_file_io(spec.io_properties))
    return LookupResult(files, report)


def run_lookup(
    spark: SparkSession, tasks: list[LookupTask], spec: LookupSpec, parallelism: int
) -> LookupResult:
    """Run the tasks in Spark's executors, at most ``parallelism`` Spark tasks (one job; the cores to use).

    Only the tasks' JSON travels to the executors and only the delete file messages
    and the reports come back: the driver reads no data file.
    """
    return run_lookups(spark, [(spec, tasks)], parallelism)[0]


def run_lookups(
    spark: SparkSession, lookups: Sequence[tuple[LookupSpec, list[LookupTask]]], parallelism: int
) -> list[LookupResult]:
    """The lookups of several tables (a routed batch's) in ONE Spark job; their results in order.

    Each Spark task gets whole partitions (:func:`~icesink.upsert.lookup_slices.deal_partitions`):
    at most one per partition touched and at most ``parallelism`` (the cores to use, never
    the session's shuffle partitions), so a partition gets at most one delete file. A
    partition's keys (:attr:`LookupTask.partition_keys`) travel once, not once per file.
    """
    work = [(n, task) for n, (_, tasks) in enumerate(lookups) for task in tasks]
    if not work:
        return [LookupResult([], LookupReport()) for _ in lookups]
    dealt = deal_partitions(work, parallelism)
    frame = spark.createDataFrame(wire_rows(dealt), "spec int, kind int, text string, slice int")
    frame = frame.repartitionByRange(len(dealt), "slice")
    specs = [spec for spec, _ in lookups]
    found = frame.mapInArrow(_lookups_function(specs), _RESULT_DDL).collect()
    reports = [LookupReport() for _ in lookups]
    files: list[list[DataFileMessage]] = [[] for _ in lookups]
    for n, text in found:
        if LookupReport.is_report(text):
            reports[n] += LookupReport.from_json(text)
        else:
            files[n].append(DataFileMessage.from_json(text))
    for spec, report, written in zip(specs, reports, files, strict=True):
        logger.info(
            "lookup for %s read %s files (%s rows), found %s rows, wrote %s delete files (prefix %s)",
            spec.table,
            report.files_read,
            report.rows_read,
            report.rows_matched,
            len(written),
            spec.file_prefix,
        )
    return [LookupResult(f, r) for f, r in zip(files, reports, strict=True)]


_RESULT_DDL = "spec int, message string"
_RESULT_SCHEMA = pa.schema([("spec", pa.int32()), ("message", pa.string())])


def _lookups_function(
    specs: list[LookupSpec],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of :func:`run_lookups`: wire rows in, ``(spec, message)`` out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [
            row for batch in batches for row in zip(*(c.to_pylist() for c in batch.columns[:3]), strict=True)
        ]
        shipped = (json.loads(text) for _, kind, text in rows if kind == KEY_SET)
        key_sets = {name: decode_keys(encoded) for name, encoded in shipped}
        by_spec: dict[int, list[LookupTask]] = {}
        for n, kind, text in rows:
            if kind == TASK:
                by_spec.setdefault(n, []).append(LookupTask.from_json(text, key_sets))
        numbers: list[int] = []
        texts: list[str] = []
        for n, tasks in sorted(by_spec.items()):
            messages, report = lookup_and_write(tasks, specs[n], load_file_io(specs[n].io_properties))
            texts += [message.to_json() for message in messages] + [report.to_json()]
            numbers += [n] * (len(messages) + 1)
        yield pa.RecordBatch.from_arrays(
            [pa.array(numbers, pa.int32()), pa.array(texts, pa.string())], schema=_RESULT_SCHEMA
        )

    return run


def columns_by_field_id(schema: pa.Schema, field_ids: tuple[int, ...], path: str) -> list[int]:
    """Indexes of the top-level file columns with these Iceberg field ids."""
    by_id = {
        int(field.metadata[b"PARQUET:field_id"]): index
        for index, field in enumerate(schema)
        if field.metadata and b"PARQUET:field_id" in field.metadata
    }
    missing = [fid for fid in field_ids if fid not in by_id]
    if missing:
        raise ValueError(f"data file {path} has no column with field id {missing}")
    return [by_id[fid] for fid in field_ids]


def _group_excludes_keys(row_group: pq.RowGroupMetaData, columns: list[int], keys: pa.Table) -> bool:
    """Whether a row group's min/max statistics leave none of ``keys`` possible."""
    mask = None
    for index, column in enumerate(columns):
        stats = row_group.column(column).statistics
        if stats is None or not stats.has_min_max:
            continue
        key = keys.column(index)
        try:
            inside = pc.and_(
                pc.greater_equal(key, pa.scalar(stats.min).cast(key.type)),
                pc.less_equal(key, pa.scalar(stats.max).cast(key.type)),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue  # statistics not comparable with the key's type: read the group
        mask = inside if mask is None else pc.and_(mask, inside)
    return mask is not None and not pc.any(mask).as_py()


def _matches(pieces: list[pa.Table], keys: pa.Table) -> pa.Table:
    """Rows of ``pieces`` (key columns and ``pos``) whose key is in ``keys``."""
    names = keys.column_names
    if not pieces:
        return keys.slice(0, 0).append_column("pos", pa.array([], pa.int64()))
    rows = pa.concat_tables(pieces)
    if len(names) == 1:
        return rows.filter(pc.is_in(rows.column(0), value_set=keys.column(0).combine_chunks()))
    wanted = keys.group_by(names, use_threads=False).aggregate([])
    return rows.join(wanted, keys=names, join_type="inner", use_threads=False)
