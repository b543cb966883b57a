"""Write ``docs/options.md``, the option reference, from the configuration models.

The sink's options come from :class:`icesink.config.SinkConfig` and its sections (the keys
``SinkConfig.from_options()`` accepts, :func:`icesink.config_options.option_fields`); the
Kafka job's from :class:`icesink.jobs.kafka.job.config.JobConfig`. Each option's text is the
field's ``description``, else its entry in the ``Attributes:`` section of its model's
docstring: an option without either is an error naming the model and the field, so a new
option cannot reach the reference undocumented.

Usage: ``python scripts/options_doc.py`` (``make docs``) writes the file;
``python scripts/options_doc.py --check`` (part of ``make lint``) exits 1 when the
committed file differs from what the models give, naming the fix. ``--output FILE``
writes or checks another file.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "options.md"
FIX = "run `make docs` (python scripts/options_doc.py) and commit docs/options.md"
_ROLE = re.compile(r":(?:mod|class|func|meth|data|attr|exc):`~?([^`]+)`")
_MIB = 1024 * 1024

HEADER = """\
# Options

Generated from the configuration models by `scripts/options_doc.py` (`make docs`); do not
edit by hand: change the field's description in its model and run `make docs` again
(`make lint` fails while this file and the models disagree).

"""

SINK_INTRO = """\
## Sink options

What `IcebergSink.from_options({...})` and `SinkConfig.from_options({...})` accept: string
values, keys case-insensitive (the Kafka job takes the same keys under `sink:`). The typed
way in is `SinkConfig(...)` with the model's fields (`icesink/config.py`).

A bad key or value fails when the sink is built, naming the key, the value and what is
accepted; so do options that contradict each other (`commit.retry.min-wait-ms` above
`commit.retry.max-wait-ms`, a row group larger than the target file, `distribution-mode=bucket`
without a bucket term, upsert key columns without upsert mode) and a `partition-by` that does
not parse or names a field twice (`id, id`, `day(ts), hour(ts)`). What needs the stream's
schema (a missing column, `day()` of a `long`) fails in `prepare()`, or at the first batch,
before the table is created.

"""

KAFKA_INTRO = """\
## Kafka job options

The keys of `icesink-kafka-to-iceberg --config job.yaml` (`icesink/jobs/kafka/job/config.py`);
`--set KEY=VALUE` sets any of them and `--help` lists the flags. A value may be
`${env:NAME}`, replaced by the environment variable `NAME`. The configuration is validated
before Spark starts; an error exits with code 2, naming the key. See
[kafka-job.md](kafka-job.md).

"""


class OptionDocError(Exception):
    """A field of the models the reference cannot document: no description, or no option key."""


@dataclass(frozen=True)
class Option:
    """One row of the reference.

    Attributes:
        key: The option as written by the user.
        type: What the value is (integer, string, ...).
        default: The default as text (``required``, ``unset``, a value).
        allowed: The accepted values or bounds, or ``""``.
        description: What it does, Markdown.
    """

    key: str
    type: str
    default: str
    allowed: str
    description: str


def main(argv: list[str]) -> int:
    """Write the reference, or with ``--check`` compare it with the file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the file is out of date")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the file (default docs/options.md)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # this checkout's models, whatever the environment has installed
    try:
        text = render()
    except OptionDocError as e:
        print(f"options_doc: {e}", file=sys.stderr)
        return 1
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"options_doc: {args.output} differs from the configuration models: {FIX}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    return 0


def render() -> str:
    """The whole reference, as Markdown."""
    from icesink.config import SinkConfig
    from icesink.jobs.kafka.job.config import JobConfig

    parts = [HEADER, SINK_INTRO]
    for title, options in sink_sections(SinkConfig):
        parts.append(section(title, options))
    parts.append(KAFKA_INTRO)
    for title, options in model_sections(JobConfig, "", "The job"):
        parts.append(section(title, options))
    return "".join(parts).rstrip("\n") + "\n"


def section(title: str, options: list[Option]) -> str:
    """One table of options under a heading."""
    lines = [
        f"### {title}",
        "",
        "| option | type | default | accepted | description |",
        "|---|---|---|---|---|",
    ]
    for o in options:
        cells = [f"`{o.key}`", o.type, o.default, o.allowed, o.description]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n\n"


def sink_sections(model: type[BaseModel]) -> list[tuple[str, list[Option]]]:
    """The sink's options by section, in the order of the model's sections."""
    from icesink.config_options import option_fields

    keys: dict[tuple[str | None, str], list[str]] = {}
    for key, place in option_fields().items():
        keys.setdefault(place, []).append(key)
    sections: dict[str | None, list[Option]] = {None: []}
    catalog = _section_model(model, "catalog")
    sections["catalog"] = [
        option(catalog, "name", "catalog.name"),
        _each(option(catalog, "properties", "catalog.*")),
    ]
    sections[None].append(_each(option(model, "table_properties", "table-property.*")))
    for (section_name, field), names in keys.items():
        owner = model if section_name is None else _section_model(model, section_name)
        first, *others = names
        row = _as_string_option(option(owner, field, first))
        if others:
            also = ", ".join(f"`{k}`" for k in others)
            row = Option(row.key, row.type, row.default, row.allowed, f"{row.description} Also {also}.")
        sections.setdefault(section_name, []).append(row)
    check_every_field_has_a_key(model, set(keys))
    order = [None, *(name for name in model.model_fields if name in sections)]
    result = []
    for name in order:
        owner = model if name is None else _section_model(model, name)
        title = "Table" if name is None else f"{name.replace('_', ' ').capitalize()}: {_first_line(owner)}"
        result.append((title, sorted(sections[name], key=lambda o: o.key.replace("*", "~"))))
    return result


