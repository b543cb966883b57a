"""A micro-batch of Parquet files, read by the write tasks themselves.

A file source's micro-batch (``spark.readStream.schema(...).parquet(path)``) reaches the sink
as Spark's rows: Spark's reader decodes each row group into columns, makes rows of them and
Arrow of the rows for the write tasks, which costs the JVM about as much CPU as the write
tasks spend writing them (``benchmarks/README.md``, "Input layout and a plain SparkSession").
When the batch is nothing but the files' columns, the write tasks read the row groups with
pyarrow instead (:mod:`icesink.write.parquet_input`): the batch is an
:class:`~icesink.batch.source_write.ArrowSource` over ``spark.range``, whose rows only number
each task's share. There are as many shares as Spark's read has tasks (one when the route step
coalesced the batch), so the batch is written in the same files as through Spark.

Only when Spark and pyarrow read the same values; any other batch reads through Spark, as before:

- the batch's plan is one scan of Parquet files (``spark.read.parquet`` or a file source's
  micro-batch handed to ``foreachBatch`` as it is): no filter, no added or dropped column, no
  partition column from directory names, no read option but the source's own
  (:data:`SOURCE_OPTIONS`), none of Spark's settings that make it skip or match files otherwise
  (:data:`READ_SETTINGS`);
- the files are on the local file system (or mounted there), at most :data:`MAX_FILES`;
- every file has each of the table's columns under its exact name (and no other name equal but
  in case), in a type that holds the same values (:func:`~icesink.write.parquet_input.readable_as`:
  no INT96, no other timestamp unit, no wider integer), and no mark of Spark's legacy calendar
  (which Spark's reader would rebase);
- each row group's statistics put every date and timestamp within the range the sink writes
  (a column without them is read through Spark, which checks every value), so no row can be bad;
- the sink appends (an upsert splits its changes in Spark), and the route step moves no row: its
  distribution mode is ``none``, or it wrote the batch in one task (:mod:`icesink.route.one_task`:
  on two local cores, whenever one task holds it), as any mode may.

The batch is the same attempt as any other: files, records and the commit do not change.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession

from icesink.batch.parquet_footers import Footer, in_range, read_footer, readable, row_bytes
from icesink.config import DistributionMode
from icesink.route.routed import RoutedBatch
from icesink.schema.casts import arrow_range
from icesink.spark_session import is_connect, streaming_query_of
from icesink.type_mapping import row_schema_of
from icesink.write.parquet_input import RowRange, read_function
from icesink.write.task import ArrowFunction

logger = logging.getLogger(__name__)

# Read options of a file source that choose files, not how they are read (lower case, as Spark keeps them).
SOURCE_OPTIONS = frozenset(
    {
        "path",
        "paths",
        "basepath",
        "__globpaths__",
        "maxfilespertrigger",
        "maxbytespertrigger",
        "latestfirst",
        "filenameonly",
        "maxfileage",
        "maxcachedfiles",
        "discardcachedinputratio",
        "cleansource",
        "sourcearchivedir",
        "pathglobfilter",
        "recursivefilelookup",
        "modifiedbefore",
        "modifiedafter",
        "mergeschema",
    }
)
# Spark's settings that change what its Parquet reader gives, with the value that does not.
READ_SETTINGS = {
    "spark.sql.files.ignoreCorruptFiles": "false",
    "spark.sql.files.ignoreMissingFiles": "false",
    "spark.sql.parquet.fieldId.read.enabled": "false",
    "spark.sql.parquet.int96TimestampConversion": "false",
}
MAX_FILES = 2_000  # beyond this many files, reading every footer in the driver costs more than it saves
_PLAN_WRAPPERS = frozenset({"WholeStageCodegenExec", "ColumnarToRowExec", "InputAdapter"})
_FOOTER_THREADS = 8
_REBASE_SETTINGS = ("spark.sql.parquet.datetimeRebaseModeInRead", "spark.sql.parquet.int96RebaseModeInRead")


def may_read_parquet(routed: RoutedBatch, upsert: bool) -> bool:
    """Whether a batch so routed may be read by its write tasks: appended, its rows staying in the
    tasks that read them (``none``, or coalesced into one task in any mode), no column added."""
    return (
        not upsert
        and not routed.in_driver
        and (routed.mode is DistributionMode.NONE or routed.single_task)
        and len(routed.df.columns) == routed.num_data_columns
    )


@dataclass(frozen=True)
class ParquetBatch:
    """A batch of Parquet files its write tasks read: what an
    :class:`~icesink.batch.source_write.ArrowSource` of them holds, and Spark's scan of them."""

    df: DataFrame  # spark.range: a row per share
    function: ArrowFunction  # a share's rows, read
    rows: int
    in_range_columns: frozenset[str]
    row_bytes: int
    scan: Any = field(repr=False)  # the plan's FileSourceScanExec

    def count_in_spark(self) -> None:
        """Count the rows in Spark's scan, which then never runs: the query's progress
        (``numInputRows``, rows a second, :mod:`icesink.progress`) counts what the tasks read."""
        try:
            self.scan.metrics().apply("numOutputRows").add(self.rows)
        except Exception:  # Spark's internals: a version without them only loses the count
            logger.debug("the rows read could not be counted in Spark's scan", exc_info=True)


