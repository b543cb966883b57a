"""scripts/options_doc.py: docs/options.md generated from the configuration models, and its check."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel, Field

from icesink.config import SinkConfig
from icesink.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "options_doc.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("options_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["options_doc"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


options_doc = _load()


def test_the_committed_reference_is_what_the_models_give() -> None:
    assert (ROOT / "docs" / "options.md").read_text(encoding="utf-8") == options_doc.render()
    assert options_doc.main(["--check"]) == 0


def test_a_stale_reference_fails_the_check_naming_make_docs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "options.md"
    stale.write_text(options_doc.render().replace("| `write.mode` |", "| `write.old-mode` |"))

    assert options_doc.main(["--check", "--output", str(stale)]) == 1
    assert "make docs" in capsys.readouterr().err
    assert options_doc.main(["--output", str(stale)]) == 0  # make docs
    assert options_doc.main(["--check", "--output", str(stale)]) == 0


def test_an_option_without_a_description_is_refused_naming_it() -> None:
    class Section(BaseModel):
        """A section.

        Attributes:
            documented: What it does, over
                two lines.
        """

        documented: int = Field(default=3, ge=1)
        undocumented: int = 0
        described: str = Field(default="x", description="Said in the field.")

    row = options_doc.option(Section, "documented", "section.documented")
    assert (row.type, row.default, row.allowed) == ("integer", "`3`", ">= 1")
    assert row.description == "What it does, over two lines."
    assert options_doc.option(Section, "described", "section.described").description == "Said in the field."
    missing = options_doc.OptionDocError
    with pytest.raises(missing, match=r"'section.undocumented'.*Section.undocumented"):
        options_doc.option(Section, "undocumented", "section.undocumented")


def test_a_sink_field_without_an_option_key_is_refused_naming_it() -> None:
    class Write(BaseModel):
        """How files are written.

        Attributes:
            keyed: Has a key.
            unkeyed: Has none.
        """

        keyed: int = 1
        unkeyed: int = 2

    class Sink(BaseModel):
        write: Write = Field(default_factory=Write)

    with pytest.raises(options_doc.OptionDocError, match=r"field write.unkeyed of Sink has no option key"):
        options_doc.check_every_field_has_a_key(Sink, {("write", "keyed")})
    options_doc.check_every_field_has_a_key(Sink, {("write", "keyed"), ("write", "unkeyed")})


def test_every_sink_key_of_the_reference_is_one_from_options_accepts() -> None:
    text = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    sink_part = text.split("## Kafka job options")[0]
    keys = re.findall(r"^\| `([^`]+)` \|", sink_part, flags=re.MULTILINE)
    keys += re.findall(r"Also `([^`]+)`", sink_part)
    assert "write.target-file-size-bytes" in keys and "write.distribution-mode" in keys

    for key in keys:
        written = key.replace("*", "some-property")
        try:
            SinkConfig.from_options({"table": "db.t", written: "1"})
        except ConfigError as e:
            assert not e.message.startswith("unknown option"), key
