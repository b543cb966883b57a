"""Which ``catalog.*`` keys a catalog reads, and the closest ones to a key it does not.

pyiceberg takes any property and ignores those nobody reads, so a misspelled key
(``catalog.warehose``) would pass silently and fail later for another reason. The keys
accepted here are those pyiceberg's code for the chosen catalog type and for its FileIOs
(pyarrow's and fsspec's) reads: the property names its modules define, and the literal
names they look up, read from the modules' source (so an optional dependency a catalog
type needs, boto3 for Glue say, does not have to be installed to check its keys). Keys
read by prefix (``header.*`` sent by a REST catalog with every request) are accepted by
prefix. A catalog given as ``py-catalog-impl``, or of a type pyiceberg does not know, is
not checked: only its own code knows what it reads.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import re
from collections.abc import Iterable

# Modules whose property names every catalog reads (the catalog base, the FileIOs).
_COMMON = ("pyiceberg.catalog", "pyiceberg.io", "pyiceberg.io.pyarrow", "pyiceberg.io.fsspec")
# Modules of each catalog type (pyiceberg's ``type`` values).
_BY_TYPE: dict[str, tuple[str, ...]] = {
    "rest": ("pyiceberg.catalog.rest", "pyiceberg.catalog.rest.auth"),
    "sql": ("pyiceberg.catalog.sql",),
    "hive": ("pyiceberg.catalog.hive",),
    "glue": ("pyiceberg.catalog.glue",),
    "dynamodb": ("pyiceberg.catalog.dynamodb",),
    "bigquery": ("pyiceberg.catalog.bigquery_metastore",),
    "in-memory": ("pyiceberg.catalog.memory", "pyiceberg.catalog.sql"),
}
# Keys read by prefix: a REST catalog's extra HTTP headers, fsspec's ADLS SAS tokens per account.
_PREFIXES = {"rest": ("header.",), "*": ("adls.sas-token.",)}

_KEY = r"[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*"
_CONSTANT = re.compile(rf'^[A-Z][A-Z0-9_]*(?:\s*:\s*str)?\s*=\s*"({_KEY})"', re.MULTILINE)
_LOOKUP = re.compile(rf'properties(?:\.get)?[(\[]\s*"({_KEY})"')


def catalog_type(properties: Iterable[str], kind: str | None, uri: str | None) -> str | None:
    """The catalog type pyiceberg would load (``None``: a ``py-catalog-impl`` or an unknown type)."""
    if "py-catalog-impl" in properties:
        return None
    if kind:
        return kind.lower() if kind.lower() in _BY_TYPE else None
    uri = uri or ""
    if uri.startswith("http"):
        return "rest"
    if uri.startswith("thrift"):
        return "hive"
    if uri.startswith(("sqlite", "postgresql")):
        return "sql"
    return None


@functools.cache
def accepted_keys(kind: str) -> frozenset[str]:
    """The property keys a catalog of type ``kind`` and its FileIOs read (without the prefixed ones)."""
    # A REST catalog's credential is often kept in a job's shared settings when the type changes.
    keys: set[str] = {"type", "uri", "warehouse", "credential"}
    for module in (*_COMMON, *_BY_TYPE[kind]):
        source = _source(module)
        keys.update(_CONSTANT.findall(source))
        keys.update(_LOOKUP.findall(source))
    return frozenset(keys)


def _source(module: str) -> str:
    """The text of ``module``'s source file, without importing it ('' when it is not there)."""
    try:
        spec = importlib.util.find_spec(module)
    except ImportError:
        return ""
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return ""
    with open(spec.origin, encoding="utf-8") as source:
        return source.read()


def unknown_keys(properties: Iterable[str], kind: str) -> list[str]:
    """The keys among ``properties`` that a catalog of type ``kind`` does not read."""
    accepted = accepted_keys(kind)
    prefixes = (*_PREFIXES.get(kind, ()), *_PREFIXES["*"])
    return [key for key in properties if key.lower() not in accepted and not key.lower().startswith(prefixes)]


def closest(key: str, candidates: Iterable[str], count: int = 3) -> list[str]:
    """The ``count`` candidates closest to ``key`` (a misspelling), best first; none when nothing is close."""
    return difflib.get_close_matches(key.lower(), list(candidates), n=count, cutoff=0.6)


def did_you_mean(key: str, candidates: Iterable[str], prefix: str = "") -> str:
    """``did you mean 'x'?`` (or ``'x' or 'y'``) for ``key``, or '' when no candidate is close."""
    matches = closest(key, candidates)
    if not matches:
        return ""
    return "did you mean " + " or ".join(repr(prefix + match) for match in matches) + "?"
