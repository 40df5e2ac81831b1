"""The functions a stage can run, found statically: a call graph over the stage's import closure.

    python -m scripts.callgraph pipeline.stages.decide     # the functions decide can reach, one a line

A function is reachable when reachable code names it: `f(...)`, `module.f`, a callback `run=f`, a
class (then all its methods). An attribute on anything else (`session.token_dists`, `self.cfg.x`)
may be any method of that name in the closure: an over-approximation, never a miss. Roots are the
module-level code of every module in the closure (it runs on import) and the entry module's
`if __name__ == "__main__":` block; other modules' main blocks never run. Type annotations are not
code (`from __future__ import annotations`). Standard library only.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from scripts.depgraph import ROOT, closure, fingerprint, import_targets, modules, syntax

Fn = tuple[str, str]   # (module, qualified name in it: `f` or `Class.method`)


def walk(node: ast.AST) -> list[ast.AST]:
    """ast.walk without type annotations, depth-first in source order. Memoized: parsed trees are
    cached (depgraph.syntax) and walked again by every stage's graph and every deps check."""
    hit = _walked.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    out: list[ast.AST] = []
    todo = [node]
    while todo:
        n = todo.pop()
        out.append(n)
        children = [c for name, value in ast.iter_fields(n) if name not in ("annotation", "returns")
                    for c in (value if isinstance(value, list) else [value]) if isinstance(c, ast.AST)]
        todo += reversed(children)
    _walked[id(node)] = (node, out)      # the node itself is kept, so its id is never reused
    return out


_walked: dict[int, tuple[ast.AST, list[ast.AST]]] = {}


def _is_main_block(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test) and "__main__" in ast.unparse(stmt.test)


