"""One description per params.yaml key (issue 61, "One concept, one place").

The rule: a key is described once, by its line in docs/params_doc.yaml; docs/params.md is generated
from it (tests/test_params_doc.py) and states the rule in its header. Every other place that writes a
key is held here to describing none:
- docs/params_doc.yaml gives each key once: a second line for a key stops the generator (plain YAML
  would keep the last one, silently);
- pipeline/schema/: a dataclass of params.yaml carries types, defaults and checks, no description: no
  docstring, no comment on a field's lines or directly above them (a module docstring may say where a
  key belongs, never what it means);
- params.yaml: apart from its header, a comment says why a value is what it is (its first word `why`)
  or is an alternative to uncomment, which the schema must accept once uncommented;
- and no comment or docstring of those places, nor a comment of dvc.yaml, repeats COPY words running
  of any description.
Beside it, dvc.yaml's header chain names every stage dvc.yaml defines, once. Fast: no torch.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import tokenize
from pathlib import Path

import pytest

from pipeline import params_doc, schema
from pipeline.schema.yaml_io import safe_load

pytestmark = pytest.mark.unit

ROOT = params_doc.ROOT
COPY = 8                                          # words running that make a copy
WHY = re.compile(r"why\b", re.IGNORECASE)
KEY = re.compile(r"[A-Za-z0-9_.-]+:(\s|$)")       # a comment line opening a commented-out key


# docs/params_doc.yaml: each key once

def test_a_key_described_twice_stops_the_generator(tmp_path):
    assert params_doc.load_descriptions()
    twice = tmp_path / "params_doc.yaml"
    text = (ROOT / params_doc.DESCRIPTIONS).read_text(encoding="utf-8")
    twice.write_text(text + 'decision.confidence: "A second description."\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"`decision\.confidence` is described twice \(lines \d+ and \d+\)"):
        params_doc.load_descriptions(twice)


# pipeline/schema: no description

def described(cls: type) -> list[str]:
    """'<file>:<line>: ...' for the docstring and each field comment of one dataclass."""
    path = Path(inspect.getsourcefile(cls))
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    node = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    comments = {t.start[0]: t.start[1] for t in tokenize.generate_tokens(io.StringIO(src).readline)
                if t.type == tokenize.COMMENT}
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = [f"{where}:{node.body[0].lineno}: {cls.__name__} has a docstring"] if ast.get_docstring(node) else []
    for st in node.body:
        if isinstance(st, ast.AnnAssign):
            span, above = set(range(st.lineno, st.end_lineno + 1)), st.lineno - 1
            while above in comments and not lines[above - 1][:comments[above]].strip():
                span.add(above)
                above -= 1
            found += [f"{where}:{n}: {cls.__name__}.{st.target.id} has a comment"
                      for n in sorted(span) if n in comments]
    return found


def schema_classes() -> list[type]:
    return list(dict.fromkeys(s.cls for s in params_doc.walk()))


def test_the_schema_dataclasses_describe_no_key():
    assert [line for cls in schema_classes() for line in described(cls)] == []


@dataclasses.dataclass(frozen=True)
class _Described:
    """A section that describes itself."""
    size: int = 4          # how big
    # which kind
    kind: str = "a"
    plain: int = 0


def test_a_docstring_and_a_field_comment_are_each_found():
    found = described(_Described)
    assert [line.split(": ", 1)[1] for line in found] == [
        "_Described has a docstring", "_Described.size has a comment", "_Described.kind has a comment"]


# params.yaml: why, or an alternative to uncomment

@dataclasses.dataclass(frozen=True)
class Comment:
    line: int            # 1-based
    col: int             # of its '#'
    text: str            # after '#' and one space
    whole: bool          # nothing else on the line


def comments(text: str) -> list[Comment]:
    """Every comment of a YAML text (a '#' inside a quoted scalar is none)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        quote = None
        for i, ch in enumerate(line):
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"" and (not line[:i].strip() or line[:i].rstrip()[-1] in ":[{,-"):
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
                body = line[i + 1:]
                out.append(Comment(n, i, body[1:] if body.startswith(" ") else body, not line[:i].strip()))
                break
    return out


def segments(found: list[Comment]) -> list[list[Comment]]:
    """Whole-line comments in runs (consecutive lines, one column), a run cut where a line starts with
    `why` or opens a key; a trailing comment alone."""
    out: list[list[Comment]] = []
    for c in found:
        last = out[-1][-1] if out else None
        if (c.whole and last is not None and last.whole and (last.line, last.col) == (c.line - 1, c.col)
                and not WHY.match(c.text) and not KEY.match(c.text)):
            out[-1].append(c)
        else:
            out.append([c])
    return out


