"""Parse the ``partition-by`` option into Iceberg partition fields.

Accepted terms, comma separated: ``col`` or ``identity(col)``, ``bucket(N, col)``,
``truncate(W, col)``, ``year(col)``, ``month(col)``, ``day(col)``, ``hour(col)`` (Spark
SQL's plural forms ``years``/``months``/``days``/``hours`` too). Column names may be
dotted paths into structs and may be quoted with backticks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)

from icesink.errors import ConfigError, PartitionSpecError

_TERM = re.compile(r"^\s*(?:(?P<fn>[A-Za-z_]+)\s*\((?P<args>[^()]*)\)|(?P<col>[^(),]+?))\s*$")
_UNARY: dict[str, type[Transform[Any, Any]]] = {
    "identity": IdentityTransform,
    "year": YearTransform,
    "years": YearTransform,
    "month": MonthTransform,
    "months": MonthTransform,
    "day": DayTransform,
    "days": DayTransform,
    "date": DayTransform,
    "hour": HourTransform,
    "hours": HourTransform,
}
_TIME_TRANSFORMS = (YearTransform, MonthTransform, DayTransform, HourTransform)
_TIME_NAMES: dict[type, str] = {
    YearTransform: "year",
    MonthTransform: "month",
    DayTransform: "day",
    HourTransform: "hour",
}
_ACCEPTED = "col, identity(col), bucket(N, col), truncate(W, col), year(col), month(col), day(col), hour(col)"


@dataclass(frozen=True)
class PartitionTerm:
    """One partition field as written by the user: a transform of a source column."""

    transform: Transform[Any, Any]
    column: str


def parse_partition_by(text: str | None) -> list[PartitionTerm]:
    """Parse a ``partition-by`` string into terms (empty for ``None`` or blank).

    Raises:
        PartitionSpecError: A term is not one of the accepted forms.
    """
    if text is None or not text.strip():
        return []
    return [_parse_term(term) for term in _split_terms(text)]


def check_terms(terms: list[PartitionTerm], case_sensitive: bool = False) -> None:
    """Fail when two terms make the same partition field, or partition one column by time twice.

    Iceberg refuses both (a partition field name is used once; ``day(ts)`` next to
    ``hour(ts)`` is redundant), so they are refused before any table is created.

    Raises:
        PartitionSpecError: Naming both terms.
    """
    names: dict[str, PartitionTerm] = {}
    by_time: dict[str, PartitionTerm] = {}
    for term in terms:
        column = term.column if case_sensitive else term.column.lower()
        name = default_field_name(term, column)
        earlier = names.setdefault(name, term)
        if earlier is not term:
            raise PartitionSpecError(
                f"partition terms {describe_term(earlier)} and {describe_term(term)} both make the "
                f"partition field {name!r}; a spec cannot have a field more than once",
                hint="list each partition term once",
            )
        if isinstance(term.transform, _TIME_TRANSFORMS):
            earlier = by_time.setdefault(column, term)
            if earlier is not term:
                raise PartitionSpecError(
                    f"partition terms {describe_term(earlier)} and {describe_term(term)} both partition "
                    f"column {term.column!r} by time",
                    hint="keep one of them: the finer one (hour) also groups rows by the coarser",
                )


def check_partition_by(text: str | None, case_sensitive: bool, distribution_mode: Any) -> None:
    """``partition-by`` parses, names each field once, and has a bucket for ``distribution-mode=bucket``.

    Whether its columns exist and take their transforms needs the stream's schema: that
    is checked before the table is created (:func:`build_partition_spec`).

    Raises:
        PartitionSpecError: The option does not parse, naming its value.
        ConfigError: ``distribution-mode=bucket`` without a bucket term.
    """
    try:
        terms = parse_partition_by(text)
        check_terms(terms, case_sensitive)
    except PartitionSpecError as e:
        raise PartitionSpecError(
            f"invalid value {text!r} for option 'partition-by': {e.message}", hint=e.hint
        ) from e
    mode = getattr(distribution_mode, "value", distribution_mode)
    if terms and mode == "bucket" and not any(isinstance(t.transform, BucketTransform) for t in terms):
        raise ConfigError(
            f"invalid value {mode!r} for option 'distribution-mode': partition-by {text!r} "
            "has no bucket(N, col) term to shuffle by",
            hint="use distribution-mode=hash (or none), or add a bucket(N, col) term to partition-by",
        )


def describe_term(term: PartitionTerm) -> str:
    """A term as ``partition-by`` spells it, e.g. ``bucket(16, id)``."""
    transform = term.transform
    if isinstance(transform, BucketTransform):
        return f"bucket({transform.num_buckets}, {term.column})"
    if isinstance(transform, TruncateTransform):
        return f"truncate({transform.width}, {term.column})"
    if isinstance(transform, IdentityTransform):
        return term.column
    return f"{_TIME_NAMES[type(transform)]}({term.column})"


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in (t.strip() for t in terms) if t]


def _parse_term(term: str) -> PartitionTerm:
    match = _TERM.match(term)
    if not match:
        raise PartitionSpecError(f"cannot parse partition term {term!r}", hint=f"use one of: {_ACCEPTED}")
    if match.group("col"):
        return PartitionTerm(IdentityTransform(), _unquote(match.group("col")))
    fn = match.group("fn").lower()
    args = [a.strip() for a in match.group("args").split(",")]
    if fn in _UNARY and len(args) == 1:
        return PartitionTerm(_UNARY[fn](), _unquote(args[0]))
    if fn in ("bucket", "truncate") and len(args) == 2:
        number, column = args
        if not number.isdigit() or int(number) <= 0:
            raise PartitionSpecError(
                f"{fn} width {number!r} in partition term {term!r} is not a positive integer",
                hint=f"write it as {fn}(16, column)",
            )
        cls = BucketTransform if fn == "bucket" else TruncateTransform
        return PartitionTerm(cls(int(number)), _unquote(column))
    raise PartitionSpecError(f"unknown partition transform in {term!r}", hint=f"use one of: {_ACCEPTED}")


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == "`":
        return name[1:-1].replace("``", "`")  # Spark's escape of a backtick inside quotes
    return name


def default_field_name(term: PartitionTerm, source_name: str) -> str:
    """Iceberg Java's default partition field name for a term (``id_bucket``, ``ts_day``, ...)."""
    transform = term.transform
    base = source_name.replace(".", "_")
    if isinstance(transform, IdentityTransform):
        return source_name
    if isinstance(transform, BucketTransform):
        return f"{base}_bucket"
    if isinstance(transform, TruncateTransform):
        return f"{base}_trunc"
    return f"{base}_{_TIME_NAMES[type(transform)]}"


