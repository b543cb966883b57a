"""scripts/check_docs.py: docs/architecture.md names every module, and only paths that exist."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "check_docs.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_docs = _load()

CODE = {
    "icesink/__init__.py": "",
    "icesink/sink.py": "",
    "icesink/commit/__init__.py": "",
    "icesink/commit/snapshot.py": "",
    "scripts/check_docs.py": "",
    "monitoring/build_dashboard.py": "",
    "monitoring/grafana/dashboards/icesink.json": "{}",
}
MAP = """# Map

- `icesink/`: the library; `icesink/sink.py`: the sink.
- `icesink/commit/`: commits; `icesink/commit/snapshot.py`: one snapshot.
- `scripts/check_docs.py`: this check.
- `monitoring/build_dashboard.py` builds `monitoring/grafana/dashboards/icesink.json`.
- Not paths: `IcebergSink`, `write.mode`, `make lint`, `tests/unit` (outside the mapped folders).
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, check=False
    )


def test_a_map_naming_every_module_passes(tmp_path: Path) -> None:
    done = _run(_tree(tmp_path, {**CODE, "docs/architecture.md": MAP}))
    assert done.returncode == 0, done.stdout
    assert done.stdout == ""


def test_a_missing_path_a_short_name_and_an_unnamed_module_fail(tmp_path: Path) -> None:
    stale = MAP.replace("`icesink/commit/snapshot.py`", "`icesink/upsert/snapshot.py`") + "- `snapshot.py`\n"
    root = _tree(tmp_path, {**CODE, "icesink/write/__init__.py": "", "docs/architecture.md": stale})

    done = _run(root)

    assert done.returncode == 1
    missing = "which does not exist (write modules as their path from the checkout)"
    assert done.stdout.splitlines() == [
        f"docs/architecture.md: names icesink/upsert/snapshot.py, {missing}",
        f"docs/architecture.md: names snapshot.py, {missing}",
        "icesink/commit/snapshot.py: not named in docs/architecture.md: add a line saying what it does",
        "icesink/write/: not named in docs/architecture.md: add a line saying what it does",
    ]


def test_links_to_missing_files_or_headings_fail(tmp_path: Path) -> None:
    docs = {
        "README.md": "See [the map](docs/architecture.md#map), [gone](docs/gone.md), "
        "[no heading](docs/architecture.md#nowhere) and [the site](https://example.com).\n"
        "```\n[in a code block](nowhere.md)\n```\n",
        "docs/guide.md": "# A guide's title\n\n[here](#a-guides-title), [the README](../README.md#nope)\n",
    }
    root = _tree(tmp_path, {**CODE, "docs/architecture.md": MAP, **docs})

    assert check_docs.check(root) == [
        "README.md: links to docs/gone.md, which does not exist",
        "README.md: links to docs/architecture.md#nowhere, but docs/architecture.md has no such heading",
        "docs/guide.md: links to ../README.md#nope, but ../README.md has no such heading",
    ]


def test_the_checkout_passes() -> None:
    assert check_docs.check(ROOT) == []
