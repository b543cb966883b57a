"""Short jobs push their metrics to a real Pushgateway (Debian's ``prometheus-pushgateway``)."""

from __future__ import annotations

import socket

import pytest
from prometheus_client.parser import text_string_to_metric_families

from icesink import MetricsConfig, SinkMetrics, metrics_server
from tests.e2e.servers import Pushgateway, http_get

pytestmark = pytest.mark.e2e


def test_exported_metrics_are_pushed_at_shutdown(pushgateway: Pushgateway, metrics_exports: None) -> None:
    metrics = SinkMetrics()
    metrics.start_sink("db.pushed", "short-job")
    metrics.rows_written.labels("db.pushed", "short-job").inc(42)
    metrics.last_batch_id.labels("db.pushed", "short-job").set(3)
    config = MetricsConfig(pushgateway_url=pushgateway.url, pushgateway_job="e2e-push")
    assert metrics_server.export(metrics, config) is None  # no HTTP endpoint: pushing only
    assert metrics_server.is_exported(metrics)
    (pusher,) = metrics_server.pushers()
    assert pusher.grouping_key == {"instance": socket.gethostname()}

    metrics_server.shutdown()  # what happens at exit: a last push

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(http_get(f"{pushgateway.url}/metrics"))
        for s in family.samples
    }
    group = {"instance": socket.gethostname(), "job": "e2e-push"}
    assert (
        samples[
            (
                "icesink_rows_written_total",
                tuple(sorted({**group, "table": "db.pushed", "sink_id": "short-job"}.items())),
            )
        ]
        == 42
    )
    assert (
        samples[
            (
                "icesink_last_committed_batch_id",
                tuple(sorted({**group, "table": "db.pushed", "sink_id": "short-job"}.items())),
            )
        ]
        == 3
    )
    # Only the sinks' metrics are pushed, not the driver's process metrics.
    pushed = {name for name, labels in samples if dict(labels).get("job") == "e2e-push"}
    assert not {n for n in pushed if n.startswith("process_")}
