"""A failed write job, as the sink's error: the one place its text becomes one.

A write job's failure reaches the driver as text (a Python worker's traceback inside
Spark's). The table's write, the routed write and the dead letters' write turn it into an
error of the sink here, so that each names the table, the batch and the fix the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame

from icesink.errors import BadRecordError, SchemaError, WriteError, find_error_code
from icesink.normalize import bad_record_error
from icesink.worker_python import worker_import_error

__all__ = ["write_failure", "write_failures"]


def write_failure(
    error: Exception,
    df: DataFrame,
    table: str,
    batch_id: int,
    file_prefix: str | None = None,
    what: str = "write job",
) -> Exception:
    """The sink's error for a failed write job of ``table`` (``df``: what it wrote; ``what``: which job).

    A schema error stays as it is; a bad record (``dead-letter.on-bad-record=fail``) and a Python
    worker that cannot import the sink get errors of their own; anything else is a
    :class:`~icesink.errors.WriteError` quoting the first line that names an error code.
    """
    found = find_error_code(str(error))
    if found is SchemaError:
        return error
    if found is BadRecordError:
        bad = bad_record_error(str(error), table, batch_id)
        if bad is not None:
            return bad
    worker = worker_import_error(error, df, table, batch_id)
    if worker is not None:
        return worker
    return WriteError(
        f"{what} of batch {batch_id} failed: {_first_line(error)}",
        table=table,
        batch_id=batch_id,
        file_prefix=file_prefix,
    )


@contextmanager
def write_failures(
    df: DataFrame, table: str, batch_id: int, file_prefix: str | None = None, what: str = "write job"
) -> Iterator[None]:
    """Raise the failure of the write job run inside as :func:`write_failure` says."""
    try:
        yield
    except Exception as e:
        failure = write_failure(e, df, table, batch_id, file_prefix, what)
        if failure is e:
            raise
        raise failure from e


def _first_line(error: BaseException) -> str:
    text = str(error)
    for line in text.splitlines():
        if "ICESINK-" in line:
            return line.strip()
    return text.splitlines()[0] if text else type(error).__name__
