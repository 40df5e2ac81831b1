"""What each stage's code reads, against dvc.yaml's hand-written data deps: missing and needless ones.

    python -m scripts.dvc_reads        # per stage: the paths its code reads or writes

A stage reads what the functions it can run (scripts/callgraph.py) open:
- pipeline/paths.py locations: every `paths.<name>(...)` in a reachable function, its template
  evaluated from paths.py itself (`tier_dir(model, tier)` -> artifacts/{model}/tiers/{tier}); an
  argument taken from `decision.baseline` becomes `${decision.baseline.tier}` as dvc.yaml writes it,
  a variable the stage does not fan out over (decide has none) stands for all of them: the folder;
  a file name there (a str constant or `-> str` function: RESULT_FILE, server_log) is no read of its
  own, and the stage logs (paths.stage_log) are no DVC dep or output by design (NOT_READ);
- files named in params.yaml, by the functions READERS lists (a recipe, the calibration set, ...).
Every function of the package that opens a file and names no paths.py location must be in READERS
(`unclassified_readers`), so a new read cannot go unseen (one that names a location is taken to
read through it). A dep is missing when a read is neither
a dep nor an output (outs, metrics, plots) of the stage; needless when no read lies in it, or it is a whole folder where
the stage reads one file of it. Standard library and yaml only.
"""
from __future__ import annotations

import ast
import re
import sys
from functools import lru_cache
from pathlib import Path


from pipeline.schema.yaml_io import safe_load
from scripts.callgraph import Graph, parse, stage_graph, walk
from scripts.depgraph import PACKAGE, ROOT, closure, fingerprint, modules
from scripts.dvc_readers import NOT_READ, OPENS, ORDERING, PATHS, READERS, keys, reader


class PathsModule:
    """pipeline/paths.py, evaluated symbolically: a name and its arguments -> path templates."""

    def __init__(self, root: Path = ROOT):
        mods = modules(root)
        m = parse(PATHS, mods[PATHS], set(mods))
        self.consts = {s.targets[0].id: s.value for s in m.tree.body
                       if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)}
        self.funcs = {n: f for n, f in m.funcs.items() if "." not in n}

    def names(self) -> set[str]:
        return set(self.consts) | set(self.funcs)

    def is_name(self, name: str) -> bool:
        """A file name, not a location: a str constant (RESULT_FILE) or a `-> str` function (server_log,
        a path relative to results/ for a link). It is read inside a location the code names itself."""
        if name in self.consts:
            value = self.consts[name]
            return isinstance(value, ast.Constant) and isinstance(value.value, str)
        returns = self.funcs[name].returns
        return returns is not None and ast.unparse(returns) == "str"

    def params(self, name: str) -> list[str]:
        return [a.arg for a in self.funcs[name].args.args] if name in self.funcs else []

    def templates(self, name: str, args: dict[str, set[str]]) -> set[str]:
        if name in self.consts:
            return self._eval(self.consts[name], {})
        ret = next(s.value for s in self.funcs[name].body if isinstance(s, ast.Return))
        return self._eval(ret, {p: args.get(p, {"{" + p + "}"}) for p in self.params(name)})

    def _eval(self, e: ast.AST, env: dict[str, set[str]]) -> set[str]:
        if isinstance(e, ast.Constant):
            return {str(e.value)}
        if isinstance(e, ast.Name):
            return env[e.id] if e.id in env else self._eval(self.consts[e.id], {}) if e.id in self.consts else set()
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):
            return {f"{a}/{b}" for a in self._eval(e.left, env) for b in self._eval(e.right, env)}
        if isinstance(e, ast.IfExp):
            return self._eval(e.body, env) | self._eval(e.orelse, env)
        if isinstance(e, ast.JoinedStr):
            out = {""}
            for part in e.values:
                pieces = self._eval(part.value if isinstance(part, ast.FormattedValue) else part, env)
                out = {a + b for a in out for b in pieces}
            return out
        if ast.unparse(e) == "Path(__file__).resolve().parent":
            return {"pipeline"}           # paths.py's own folder, as the repo names it
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            if e.func.id == "Path":
                return self._eval(e.args[0], env)
            if e.func.id in self.funcs:
                bound = dict(zip(self.params(e.func.id), (self._eval(a, env) for a in e.args)))
                return self.templates(e.func.id, bound)
        raise ValueError(f"pipeline/paths.py: cannot evaluate {ast.unparse(e)!r} as a path")


def _assigned(fn: ast.AST, name: str) -> list[str]:
    """The source of every value assigned to `name` in a function (tuple unpacking included)."""
    found = []
    for n in walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    found.append(ast.unparse(n.value))
                elif isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple):
                    found += [ast.unparse(v) for el, v in zip(t.elts, n.value.elts)
                              if isinstance(el, ast.Name) and el.id == name]
    return found


