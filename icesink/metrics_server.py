"""Serving the sinks' metrics: one HTTP endpoint per process, and an optional Pushgateway push.

Each sink keeps its own :class:`~icesink.metrics.SinkMetrics` registry, so what a sink
recorded stays readable on its own (tests and embedding code rely on it). What is
served is the union of every exported registry of the process: :func:`export` adds a
sink's registry to that union and starts, once per process and address, the HTTP
server that serves it. Two sinks of one process configured with the same
``metrics.port`` therefore share one endpoint instead of fighting over the port, and
a series that two registries both hold (two sinks writing one table) is merged:
counters and histograms are summed, gauges take the largest value.

For jobs too short to be scraped, ``metrics.pushgateway-url`` pushes the same union
to a Pushgateway every :data:`PUSH_INTERVAL_S` seconds and once more at exit.
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector, push_to_gateway
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from icesink.config import MetricsConfig
from icesink.errors import ConfigError
from icesink.metrics import SinkMetrics

logger = logging.getLogger(__name__)

PUSH_INTERVAL_S = 15.0
PUSH_TIMEOUT_S = 5.0
# How often the server's loop looks for a stop request: closing waits for it, and a job's
# end waited up to half a second with the HTTP server's default.
SERVE_POLL_S = 0.05


class MergedRegistries(Collector):
    """A collector yielding the metric families of several registries as one.

    Families of the same name are joined; a sample present in several registries with
    the same labels is merged (counters, histograms and summaries summed, ``_created``
    the earliest, gauges the largest).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._registries: dict[int, CollectorRegistry] = {}

    def add(self, registry: CollectorRegistry) -> None:
        """Include ``registry`` (idempotent)."""
        with self._lock:
            self._registries[id(registry)] = registry

    def remove(self, registry: CollectorRegistry) -> None:
        """Stop including ``registry``."""
        with self._lock:
            self._registries.pop(id(registry), None)

    def registries(self) -> list[CollectorRegistry]:
        """The registries included."""
        with self._lock:
            return list(self._registries.values())

    def __contains__(self, registry: object) -> bool:
        with self._lock:
            return id(registry) in self._registries

    def collect(self) -> Iterable[Metric]:
        """The merged families."""
        with self._lock:
            registries = list(self._registries.values())
        families: dict[str, Metric] = {}
        sources: dict[str, int] = {}
        for registry in registries:
            for family in registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = Metric(family.name, family.documentation, family.type, family.unit)
                    families[family.name] = merged
                elif merged.type != family.type:
                    logger.warning(
                        "metric %s is a %s in one registry and a %s in another: the latter is not served",
                        family.name,
                        merged.type,
                        family.type,
                    )
                    continue
                merged.samples.extend(family.samples)
                sources[family.name] = sources.get(family.name, 0) + 1
        for name, family in families.items():
            if sources[name] > 1:
                family.samples = list(_merge_samples(family.type, family.samples))
            yield family


def _merge_samples(family_type: str, samples: list[Sample]) -> Iterator[Sample]:
    merged: dict[tuple[str, tuple[tuple[str, str], ...]], Sample] = {}
    for sample in samples:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        seen = merged.get(key)
        if seen is None:
            merged[key] = sample
        elif sample.name.endswith("_created"):
            merged[key] = seen._replace(value=min(seen.value, sample.value))
        elif family_type in ("counter", "histogram", "summary", "gaugehistogram"):
            merged[key] = seen._replace(value=seen.value + sample.value)
        else:
            merged[key] = seen._replace(value=max(seen.value, sample.value))
    yield from merged.values()


class MetricsServer:
    """An HTTP endpoint serving the exported metrics at ``/metrics`` (a daemon thread).

    Args:
        host: Address to bind.
        port: Port to bind; 0 for any free port (see :attr:`port` for the one bound).
        registry: What to serve.

    Raises:
        ConfigError: The address cannot be bound (port in use, unknown host).
    """

    def __init__(self, host: str, port: int, registry: CollectorRegistry) -> None:
        self.host = host
        try:
            server_class = type("_Server", (ThreadingWSGIServer,), {"address_family": _family(host, port)})
            self._server: WSGIServer = make_server(
                host, port, make_wsgi_app(registry), server_class, handler_class=_QuietHandler
            )
        except OSError as e:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {e}",
                hint="choose a free 'metrics.port' (0 picks any free port) or another 'metrics.host'",
            ) from e
        self.port: int = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SERVE_POLL_S},
            name=f"icesink-metrics-{self.port}",
            daemon=True,
        )
        self._thread.start()
        logger.info("metrics served at %s", self.url)

    @property
    def url(self) -> str:
        """Where Prometheus scrapes, e.g. ``http://127.0.0.1:9108/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (safe twice)."""
        self._server.shutdown()
        self._server.server_close()


