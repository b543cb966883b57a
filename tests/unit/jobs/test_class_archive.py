"""Where the driver JVM's class archive is, and the options that map it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark import SparkContext

from icesink.jobs import class_archive, make_class_archive
from icesink.jobs.spark import DRIVER_JAVA_OPTIONS, with_class_archive


@pytest.fixture()
def no_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a job's process before its session: no JVM started yet."""
    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)


@pytest.mark.parametrize("value", ["off", "OFF", "", "0", "false"])
def test_the_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(class_archive.ENV_VARIABLE, value)
    assert class_archive.archive_path() is None
    assert class_archive.java_options() == ""


def test_by_default_it_is_in_the_environment_named_for_this_java_and_spark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(class_archive.ENV_VARIABLE, raising=False)
    path = class_archive.archive_path()
    assert path is not None and path.parent == Path(sys.prefix) / "share" / "icesink"
    assert path.name.startswith("spark-classes-") and path.suffix == ".jsa"

    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    other_java = class_archive.archive_path()
    assert other_java != path  # another Java, another archive
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert class_archive.archive_path() not in (path, other_java)  # another class path


def test_options_name_the_archive_only_once_it_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_gateway: None
) -> None:
    archive = tmp_path / "classes.jsa"
    monkeypatch.setenv(class_archive.ENV_VARIABLE, str(archive))
    assert class_archive.java_options() == ""
    assert with_class_archive({"a": "b"}) == {"a": "b"}

    archive.write_bytes(b"archive")
    options = class_archive.java_options()
    assert options.startswith(f"-XX:SharedArchiveFile={archive} ")
    assert "warning:stderr" in options  # never on the job's stdout
    assert with_class_archive({}) == {DRIVER_JAVA_OPTIONS: options}
    given = {DRIVER_JAVA_OPTIONS: "-Dmy.flag=1", "a": "b"}
    assert with_class_archive(given) == {DRIVER_JAVA_OPTIONS: f"-Dmy.flag=1 {options}", "a": "b"}


def test_a_running_jvm_gets_no_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_gateway: None
) -> None:
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setenv(class_archive.ENV_VARIABLE, str(archive))
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")  # started by spark-submit: too late
    assert with_class_archive({"a": "b"}) == {"a": "b"}


def _no_build(path: Path) -> float:
    raise AssertionError(f"made an archive at {path}")


def test_make_env_keeps_an_archive_that_is_there_and_makes_none_when_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(make_class_archive, "build", _no_build)
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setenv(class_archive.ENV_VARIABLE, str(archive))
    assert make_class_archive.main([]) == 0
    assert f"class archive present: {archive}" in capsys.readouterr().out
    monkeypatch.setenv(class_archive.ENV_VARIABLE, "off")
    assert make_class_archive.main([]) == 0
    assert "no class archive made" in capsys.readouterr().out
    monkeypatch.setenv(class_archive.ENV_VARIABLE, str(archive))
    with pytest.raises(AssertionError, match="made an archive"):
        make_class_archive.main(["--force"])


def test_make_envs_check_for_the_archive_imports_no_sink() -> None:
    """``make env`` runs the builder before every target: with the archive there, it answers at once."""
    probe = (
        "import sys, icesink.jobs.make_class_archive; "
        "library = {m for m in sys.modules if m.startswith('icesink.')} - {'icesink._lazy'}; "
        "library = {m for m in library if not m.startswith('icesink.jobs')}; "
        "print(sorted(library | ({m.split('.')[0] for m in sys.modules} & {'pyiceberg', 'pyarrow'})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
