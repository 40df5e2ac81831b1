"""What params each stage's code reads, against dvc.yaml's `params:` lists: missing and needless keys.

    python -m scripts.dvc_params       # per stage: the params.yaml keys its code reads

The schema's dataclasses (pipeline/schema, read with ast) give every key's path, the class at it
and whether it has a default. In the code a stage can run (scripts/callgraph.py) values are typed by
their annotations (`cfg: Vllm` is serving.vllm, `params: schema.Params` the root, a function's
return annotation its result) and followed through assignments, loops over a mapping, `self.x =`
in __init__, annotated class fields and `self.x: T` (runner.Stage.params); `cfg.budget.max_wall_s` then reads that key, and a schema
method (`params.gate(...)`) what its body reads. A typed value handed to code outside the package
(`dataclasses.asdict(cfg)`, `getattr(mem, name)`) reads the whole of it, unless BY_NAME says what
the function reads instead. The schema's own parsing
and validation is left out: the check stage validates the whole file. A declared key must be read,
and must always be in params.yaml: DVC stops with "Parameters ... are missing" on a key the file
leaves out, so a key with a default can only be declared through its section. Stdlib and yaml only.
"""
from __future__ import annotations

import ast
import re
import sys
from functools import lru_cache
from pathlib import Path


from pipeline.schema.yaml_io import safe_load
from scripts.callgraph import Graph, stage_graph, walk
from scripts.depgraph import PACKAGE, ROOT, fingerprint, modules, syntax
from scripts.dvc_reads import stage_entry, stage_modules

SCHEMA = f"{PACKAGE}.schema"
_INTERPOLATED = re.compile(r"\$\{[^}]*\}")
# functions that read params by a name chosen at run time (`getattr(params, section)`), which the
# analysis would take as the whole file: what they read instead, and why no dvc.yaml param needs it
BY_NAME = {
    # rebuilds the params with serving.vllm.budget's wall limits off: it reads nothing but that section,
    # which every stage calling it (baseline, noise) declares through `serving`
    "pipeline.schema.params:without_wall_budget": "serving.vllm.budget (its wall limits set to null)",
    "pipeline.stages.runner:unknown_variant": "the stage's own entries (models.<model>, tiers.<tier>, "
                                              "kv_modes.<kv> from its argv), which its fan-out params name",
}


def _in_schema(mod: str) -> bool:
    return mod == SCHEMA or mod.startswith(SCHEMA + ".")


def _class_name(ann: ast.AST) -> str | None:
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        ann = ast.parse(ann.value, mode="eval").body
    return ann.id if isinstance(ann, ast.Name) else ann.attr if isinstance(ann, ast.Attribute) else None


class Schema:
    """Key paths ('*': an entry of a mapping; '': the root) with the dataclass at each."""

    def __init__(self, root: Path = ROOT):
        self.classes: dict[str, ast.ClassDef] = {}
        for name, path in modules(root).items():
            if _in_schema(name):
                for node in syntax(path).body:
                    if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                        self.classes[node.name] = node
        self.required: dict[str, bool] = {}
        self.at: dict[str, str] = {"": "Params"}
        self._visit("Params", "", True)

    def _visit(self, cls: str, prefix: str, present: bool) -> None:
        for stmt in self.classes[cls].body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                path = f"{prefix}{stmt.target.id}"
                self.required[path] = present and stmt.value is None
                for entry, inner in self._field_kinds(stmt.annotation):
                    key = path + entry
                    self.required[key] = self.required[path]
                    if inner:
                        self.at[key] = inner
                        self._visit(inner, key + ".", self.required[path])

    def _field_kinds(self, ann: ast.AST) -> list[tuple[str, str | None]]:
        """('', C) for a dataclass field, ('.*', C or None) for a mapping of them."""
        if isinstance(ann, ast.BinOp):
            return self._field_kinds(ann.left) + self._field_kinds(ann.right)
        if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "dict" and isinstance(ann.slice, ast.Tuple):
            inner = _class_name(ann.slice.elts[1])
            return [(".*", inner if inner in self.classes else None)]
        name = _class_name(ann)
        return [("", name)] if name in self.classes else []

    def typed(self, ann: ast.AST | None) -> set[str]:
        """The key paths a value annotated `ann` may be."""
        if ann is None:
            return set()
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            return self.typed(ast.parse(ann.value, mode="eval").body)
        if isinstance(ann, ast.BinOp):
            return self.typed(ann.left) | self.typed(ann.right)
        if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "dict" and isinstance(ann.slice, ast.Tuple):
            return {p[:-2] for p in self.typed(ann.slice.elts[1]) if p.endswith(".*")}
        name = _class_name(ann)
        return {p for p, c in self.at.items() if c == name}

    def method(self, path: str, name: str) -> ast.FunctionDef | None:
        cls = self.classes.get(self.at.get(path, ""))
        return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None) if cls else None