def parquet_source(batch_df: DataFrame, table: Table, one_task: bool) -> ParquetBatch | None:
    """``batch_df`` as Parquet files its write tasks read (see the module), or ``None``: Spark reads it.

    ``one_task``: the route step coalesced the batch into one task.
    """
    scanned = _scanned_files(batch_df)
    if scanned is None:
        return None
    paths, tasks, scan = scanned
    target = row_schema_of(table)
    ranged = [f.name for f in target if arrow_range(f.type) is not None]
    legacy = _legacy_rebase(batch_df.sparkSession)
    if legacy is None:
        return None

    def check(path: str) -> Footer | None:
        footer = read_footer(path)
        if footer is None or not readable(footer, target, legacy) or not in_range(footer, target, ranged):
            logger.info("a Parquet file of the batch is read through Spark: %s", path)
            return None
        return footer

    with ThreadPoolExecutor(min(_FOOTER_THREADS, len(paths))) as pool:
        footers = list(pool.map(check, paths))
    if any(f is None for f in footers):
        return None
    groups: list[tuple[int, int, int, int]] = []  # file, row group, rows, bytes
    for index, footer in enumerate(f for f in footers if f is not None):
        for g in range(footer.metadata.num_row_groups):
            group = footer.metadata.row_group(g)
            if group.num_rows:
                groups.append((index, g, group.num_rows, group.total_byte_size))
    rows = sum(g[2] for g in groups)
    if not rows:
        return None
    shares = plan_shares(groups, 1 if one_task else tasks)
    df = batch_df.sparkSession.range(0, len(shares), 1, len(shares))
    width = max(row_bytes(f, target) for f in footers if f is not None)
    logger.info("the write tasks read the batch's %d Parquet files themselves (%d rows)", len(paths), rows)
    function = read_function(paths, shares, target)
    return ParquetBatch(df, function, rows, frozenset(ranged), width, scan)


def _legacy_rebase(spark: SparkSession) -> bool | None:
    """Whether the session reads the dates and timestamps of files that are not Spark's in the legacy
    calendar (``None``: in a mode not known here)."""
    modes = {str(spark.conf.get(k, "EXCEPTION")).upper() for k in _REBASE_SETTINGS}
    if not modes <= {"EXCEPTION", "CORRECTED", "LEGACY"}:
        return None
    return "LEGACY" in modes


