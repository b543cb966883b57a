"""Errors of the Kafka source, and the one place that decides what lost data means.

They live here rather than in :mod:`icesink.errors` only because that module belongs to
the sink; both follow its rules (a stable ``ICESINK-...`` code at the start of the
message, so an executor traceback is recognisable on the driver).
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any

from icesink import ConfigError, SinkError

logger = logging.getLogger(__name__)

DATA_LOSS_HINT = (
    "the data was deleted by retention or the topic was deleted or recreated before it was read; "
    "if losing it is acceptable, set the source option failOnDataLoss=false"
)


class KafkaSourceError(SinkError):
    """The Kafka source could not get offsets or records from the brokers."""

    code = "KAFKA-SOURCE"
    retryable = True


class KafkaDataLossError(KafkaSourceError):
    """Records the stream should read are gone from Kafka and ``failOnDataLoss`` is true."""

    code = "KAFKA-DATA-LOSS"
    retryable = False


def require_client() -> ModuleType:
    """confluent-kafka, the Python source's client, or a :class:`~icesink.ConfigError` naming the extra.

    Raises:
        ConfigError: confluent-kafka is not installed (the sink itself does not need it).
    """
    try:
        return importlib.import_module("confluent_kafka")
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "confluent_kafka":
            raise  # something confluent-kafka itself imports: its own error says what
        raise ConfigError(
            "the Python Kafka source needs confluent-kafka, which is not installed in this "
            "Python environment",
            hint="install icesink with its kafka extra: pip install 'icesink[kafka]' (or read with "
            "Spark's Kafka connector: kafka.source: jvm)",
        ) from e


def report_data_loss(message: str, *, fail_on_data_loss: bool, **context: Any) -> None:
    """Fail with :class:`KafkaDataLossError`, or log a warning and let the caller go on.

    Spark's Kafka source behaves the same way: ``failOnDataLoss=true`` (the default) stops
    the query, ``false`` logs and continues with what is still available.

    Args:
        message: What was lost, with the offsets involved.
        fail_on_data_loss: The source's ``failOnDataLoss`` option.
        **context: Identifying values (topic, partition, offsets) for the error.

    Raises:
        KafkaDataLossError: When ``fail_on_data_loss`` is true.
    """
    if fail_on_data_loss:
        raise KafkaDataLossError(message, hint=DATA_LOSS_HINT, **context)
    logger.warning("%s; continuing because failOnDataLoss=false %s", message, context or "")
