"""Where the fetched JVM artifacts are, and how a session is handed Spark's Kafka source."""

from __future__ import annotations

from pathlib import Path

import pytest

from icesink.jobs import jvm_jars
from icesink.jobs.fetch_jvm_jars import _stamp, artifact_of, build_application, fetch
from icesink.jobs.jvm_jars import COMPLETE_MARKER, spark_kafka_folder, with_spark_kafka_jars


@pytest.fixture()
def jars_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jvm_jars.ENV_VARIABLE, str(tmp_path))
    return tmp_path


def fetched(names: list[str], *, complete: bool = True) -> Path:
    folder = spark_kafka_folder()
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_bytes(b"")
    if complete:
        (folder / COMPLETE_MARKER).write_text("done\n")
    return folder


@pytest.mark.parametrize(
    ("name", "artifact"),
    [
        ("kafka-clients-3.9.2.jar", "kafka-clients"),
        ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("zstd-jni-1.5.6-10.jar", "zstd-jni"),
        ("HdrHistogram-2.2.2.jar", "HdrHistogram"),
        ("netty-common-4.1.118.Final.jar", "netty-common"),
    ],
)
def test_jar_names_give_their_artifact_whatever_the_version(name: str, artifact: str) -> None:
    assert artifact_of(name) == artifact


def test_the_folder_is_named_for_the_installed_pyspark(jars_root: Path) -> None:
    assert spark_kafka_folder() == jars_root / f"spark-kafka-{jvm_jars.spark_version()}"


def test_the_fetched_jars_are_added_to_spark_jars(jars_root: Path) -> None:
    folder = fetched(["spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar"])
    conf = with_spark_kafka_jars({"spark.jars": "/opt/mine.jar", "spark.ui.enabled": "false"})
    assert conf["spark.jars"].split(",") == [
        "/opt/mine.jar",
        str(folder / "kafka-clients-3.9.2.jar"),
        str(folder / "spark-sql-kafka-0-10_2.13-4.2.0.jar"),
    ]
    assert conf["spark.ui.enabled"] == "false"


@pytest.mark.parametrize(
    "conf",
    [
        {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"},
        {"spark.jars": "/opt/spark-sql-kafka-0-10_2.13-4.2.0.jar"},
    ],
)
def test_a_connector_given_by_the_user_is_kept_alone(jars_root: Path, conf: dict[str, str]) -> None:
    fetched(["spark-sql-kafka-0-10_2.13-4.2.0.jar"])
    assert with_spark_kafka_jars(conf) == conf


def test_a_folder_not_completed_gives_no_jars(jars_root: Path) -> None:
    fetched(["spark-sql-kafka-0-10_2.13-4.2.0.jar"], complete=False)  # mvn died while copying
    assert with_spark_kafka_jars({}) == {}


def test_a_complete_folder_of_the_same_pom_is_not_fetched_again(tmp_path: Path) -> None:
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / COMPLETE_MARKER).write_text(_stamp(pom, {"spark.version": "4.2.0"}))
    assert not fetch(pom, folder, {"spark.version": "4.2.0"})  # no mvn run (none may be on PATH)


def test_an_application_built_from_the_same_pom_and_sources_is_not_built_again(tmp_path: Path) -> None:
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    source = tmp_path / "src" / "main" / "java" / "Bean.java"
    source.parent.mkdir(parents=True)
    source.write_text("class Bean {}")
    folder = tmp_path / "app"
    folder.mkdir()
    built = _stamp(pom, {})
    (folder / COMPLETE_MARKER).write_text(built)
    assert not build_application(pom, folder)  # no mvn run (none may be on PATH)
    source.write_text("class Bean { int changed; }")
    assert _stamp(pom, {}) != built  # a changed source builds again