def _role(fn: ast.AST, arg: ast.AST, param: str) -> str:
    """A paths.py argument as dvc.yaml writes it: the baseline's, a literal, or the stage's own."""
    if isinstance(arg, ast.Constant):
        return str(arg.value)
    sources = [ast.unparse(arg)] + (_assigned(fn, arg.id) if isinstance(arg, ast.Name) else [])
    if any("decision.baseline" in s for s in sources):
        return "${decision.baseline.%s}" % param
    return "{%s}" % param


def path_reads(g: Graph, bodies: dict, paths: PathsModule) -> set[str]:
    """Templates of every paths.py location the reachable code names."""
    found: set[str] = set()
    for (mod, _), body in bodies.items():
        calls = {id(n.func): n for n in walk(body) if isinstance(n, ast.Call)}
        for n in walk(body):
            name = None
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and g.module_alias(mod, n.value.id) == PATHS:
                name = n.attr
            elif isinstance(n, ast.Name) and g.mods[mod].aliases.get(n.id, (None,))[0] == PATHS:
                name = g.mods[mod].aliases[n.id][1]
            if name is None or name in NOT_READ or name not in paths.names() or paths.is_name(name):
                continue
            call = calls.get(id(n))
            args = {} if call is None else {p: {_role(body, a, p)} for p, a in zip(paths.params(name), call.args)}
            found |= paths.templates(name, args)
    return found


def declared_reads(bodies: dict) -> set[str]:
    return {t for mod, q in bodies if isinstance(found := reader(mod, q), list) for t in found}


def opens_files(g: Graph, mod: str, body: ast.AST) -> bool:
    """The function opens a file itself, or calls a READERS function that reads what it is given."""
    for n in walk(body):
        if isinstance(n, ast.Call):
            func = ast.unparse(n.func)
            if func == "open" or func == "np.load" or (isinstance(n.func, ast.Attribute) and n.func.attr in OPENS):
                return True
            called = n.func.attr if isinstance(n.func, ast.Attribute) else ast.unparse(n.func)
            if any(reader(m, q) == "arg" and q.split(".")[-1] == called for m, q in g.refs(mod, n.func)):
                return True
    return False


def unclassified_readers(root: Path = ROOT) -> list[str]:
    """Functions of the package that open files with no paths.py location and no READERS entry."""
    g = Graph(set(modules(root).values()), root)
    problems = []
    for mod, m in g.mods.items():
        for q, body in [*m.funcs.items(), ("<module>", ast.Module(body=m.top + m.main, type_ignores=[]))]:
            uses_paths = any(isinstance(n, ast.Name) and g.mods[mod].aliases.get(n.id, (None,))[0] == PATHS
                             or isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                             and g.module_alias(mod, n.value.id) == PATHS for n in walk(body))
            if reader(mod, q) is None and not uses_paths and opens_files(g, mod, body):
                problems.append(f"{m.path.relative_to(root)}: {q} opens a file that no pipeline/paths.py location "
                                f"names: say what it reads in READERS (scripts/dvc_readers.py)")
    return problems


def stale_readers(root: Path = ROOT) -> list[str]:
    g = Graph(set(modules(root).values()), root)
    found = {k for mod, m in g.mods.items() for q in [*m.funcs, "<module>"] for k in keys(mod, q)}
    return [f"scripts/dvc_readers.py: READERS names {k}, which does not exist" for k in READERS if k not in found]


FANOUT = {"models": "model", "tiers": "tier", "kv_modes": "kv"}   # a foreach over these: ${key} is a ...
_PLACEHOLDER = re.compile(r"(?<!\$)\{(\w+)\}")
_GLOBAL = re.compile(r"\$\{([\w.]+)\}")
_CMD = re.compile(r"python -m ([\w.]+)")


def stage_modules(dvc: dict) -> dict[str, str]:
    """Stage name -> the pipeline module its cmd runs."""
    out = {}
    for name, entry in dvc["stages"].items():
        found = _CMD.search(stage_entry(dvc, name)["cmd"])
        if found and found.group(1).split(".")[0] == PACKAGE:
            out[name] = found.group(1)
    return out


def stage_entry(dvc: dict, stage: str) -> dict:
    entry = dvc["stages"][stage]
    return entry.get("do", entry)


def stage_vars(dvc: dict, stage: str) -> dict[str, str]:
    """dvc.yaml's fan-out variables -> placeholders: ${item.tier} -> {tier}, a foreach's ${key} -> {model}."""
    entry = dvc["stages"][stage]
    if "matrix" in entry:
        return {"${item.%s}" % k: "{%s}" % k for k in entry["matrix"]}
    if "foreach" in entry:
        return {"${key}": "{%s}" % FANOUT[str(entry["foreach"]).strip("${}")]}
    return {}