def _join(path: str, attr: str) -> str:
    return f"{path}.{attr}" if path else attr


class Reads:
    """The keys the functions of one stage read."""

    def __init__(self, schema: Schema, g: Graph):
        self.s, self.g, self.keys, self.whole = schema, g, set(), set()
        self.done: set[tuple[int, tuple]] = set()
        self.attrs: dict[str, set[str]] = {}     # attribute name -> key paths (annotated fields, self.x = arg)
        for m in g.mods.values():
            for node in ast.walk(m.tree):
                if isinstance(node, ast.AnnAssign) and not _in_schema(m.name):
                    # a class field `x: T`, or `self.x: T = ...` in a method (runner.Stage.params)
                    name = node.target.id if isinstance(node.target, ast.Name) else (
                        node.target.attr if isinstance(node.target, ast.Attribute) else None)
                    if name is not None:
                        self.attrs.setdefault(name, set()).update(schema.typed(node.annotation))
                if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                    args = {a.arg: schema.typed(a.annotation) for a in node.args.args}
                    for n in ast.walk(node):
                        if isinstance(n, ast.Assign):
                            for t, v in self._pairs(n):
                                if isinstance(t, ast.Attribute) and isinstance(v, ast.Name) and args.get(v.id):
                                    self.attrs.setdefault(t.attr, set()).update(args[v.id])

    @staticmethod
    def _pairs(n: ast.Assign) -> list[tuple[ast.AST, ast.AST]]:
        out = []
        for t in n.targets:
            if isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple):
                out += list(zip(t.elts, n.value.elts))
            else:
                out.append((t, n.value))
        return out

    def function(self, mod: str, fn: ast.AST, env: dict[str, set[str]]) -> set[str]:
        """Read what `fn` reads given its arguments' key paths; the paths it may return."""
        key = (id(fn), tuple(sorted((k, tuple(sorted(v))) for k, v in env.items())))
        if key in self.done or f"{mod}:{getattr(fn, 'name', '')}" in BY_NAME:
            return set()
        self.done.add(key)
        env = dict(env)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
                env.setdefault(a.arg, self.s.typed(a.annotation))
        for _ in range(2):                        # assignments in any order: two passes reach the fixpoint
            for n in walk(fn):
                if isinstance(n, ast.Assign):
                    for t, v in self._pairs(n):
                        if isinstance(t, ast.Name):
                            env[t.id] = env.get(t.id, set()) | self.value(mod, v, env, record=False)
                elif isinstance(n, (ast.For, ast.comprehension)):
                    self._bind_loop(mod, n, env)
        for n in walk(fn):
            if isinstance(n, ast.expr):
                self.value(mod, n, env)
        return set().union(*(self.value(mod, r.value, env, record=False) for r in walk(fn)
                             if isinstance(r, ast.Return) and r.value is not None))

    def _bind_loop(self, mod: str, n: ast.For | ast.comprehension, env: dict) -> None:
        it, target = n.iter, n.target
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values"):
            entries = {f"{p}.*" for p in self.value(mod, it.func.value, env, record=False) if f"{p}.*" in self.s.required}
            if it.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
            if isinstance(target, ast.Name):
                env[target.id] = env.get(target.id, set()) | entries

    def value(self, mod: str, e: ast.AST, env: dict, record: bool = True) -> set[str]:
        """The key paths an expression may be; with `record`, the keys it reads are noted."""
        if isinstance(e, ast.Name):
            return env.get(e.id, set())
        if isinstance(e, ast.Attribute):
            base = self.value(mod, e.value, env, record=False)
            out = {_join(p, e.attr) for p in base if _join(p, e.attr) in self.s.required}
            for p in base:
                meth = self.s.method(p, e.attr)
                if meth is not None:
                    out |= self.function(SCHEMA, meth, {"self": {p}})
            if record:
                self.keys |= out
            # a field of a schema value is the schema's; a field of anything else, by its annotation
            return out if base else self.attrs.get(e.attr, set())
        if isinstance(e, ast.Subscript):
            out = {f"{p}.*" for p in self.value(mod, e.value, env, record=False) if f"{p}.*" in self.s.required}
            self.keys |= out if record else set()
            return out
        if isinstance(e, (ast.BoolOp, ast.IfExp)):
            parts = e.values if isinstance(e, ast.BoolOp) else [e.body, e.orelse]
            return set().union(*(self.value(mod, p, env, record=False) for p in parts))
        if isinstance(e, ast.Call):
            return self._call(mod, e, env, record)
        return set()

    def _is_class(self, mod: str, func: ast.AST) -> bool:
        """A package class: its fields are typed by their annotations where they are read."""
        name = func.attr if isinstance(func, ast.Attribute) else ast.unparse(func)
        return any(q.startswith(name + ".") for _, q in self.g.refs(mod, func))

    def _call(self, mod: str, e: ast.Call, env: dict, record: bool) -> set[str]:
        if isinstance(e.func, ast.Attribute) and e.func.attr == "get":
            return {f"{p}.*" for p in self.value(mod, e.func.value, env, record=False) if f"{p}.*" in self.s.required}
        called = e.func.attr if isinstance(e.func, ast.Attribute) else ast.unparse(e.func)
        callees = [(m, self.g.mods[m].funcs[q]) for m, q in self.g.refs(mod, e.func) if q.split(".")[-1] == called]
        args = [self.value(mod, a, env, record=False) for a in e.args]
        kwargs = {k.arg: self.value(mod, k.value, env, record=False) for k in e.keywords if k.arg}
        out: set[str] = set()
        if not callees:
            if record and not self._is_class(mod, e.func):   # outside the package: it may read all of it
                self.whole |= set().union(*args, *kwargs.values())
            return out
        for m, fn in callees:
            params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
            if params and params[0] in ("self", "cls") and isinstance(e.func, ast.Attribute):
                params = params[1:]
            bound = {p: v for p, v in [*zip(params, args), *kwargs.items()] if v}
            if _in_schema(m) or bound:
                out |= self.function(m, fn, bound)
            out |= self.s.typed(fn.returns)
        return out