def uncommented(text: str, seg: list[Comment]) -> str:
    lines = text.splitlines()
    for c in seg:
        lines[c.line - 1] = lines[c.line - 1][:c.col] + c.text
    return "\n".join(lines) + "\n"


def params_problems(text: str, scratch: Path) -> list[str]:
    """One line per params.yaml comment that is neither the header, a `why`, nor an alternative the
    schema accepts uncommented."""
    out = []
    for seg in segments(comments(text)):
        first = seg[0]
        if first.line == 1 or WHY.match(first.text):
            continue
        where = f"params.yaml:{first.line}"
        if not first.whole:
            out.append(f"{where}: a trailing comment says why (`# why ...`) or goes: {first.text!r}")
            continue
        scratch.write_text(uncommented(text, seg), encoding="utf-8")
        try:
            schema.load(scratch)
        except schema.ConfigError as e:
            out.append(f"{where}: neither `# why ...` nor an alternative the schema accepts uncommented ({e}): "
                       f"{first.text!r}")
    return out


def test_params_yaml_comments_say_why_or_are_alternatives(tmp_path):
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    assert params_problems(text, tmp_path / "params.yaml") == []


def test_a_description_in_params_yaml_is_found(tmp_path):
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    described_ = text.replace("    scale: 1.0\n", "    # the fp8 k/v scale: a number\n    scale: 1.0\n", 1)
    trailing = text.replace("  seed: 1234\n", "  seed: 1234   # lm-eval's seeds\n", 1)
    stale = text.replace("  # bandwidth_gbps: 20\n", "  # bandwidth_gbs: 20\n", 1)
    assert len({described_, trailing, stale, text}) == 4
    for edited in (described_, trailing, stale):
        (found,) = params_problems(edited, tmp_path / "params.yaml")
        assert found.startswith("params.yaml:")


# no second copy anywhere: COPY words running

def runs(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i:i + COPY]) for i in range(len(words) - COPY + 1)}


def copies(texts: dict[str, str], descriptions: dict[str, str]) -> list[str]:
    """'<where>: repeats <key>'s description: ...' for each text sharing COPY words running with one."""
    owner = {r: key for key, d in descriptions.items() for r in runs(d)}
    return [f"{where}: repeats {owner[r]}'s description: {' '.join(r)}"
            for where, text in texts.items() for r in sorted(runs(text) & owner.keys())]


def prose() -> dict[str, str]:
    """Each place's own prose: the schema's comments and docstrings, params.yaml's and dvc.yaml's comments."""
    out = {}
    for path in sorted((ROOT / "pipeline/schema").glob("*.py")):
        src = path.read_text(encoding="utf-8")
        tokens = tokenize.generate_tokens(io.StringIO(src).readline)
        docs = [ast.get_docstring(n) or "" for n in ast.walk(ast.parse(src))
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
        out[str(path.relative_to(ROOT))] = "\n".join([t.string for t in tokens if t.type == tokenize.COMMENT] + docs)
    for name in ("params.yaml", "dvc.yaml"):
        found = comments((ROOT / name).read_text(encoding="utf-8"))
        out.update({f"{name}:{seg[0].line}": " ".join(c.text for c in seg) for seg in segments(found)})
    return out


def test_no_comment_or_docstring_repeats_a_description():
    assert copies(prose(), params_doc.load_descriptions()) == []


def test_a_copied_description_is_found():
    descriptions = params_doc.load_descriptions()
    copied = {"pipeline/schema/decision.py": "# " + descriptions["decision.kv_kl_tolerance"][:200]}
    (found,) = {line.split(": repeats ")[1].split("'s")[0] for line in copies(copied, descriptions)}
    assert found == "decision.kv_kl_tolerance"


# dvc.yaml: its header chain names every stage

def chain(text: str) -> list[str]:
    """The stage names of a dvc.yaml's opening chain (its first comment line and the `#   ` lines after
    it), parentheses left out, sorted."""
    lines = text.splitlines()
    n = 1 + next((i for i, line in enumerate(lines[1:]) if not line.startswith("#   ")), len(lines) - 1)
    joined = re.sub(r"\([^)]*\)", " ", " ".join(line.lstrip("#") for line in lines[:n]))
    return sorted(part.strip().split("@")[0] for part in re.split(r"->|\band\b", joined))


def test_dvc_yaml_header_chain_names_every_stage_once():
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    assert chain(text) == sorted(safe_load(text)["stages"])


def test_the_chain_is_read_without_parentheses_and_up_to_its_last_line():
    assert chain("# a -> b@<m> (x -> y and z)\n#   -> c and d@<m>-<t>\n# other -> e\nstages: {}\n") == [
        "a", "b", "c", "d"]
