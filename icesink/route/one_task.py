"""Whether one writer beats a shuffle: after a small batch, and on two cores whenever one task can hold it.

One rule writes a partitioned batch in one task, in every mode: when the sink's previous
non-empty batch wrote at most :data:`SINGLE_TASK_MAX_BYTES` of data files and one target file
size, or, on two cores, one task can hold it (below), the batch is coalesced into one task
(``coalesce(1)``, a narrow dependency). It writes every value, one file each while under the
target, as few files as the shuffle gives, for one Python task instead of a shuffle stage and
one task per bucket (``none``: instead of one file per value and source task). A first batch
goes by what its plan reads, when it knows; a batch much larger than the one before it is
written by one task too, slower but with the same files, and the next is shuffled again.
Below :data:`DRIVER_MAX_BYTES` the driver writes the batch itself, without a Python task,
collecting every partition at once; known before the batch is read
(:meth:`~icesink.route.router.BucketRouter.writes_in_driver`), so a one-table upsert batch may
be collected and split there at once (:mod:`icesink.batch.collected`).

A shuffle spreads a batch's write over every core, at a price paid on every row: the
JVM serializes, compresses and writes the rows, reads them back and decompresses them
before they go to Python. For the reference workload read in one task per core, that is
about a third of what a ``bucket`` batch costs in all (``benchmarks/README.md``, "Input
layout and a plain SparkSession").

One write task keeps two cores busy by itself: its JVM thread reads the rows and hands
them to Python as Arrow while its Python worker splits and encodes them, the fanout's
close threads too (:mod:`icesink.write.task_fanout`); a task reading Parquet files itself
(:mod:`icesink.batch.parquet_source`) has pyarrow's read threads instead of the JVM's.
On a local-mode application of at most :data:`ONE_TASK_MAX_CORES` cores, one task
therefore writes as fast as a shuffle's tasks and spends less CPU. Only in local mode:
two cores of a cluster may be two executors of one core each, where one task's JVM
thread and Python worker would share one core. It writes the same files when the
previous batch wrote at most one target file size (every value then fits in one file,
none is hot enough to be spread over tasks: :mod:`icesink.route.skew`) and the task
holds every value's rows at once: the previous batch's rows, in Arrow, within
:data:`ONE_TASK_BUDGET_SHARE` of a write task's memory budget (the rest goes to the chunks
in flight and to a larger next batch). On more
cores the shuffle's parallelism wins, and only small batches go to one task.

A first batch has no previous one to go by. When its plan knows what it reads before
reading it (a file source's micro-batch: the bytes of its files,
:func:`~icesink.spark_session.planned_input_bytes`), Arrow's rows take about
``1 / INITIAL_COMPRESSION_RATIO`` times the Parquet bytes they come from (the guess the
write tasks start from, :mod:`icesink.write.parquet`; the reference workload's files in
``benchmarks/LOG.md``, "a first batch in one task"): a first batch whose bytes give at
most the same share of the budget goes to one task as well. Guessed wrong (input
compressed far better than that), the fanout's budget closes some of that batch's files
early: more files for one batch, never lost rows, and the next batch goes by what this
one measured. Any other first batch (a Kafka batch, nothing known of it) is shuffled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icesink.route.skew import BatchProfile
from icesink.spark_session import local_cores, planned_input_bytes
from icesink.write.parquet import INITIAL_COMPRESSION_RATIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SINGLE_TASK_MAX_BYTES = 16 * 1024 * 1024
"""A batch after one that wrote at most this many bytes (and one target) is written by one task.

Set well below where one task and the bucket shuffle break even on two cores (more
cores favour the shuffle sooner): ``benchmarks/README.md``, "Figures behind the code's
thresholds".
"""

DRIVER_MAX_BYTES = 4 * 1024 * 1024
"""A batch after one that wrote at most this many bytes (and one target) is written by the driver.

It is collected as Arrow (a Spark job without a Python worker) and written in the
driver's process by the same writer the tasks use: for small batches the cheapest path,
with no Python task to schedule and no result to send back (``benchmarks/README.md``,
"Figures behind the code's thresholds"). The driver then holds one small batch in memory.
"""

ONE_TASK_MAX_CORES = 2
"""Most cores of an application on which one write task is as fast as a shuffle's tasks."""

ONE_TASK_BUDGET_SHARE = 0.5
"""Share of a write task's memory budget the previous batch's Arrow rows may fill."""

HELD = "the previous batch was small, or one task holds it on two cores"
FIRST_HELD = "a first batch whose planned input fits one task on two cores"


def one_task_reason(
    df: DataFrame,
    last: BatchProfile | None,
    small: bool,
    memory_budget_bytes: int,
    target_file_size_bytes: int,
) -> str | None:
    """Why one write task writes ``df`` (for the log), or ``None`` when it is better distributed.

    Args:
        df: The batch.
        last: What the sink's previous non-empty batch of the table wrote, if any.
        small: The previous batch was small enough for one task on any number of cores
            (:data:`SINGLE_TASK_MAX_BYTES`).
        memory_budget_bytes: A write task's memory budget (``write.fanout.memory-budget-bytes``).
        target_file_size_bytes: The table's target data file size.
    """
    cores = local_cores(df.sparkSession)
    if small or one_task_holds(last, cores, memory_budget_bytes, target_file_size_bytes):
        return HELD
    if last is not None or cores is None or cores > ONE_TASK_MAX_CORES:
        return None
    planned = planned_input_bytes(df)  # a first batch, on a local application: what its plan reads
    held = one_task_holds_planned(planned, cores, memory_budget_bytes, target_file_size_bytes)
    return FIRST_HELD if held else None


def one_task_holds(
    last: BatchProfile | None, cores: int | None, memory_budget_bytes: int, target_file_size_bytes: int
) -> bool:
    """Whether one write task is the cheaper writer of the next batch, as the module says.

    Args:
        last: What the sink's previous non-empty batch of the table wrote, if any.
        cores: The cores of a local-mode application; ``None`` for any other
            (:func:`~icesink.spark_session.local_cores`).
        memory_budget_bytes: A write task's memory budget (``write.fanout.memory-budget-bytes``).
        target_file_size_bytes: The table's target data file size.
    """
    if last is None or cores is None or cores > ONE_TASK_MAX_CORES or last.input_row_bytes <= 0:
        return False  # nothing known of the rows' width (a first batch, or one the driver wrote)
    held = last.rows * last.input_row_bytes <= memory_budget_bytes * ONE_TASK_BUDGET_SHARE
    return held and last.file_bytes <= target_file_size_bytes


def one_task_holds_planned(
    planned_bytes: int | None, cores: int | None, memory_budget_bytes: int, target_file_size_bytes: int
) -> bool:
    """Whether one write task is the cheaper writer of a first batch whose plan expects to read
    ``planned_bytes``, as the module says.

    Args:
        planned_bytes: :func:`~icesink.spark_session.planned_input_bytes` of the batch; ``None``
            when its plan does not know.
        cores: As :func:`one_task_holds`.
        memory_budget_bytes: As :func:`one_task_holds`.
        target_file_size_bytes: As :func:`one_task_holds`.
    """
    if planned_bytes is None or cores is None or cores > ONE_TASK_MAX_CORES:
        return False
    held = planned_bytes / INITIAL_COMPRESSION_RATIO <= memory_budget_bytes * ONE_TASK_BUDGET_SHARE
    return held and planned_bytes <= target_file_size_bytes