# Fields reached by a key prefix or by a key of their own in sink_sections, not by option_fields().
_SPECIAL_FIELDS = {("catalog", "name"), ("catalog", "properties"), (None, "table_properties")}


def check_every_field_has_a_key(model: type[BaseModel], mapped: set[tuple[str | None, str]]) -> None:
    """Every field of the sink's model can be set by some option key.

    Raises:
        OptionDocError: A field no key of ``icesink/config_options.py`` reaches.
    """
    for name, info in model.model_fields.items():
        inner = _model_class(info.annotation)
        fields = [(name, f) for f in inner.model_fields] if inner else [(None, name)]
        for place in fields:
            if place not in mapped and place not in _SPECIAL_FIELDS:
                raise OptionDocError(
                    f"field {'.'.join(p for p in place if p)} of {model.__name__} has no option key: add "
                    "one to _OPTION_FIELDS in icesink/config_options.py, then run `make docs`"
                )


def model_sections(model: type[BaseModel], prefix: str, title: str) -> Iterator[tuple[str, list[Option]]]:
    """A model's own options, then one section per nested model (the Kafka job's YAML tree)."""
    rows = []
    nested = []
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        inner = _model_class(info.annotation)
        if inner is not None:
            nested.append((inner, key))
        else:
            rows.append(option(model, name, key))
    if rows:
        yield title, rows
    for inner, key in nested:
        yield from model_sections(
            inner, key + ".", f"`{key}`: {_first_line(inner).replace(f' (`{key}`)', '')}"
        )


def option(model: type[BaseModel], field: str, key: str) -> Option:
    """The row of ``model``'s ``field``, known to users as ``key``.

    Raises:
        OptionDocError: The field has no description in the model.
    """
    info = model.model_fields[field]
    text = info.description or attribute_docs(model).get(field)
    if not text:
        raise OptionDocError(
            f"option {key!r} ({model.__module__}.{model.__name__}.{field}) has no description: "
            "add it to the model's docstring (Attributes:) or as Field(description=...), then "
            "run `make docs`"
        )
    text = markdown(text).replace(f" (`{key}`)", "").replace(f"(`{key}`)", "")
    annotation, metadata = _unwrap(info.annotation, list(info.metadata))
    return Option(key, type_name(annotation), default_text(info), allowed_text(annotation, metadata), text)


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """The ``Attributes:`` entries of ``model``'s docstring (Google style), by field name."""
    doc = inspect.cleandoc(model.__doc__ or "")
    entries: dict[str, str] = {}
    inside = False
    current = None
    for line in doc.splitlines():
        if not inside:
            inside = line.strip() == "Attributes:"
            continue
        if line and not line.startswith(" "):
            break  # the next section
        match = re.match(r"^    (\w+):\s*(.*)$", line)
        if match:
            current = match[1]
            entries[current] = match[2]
        elif current and line.strip():
            entries[current] += " " + line.strip()
    return entries


def markdown(text: str) -> str:
    """reStructuredText roles and literals as Markdown code."""
    text = _ROLE.sub(lambda m: f"``{m[1].rsplit('.', 1)[-1] if m[0].count('~') else m[1]}``", text)
    return " ".join(text.replace("``", "`").split())


def type_name(annotation: Any) -> str:
    """What the value is, in words."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        return "string"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is dict or annotation is dict:
        return "mapping"
    if origin is list:
        return "list"
    if origin is tuple:
        first, *rest = typing.get_args(annotation)
        return "mapping" if typing.get_origin(first) is tuple or rest != [Ellipsis] else "list"
    names = {bool: "boolean", int: "integer", float: "number", str: "string", SecretStr: "string (secret)"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def default_text(info: FieldInfo) -> str:
    """The default as shown in the reference."""
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if value is None or value in ("", {}, (), []):
        return "unset"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and value >= _MIB and value % _MIB == 0:
        return f"`{value}` ({value // _MIB} MiB)"
    return f"`{value}`"


def allowed_text(annotation: Any, metadata: list[Any]) -> str:
    """The accepted values (enumerations) or bounds (constraints) of a field."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return ", ".join(f"`{v}`" for v in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return ", ".join(f"`{m.value}`" for m in annotation)
    bounds = []
    for item in metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(item, getattr(annotated_types, name.capitalize())):
                bounds.append(f"{sign} {getattr(item, name)}")
        if isinstance(item, annotated_types.MinLen) and item.min_length:
            bounds.append("not empty")
        pattern = getattr(item, "pattern", None)
        if pattern:
            bounds.append(f"matches `{pattern}`")
    return ", ".join(bounds)


def _unwrap(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    """``annotation`` without ``None`` and ``Annotated``, with the constraints found inside."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0], metadata)
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        return _unwrap(base, metadata + extra)
    return annotation, metadata


def _each(row: Option) -> Option:
    """A prefix row (``catalog.*``): each key under it takes a string."""
    return Option(row.key, "string", "unset", row.allowed, row.description)


def _as_string_option(row: Option) -> Option:
    """A sink option as ``from_options`` takes it: structured values are written as text."""
    kind = {"mapping": "JSON object", "list": "comma list"}.get(row.type, row.type)
    return Option(row.key, kind, row.default, row.allowed, row.description)


def _model_class(annotation: Any) -> type[BaseModel] | None:
    annotation, _ = _unwrap(annotation, [])
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _section_model(model: type[BaseModel], name: str) -> type[BaseModel]:
    inner = _model_class(model.model_fields[name].annotation)
    if inner is None:
        raise TypeError(f"{model.__name__}.{name} is not a section model")
    return inner


def _first_line(model: type[BaseModel]) -> str:
    line = inspect.cleandoc(model.__doc__ or model.__name__).splitlines()[0]
    return markdown(line).rstrip(".")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
