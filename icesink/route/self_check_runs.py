"""The route step's self-checks (:mod:`icesink.route.self_check`), each run once per Spark application.

They matter where Spark computes the partition values the files get (a bucket on a
decimal, a nested source column: :mod:`icesink.write.keys` cannot): a wrong bucket hash
would put rows in the wrong partition. :func:`ensure_self_checks` runs the checks not
passed yet and waits; a failure fails the batch before any file is written, and is not
remembered (the next batch checks again). :func:`check_ahead` starts them when the sink
is prepared, so that a new job's first batch finds them run or running.

Where the write tasks compute the values, Spark's bucket ids only choose the write task
and no check runs: the files the bucket shuffle wrote show whether it gave each bucket
to one task (:func:`icesink.route.skew.scattered_bucket`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import IcebergType
from pyspark.sql import SparkSession
from pyspark.util import InheritableThread

from icesink.config import DistributionMode
from icesink.errors import SelfCheckError
from icesink.route import self_check
from icesink.route.routed import resolve_mode
from icesink.spark_session import application_id
from icesink.write.keys import arrow_key_functions

__all__ = ["bucket_source_types", "check_ahead", "ensure_self_checks", "start_self_checks"]

logger = logging.getLogger(__name__)

_SHUFFLE = "exact shuffle"
# (application id, code path or _SHUFFLE) of the checks that passed in this process.
_checked: set[tuple[str, str]] = set()
_checked_lock = threading.Lock()  # held while checks run: one run at a time


def ensure_self_checks(spark: SparkSession, source_types: Iterable[IcebergType], shuffle: bool) -> None:
    """Run the self-checks a table's buckets rely on that have not passed yet, and wait for them.

    The bucket hash is checked with the spec's vectors of the code paths the table's
    bucket source types take (:func:`~icesink.route.self_check.vectors_for`), so a table
    bucketing ints does not wait for the large byte-string expressions to compile; other
    paths are checked when a table first needs them. When both checks are due they run
    at once (:func:`_run_checks`); both must pass before this returns. Thread-safe.

    Args:
        spark: The session the sink runs in; none of its settings are changed.
        source_types: Iceberg types of the spec's bucket source columns.
        shuffle: Whether the exact bucket shuffle is used (then it is checked too).

    Raises:
        SelfCheckError: A check failed.
    """
    application = application_id(spark)
    with _checked_lock:
        vectors = [
            v
            for v in self_check.vectors_for(source_types)
            if (application, self_check.code_path(v.source_type)) not in _checked
        ]
        shuffle = shuffle and (application, _SHUFFLE) not in _checked
        hash_error, shuffle_error = _run_checks(spark, vectors, shuffle)
        if vectors and hash_error is None:
            _checked.update((application, self_check.code_path(v.source_type)) for v in vectors)
        if shuffle and shuffle_error is None:
            _checked.add((application, _SHUFFLE))
    for error in (hash_error, shuffle_error):
        if error is not None:
            raise error


def start_self_checks(spark: SparkSession, source_types: Iterable[IcebergType], shuffle: bool) -> None:
    """Run :func:`ensure_self_checks` on a thread of its own; a failure is only logged.

    A batch that needs the checks calls :func:`ensure_self_checks` itself: it waits for
    these (one run at a time), finds them passed, or checks again and fails.
    """

    def run() -> None:
        try:
            ensure_self_checks(spark, source_types, shuffle)
        except Exception as e:  # the batch checks again, and raises
            logger.warning("the self-checks started before the first batch failed: %s", e)

    # Carries the caller's Spark local properties, as the batch's own check would.
    InheritableThread(run, session=spark, name="icesink-self-checks", daemon=True).start()


def check_ahead(spark: SparkSession, table: Table, mode: DistributionMode | None) -> None:
    """Start the self-checks ``table``'s first batch will wait for, in the background.

    Only a table whose partition values Spark computes needs them (the write tasks
    compute them wherever they can); its new job's first batch then finds them run or
    running. A failure here is only logged: the batch checks again, and fails.

    Args:
        spark: The session the sink runs in.
        table: The table the sink writes.
        mode: The requested distribution (``None``: chosen from the spec).
    """
    spec, schema = table.spec(), table.schema()
    types = bucket_source_types(spec, schema)
    if not types or arrow_key_functions(spec, schema) is not None:
        return  # no bucket id of Spark's is used, or only to choose the write task
    start_self_checks(spark, types, shuffle=resolve_mode(mode, spec) is DistributionMode.BUCKET)


def bucket_source_types(spec: PartitionSpec, schema: Schema) -> list[IcebergType]:
    """The Iceberg types of the spec's bucket source columns, in spec order."""
    return [
        schema.find_field(f.source_id).field_type
        for f in spec.fields
        if isinstance(f.transform, BucketTransform)
    ]


def _run_checks(
    spark: SparkSession, vectors: list[self_check.HashVector], shuffle: bool
) -> tuple[SelfCheckError | None, SelfCheckError | None]:
    """The errors of the bucket hash check of ``vectors`` and of the shuffle check (when due).

    When both are due they run at once, the hash check in a thread of its own: each is a
    small Spark job whose time is mostly latency (planning, code generation, task
    scheduling), so the two overlap well.
    """

    def check_hash() -> SelfCheckError | None:
        return _error_of(lambda: self_check.verify_bucket_function(spark, vectors))

    def check_shuffle() -> SelfCheckError | None:
        return _error_of(lambda: self_check.verify_partition_keys(spark))

    if not (vectors and shuffle):
        return (check_hash() if vectors else None), (check_shuffle() if shuffle else None)
    hash_result: list[SelfCheckError | None] = []
    # An InheritableThread runs its Spark job with the caller's local properties (job
    # group, scheduler pool, tags), as the caller's own job would.
    thread = InheritableThread(lambda: hash_result.append(check_hash()), session=spark)
    thread.start()
    try:
        shuffle_error = check_shuffle()
    finally:
        thread.join()
    if not hash_result:  # the thread died of something other than a failed check
        return SelfCheckError(
            "the bucket hash self-check did not finish",
            hint="see the driver's log; bucketed tables cannot be written safely until it passes",
        ), shuffle_error
    return hash_result[0], shuffle_error


def _error_of(check: Callable[[], None]) -> SelfCheckError | None:
    """The :class:`SelfCheckError` ``check`` raises, or ``None`` when it passes."""
    try:
        check()
    except SelfCheckError as e:
        return e
    return None
