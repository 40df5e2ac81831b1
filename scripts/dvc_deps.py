"""dvc.yaml's deps, exact (docs/decisions/deps-by-trace.md): code through a digest per stage, data deps
and params held against what each stage read while it ran.

    python -m scripts.dvc_deps --digest         # stage `code`: artifacts/code/<stage>.json, one per stage
    python -m scripts.dvc_deps --check          # exit 1 naming a stage whose code digest dep is missing or wrong
    QTIER_TRACE=trace dvc repro && python -m scripts.dvc_deps --trace trace     # data deps and params

Code: a stage depends on its own digest, the sha256 of every file of its import closure (ast) that
stage `code` writes whenever a module changes: it re-runs for a module it runs and for no other, with one
code dep in dvc.lock, which DVC rewrites in pure-Python YAML after each stage
(docs/decisions/code-deps-by-digest.md). Data and params, by hand: a read no dep, output or declared
param of the stage covers is missing; a dep or param under which no run of the stage read anything is
needless, unless UNSEEN says why. The e2e pipeline test runs the trace check on every stage.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
from pathlib import Path

from pipeline.schema.yaml_io import safe_load

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pipeline"
CODE = "artifacts/code"             # stage `code` writes each stage's code digest here
_CMD = re.compile(rf"python -m ({PACKAGE}(?:\.\w+)+)")
# read by a stage, yet no dep by design
NOT_DEPS = {"dvc.lock": "decide's provenance line: the digest of the run's sources in dvc.lock",
            "params.yaml": "read through the schema: its keys are checked as params",
            ".qtier-cache": "the sample cache, outside DVC: a sample is read back only under a key holding "
                            "everything that changes it (pipeline/evaluation/sample_cache.py)",
            "logs": "a stage's own log (pipeline/runlog.py), read back for its failure line"}
# deps no stage of the e2e project is seen to read, each with why it is a dep all the same
UNSEEN = {
    "*": {"artifacts/params.checked": "order: every stage runs after check, which validates all of params.yaml",
          "artifacts/eval_data": "read by lm-eval through datasets' pyarrow reader, native code",
          "artifacts/${item.model}/probes": "read for a retrieval task, longer than the tiny test model's context",
          "artifacts/${key}/probes": "read for a retrieval task, longer than the tiny test model's context"},
    "prepare": {"artifacts/eval_data": "order: eval data checked (public sets fetched) before any model work"},
    "probes": {"eval_sets": "the probe texts, read for a retrieval task (none fits the tiny test model)"},
    "kvscales": {"*": "read for a calibrated KV mode only (tests/test_pipeline_e2e.py's calibrated test)"},
    "kvrepair": {"*": "read for a repaired KV mode only (kv_modes.<kv>.repair; tests/test_kv_sensitivity.py)"},
    "baseline": {"artifacts/${key}/kvscales/${decision.baseline.tier}/${decision.baseline.kv}": "a calibrated mode's checkpoint",
                 "results/kvscales/${key}-${decision.baseline.tier}/${decision.baseline.kv}.json": "a calibrated mode's record"},
    "evaluate": {"artifacts/${item.model}/kvscales/${item.tier}/${item.kv}": "a calibrated mode's checkpoint",
                 "results/kvscales/${item.model}-${item.tier}/${item.kv}.json": "a calibrated mode's record",
                 "results/kvrepair/${item.model}-${item.tier}/${item.kv}.json": "a repaired mode's record",
                 "results/fidelity/${item.model}-long.npz": "the long-context probe of a variant that can still "
                                                            "pass (eval.sequential.probes); none of the tiny model's"},
    "decide": {"results/kvscales": "the calibrated modes' records"},
}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the package (a package: its __init__.py)."""
    out = {}
    for p in sorted((root / PACKAGE).rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def closure(entry: str, root: Path = ROOT, mods: dict[str, Path] | None = None) -> set[Path]:
    """Every package file `python -m entry` executes: the imports it runs, each with its parent packages
    (`mods`: modules(root), when the caller walks several entries)."""
    mods = modules(root) if mods is None else mods
    todo, seen = [entry], set()
    while todo:
        for m in _parents(todo.pop()):
            if m in mods and m not in seen:
                seen.add(m)
                todo += _imports(mods[m], m)
    return {mods[m] for m in seen}


def _imports(path: Path, module: str) -> set[str]:
    """The names an import in `path` may load (`from a import b`: a, and a.b if b is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:         # relative: from the package `module` is in (or is, for an __init__)
                parts = (module if path.name == "__init__.py" else module.rpartition(".")[0]).split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


def _parents(name: str) -> list[str]:
    return [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)]


def stages(dvc: dict) -> dict[str, tuple[dict, str]]:
    """Stage -> (its entry, the module its cmd runs)."""
    out = {}
    for name, entry in dvc["stages"].items():
        entry = entry.get("do", entry)
        if found := _CMD.search(entry["cmd"]):
            out[name] = (entry, found.group(1))
    return out


def code_files(dvc: dict, root: Path = ROOT) -> dict[str, list[str]]:
    """Stage -> the package files its process runs (its import closure)."""
    mods = modules(root)
    return {stage: sorted(str(p.relative_to(root)) for p in closure(module, root, mods))
            for stage, (_, module) in stages(dvc).items()}


def digest(folder: Path, root: Path = ROOT) -> None:
    """Write `<folder>/<stage>.json` for every stage: the sha256 of each file of its import closure. A
    stage depends on its own file (stage `code` writes them when any module changes), so it re-runs when
    a module it runs changes, and for no other."""
    folder.mkdir(parents=True, exist_ok=True)
    dvc = safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))
    per_stage = code_files(dvc, root)
    # a module most stages import (io.py, schema/) is hashed once, not once per stage
    sums = {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in set().union(*per_stage.values())}
    for stage, files in per_stage.items():
        (folder / f"{stage}.json").write_text(json.dumps({"stage": stage, "files": {f: sums[f] for f in files}}, indent=1) + "\n")


def code_problems(dvc: dict, root: Path = ROOT) -> list[str]:
    """Each stage that runs the package names its own code digest and no module of it by hand; stage
    `code` depends on the whole package."""
    problems = [] if "pipeline" in dvc["stages"].get("code", {}).get("deps", []) else [
        "code: dvc.yaml must list the folder pipeline in its deps (its digests cover every module)"]
    for stage, (entry, _) in stages(dvc).items():
        own, listed = f"{CODE}/{stage}.json", [d for d in entry.get("deps", []) if is_code(d, root)]
        problems += [] if own in listed else [f"{stage}: dvc.yaml does not list its code digest {own}"]
        problems += [f"{stage}: dvc.yaml lists {d}, which is not its own code digest" for d in listed if d != own]
    return problems


def is_code(dep: str, root: Path = ROOT) -> bool:
    """A dep that stands for code: a code digest, the package or a module of it."""
    return dep.startswith(f"{CODE}/") or dep == PACKAGE or (dep.startswith(f"{PACKAGE}/") and (
        dep.endswith(".py") or (root / dep / "__init__.py").exists()))


def _under(path: str, folder: str, sep: str = "/") -> bool:
    return path == folder or path.startswith(folder + sep) or folder == "."


def _files(trace: dict) -> list[str]:
    """The data a stage read: no code, nothing it staged itself (`.<out>.partial`)."""
    return [r for r in trace["reads"] if not r.endswith(".py") and ".partial" not in r]


def trace_problems(lock: dict, trace: dict, root: Path = ROOT, params: dict | None = None) -> list[str]:
    """One line per read of one stage that its dvc.lock entry does not cover: a file no dep or output
    holds, a params key no declared one does."""
    stage = trace["stage"]
    if (entry := lock["stages"].get(stage)) is None:
        return [f"{stage}: traced, but dvc.lock has no such stage"]
    deps = [d["path"] for d in entry.get("deps", [])]
    sources = [m["source"][len("local:"):] for m in (params or {}).get("models", {}).values()
               if str(m.get("source", "")).startswith("local:")]     # a local model: named by a param, no dep
    covered = deps + [o["path"] for o in entry.get("outs", [])] + list(NOT_DEPS) + sources
    problems = [f"{stage}: reads {r}, which no dep or output of it covers" for r in _files(trace)
                if not any(_under(r, c) for c in covered) and not any(_under(c, r) for c in deps)]
    problems += [f"{stage}: read {k} through a copy no label follows (use schema.replaced)"
                 for k in trace["params"] if k[0] == "?"]
    declared = [k for keys in entry.get("params", {}).values() for k in keys]
    if "params.yaml" not in deps:           # check depends on the whole file
        problems += [f"{stage}: reads params {k}, which dvc.yaml does not declare" for k in trace["params"]
                     if k[0] != "?" and not any(_under(k, d, ".") for d in declared)]
    return problems


def _pattern(template: str, params: dict, sep: str) -> re.Pattern:
    """A dep or param of dvc.yaml as a pattern: params' values filled in, a stage's own (`item`, `key`) any name."""
    def value(name: str) -> str:
        node = params
        for part in name.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return re.escape(str(node)) if isinstance(node, (str, int, float)) else ".+?"
    parts = re.split(r"\$\{([^}]*)\}", template)
    body = "".join(value(p) if i % 2 else re.escape(p) for i, p in enumerate(parts))
    return re.compile(rf"{body}({re.escape(sep)}.*)?")


def needless_problems(dvc: dict, params: dict, traces: list[dict], root: Path = ROOT,
                      unseen: dict = UNSEEN) -> list[str]:
    """One line per data dep or param of a stage under which none of its traced runs read anything,
    but for the deps `unseen` explains."""
    problems = []
    for name, (entry, _) in stages(dvc).items():
        runs = [t for t in traces if t["stage"].split("@")[0] == name]
        skip = {**unseen.get("*", {}), **unseen.get(name, {})}
        if not runs or "*" in skip:
            continue
        reads, keys = [r for t in runs for r in _files(t)], [k for t in runs for k in t["params"]]
        problems += [f"{name}: dvc.yaml lists {dep}, which no run of the stage read" for dep in entry.get("deps", [])
                     if not is_code(dep, root) and dep not in skip
                     and not any(_pattern(dep, params, "/").fullmatch(r) for r in reads)]
        problems += [f"{name}: dvc.yaml declares params {key}, which no run of the stage read"
                     for key in entry.get("params", [])
                     if not any(_pattern(key, params, ".").fullmatch(k) or key.startswith(k + ".") for k in keys)]
    return problems


def main(argv: list[str]) -> int:
    read = lambda name: safe_load(Path(name).read_text(encoding="utf-8"))      # noqa: E731
    if argv[:1] == ["--trace"] and len(argv) == 2:
        lock, dvc, params = read("dvc.lock"), read("dvc.yaml"), read("params.yaml")
        traces = [json.loads(f.read_text()) for f in sorted(Path(argv[1]).glob("*.json"))]
        problems = [p for t in traces for p in trace_problems(lock, t, Path.cwd(), params)]
        problems += needless_problems(dvc, params, traces, Path.cwd())
        print("\n".join(problems) or f"dvc.lock: the deps and params of {len(traces)} traced stages are exact")
        return 1 if problems or not traces else 0
    if argv == ["--digest"]:
        digest(Path.cwd() / CODE, Path.cwd())
        return 0
    if argv != ["--check"]:
        raise SystemExit("usage: python -m scripts.dvc_deps --digest | --check | --trace <folder>")
    problems = code_problems(read(ROOT / "dvc.yaml"))
    print("\n".join(problems) or "dvc.yaml: every stage depends on its own code digest")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
