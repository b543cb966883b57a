"""The sink library imports without the Kafka client (confluent-kafka, the ``kafka`` extra)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Makes confluent_kafka unimportable, imports every module of the library, then prints how
# many it imported and which modules of the Kafka client or the jobs got loaded on the way.
_SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class NoKafka:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "confluent_kafka":
                raise ImportError(f"{name} is not installed")
            return None

    sys.meta_path.insert(0, NoKafka())
    import icesink
    names = []
    for module in pkgutil.iter_modules(icesink.__path__, "icesink."):
        if module.name != "icesink.jobs":
            names.append(module.name)
        if module.ispkg and module.name != "icesink.jobs":
            package = importlib.import_module(module.name)
            names += [m.name for m in pkgutil.walk_packages(package.__path__, module.name + ".")]
    for name in names:
        importlib.import_module(name)
    from icesink import IcebergSink, SinkConfig
    {extra}
    loaded = sorted(m for m in sys.modules if m.startswith(("confluent_kafka", "icesink.jobs")))
    print(len(names), ",".join(loaded) or "-")
    """
)


def _run(extra: str = "") -> subprocess.CompletedProcess[str]:
    script = _SCRIPT.replace("{extra}", extra)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_every_sink_module_imports_without_confluent_kafka() -> None:
    done = _run()
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.split()
    assert int(count) > 40  # every module of the library, not an empty walk
    assert loaded == "-"


def test_the_check_sees_a_kafka_import() -> None:
    failed = _run("import confluent_kafka")
    assert failed.returncode != 0
    assert "confluent_kafka is not installed" in failed.stderr
    loaded = _run("import icesink.jobs.kafka.source")
    assert loaded.returncode == 0, loaded.stderr
    assert "icesink.jobs.kafka.source" in loaded.stdout.split()[1].split(",")
