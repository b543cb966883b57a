"""Spark's own Kafka source (``format("kafka")``) in the job: its defaults, and its failures as coded errors.

Spark's source asks the brokers for offsets through a Kafka admin client, which waits
``default.api.timeout.ms`` (Kafka's default: 60 s) for a broker, and Spark tries three
times (``fetchOffset.numRetries``): a query whose brokers are down or misnamed would wait
three minutes before failing. The job gives the admin client
:data:`DEFAULT_API_TIMEOUT_MS` unless ``kafka.options`` sets it, so such a query fails in
under a minute; :func:`source_failure` then tells the failure apart from the sink's and
reports it as :class:`~icesink.jobs.kafka.source.kafka_errors.KafkaSourceError`
(``ICESINK-KAFKA-SOURCE``), naming the brokers.
"""

from __future__ import annotations

from collections.abc import Mapping

from icesink.jobs.kafka.source.kafka_errors import KafkaSourceError

DEFAULT_API_TIMEOUT_MS = 10_000
"""How long one offset request waits for the brokers; Spark tries three times (30 s in all)."""
API_TIMEOUT_OPTION = "kafka.default.api.timeout.ms"
REQUEST_TIMEOUT_OPTION = "kafka.request.timeout.ms"
BOOTSTRAP_OPTION = "kafka.bootstrap.servers"
_KAFKA_CLIENT_ERRORS = ("org.apache.kafka.common.errors.", "org.apache.kafka.common.KafkaException")


def jvm_source_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` of Spark's Kafka source with the job's timeouts where they leave them unset.

    The admin client refuses a ``default.api.timeout.ms`` below its ``request.timeout.ms``
    (30 s by default): a request waits at most what the whole call may.
    """
    lowered = {k.lower(): v for k, v in options.items()}
    given_api, given_request = lowered.get(API_TIMEOUT_OPTION), lowered.get(REQUEST_TIMEOUT_OPTION)
    api = int(given_api) if given_api else max(DEFAULT_API_TIMEOUT_MS, int(given_request or 0))
    defaults = {API_TIMEOUT_OPTION: str(api), REQUEST_TIMEOUT_OPTION: str(min(api, DEFAULT_API_TIMEOUT_MS))}
    return {**{k: v for k, v in defaults.items() if k not in lowered}, **options}


def source_failure(error: BaseException, options: Mapping[str, str]) -> KafkaSourceError | None:
    """The Kafka client's failure inside ``error`` (a failed query) as a coded error; else ``None``.

    Spark reports a failure of its Kafka source as the query's exception, whose text
    names the Kafka client's exception class (a timeout waiting for the brokers, an
    unknown topic, an authentication failure, ...). A failure of the sink, whose text
    carries an ``ICESINK-`` code of its own, is not the source's.
    """
    text = str(error)
    if "ICESINK-" in text or not any(name in text for name in _KAFKA_CLIENT_ERRORS):
        return None
    line = next((line for line in text.splitlines() if "org.apache.kafka." in line), text)
    cause = line[line.find("org.apache.kafka.") :].split(" SQLSTATE:")[0].strip()
    servers = next((v for k, v in options.items() if k.lower() == BOOTSTRAP_OPTION), "")
    timeout = next((v for k, v in options.items() if k.lower() == API_TIMEOUT_OPTION), "")
    return KafkaSourceError(
        f"Spark's Kafka source failed on the brokers at {servers}: {_shorten(cause)}",
        hint=(
            "check that kafka.bootstrap-servers names running brokers that this machine can reach and that "
            f"the topics exist; each offset request waited {timeout} ms, three times "
            "(kafka.options default.api.timeout.ms)"
        ),
        bootstrap_servers=servers,
    )


def _shorten(text: str, most: int = 400) -> str:
    return text if len(text) <= most else text[:most] + "..."