def _definition_time(stmt: ast.stmt) -> list[ast.AST]:
    """What a def or class statement evaluates when it runs: decorators, defaults, bases, class body."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*stmt.decorator_list, *stmt.args.defaults, *[d for d in stmt.args.kw_defaults if d]]
    if isinstance(stmt, ast.ClassDef):
        return [*stmt.decorator_list, *stmt.bases, *[n for s in stmt.body for n in _definition_time(s)]]
    return [stmt]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    funcs: dict[str, ast.AST] = field(default_factory=dict)          # qualname -> def
    classes: dict[str, list[str]] = field(default_factory=dict)      # class -> its methods' qualnames
    aliases: dict[str, tuple[str, str | None]] = field(default_factory=dict)   # local -> (module, name)
    stars: list[str] = field(default_factory=list)                   # `from m import *`
    top: list[ast.AST] = field(default_factory=list)                 # runs on import
    main: list[ast.AST] = field(default_factory=list)                # runs as `python -m`


def parse(name: str, path: Path, known: set[str]) -> Module:
    """A module's definitions and aliases (cached while the file is unchanged: every stage's graph
    parses the same modules)."""
    return _module(name, path, frozenset(known), path.stat().st_mtime_ns)


@lru_cache(maxsize=None)
def _module(name: str, path: Path, known: frozenset[str], _mtime_ns: int) -> Module:
    tree = syntax(path)
    m = Module(name, path, tree)
    for node in walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                m.aliases[local] = (a.name if a.asname else local, None)
        elif isinstance(node, ast.ImportFrom):
            for a, (base, imported) in zip(node.names, import_targets(node, name, path.name == "__init__.py")):
                if imported == "*":
                    m.stars.append(base)
                    continue
                full = f"{base}.{imported}"
                m.aliases[a.asname or imported] = (full, None) if full in known else (base, imported)
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            m.funcs[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            methods = [s for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
            m.classes[stmt.name] = [f"{stmt.name}.{s.name}" for s in methods]
            m.funcs.update({f"{stmt.name}.{s.name}": s for s in methods})
        (m.main if _is_main_block(stmt) else m.top).extend(_definition_time(stmt))
    return m


class Graph:
    """The modules of one closure, and who names whom."""

    def __init__(self, files: set[Path], root: Path = ROOT):
        by_path = {p: n for n, p in modules(root).items()}
        known = set(by_path.values())
        self.mods = {by_path[p]: parse(by_path[p], p, known) for p in files if p in by_path}
        self.methods: dict[str, set[Fn]] = {}
        self._reachable: dict[str, dict[Fn, ast.AST]] = {}
        self.properties: set[Fn] = set()
        for m in self.mods.values():
            for q, fn in m.funcs.items():
                if "." in q:
                    self.methods.setdefault(q.split(".")[1], set()).add((m.name, q))
                    if any(ast.unparse(d).endswith("property") for d in fn.decorator_list):
                        self.properties.add((m.name, q))

    def resolve(self, mod: str, name: str, depth: int = 0) -> set[Fn]:
        """What `name` in module `mod` is, as functions: itself, a class's methods, or a re-export."""
        m = self.mods.get(mod)
        if m is None or depth > 8:
            return set()
        if name in m.classes:
            return {(mod, q) for q in m.classes[name]}
        if name in m.funcs:
            return {(mod, name)}
        target = m.aliases.get(name)
        if target and target[1] is not None:
            return self.resolve(target[0], target[1], depth + 1)
        return set().union(*(self.resolve(star, name, depth + 1) for star in m.stars))

    def module_alias(self, mod: str, name: str) -> str | None:
        target = self.mods[mod].aliases.get(name)
        return target[0] if target and target[1] is None else None

    def refs(self, mod: str, node: ast.AST) -> set[Fn]:
        found: set[Fn] = set()
        called = {id(n.func) for n in walk(node) if isinstance(n, ast.Call)}
        for n in walk(node):
            if isinstance(n, ast.Name):
                found |= self.resolve(mod, n.id)
            elif isinstance(n, ast.Attribute):
                target = self.module_alias(mod, n.value.id) if isinstance(n.value, ast.Name) else None
                if target is not None:
                    found |= self.resolve(target, n.attr)
                else:       # a method called on a value, or a property read
                    found |= {f for f in self.methods.get(n.attr, set()) if id(n) in called or f in self.properties}
            elif (isinstance(n, ast.Call) and ast.unparse(n.func) == "getattr" and len(n.args) > 1
                  and isinstance(n.args[1], ast.Constant)):
                found |= self.methods.get(str(n.args[1].value), set())
        return found

    def reachable(self, entry: str) -> dict[Fn, ast.AST]:
        """Every function `python -m entry` can run; the pseudo-function (module, "<module>") holds
        the module-level code of each module. Computed once per entry (callers only read it)."""
        if entry not in self._reachable:
            self._reachable[entry] = self._reach(entry)
        return self._reachable[entry]

    def _reach(self, entry: str) -> dict[Fn, ast.AST]:
        bodies: dict[Fn, ast.AST] = {}
        todo: list[Fn] = []
        for m in self.mods.values():
            top = ast.Module(body=[*m.top, *(m.main if m.name == entry else [])], type_ignores=[])
            bodies[(m.name, "<module>")] = top
            todo += self.refs(m.name, top)
        while todo:
            fn = todo.pop()
            if fn in bodies:
                continue
            bodies[fn] = self.mods[fn[0]].funcs[fn[1]]
            todo += self.refs(fn[0], bodies[fn])
        return bodies


def stage_graph(entry: str, root: Path = ROOT) -> Graph:
    """The graph of a stage's closure (cached while no file of it changes: the deps checks build it
    once per stage for code, data and params)."""
    return _graph(entry, root, fingerprint(entry, root))


@lru_cache(maxsize=None)
def _graph(entry: str, root: Path, _fingerprint: tuple) -> Graph:
    return Graph(closure(entry, root), root)


if __name__ == "__main__":
    print("\n".join(sorted(f"{m}:{q}" for m, q in stage_graph(sys.argv[1]).reachable(sys.argv[1]))))
