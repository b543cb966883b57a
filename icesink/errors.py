"""Errors raised by icesink.

Every error has a stable code (``ICESINK-...``) at the start of its message, so an
error raised inside a Spark executor, which reaches the driver only as text inside a
Python traceback, is still recognisable there (see :func:`find_error_code`). Each class
says whether retrying the same operation can succeed, and carries the context an
operator needs: table, batch id, path.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

_CODE_PATTERN = re.compile(r"\bICESINK-([A-Z]+(?:-[A-Z]+)*)\b")


_BY_CODE: dict[str, type[SinkError]] = {}


class SinkError(Exception):
    """Base class of every icesink error.

    Args:
        message: What failed and with which values.
        hint: How to fix it; appended to the message as ``hint: ...``.
        **context: Identifying values (``table``, ``batch_id``, ``path``, ...), kept on
            the instance and shown in the message.
    """

    code: ClassVar[str] = "ERROR"
    retryable: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _BY_CODE[cls.code] = cls

    def __init__(self, message: str, *, hint: str | None = None, **context: Any) -> None:
        self.message = message
        self.hint = hint
        self.context = {k: v for k, v in context.items() if v is not None}
        super().__init__(self._render())

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own pickling calls ``cls(*self.args)`` with the rendered text, which
        # would be taken for the message and get a second code; rebuild from the parts instead.
        return (_restore, (type(self), self.__dict__.copy()))

    def _render(self) -> str:
        text = f"ICESINK-{self.code}: {self.message}"
        if self.context:
            text += " [" + ", ".join(f"{k}={v}" for k, v in self.context.items()) + "]"
        if self.hint:
            text += f"; hint: {self.hint}"
        return text


class ConfigError(SinkError):
    """A sink option is missing, unknown or has a value that is not accepted."""

    code = "CONFIG"


class CatalogError(SinkError):
    """The catalog cannot be loaded or reached, or the table cannot be created."""

    code = "CATALOG"
    retryable = True


class StorageError(SinkError):
    """The object store (or file system) of the tables or the sink's state failed or did not answer."""

    code = "STORAGE"
    retryable = True


class PartitionSpecError(ConfigError):
    """The ``partition-by`` option does not describe a valid spec for the table."""

    code = "PARTITION-SPEC"


class SchemaError(SinkError):
    """The batch's schema cannot be written to the table (and evolution cannot help)."""

    code = "SCHEMA"


class RenameConflictError(SchemaError):
    """A batch field is renamed from a column to the name of another column the table has."""

    code = "RENAME-CONFLICT"


class BadRecordError(SinkError):
    """A value cannot be converted to the table's type and ``on-bad-record=fail``."""

    code = "BAD-RECORD"


class WriteError(SinkError):
    """Writing data files in an executor failed."""

    code = "WRITE"
    retryable = True


class WorkerPythonError(SinkError):
    """Spark's Python workers cannot import the sink or its dependencies: not the driver's Python."""

    code = "WORKER-PYTHON"


class CommitConflictError(SinkError):
    """A commit kept conflicting with concurrent writers after every retry."""

    code = "COMMIT-CONFLICT"
    retryable = True


class CommitError(SinkError):
    """A commit failed for a reason other than a conflict."""

    code = "COMMIT"


class UpsertError(SinkError):
    """An upsert cannot be applied to the table as it is (format version, equality deletes, ...)."""

    code = "UPSERT"


class KeyedTableError(ConfigError):
    """An append-mode sink would write to a table with identifier fields (keys could be stored twice)."""

    code = "KEYED-TABLE"


class RowDeltaConflictError(SinkError):
    """A concurrent commit removed, or added deletes to, data files a batch's position deletes point at.

    The batch's new data files are still good; its lookup must be redone for the keys
    found in :attr:`files` against the refreshed table, and the commit retried.
    """

    code = "ROW-DELTA-CONFLICT"
    retryable = True

    def __init__(self, message: str, *, files: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.files = files
        super().__init__(message, **kwargs)


class RewriteConflictError(SinkError):
    """A concurrent commit removed, or added deletes to, files a compaction was rewriting.

    Nothing was committed and the compaction's new files were deleted; running the
    compaction again plans it from the current snapshot.
    """

    code = "REWRITE-CONFLICT"
    retryable = True


class SelfCheckError(SinkError):
    """A start-up self-check (for example of the bucket hash) found a mismatch."""

    code = "SELF-CHECK"


class SinkClosedError(SinkError):
    """The sink was used after :meth:`~icesink.sink.IcebergSink.close`."""

    code = "CLOSED"


def _restore(cls: type[SinkError], state: dict[str, Any]) -> SinkError:
    """Rebuild a pickled error without calling its ``__init__`` (subclasses may change its signature)."""
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, error._render())
    return error


def find_error_code(text: str) -> type[SinkError] | None:
    """Return the icesink error class whose code appears in ``text`` (e.g. an executor traceback).

    Every subclass of :class:`SinkError` registers its code when its module is imported.
    """
    match = _CODE_PATTERN.search(text)
    if not match:
        return None
    return _BY_CODE.get(match.group(1), SinkError)