def resolve(path: str, variables: dict[str, str], params: dict) -> str:
    """A dvc.yaml path with its fan-out variables as placeholders and params interpolated."""
    for var, placeholder in variables.items():
        path = path.replace(var, placeholder)

    def lookup(m: re.Match) -> str:
        value = params
        for key in m.group(1).split("."):
            value = value[key]
        return str(value)

    return _GLOBAL.sub(lookup, path).rstrip("/")


def bounded(template: str, own: set[str]) -> str:
    """A read template for one stage: a placeholder it does not fan out over means every value, so
    the read is the folder above it."""
    for m in _PLACEHOLDER.finditer(template):
        if m.group(0) not in own:
            return template[: template.rfind("/", 0, m.start())]
    return template


def listed(entry: dict, key: str) -> list[str]:
    return [d if isinstance(d, str) else next(iter(d)) for d in entry.get(key, [])]


# subpackages a stage depends on as a whole folder (scripts/dvc_deps.py); stages/ and the top-level
# modules are listed file by file, so a stage does not re-run for another stage's module
GROUPED = ("domain", "engines", "evaluation", "quant", "report", "schema", "scoring")
GROUPED_DIRS = frozenset(f"{PACKAGE}/{g}" for g in GROUPED)


def is_code(dep: str, derived: set[str]) -> bool:
    """A code dep (generated by scripts/dvc_deps.py): a module or a GROUPED folder of the package, or a
    file of the stage's closure. The package's data read through paths.py (pipeline/data/...) is a
    read, checked here."""
    return dep.startswith(PACKAGE + "/") and (dep.endswith(".py") or dep in derived or dep in GROUPED_DIRS)


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def stage_reads(dvc: dict, stage: str, module: str, params: dict, root: Path = ROOT) -> set[str]:
    """What the stage reads, as dvc.yaml paths with the stage's own placeholders ({model}, ...)."""
    own = set(stage_vars(dvc, stage).values())
    return {bounded(resolve(t, {}, params), own) for t in read_templates(module, root, fingerprint(module, root))}


@lru_cache(maxsize=None)
def read_templates(module: str, root: Path, _fingerprint: tuple) -> frozenset[str]:
    g = stage_graph(module, root)
    bodies = g.reachable(module)
    locations = PathsModule(root)
    named = {t for t in declared_reads(bodies) if not t.startswith("paths.")}
    stand_ins = {t for r in declared_reads(bodies) if r.startswith("paths.")
                 for t in locations.templates(r.removeprefix("paths."), {})}
    return frozenset(path_reads(g, bodies, locations) | named | stand_ins)


def data_problems(dvc: dict, stage: str, module: str, params: dict, root: Path = ROOT) -> list[str]:
    """One line per data dep the stage lacks (a read neither a dep nor an output) or lists needlessly."""
    entry, variables = stage_entry(dvc, stage), stage_vars(dvc, stage)
    code = {str(p.relative_to(root)) for p in closure(module, root)}
    deps = [resolve(d, variables, params) for d in listed(entry, "deps") if not is_code(d, code)]
    outs = [resolve(o, variables, params) for key in ("outs", "metrics", "plots") for o in listed(entry, key)]
    reads = stage_reads(dvc, stage, module, params, root)
    problems = []
    for r in sorted(reads):
        covered = any(under(r, d) for d in deps + outs) or (r == "params.yaml" and entry.get("params"))
        if not covered:
            problems.append(f"{stage}: reads {r} but dvc.yaml neither depends on nor outputs it")
    for d in deps:
        if d in ORDERING or any(under(d, r) for r in reads):
            continue
        inside = sorted(r for r in reads if under(r, d))
        problems.append(f"{stage}: dvc.yaml lists {d}, " + (f"a folder of which the stage reads only {', '.join(inside)}"
                                                             if inside else "which the stage never reads"))
    return problems


def read_problems(dvc: dict, root: Path = ROOT) -> list[str]:
    params = safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    problems = unclassified_readers(root) + stale_readers(root)
    for stage, module in stage_modules(dvc).items():
        problems += data_problems(dvc, stage, module, params, root)
    return problems


if __name__ == "__main__":
    dvc_yaml = safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    values = safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    for name, mod in stage_modules(dvc_yaml).items():
        print(f"{name}:\n" + "".join(f"  {r}\n" for r in sorted(stage_reads(dvc_yaml, name, mod, values))), end="")
    print("\n".join(read_problems(dvc_yaml)))