class _QuietHandler(WSGIRequestHandler):
    """Logs nothing per request: Prometheus scrapes every few seconds."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _family(host: str, port: int) -> socket.AddressFamily:
    """The address family of ``host`` (IPv6 for ``::``, IPv4 for ``0.0.0.0``), as the server binds it."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return infos[0][0]


class PushgatewayPusher:
    """Pushes a registry to a Pushgateway periodically and at exit (a daemon thread).

    The group is ``job=<job>, instance=<host name>``; every push replaces the group's
    metrics with the current values. A failed push is logged at WARNING and retried at
    the next interval: metrics never fail the stream.

    Args:
        url: The Pushgateway, e.g. ``http://pushgateway:9091``.
        job: The ``job`` of the group.
        registry: What to push.
        interval_s: Seconds between pushes.
    """

    def __init__(
        self, url: str, job: str, registry: CollectorRegistry, interval_s: float = PUSH_INTERVAL_S
    ) -> None:
        self.url = url
        self.job = job
        self.grouping_key = {"instance": socket.gethostname()}
        self._registry = registry
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"icesink-push-{job}", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def push(self) -> bool:
        """Push now; ``False`` (and a WARNING) when the Pushgateway cannot be reached."""
        try:
            push_to_gateway(
                self.url, self.job, self._registry, grouping_key=self.grouping_key, timeout=PUSH_TIMEOUT_S
            )
        except Exception as e:  # a metrics outage must not stop the stream
            logger.warning("push of metrics to %s (job %s) failed: %s; retrying later", self.url, self.job, e)
            return False
        return True

    def close(self) -> None:
        """Stop the periodic pushes after a last one (safe twice)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=PUSH_TIMEOUT_S)
        self.push()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.push()


class _Exports:
    """The process-wide state: the union of exported registries, its servers and pushers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sinks = MergedRegistries()
        self.pushed = CollectorRegistry(auto_describe=False)
        self.pushed.register(self.sinks)
        self.served = CollectorRegistry(auto_describe=False)
        self.served.register(self.sinks)
        ProcessCollector(registry=self.served)
        PlatformCollector(registry=self.served)
        self.servers: dict[tuple[str, int], MetricsServer] = {}
        self.pushers: dict[tuple[str, str], PushgatewayPusher] = {}


_EXPORTS = _Exports()


def export(metrics: SinkMetrics, config: MetricsConfig) -> MetricsServer | None:
    """Make ``metrics`` visible as ``config`` says: served over HTTP, pushed, or neither.

    Idempotent: the server of an address (and the pusher of a Pushgateway and job) is
    started once per process and shared by every sink exporting to it. ``port=0``
    means one server on any free port, shared likewise.

    Returns:
        The server serving the metrics, or ``None`` when ``metrics.port`` is not set.

    Raises:
        ConfigError: The address cannot be bound.
    """
    if config.port is None and config.pushgateway_url is None:
        return None
    with _EXPORTS.lock:
        _EXPORTS.sinks.add(metrics.registry)
        server = None
        if config.port is not None:
            key = (config.host, config.port)
            server = _EXPORTS.servers.get(key)
            if server is None:
                server = _EXPORTS.servers[key] = MetricsServer(config.host, config.port, _EXPORTS.served)
        if config.pushgateway_url is not None:
            push_key = (config.pushgateway_url, config.pushgateway_job)
            if push_key not in _EXPORTS.pushers:
                _EXPORTS.pushers[push_key] = PushgatewayPusher(
                    config.pushgateway_url, config.pushgateway_job, _EXPORTS.pushed
                )
    return server


def is_exported(metrics: SinkMetrics) -> bool:
    """Whether ``metrics`` is part of what this process serves or pushes."""
    return metrics.registry in _EXPORTS.sinks


def served_registry() -> CollectorRegistry:
    """The registry the HTTP servers serve (the union of exported sinks plus process metrics)."""
    return _EXPORTS.served


def pushers() -> list[PushgatewayPusher]:
    """The running Pushgateway pushers of this process."""
    with _EXPORTS.lock:
        return list(_EXPORTS.pushers.values())


def shutdown() -> None:
    """Push a last time, stop every server and pusher of the process, forget the exported registries."""
    with _EXPORTS.lock:
        servers, _EXPORTS.servers = list(_EXPORTS.servers.values()), {}
        pushing, _EXPORTS.pushers = list(_EXPORTS.pushers.values()), {}
    for pusher in pushing:
        pusher.close()
    for server in servers:
        server.close()
    with _EXPORTS.lock:
        for registry in _EXPORTS.sinks.registries():
            _EXPORTS.sinks.remove(registry)


def unexport(metrics: SinkMetrics) -> None:
    """Stop exporting ``metrics``; the last exported sink of the process stops the servers and pushers."""
    with _EXPORTS.lock:
        if metrics.registry not in _EXPORTS.sinks:
            return
        last = _EXPORTS.sinks.registries() == [metrics.registry]
        if not last:
            _EXPORTS.sinks.remove(metrics.registry)
    if last:
        shutdown()  # pushes the last values first
