"""scripts/check_layout.py: module and function sizes, import cycles, imports from above."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
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
            "icesink/__init__.py": "",
            "icesink/errors.py": "class SinkError(Exception): ...\n",
            "icesink/route/__init__.py": "",
            "icesink/route/router.py": "from icesink.errors import SinkError\n"
            + "from icesink.write import task\n",
            "icesink/write/__init__.py": "",
            "icesink/write/task.py": "from ..errors import SinkError\n" + _function("run", 59),
        },
    )
    done = _run(root)
    assert done.returncode == 0, done.stdout
    assert done.stdout == ""


def test_a_long_function_a_cycle_and_a_job_import_fail(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "icesink/__init__.py": "",
            "icesink/route/__init__.py": "",
            "icesink/route/router.py": "from icesink.write.task import run\n",
            "icesink/write/__init__.py": "",
            "icesink/write/task.py": "from icesink.route import router\n"
            + "class Writer:\n"
            + "\n".join("    " + line for line in _function("write", 61).splitlines())
            + "\n",
            "icesink/metrics.py": "import icesink.jobs.kafka\n",
            "icesink/errors.py": "from icesink import IcebergSink\nfrom icesink import metrics\n",
        },
    )
    done = _run(root)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "icesink/write/task.py:3: function Writer.write of 62 lines (at most 60)" in lines
    assert "import cycle between packages: icesink.route -> icesink.write -> icesink.route" in lines
    assert "icesink/metrics.py:1: the library imports icesink.jobs.kafka, above it" in lines
    assert "icesink/errors.py:1: the library imports icesink.IcebergSink, above it" in lines
    assert len(lines) == 4


def test_a_long_module_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"icesink/__init__.py": "", "icesink/big.py": "x = 1\n" * 351})
    assert check_layout.check(root) == ["icesink/big.py: module of 351 lines (at most 350)"]


def test_a_cycle_through_three_packages_and_relative_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "icesink/__init__.py": "",
            "icesink/a/__init__.py": "from ..b import y\n",
            "icesink/b/__init__.py": "",
            "icesink/b/y.py": "def f():\n    from icesink.c import z\n",
            "icesink/c/__init__.py": "",
            "icesink/c/z.py": "from icesink import a\n",
            "icesink/d.py": "from icesink.a import x\n",
        },
    )
    assert check_layout.check(root) == [
        "import cycle between packages: icesink.a -> icesink.b -> icesink.c -> icesink.a"
    ]


def test_a_cycle_inside_a_package_fails_naming_its_modules(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "icesink/__init__.py": "",
            "icesink/write/__init__.py": "",
            "icesink/write/task.py": "from icesink.write.table_files import TableFiles\n",
            "icesink/write/table_files.py": "from typing import TYPE_CHECKING\n"
            + "if TYPE_CHECKING:\n    from icesink.write.task import WriteSpec\n",
            "icesink/route/__init__.py": "",
            "icesink/route/a.py": "from . import c\n",
            "icesink/route/c.py": "from .b import f\n",
            "icesink/route/b.py": "import icesink.route.a\n",
            "icesink/commit/__init__.py": "",
            "icesink/commit/a.py": "from icesink.commit import b, c\n",
            "icesink/commit/b.py": "from icesink.commit.a import x\n",
            "icesink/commit/c.py": "from icesink.commit.a import y\n",
        },
    )
    assert check_layout.check(root) == [
        "import cycle inside icesink.commit: icesink.commit.a -> icesink.commit.b -> icesink.commit.a"
        "; with icesink.commit.c",
        "import cycle inside icesink.route: "
        "icesink.route.a -> icesink.route.c -> icesink.route.b -> icesink.route.a",
        "import cycle inside icesink.write: "
        "icesink.write.table_files -> icesink.write.task -> icesink.write.table_files",
    ]


def test_an_import_inside_a_function_or_of_the_package_makes_no_cycle_inside_it(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "icesink/__init__.py": "",
            "icesink/write/__init__.py": "",
            "icesink/write/spec.py": "class WriteSpec: ...\n",
            "icesink/write/task.py": "from icesink.write import spec\n"
            + "from icesink.write.table_files import TableFiles\n",
            "icesink/write/table_files.py": "from icesink.write.spec import WriteSpec\n"
            + "def run():\n    from icesink.write.task import run_write\n",
        },
    )
    assert check_layout.check(root) == []


def test_the_benchmarks_sizes_and_cycles_are_checked_but_they_may_import_the_jobs(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "icesink/__init__.py": "",
            "benchmarks/__init__.py": "",
            "benchmarks/run.py": "import icesink.jobs.spark\nfrom benchmarks._fresh import run_fresh\n"
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
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from icesink.batch import d\n"
    files = {
        "icesink/__init__.py": "",
        "icesink/sink.py": "from icesink.batch import a\n",
        "icesink/batch/__init__.py": "",
        "icesink/batch/a.py": "from icesink.batch import b\n",
        "icesink/batch/b.py": "from icesink.batch import c\n",
        "icesink/batch/c.py": typing_only,
        "icesink/batch/d.py": "import json\n",
    }
    assert _run(_tree(tmp_path / "four", files)).returncode == 0
    files["icesink/batch/c.py"] = "from icesink.batch import d\n"
    done = _run(_tree(tmp_path / "five", files))
    assert done.returncode == 1
    assert done.stdout.strip() == (
        "import chain of 5 driver modules (at most 4): "
        "icesink.sink -> icesink.batch.a -> icesink.batch.b -> icesink.batch.c -> icesink.batch.d"
    )


def test_the_checkout_passes() -> None:
    assert check_layout.check(ROOT) == []


def test_the_jobs_and_monitoring_are_checked_and_use_the_library_only_through_icesink(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "icesink/catalog.py": "",
            "icesink/metrics.py": "",
            "icesink/__init__.py": "from icesink import catalog\n",
            "icesink/sources.py": "",
            "icesink/jobs/__init__.py": "",
            "icesink/jobs/kafka/__init__.py": "",
            "icesink/jobs/kafka/job/__init__.py": "",
            "icesink/jobs/kafka/job/main.py": "import icesink.sources\nfrom icesink import IcebergSink\n"
            + "from icesink.jobs.kafka.job.query import run_query\n",
            "icesink/jobs/kafka/job/query.py": "from icesink import catalog as catalogs\n"
            + "from icesink.jobs.kafka.job.main import run\n",
            "icesink/jobs/spark.py": "x = 1\n" * 351,
            "monitoring/build_dashboard.py": "from monitoring.dashboard.panels import graph\n",
            "monitoring/dashboard/__init__.py": "",
            "monitoring/dashboard/panels.py": "import icesink.metrics\n" + _function("graph", 60),
            "benchmarks/__init__.py": "",
            "benchmarks/task_cpu.py": "from icesink.catalog import load_table\n",
        },
    )
    assert check_layout.check(root) == [
        "icesink/jobs/kafka/job/query.py:1: icesink.jobs imports icesink.catalog: "
        "use the public names of icesink or icesink.sources",
        "icesink/jobs/spark.py: module of 351 lines (at most 350)",
        "import cycle inside icesink.jobs.kafka: "
        "icesink.jobs.kafka.job.main -> icesink.jobs.kafka.job.query -> icesink.jobs.kafka.job.main",
        "monitoring/dashboard/panels.py:2: function graph of 61 lines (at most 60)",
        "monitoring/dashboard/panels.py:1: monitoring imports icesink.metrics: "
        "use the public names of icesink or icesink.sources",
    ]
