"""scripts/check_layout.py: module and function sizes, import cycles, imports from above."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layout.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layout", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layout"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


check_layout = _load()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _function(name: str, body_lines: int) -> str:
    return f"def {name}():\n" + "    x = 1\n" * (body_lines - 1) + "    return x\n"


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, check=False
    )


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "sink/errors.py": "class SinkError(Exception): ...\n",
            "sink/route/__init__.py": "",
            "sink/route/router.py": "from sink.errors import SinkError\nfrom sink.write import task\n",
            "sink/write/__init__.py": "",
            "sink/write/task.py": "from ..errors import SinkError\n" + _function("run", 59),
        },
    )
    done = _run(root)
    assert done.returncode == 0, done.stdout
    assert done.stdout == ""


def test_a_long_function_a_cycle_and_a_job_import_fail(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "sink/route/__init__.py": "",
            "sink/route/router.py": "from sink.write.task import run\n",
            "sink/write/__init__.py": "",
            "sink/write/task.py": "from sink.route import router\n"
            + "class Writer:\n"
            + "\n".join("    " + line for line in _function("write", 61).splitlines())
            + "\n",
            "sink/metrics.py": "import streaming_jobs.kafka\n",
        },
    )
    done = _run(root)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "sink/write/task.py:3: function Writer.write of 62 lines (at most 60)" in lines
    assert "import cycle between packages: sink.route -> sink.write -> sink.route" in lines
    assert "sink/metrics.py:1: the library imports streaming_jobs.kafka" in lines
    assert len(lines) == 3


def test_a_long_module_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"sink/__init__.py": "", "sink/big.py": "x = 1\n" * 351})
    assert check_layout.check(root) == ["sink/big.py: module of 351 lines (at most 350)"]


def test_a_cycle_through_three_packages_and_relative_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "sink/a/__init__.py": "from ..b import y\n",
            "sink/b/__init__.py": "",
            "sink/b/y.py": "def f():\n    from sink.c import z\n",
            "sink/c/__init__.py": "",
            "sink/c/z.py": "from sink import a\n",
            "sink/d.py": "from sink.a import x\n",
        },
    )
    assert check_layout.check(root) == ["import cycle between packages: sink.a -> sink.b -> sink.c -> sink.a"]


def test_a_cycle_inside_a_package_fails_naming_its_modules(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "sink/write/__init__.py": "",
            "sink/write/task.py": "from sink.write.table_files import TableFiles\n",
            "sink/write/table_files.py": "from typing import TYPE_CHECKING\n"
            + "if TYPE_CHECKING:\n    from sink.write.task import WriteSpec\n",
            "sink/route/__init__.py": "",
            "sink/route/a.py": "from . import c\n",
            "sink/route/c.py": "from .b import f\n",
            "sink/route/b.py": "import sink.route.a\n",
            "sink/commit/__init__.py": "",
            "sink/commit/a.py": "from sink.commit import b, c\n",
            "sink/commit/b.py": "from sink.commit.a import x\n",
            "sink/commit/c.py": "from sink.commit.a import y\n",
        },
    )
    assert check_layout.check(root) == [
        "import cycle inside sink.commit: sink.commit.a -> sink.commit.b -> sink.commit.a"
        "; with sink.commit.c",
        "import cycle inside sink.route: sink.route.a -> sink.route.c -> sink.route.b -> sink.route.a",
        "import cycle inside sink.write: sink.write.table_files -> sink.write.task -> sink.write.table_files",
    ]


def test_an_import_inside_a_function_or_of_the_package_makes_no_cycle_inside_it(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "sink/write/__init__.py": "",
            "sink/write/spec.py": "class WriteSpec: ...\n",
            "sink/write/task.py": "from sink.write import spec\n"
            + "from sink.write.table_files import TableFiles\n",
            "sink/write/table_files.py": "from sink.write.spec import WriteSpec\n"
            + "def run():\n    from sink.write.task import run_write\n",
        },
    )
    assert check_layout.check(root) == []


def test_the_benchmarks_sizes_and_cycles_are_checked_but_they_may_import_the_jobs(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "benchmarks/__init__.py": "",
            "benchmarks/run.py": "import streaming_jobs.spark\nfrom benchmarks._fresh import run_fresh\n"
            + "x = 1\n" * 349,
            "benchmarks/_fresh.py": "from benchmarks.run import _session\n" + _function("run_fresh", 60),
        },
    )
    assert check_layout.check(root) == [
        "benchmarks/_fresh.py:2: function run_fresh of 61 lines (at most 60)",
        "benchmarks/run.py: module of 351 lines (at most 350)",
        "import cycle between packages: benchmarks._fresh -> benchmarks.run -> benchmarks._fresh",
    ]


def test_a_driver_import_chain_over_four_modules_fails_but_typing_imports_do_not_count(
    tmp_path: Path,
) -> None:
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sink.batch import d\n"
    files = {
        "sink/__init__.py": "",
        "sink/sink.py": "from sink.batch import a\n",
        "sink/batch/__init__.py": "",
        "sink/batch/a.py": "from sink.batch import b\n",
        "sink/batch/b.py": "from sink.batch import c\n",
        "sink/batch/c.py": typing_only,
        "sink/batch/d.py": "import json\n",
    }
    assert _run(_tree(tmp_path / "four", files)).returncode == 0
    files["sink/batch/c.py"] = "from sink.batch import d\n"
    done = _run(_tree(tmp_path / "five", files))
    assert done.returncode == 1
    assert done.stdout.strip() == (
        "import chain of 5 driver modules (at most 4): "
        "sink.sink -> sink.batch.a -> sink.batch.b -> sink.batch.c -> sink.batch.d"
    )


def test_the_checkout_passes() -> None:
    assert check_layout.check(ROOT) == []


def test_the_jobs_and_monitoring_are_checked_and_use_the_library_only_through_icesink(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sink/__init__.py": "",
            "sink/catalog.py": "",
            "icesink/__init__.py": "from sink import catalog\n",
            "icesink/sources.py": "",
            "streaming_jobs/__init__.py": "",
            "streaming_jobs/kafka/__init__.py": "",
            "streaming_jobs/kafka/job/__init__.py": "",
            "streaming_jobs/kafka/job/main.py": "import icesink.sources\nfrom icesink import IcebergSink\n"
            + "from streaming_jobs.kafka.job.query import run_query\n",
            "streaming_jobs/kafka/job/query.py": "from sink import catalog as catalogs\n"
            + "from streaming_jobs.kafka.job.main import run\n",
            "streaming_jobs/spark.py": "x = 1\n" * 351,
            "monitoring/build_dashboard.py": "from monitoring.dashboard.panels import graph\n",
            "monitoring/dashboard/__init__.py": "",
            "monitoring/dashboard/panels.py": "import sink.metrics\n" + _function("graph", 60),
            "benchmarks/__init__.py": "",
            "benchmarks/task_cpu.py": "from sink.catalog import load_table\n",
        },
    )
    assert check_layout.check(root) == [
        "streaming_jobs/kafka/job/query.py:1: streaming_jobs imports sink: "
        "use the public names of icesink or icesink.sources",
        "streaming_jobs/spark.py: module of 351 lines (at most 350)",
        "import cycle inside streaming_jobs.kafka: "
        "streaming_jobs.kafka.job.main -> streaming_jobs.kafka.job.query -> streaming_jobs.kafka.job.main",
        "monitoring/dashboard/panels.py:2: function graph of 61 lines (at most 60)",
        "monitoring/dashboard/panels.py:1: monitoring imports sink.metrics: "
        "use the public names of icesink or icesink.sources",
    ]
