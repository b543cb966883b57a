"""Check that docs/architecture.md, the map of the code, matches the code.

Prints, one per line, every problem it finds and exits 1 when there is one:

- a path the map names (a code span such as ```icesink/write/task.py``` or ```icesink/route/```)
  that does not exist; every module is named by its full path from the checkout, so a
  span ending in ``.py`` that is not such a path is a problem too;
- a module (a ``.py`` file other than ``__init__.py``) or a package (a folder with an
  ``__init__.py``) of :data:`MAPPED` that the map does not name;
- a relative link of the docs (:data:`LINKED`: the README, ``docs/``, the benchmarks'
  README) to a file that does not exist, or to a heading its Markdown file does not have.

Usage: ``python scripts/check_docs.py [ROOT]`` (ROOT: the checkout, by default the parent
of this script's folder). Standard library only, like ``check_layout.py``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

MAP = Path("docs") / "architecture.md"
# The folders whose every module and package the map names.
MAPPED = ("icesink", "benchmarks", "monitoring", "scripts")
# The Markdown files whose relative links must resolve (globs from the checkout).
LINKED = ("README.md", "docs/*.md", "benchmarks/README.md")
_SPAN = re.compile(r"`([^`\s]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_PATH = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")


def main(argv: list[str]) -> int:
    """Run the check over the checkout at ``argv[0]`` (default: this script's parent)."""
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


def check(root: Path) -> list[str]:
    """Every disagreement between the map and the code under ``root``, as printable lines."""
    text = (root / MAP).read_text(encoding="utf-8")
    named = set(named_paths(text))
    problems = [
        f"{MAP}: names {path}, which does not exist (write modules as their path from the checkout)"
        for path in sorted(named)
        if not (root / path).exists() or (path.endswith("/") and not (root / path).is_dir())
    ]
    problems += [
        f"{path}: not named in {MAP}: add a line saying what it does"
        for path in code_paths(root)
        if path not in named
    ]
    for pattern in LINKED:
        for doc in sorted(root.glob(pattern)):
            problems += broken_links(root, doc)
    return problems


def broken_links(root: Path, doc: Path) -> list[str]:
    """The relative links of ``doc`` whose file, or heading (``#anchor``), does not exist."""
    problems = []
    for link in _LINK.findall(_FENCE.sub("", doc.read_text(encoding="utf-8"))):
        if "://" in link or link.startswith("mailto:"):
            continue
        target, _, anchor = link.partition("#")
        path = (doc.parent / target) if target else doc
        where = doc.relative_to(root)
        if not path.exists():
            problems.append(f"{where}: links to {link}, which does not exist")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            problems.append(f"{where}: links to {link}, but {target or where} has no such heading")
    return problems


def anchors(doc: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them."""
    found = set()
    for line in _FENCE.sub("", doc.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def named_paths(text: str) -> Iterator[str]:
    """The paths the map names: code spans under a top-level folder, or ending in ``.py``."""
    for span in _SPAN.findall(text):
        if not _PATH.match(span):
            continue
        if span.endswith(".py") or (span.split("/")[0] in MAPPED and "/" in span):
            yield span


def code_paths(root: Path) -> Iterator[str]:
    """The modules and packages of :data:`MAPPED` under ``root``, as the map writes them."""
    for folder in MAPPED:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            relative = path.relative_to(root).as_posix()
            if path.name == "__init__.py":
                yield relative.removesuffix("__init__.py")
            else:
                yield relative


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