def stage_keys(module: str, root: Path = ROOT) -> frozenset[str]:
    """The keys `python -m module` can read (the deepest of each path)."""
    return _stage_keys(module, root, fingerprint(module, root))


@lru_cache(maxsize=None)
def _stage_keys(module: str, root: Path, _fingerprint: tuple) -> frozenset[str]:
    schema = Schema(root)
    g = stage_graph(module, root)
    reads = Reads(schema, g)
    for (mod, _), body in g.reachable(module).items():
        if not _in_schema(mod):
            reads.function(mod, body, {})
    whole = {w for w in reads.whole if not any(under(w, o) and w != o for o in reads.whole)}
    deepest = {k for k in reads.keys if not any(o.startswith(k + ".") for o in reads.keys)}
    return frozenset({k for k in deepest if not any(under(k, w) for w in whole)} | whole)


def under(key: str, declared: str) -> bool:
    return key == declared or key.startswith(declared + ".")


def declared_params(entry: dict) -> list[str]:
    out = []
    for p in entry.get("params", []):
        keys = [p] if isinstance(p, str) else [k for ks in p.values() for k in ks]
        out += [_INTERPOLATED.sub("*", k) for k in keys]
    return out


def param_problems(stage: str, entry: dict, module: str, root: Path = ROOT) -> list[str]:
    if "params.yaml" in (entry.get("deps") or []):
        return []       # the whole file is a dep
    schema = Schema(root)
    declared, read = declared_params(entry), stage_keys(module, root)
    problems = []
    for k in declared:
        if k not in schema.required:
            problems.append(f"{stage}: params {k} is no key of the schema")
            continue
        parts = k.split(".")
        optional = next((".".join(parts[:i]) for i in range(1, len(parts) + 1)
                         if not schema.required[".".join(parts[:i])]), None)
        if optional:
            problems.append(f"{stage}: params {k}: {optional} has a default, so params.yaml may leave it out and "
                            f"DVC then stops with 'missing params': declare {optional.rpartition('.')[0] or 'the section'}")
        elif not any(under(r, k) or under(k, r) for r in read):
            problems.append(f"{stage}: dvc.yaml lists params {k}, which the stage never reads")
    problems += [f"{stage}: reads params {r or '(all of params.yaml)'} but dvc.yaml's params do not cover it"
                 for r in sorted(read) if not any(under(r, d) for d in declared)]
    return problems


def stale_by_name(root: Path = ROOT) -> list[str]:
    """BY_NAME entries whose function is gone (moved or renamed: the entry must follow it)."""
    mods = modules(root)
    return [f"scripts/dvc_params.py: BY_NAME names {k}, which does not exist" for k in BY_NAME
            if k.partition(":")[0] not in mods or not any(
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == k.partition(":")[2]
                for n in ast.walk(syntax(mods[k.partition(":")[0]])))]


if __name__ == "__main__":
    dvc_yaml = safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    for name, mod in stage_modules(dvc_yaml).items():
        print(f"{name}:\n" + "".join(f"  {k}\n" for k in sorted(stage_keys(mod))), end="")
        print("".join(f"  !! {p}\n" for p in param_problems(name, stage_entry(dvc_yaml, name), mod)), end="")
    sys.exit(0)
