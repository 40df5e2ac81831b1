"""The params.yaml reference, docs/params.md, generated from the schema: every field of
`pipeline.schema.Params`, recursively (its type, its default), with the one-line description of its
dotted key in docs/params_doc.yaml, the one place a key is described (`RULE`, stated in docs/params.md;
tests/test_one_description.py holds the other places to it).

    python -m pipeline.params_doc            # write docs/params.md
    python -m pipeline.params_doc --check    # exit 1 if a field has no description, a description
                                             # names no field or is given twice, or docs/params.md is stale

The walk is generic (dataclasses.fields and type hints), so a field added to the schema shows up here
without a code change and needs only its line in docs/params_doc.yaml. A mapping's own keys (a model,
tier, task or metric name you choose) are written `<name>`: `tiers.<name>.group_size`. Imports the
schema and nothing that loads a model.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.schema import Params
from pipeline.schema.typed import type_name
from pipeline.schema import yaml_io

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTIONS = Path("docs/params_doc.yaml")
OUTPUT = Path("docs/params.md")
NAME = "<name>"
RULE = (f"Each key is described once, by its line in `{DESCRIPTIONS}`: params.yaml's comments say only why "
        "a value is what it is (`# why ...`) or are alternatives to uncomment, and the schema's dataclasses "
        "carry types, defaults and checks, no description (tests/test_one_description.py).")


@dataclass(frozen=True)
class Key:
    path: str            # dotted, e.g. "serving.vllm.budget.max_wall_s"
    type: str            # as a reader writes it in YAML
    default: str         # "required", or the value as YAML


@dataclass(frozen=True)
class Section:
    path: str            # "" for the top level
    cls: type
    keys: list[Key]


def _strip_none(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None was allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True
    return tp, False


def show(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return '`""`'
    if dataclasses.is_dataclass(value):
        return "see below"
    if isinstance(value, (list, dict)):
        return "`" + yaml.safe_dump(value, default_flow_style=True, width=10_000).strip() + "`"
    return f"`{value}`"


def _default(f: dataclasses.Field, instance: Any) -> tuple[str, Any]:
    """(the default as shown, the default value) of field f; `instance` is the enclosing section's own
    default value when it has one (a field whose default is e.g. `VllmBench(num_prompts=200)`)."""
    if instance is not None:
        value = getattr(instance, f.name)
    elif f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required", None
    return show(value), value


def _child(tp: Any, path: str) -> tuple[str, type] | None:
    """The section below a field of type tp: a dataclass, maybe optional, or a mapping of dataclasses."""
    tp, _ = _strip_none(tp)
    if dataclasses.is_dataclass(tp):
        return path, tp
    if typing.get_origin(tp) is dict:
        inner, _ = _strip_none(typing.get_args(tp)[1])
        if dataclasses.is_dataclass(inner):
            return f"{path}.{NAME}", inner
    return None


def walk(cls: type = Params, path: str = "", instance: Any = None) -> list[Section]:
    """Every section of the schema, depth-first in field order, starting with `cls` itself."""
    hints = typing.get_type_hints(cls)
    keys, below = [], []
    for f in dataclasses.fields(cls):
        key = f"{path}.{f.name}" if path else f.name
        shown, value = _default(f, instance)
        keys.append(Key(key, type_name(hints[f.name], doc=True, key=NAME), shown))
        child = _child(hints[f.name], key)
        if child:
            below.append((*child, value if dataclasses.is_dataclass(value) else None))
    sections = [Section(path, cls, keys)]
    for child_path, child_cls, child_default in below:
        sections += walk(child_cls, child_path, child_default)
    return sections


def load_descriptions(path: Path = ROOT / DESCRIPTIONS) -> dict[str, str]:
    try:
        raw = yaml_io.load_unique(path.read_text(encoding="utf-8"))
    except yaml_io.DuplicateKey as e:
        raise SystemExit(f"qtier: {DESCRIPTIONS}: `{e.key}` is described twice (lines {e.first} and {e.second})") from None
    if not isinstance(raw, dict):
        raise SystemExit(f"qtier: {DESCRIPTIONS}: expected a mapping of dotted keys to descriptions")
    return {str(k): ("" if v is None else str(v)) for k, v in raw.items()}


def problems(descriptions: dict[str, str], sections: list[Section] | None = None) -> list[str]:
    """One line per schema key without a description and per description of no schema key."""
    keys = [k.path for s in (sections or walk()) for k in s.keys]
    missing = [f"{DESCRIPTIONS}: no description for `{k}`" for k in keys if not descriptions.get(k, "").strip()]
    unknown = [f"{DESCRIPTIONS}: `{d}` names no field of pipeline.schema.Params" for d in descriptions
               if d not in keys]
    return missing + unknown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def render(descriptions: dict[str, str], sections: list[Section] | None = None) -> str:
    sections = sections or walk()
    out = ["# params.yaml reference", "",
           "<!-- Generated by `python -m pipeline.params_doc` from the dataclasses of `pipeline.schema.Params` "
           f"and the descriptions in `{DESCRIPTIONS}`; edit those, not this file "
           "(tests/test_params_doc.py fails when it is stale). -->", "",
           f"Every key of `params.yaml`, section by section. `{NAME}` is a key you choose (a model, tier, KV mode, "
           "task, metric or GPU name). `python -m pipeline.config` checks every key before any model work; "
           "an unknown key is rejected with the closest known one.", "", RULE, ""]
    for s in sections:
        title = f"`{s.path}`" if s.path else "Top level"
        out += [f"## {title}", ""]
        if s.path:     # a mapping's entries are described by the mapping's own key
            out += [descriptions.get(s.path.removesuffix(f".{NAME}"), ""), ""]
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        for k in s.keys:
            leaf = k.path.rsplit(".", 1)[-1]
            out.append(f"| `{leaf}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(descriptions.get(k.path, ''))} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.params_doc", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help=f"do not write; exit 1 if {OUTPUT} is incomplete or stale")
    args = ap.parse_args(argv)
    descriptions = load_descriptions()
    bad = problems(descriptions)
    for line in bad:
        print(f"qtier: {line}", file=sys.stderr)
    text = render(descriptions)
    target = ROOT / OUTPUT
    if args.check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != text:
            print(f"qtier: {OUTPUT} is stale: run `python -m pipeline.params_doc`", file=sys.stderr)
            return 1
        return 1 if bad else 0
    if bad:
        return 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT} ({sum(len(s.keys) for s in walk())} keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
