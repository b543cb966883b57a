"""``python -m icesink.jobs.fetch_jvm_jars``: fetch the JVM artifacts into the virtual environment.

Runs ``mvn dependency:copy-dependencies`` on the project's small poms (``jvm/*/pom.xml``)
into the folders :mod:`icesink.jobs.jvm_jars` names: Spark's Kafka source for the
installed pyspark (its version passed as ``spark.version``), less the jars pyspark ships
already (compared by artifact, whatever their versions: Spark's own ones win), and Apache
Kafka for the tests' broker; and builds Apicurio Registry for the tests' schema registry
(``mvn package`` of ``jvm/apicurio-registry/pom.xml``: Quarkus's build of Apicurio's
application, about 140 MB). Maven's settings say where artifacts come from. A folder is
filled in a temp folder and moved into place whole, with a marker holding the hash of the
pom (and of its sources, if any) and the Spark version last: a folder whose marker matches
is skipped (``make env`` runs this before every target), a changed pom or another pyspark
fetches again.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path

from icesink.jobs.jvm_jars import (
    COMPLETE_MARKER,
    apicurio_registry_folder,
    kafka_broker_folder,
    spark_kafka_folder,
    spark_version,
)

POMS = Path(__file__).resolve().parents[2] / "jvm"
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+(?:\.\d+)*(?:[-.][A-Za-z0-9]+)*)\.jar$")
MVN_TIMEOUT_S = 600


class MavenMissing(RuntimeError):
    """There is no ``mvn`` to fetch with."""


def artifact_of(jar_name: str) -> str:
    """The artifact id in a jar's file name (``kafka-clients-3.9.2.jar`` -> ``kafka-clients``)."""
    match = _VERSIONED_JAR.match(jar_name)
    return match["artifact"] if match else jar_name.removesuffix(".jar")


def pyspark_artifacts() -> set[str]:
    """The artifacts whose jars pyspark ships in its ``jars/`` folder."""
    spec = importlib.util.find_spec("pyspark")  # not imported: make env runs this before every target
    jars = Path(next(iter(spec.submodule_search_locations or []))) / "jars" if spec else Path("jars")
    return {artifact_of(p.name) for p in jars.glob("*.jar")}


def fetch(pom: Path, folder: Path, properties: dict[str, str], *, drop: Collection[str] = ()) -> bool:
    """Copy ``pom``'s runtime dependencies into ``folder`` unless it holds them already; whether it fetched.

    Args:
        pom: The project's pom listing the artifacts.
        folder: Where the jars go.
        properties: Maven properties (``-Dkey=value``) of the pom.
        drop: Artifacts not to keep (the ones pyspark ships).

    Raises:
        MavenMissing: There is no ``mvn``.
        RuntimeError: ``mvn`` failed; its output's end is in the message.
    """

    def copy(staged: Path) -> None:
        goal = ["dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={staged}"]
        _mvn(pom, goal, properties)
        for jar in staged.glob("*.jar"):
            if artifact_of(jar.name) in drop:
                jar.unlink()

    return _fill(folder, _stamp(pom, properties), copy)


def build_application(pom: Path, folder: Path) -> bool:
    """Build ``pom``'s Quarkus application into ``folder`` unless it holds it already; whether it built.

    ``folder`` gets what Quarkus's ``fast-jar`` packaging makes (``quarkus-run.jar`` and the
    folders it reads); the build itself runs in a temp folder beside it.

    Raises:
        MavenMissing: There is no ``mvn``.
        RuntimeError: ``mvn`` failed; its output's end is in the message.
    """

    def build(staged: Path) -> None:
        output = staged.parent / "build"
        goal = ["package", "-DskipTests", f"-Dbuild.folder={output}", "-Dquarkus.package.type=fast-jar"]
        _mvn(pom, goal, {})
        (output / "quarkus-app").replace(staged)

    return _fill(folder, _stamp(pom, {}), build)


def _fill(folder: Path, stamp: str, make: Callable[[Path], None]) -> bool:
    """Unless ``folder``'s marker holds ``stamp``: ``make`` it in a temp folder, mark it, move it in place."""
    marker = folder / COMPLETE_MARKER
    if marker.is_file() and marker.read_text() == stamp:
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{folder.name}-", dir=folder.parent) as work:
        staged = Path(work) / folder.name
        make(staged)
        (staged / COMPLETE_MARKER).write_text(stamp)
        if folder.exists():
            shutil.rmtree(folder)
        staged.replace(folder)
    return True


def _mvn(pom: Path, goal: list[str], properties: dict[str, str]) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenMissing("mvn is missing: scripts/install_system_deps.sh installs it (make test does)")
    command = [mvn, "-B", "-q", "-f", str(pom), *goal, *(f"-D{k}={v}" for k, v in properties.items())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=MVN_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{(done.stdout + done.stderr)[-4000:]}")


def _stamp(pom: Path, properties: dict[str, str]) -> str:
    """The pom's hash (with its own sources', if any) and the properties, as the marker holds them."""
    digest = hashlib.sha256(pom.read_bytes())
    for source in sorted(p for p in (pom.parent / "src").rglob("*") if p.is_file()):
        digest.update(source.read_bytes())
    return (
        " ".join([f"pom={digest.hexdigest()[:16]}", *(f"{k}={v}" for k, v in sorted(properties.items()))])
        + "\n"
    )


def main() -> int:
    """Fetch what is missing; print what was fetched and how long it took.

    Without ``mvn`` it says so and exits 0: ``make demo`` and ``make lint`` need none of
    this, and ``make test`` installs Maven before it runs ``make env`` (a test that needs the
    jars skips without them, and fails in CI).
    """
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    try:
        return _fetch_all()
    except MavenMissing as e:
        print(
            f"Spark's Kafka source, Apache Kafka and Apicurio Registry were not fetched: {e}", file=sys.stderr
        )
        return 0


def _fetch_all() -> int:
    started = time.perf_counter()
    fetched = []
    version = spark_version()
    if fetch(
        POMS / "spark-kafka" / "pom.xml",
        spark_kafka_folder(),
        {"spark.version": version},
        drop=pyspark_artifacts(),
    ):
        fetched.append(f"Spark {version}'s Kafka source")
    if fetch(POMS / "kafka-broker" / "pom.xml", kafka_broker_folder(), {}):
        fetched.append("Apache Kafka")
    if build_application(POMS / "apicurio-registry" / "pom.xml", apicurio_registry_folder()):
        fetched.append("Apicurio Registry (built)")
    if fetched:
        print(f"fetched {', '.join(fetched)} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