def build_partition_spec(
    terms: list[PartitionTerm], schema: Schema, case_sensitive: bool = False
) -> PartitionSpec:
    """Bind terms to ``schema`` and return the spec (field ids from 1000, as Iceberg assigns).

    Raises:
        PartitionSpecError: A term names a missing column, or its transform cannot apply
            to the column's type.
    """
    from pyiceberg.partitioning import PartitionField

    check_terms(terms, case_sensitive)
    fields = []
    for offset, term in enumerate(terms):
        try:
            source = schema.find_field(term.column, case_sensitive=case_sensitive)
        except ValueError as e:
            raise PartitionSpecError(
                f"partition term {describe_term(term)!r} of option 'partition-by' names a missing "
                f"column {term.column!r}",
                hint=f"partition by one of the table's columns {[f.name for f in schema.fields]}",
            ) from e
        if not term.transform.can_transform(source.field_type):
            raise PartitionSpecError(
                f"partition term {describe_term(term)!r} of option 'partition-by' cannot partition "
                f"column {term.column!r} of type {source.field_type}",
                hint="bucket takes int/long/date/time/timestamp/string/binary/decimal/uuid/fixed; "
                "year/month/day/hour take date or timestamp; truncate takes int/long/string/binary/decimal",
            )
        source_name = schema.find_column_name(source.field_id) or term.column
        fields.append(
            PartitionField(
                source_id=source.field_id,
                field_id=1000 + offset,
                transform=term.transform,
                name=default_field_name(term, source_name),
            )
        )
    return PartitionSpec(*fields, spec_id=0)
