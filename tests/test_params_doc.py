"""docs/params.md covers every field of the schema, with a description from docs/params_doc.yaml, and
is what the generator writes now (pipeline/params_doc.py). Fast: no torch."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Literal

import pytest

from pipeline import params_doc

pytestmark = pytest.mark.unit


def test_every_schema_field_has_a_description_and_every_description_a_field():
    assert params_doc.problems(params_doc.load_descriptions()) == []


def test_docs_params_md_is_what_the_generator_writes():
    text = params_doc.render(params_doc.load_descriptions())
    current = (params_doc.ROOT / params_doc.OUTPUT).read_text(encoding="utf-8")
    assert current == text, "docs/params.md is stale: run `python -m pipeline.params_doc`"


def test_a_missing_and_an_unknown_description_are_both_named():
    descriptions = {k.path: "described" for s in params_doc.walk() for k in s.keys}
    assert params_doc.problems(descriptions) == []
    descriptions.pop("tiers.<name>.group_size")
    descriptions["tiers.<name>.groupsize"] = "a typo"
    assert params_doc.problems(descriptions) == [
        "docs/params_doc.yaml: no description for `tiers.<name>.group_size`",
        "docs/params_doc.yaml: `tiers.<name>.groupsize` names no field of pipeline.schema.Params"]


@dataclasses.dataclass(frozen=True)
class _Inner:
    size: int = 4
    kind: Literal["a", "b"] = "a"


@dataclasses.dataclass(frozen=True)
class _Outer:
    named: dict[str, _Inner]
    plain: _Inner = dataclasses.field(default_factory=_Inner)
    tuned: _Inner = dataclasses.field(default_factory=lambda: _Inner(size=9))
    maybe: _Inner | None = None
    names: list[str] = dataclasses.field(default_factory=lambda: ["x"])


def test_the_walk_reaches_mappings_optionals_and_a_section_default_that_differs():
    sections = params_doc.walk(_Outer)
    assert [s.path for s in sections] == ["", "named.<name>", "plain", "tuned", "maybe"]
    keys = {k.path: k for s in sections for k in s.keys}
    assert keys["named"].type == "mapping of `<name>` to section _Inner"
    assert keys["named"].default == "required"
    assert keys["maybe"].type == "section _Inner or null"
    assert keys["names"].default == "`[x]`"
    assert keys["plain.size"].default == "`4`"
    assert keys["tuned.size"].default == "`9`"          # the field's own default instance, not the class's
    assert keys["named.<name>.kind"].type == '"a" or "b"'


def test_render_lists_every_key_once_with_its_description():
    sections = params_doc.walk(_Outer)
    descriptions = {k.path: f"about {k.path}" for s in sections for k in s.keys}
    text = params_doc.render(descriptions, sections)
    assert "## `tuned`\n\nabout tuned\n" in text
    assert "## `named.<name>`\n\nabout named\n" in text       # a mapping's entries: the mapping's own line
    assert "| `size` | integer | `9` | about tuned.size |" in text
    assert text.count("| `kind` |") == 4


def test_the_generator_imports_no_torch():
    code = "import sys, pipeline.params_doc; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=params_doc.ROOT).returncode == 0
