"""The batch a log record belongs to, on every record of a batch's steps.

:func:`batch_context` names the table, sink id and batch id for the code it wraps (one
micro-batch, on the driver); loggers made by :func:`batch_logger` add them to each of
their records as the fields ``icesink_table``, ``icesink_sink_id`` and
``icesink_batch_id`` (``None`` outside a batch), e.g. for a JSON formatter or a filter.
Messages keep their own ``%s`` arguments, formatted only when a record is emitted.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

_CURRENT: contextvars.ContextVar[tuple[str, str, int] | None] = contextvars.ContextVar(
    "icesink_batch", default=None
)


@contextlib.contextmanager
def batch_context(table: str, sink_id: str, batch_id: int) -> Iterator[None]:
    """Records logged inside carry ``table``, ``sink_id`` and ``batch_id``."""
    token = _CURRENT.set((table, sink_id, batch_id))
    try:
        yield
    finally:
        _CURRENT.reset(token)


class BatchLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose records carry the current batch's table, sink id and batch id."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        current = _CURRENT.get()
        table, sink_id, batch_id = current if current is not None else (None, None, None)
        kwargs["extra"] = {
            **kwargs.get("extra", {}),
            "icesink_table": table,
            "icesink_sink_id": sink_id,
            "icesink_batch_id": batch_id,
        }
        return msg, kwargs


def batch_logger(name: str) -> BatchLogger:
    """The logger ``name``, its records tagged with the current batch."""
    return BatchLogger(logging.getLogger(name), {})
