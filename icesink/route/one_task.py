"""Whether one write task beats a shuffle: on two cores, whenever it can hold the batch.

A shuffle spreads a batch's write over every core, at a price paid on every row: the
JVM serializes, compresses and writes the rows, reads them back and decompresses them
before they go to Python. For the reference workload read in one task per core, that is
about a third of what a ``bucket`` batch costs in all (``benchmarks/README.md``, "Input
layout and a plain SparkSession").

One write task keeps two cores busy by itself: its JVM thread reads the rows and hands
them to Python as Arrow while its Python worker splits and encodes them, the fanout's
close threads too (:mod:`icesink.write.task_fanout`). On a local-mode application of at
most :data:`ONE_TASK_MAX_CORES` cores, one task therefore writes as fast as a shuffle's
tasks and spends less CPU. Only in local mode: two cores of a cluster may be two
executors of one core each, where one task's JVM thread and Python worker would share
one core. It writes the same files when the previous batch wrote at most one
target file size (every value then fits in one file, none is hot enough to be spread over
tasks: :mod:`icesink.route.skew`) and the task holds every value's rows at once: the
previous batch's rows, in Arrow, within :data:`ONE_TASK_BUDGET_SHARE` of a write task's
memory budget (the rest goes to the chunks in flight and to a larger next batch). A
first batch (nothing known yet) is shuffled. On more cores the shuffle's parallelism
wins, and only small batches go to one task (:data:`~icesink.route.router.SINGLE_TASK_MAX_BYTES`).

The same holds in ``distribution-mode=none`` against the source's own tasks: one task keeps
both cores busy alike, and writes each partition value once where each of the source's tasks
would have written it (half the files on input read in two tasks).
"""

from __future__ import annotations

from icesink.route.skew import BatchProfile

ONE_TASK_MAX_CORES = 2
"""Most cores of an application on which one write task is as fast as a shuffle's tasks."""

ONE_TASK_BUDGET_SHARE = 0.5
"""Share of a write task's memory budget the previous batch's Arrow rows may fill."""


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
