"""Check the shape of the code: module and function sizes, and the direction of imports.

Prints, one per line, every problem it finds and exits 1 when there is one. In each folder
of :data:`CHECKED`:

- a module over :data:`MAX_MODULE_LINES` lines;
- a function (or method) over :data:`MAX_FUNCTION_LINES` lines;
- an import cycle between packages (a subpackage such as ``icesink.route``, or a top-level
  module such as ``icesink.errors``, is one node of the graph), counting imports at any depth;
- an import cycle between the modules of one package (``icesink.write.task`` and
  ``icesink.write.table_files``), counting the imports outside functions, those under
  ``if TYPE_CHECKING:`` included: a type one module needs from the other is a seam to cut
  (the type moves to a module both import) even if Python would load them both. An import
  inside a function is left out: it runs once both modules are loaded, and it is how a
  module loads a heavy or optional dependency only where it runs.

One package is installed, ``icesink``: its public face (:data:`PUBLIC_FACE`: the names of
``icesink`` and ``icesink.sources``), the library's internals (every other module but the
jobs) and the jobs (:data:`JOBS`). In the internals: an import of the public face, the
jobs, the benchmarks or the tests; and an import chain among the driver's modules
(:data:`DRIVER`: the sink and the story of a micro-batch) longer than
:data:`MAX_DRIVER_CHAIN` modules, counting the imports a module runs when loaded (outside
functions and ``if TYPE_CHECKING:``): a step's types live low, in the modules every step
imports, not in the step that makes them. In the jobs and the monitoring code
(:data:`PUBLIC_ONLY`): an import of the internals: they use the library through its public
face, the only modules that follow the internals when they move. The benchmarks may import
the internals: most of them measure an internal step (a write task, the committer, the
route step) on its own.

Usage: ``python scripts/check_layout.py [ROOT]`` (ROOT: the checkout, by default the parent
of this script's folder). Standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
LIBRARY = "icesink"
# The jobs, inside the library's package but above it: they import its public face only.
JOBS = "icesink.jobs"
# The modules of the public face (icesink._lazy: how both import their names on first use).
PUBLIC_FACE = ("icesink", "icesink.sources", "icesink._lazy")
# The folders whose modules' sizes and import cycles are checked (the library's imports from
# above too); a further folder is one more line here.
CHECKED = (
    LIBRARY,
    "benchmarks",
    "monitoring",
)
# The driver's orchestration: the longest chain of imports among these modules is at most
# MAX_DRIVER_CHAIN modules long (icesink.sink -> a plan -> a step -> the table batch).
DRIVER = ("icesink.sink", "icesink.batch")
MAX_DRIVER_CHAIN = 4
# Packages that import the library; its internals must never import them (nor the public face).
ABOVE_LIBRARY = ("benchmarks", "tests")
# Folders (with the jobs) that may use the library only through its public face.
PUBLIC_ONLY = ("monitoring",)


@dataclass(frozen=True)
class Module:
    """One Python file of a checked folder.

    Attributes:
        name: Its dotted module name (``icesink.route.router``).
        path: The file.
        tree: Its parsed source.
        lines: Its number of lines.
    """

    name: str
    path: Path
    tree: ast.Module
    lines: int


def main(argv: list[str]) -> int:
    """Run every check over the checkout at ``argv[0]`` (default: this script's parent)."""
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layout: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


def check(root: Path) -> list[str]:
    """Every problem of the checked folders under ``root``, as printable lines."""
    problems: list[str] = []
    for folder in CHECKED:
        problems.extend(check_folder(root, folder))
    return problems


def check_folder(root: Path, folder: str) -> list[str]:
    """Every problem of the modules under ``root / folder``, as printable lines."""
    modules = list(load_modules(root, folder))
    internals = internal_names(root)
    problems: list[str] = []
    for module in modules:
        where = module.path.relative_to(root)
        if module.lines > MAX_MODULE_LINES:
            problems.append(f"{where}: module of {module.lines} lines (at most {MAX_MODULE_LINES})")
        for name, line, length in long_functions(module.tree):
            problems.append(
                f"{where}:{line}: function {name} of {length} lines (at most {MAX_FUNCTION_LINES})"
            )
        problems.extend(f"{where}:{problem}" for problem in wrong_imports(module, folder, internals))
    for cycle in package_cycles(modules, folder):
        problems.append("import cycle between packages: " + cycle)
    for cycle in module_cycles(modules):
        problems.append(f"import cycle inside {package_of(cycle.split()[0])}: {cycle}")
    chain = longest_driver_chain(modules) if folder == LIBRARY else []
    if len(chain) > MAX_DRIVER_CHAIN:
        problems.append(
            f"import chain of {len(chain)} driver modules (at most {MAX_DRIVER_CHAIN}): " + " -> ".join(chain)
        )
    return problems


def longest_driver_chain(modules: list[Module]) -> list[str]:
    """The longest chain of imports run on loading among the :data:`DRIVER` modules (no cycles there)."""
    driver = {m.name: m for m in modules if any(m.name == d or m.name.startswith(d + ".") for d in DRIVER)}
    graph = {
        name: {t for t in _loaded_modules(m, set(driver), typing=False) if t != name}
        for name, m in driver.items()
    }
    longest: dict[str, list[str]] = {}

    def chain(name: str, seen: frozenset[str]) -> list[str]:
        if name not in longest:
            below = [chain(t, seen | {name}) for t in sorted(graph[name]) if t not in seen]
            longest[name] = [name, *max(below, key=len, default=[])]
        return longest[name]

    return max((chain(name, frozenset()) for name in sorted(graph)), key=len, default=[])


def internal_names(root: Path) -> set[str]:
    """The names under ``icesink`` of the library's internal modules and packages (``batch``,
    ``errors``): every entry of its folder but the public face and the jobs."""
    face = {name.rpartition(".")[2] for name in (*PUBLIC_FACE, JOBS) if "." in name}
    folder = root / LIBRARY
    if not folder.is_dir():
        return set()
    entries = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    return entries - face - {"__init__", "__pycache__"}


def _layer(module: str) -> str:
    """``internal``, ``face`` or ``jobs``: the part of the installed package ``module`` is in."""
    if module == JOBS or module.startswith(JOBS + "."):
        return "jobs"
    return "face" if module in PUBLIC_FACE else "internal"


def wrong_imports(module: Module, folder: str, internals: set[str]) -> Iterator[str]:
    """``line: problem`` of each import going the wrong way: the internals importing from above
    them (the public face, the jobs, the benchmarks, the tests), or the jobs and the folders of
    :data:`PUBLIC_ONLY` importing the internals."""
    public_only = folder in PUBLIC_ONLY or (folder == LIBRARY and _layer(module.name) == "jobs")
    internal = folder == LIBRARY and _layer(module.name) == "internal"
    reported = set()
    for line, target in imports(module):
        parts = target.split(".")
        if parts[0] != LIBRARY or len(parts) == 1:
            if internal and parts[0] in ABOVE_LIBRARY:
                yield f"{line}: the library imports {target}"
            continue
        into = _layer(target) if target.startswith(JOBS) or target in PUBLIC_FACE else None
        if internal and (into in ("jobs", "face") or (into is None and parts[1] not in internals)):
            yield f"{line}: the library imports {target}, above it"
        elif public_only and into is None and parts[1] in internals and line not in reported:
            reported.add(line)  # once per import statement: its module, not each name
            who = JOBS if folder == LIBRARY else folder
            yield f"{line}: {who} imports {target}: use the public names of icesink or icesink.sources"


def load_modules(root: Path, package: str) -> Iterator[Module]:
    """The modules of ``package`` under ``root``, parsed."""
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        source = path.read_text(encoding="utf-8")
        yield Module(".".join(parts), path, ast.parse(source, str(path)), len(source.splitlines()))


def long_functions(tree: ast.Module) -> Iterator[tuple[str, int, int]]:
    """``(qualified name, first line, length)`` of each function longer than allowed.

    The length counts from the ``def`` (decorators excluded) to the last line of the body.
    """

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    yield name, child.lineno, length
                yield from visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def imports(module: Module) -> Iterator[tuple[int, str]]:
    """``(line, imported module)`` of every import in ``module``, at any depth, resolved."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            yield node.lineno, base
            for alias in node.names:  # ``from icesink import catalog`` imports the module icesink.catalog
                yield node.lineno, f"{base}.{alias.name}"


def _outside_functions(tree: ast.AST, typing: bool = True) -> Iterator[ast.AST]:
    """The nodes of ``tree`` that are not inside a function (or lambda); ``typing=False``: nor
    under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if not typing and isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
            continue
        yield child
        yield from _outside_functions(child, typing)


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def package_of(name: str) -> str:
    """The node of the package graph a module belongs to: ``icesink.route.router`` ->
    ``icesink.route``, ``icesink.jobs.kafka.job.main`` -> ``icesink.jobs.kafka``."""
    depth = 3 if name.startswith(JOBS + ".") else 2
    return ".".join(name.split(".")[:depth])


def package_cycles(modules: list[Module], folder: str) -> list[str]:
    """The import cycles between the packages of ``folder``, one per strongly connected component."""
    known = {m.name for m in modules}
    graph: dict[str, set[str]] = {package_of(m.name): set() for m in modules}
    for module in modules:
        source = package_of(module.name)
        for _, target in imports(module):
            if target in known and package_of(target) != source and package_of(target) != folder:
                graph[source].add(package_of(target))
    return _cycles(graph)


def module_cycles(modules: list[Module]) -> list[str]:
    """The import cycles between the modules of one package, one per strongly connected component.

    Only the imports outside functions count (see the module docstring); ``from p import m``
    of a module ``m`` is an import of ``p.m``, not of the package's ``__init__``.
    """
    known = {m.name for m in modules}
    graph: dict[str, set[str]] = {m.name: set() for m in modules}
    for module in modules:
        for target in _loaded_modules(module, known):
            if target != module.name and package_of(target) == package_of(module.name):
                graph[module.name].add(target)
    return _cycles(graph)


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """One line per strongly connected component of ``graph``: its shortest cycle through its
    first member (``a -> b -> a``), and the other members, if any, after a semicolon."""
    lines = []
    for component in sorted(sorted(c) for c in _strongly_connected(graph) if len(c) > 1):
        start, members = component[0], set(component)
        paths = {start: [start]}
        queue = [start]
        while start not in paths or len(paths[start]) == 1:  # breadth first, back to start
            node = queue.pop(0)
            for child in sorted(graph[node] & members):
                if child == start:
                    paths[start] = [*paths[node], start]
                    break
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    queue.append(child)
        cycle = paths[start]
        others = [m for m in component if m not in cycle]
        lines.append(" -> ".join(cycle) + (f"; with {', '.join(others)}" if others else ""))
    return lines


def _loaded_modules(module: Module, known: set[str], typing: bool = True) -> Iterator[str]:
    """The modules of ``known`` that ``module`` imports outside its functions (``typing=False``:
    and outside ``if TYPE_CHECKING:``, the imports that run when it is loaded)."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in _outside_functions(module.tree, typing):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in known or base in known:
                    yield target if target in known else base


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
