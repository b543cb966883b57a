"""``python -m icesink.jobs.kafka.job``: the job's command, the same as ``icesink-kafka-to-iceberg``."""

from __future__ import annotations

from icesink.jobs.kafka.job.main import main

if __name__ == "__main__":
    raise SystemExit(main())