def plan_shares(groups: Sequence[tuple[int, int, int, int]], tasks: int) -> list[list[RowRange]]:
    """The row groups ``(file, group, rows, bytes)`` as ``tasks`` shares of about equal bytes (fewer
    when there are fewer rows), a row group cut into ranges of rows when there are fewer than tasks."""
    pieces = [(b, RowRange(f, g, 0, r)) for f, g, r, b in groups]
    while len(pieces) < tasks:
        size, largest = max(pieces, key=lambda p: p[1].stop - p[1].start)
        rows = largest.stop - largest.start
        if rows < 2:
            break
        pieces.remove((size, largest))
        middle = largest.start + rows // 2
        pieces += [(size // 2, RowRange(largest.file, largest.group, largest.start, middle))]
        pieces += [(size - size // 2, RowRange(largest.file, largest.group, middle, largest.stop))]
    shares: list[list[RowRange]] = [[] for _ in range(min(tasks, len(pieces)))]
    loads = [0] * len(shares)
    for size, piece in sorted(pieces, key=lambda p: (-p[0], p[1].file, p[1].group, p[1].start)):
        least = loads.index(min(loads))  # the largest pieces first, each to the least loaded share
        shares[least].append(piece)
        loads[least] += size
    for share in shares:
        share.sort(key=lambda p: (p.file, p.group, p.start))  # each file read front to back
    return shares


def _scanned_files(batch_df: DataFrame) -> tuple[list[str], int, Any] | None:
    """The local paths of the Parquet files ``batch_df`` is a plain scan of, and the tasks of Spark's read."""
    spark = batch_df.sparkSession
    if is_connect(spark) or any(str(spark.conf.get(k, v)).lower() != v for k, v in READ_SETTINGS.items()):
        return None
    try:
        scan = _scan_of(batch_df)
        if scan is None:
            return None
        relation = scan.relation()
        if (
            relation.fileFormat().getClass().getSimpleName() != "ParquetFileFormat"
            or not relation.partitionSchema().isEmpty()
            or not relation.bucketSpec().isEmpty()
            or not scan.dataFilters().isEmpty()
            or not scan.partitionFilters().isEmpty()
            or scan.output().size() != len(batch_df.schema.fields)
            or scan.requiredSchema().length() != len(batch_df.schema.fields)
        ):
            return None
        options = str(relation.options().keys().mkString("\n")).split("\n")
        if any(o and o.lower() not in SOURCE_OPTIONS for o in options):
            return None
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        files = jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(relation.location().inputFiles())
        uris = [u for u in str(files.mkString("\n")).split("\n") if u]
        tasks = int(scan.inputRDD().getNumPartitions())
    except Exception:  # Spark's internals: a version without them reads through Spark
        logger.debug("the plan of a batch could not be read", exc_info=True)
        return None
    paths = [_local_path(u) for u in uris]
    if not paths or len(paths) > MAX_FILES or any(p is None for p in paths):
        return None
    return [p for p in paths if p is not None], max(1, tasks), scan


def _scan_of(batch_df: DataFrame) -> Any:
    """The physical plan's one ``FileSourceScanExec``, when the plan is nothing else."""
    analyzed = batch_df._jdf.queryExecution().analyzed()
    kind = analyzed.getClass().getSimpleName()
    if kind == "LogicalRelation":  # spark.read: the DataFrame's own plan
        execution = batch_df._jdf.queryExecution()
    elif kind == "LogicalRDD":  # foreachBatch: the rows of the micro-batch's plan, already made
        execution = _micro_batch_execution(batch_df, analyzed)
        if execution is None:
            return None
    else:
        return None
    node = execution.executedPlan()
    while node.getClass().getSimpleName() in _PLAN_WRAPPERS and node.children().size() == 1:
        node = node.children().apply(0)
    return node if node.getClass().getSimpleName() == "FileSourceScanExec" else None


def _micro_batch_execution(batch_df: DataFrame, analyzed: Any) -> Any:
    """The running query's execution of this micro-batch: the plan whose rows ``batch_df`` holds."""
    query = streaming_query_of(batch_df)
    execution = query.lastExecution() if query is not None else None
    if execution is None or execution.analyzed().output().toString() != analyzed.output().toString():
        return None  # another batch's plan (the attributes of each batch are its own)
    return execution


def _local_path(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file") or parsed.netloc not in ("", "localhost"):
        return None
    path = unquote(parsed.path)
    return path if os.path.isfile(path) else None
