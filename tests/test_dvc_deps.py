"""dvc.yaml declares what each stage reads: every module in the stage's import closure, and every
pipeline path the stage's code opens through pipeline/paths.py. Fast: ast and yaml only."""
from __future__ import annotations

import ast
from pathlib import Path

import yaml

from tests.test_import_graph import ROOT, graph, modules

STAGES = {"check": "pipeline.stages.check", "evalsets": "pipeline.stages.evalsets",
          "prepare": "pipeline.stages.prepare", "quantize": "pipeline.stages.quantize",
          "fidelity_base": "pipeline.stages.fidelity_base", "kvscales": "pipeline.stages.kvscales",
          "evaluate": "pipeline.stages.evaluate", "decide": "pipeline.stages.decide"}

# pipeline/paths.py function -> the dvc.yaml paths it resolves to (stage matrix variables as written there)
PATH_FUNCTIONS = {
    "source_dir": ["artifacts/{model}/source"],
    "tier_dir": ["artifacts/{model}/tiers/{tier}"],
    "quantize_record": ["results/quantize/{model}-{tier}.json"],
    "kvscales_dir": ["artifacts/{model}/kvscales/{tier}"],
    "kvscales_records": ["results/kvscales/{model}-{tier}"],
    "serving_checkpoint": ["artifacts/{model}/tiers/{tier}", "artifacts/{model}/kvscales/{tier}/{kv}"],
    "serving_record": ["results/quantize/{model}-{tier}.json", "results/kvscales/{model}-{tier}/{kv}.json"],
    "fidelity_base": ["results/fidelity/{model}.npz"],
    "eval_dir": ["results/evals/{model}/{tier}-{kv}"],
    "eval_data": ["artifacts/eval_data"],
    "EVAL_DATA_MANIFEST": ["artifacts/eval_data"],
    "CHECKED": ["artifacts/params.checked"],
}
# Domain calls that read data named in params, and the dvc.yaml paths holding that data.
DATA_CALLS = {
    "config.load_or_exit": ["eval_sets", "calibration", "recipes"],
    "tasks.build_all": ["eval_sets", "artifacts/eval_data"],
    "tasks.check_data": ["eval_sets"],
    "calibration.texts": ["calibration/calibration.jsonl"],   # ${calibration.path} as params.yaml sets it
    "recipes.load_template": ["recipes"],
}


def closure(module: str, g: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += g.get(m, set())
        # importing pipeline.a.b runs pipeline/a/__init__.py too
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(2, len(parts))]
    return seen


def attributes_used(f: Path) -> set[str]:
    """'module.name' for every attribute access on a bare name in the file (paths.tier_dir, ...)."""
    return {f"{n.value.id}.{n.attr}" for n in ast.walk(ast.parse(f.read_text()))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}


def stage_entry(dvc: dict, name: str) -> dict:
    entry = dvc["stages"][name]
    return entry.get("do", entry)


def normalise(p: str) -> str:
    for a, b in (("${item.model}", "{model}"), ("${item.tier}", "{tier}"), ("${item.kv}", "{kv}"),
                 ("${key}", "{model}"), ("${calibration.path}", "calibration/calibration.jsonl")):
        p = p.replace(a, b)
    return p.rstrip("/")


def declared(entry: dict, key: str) -> list[str]:
    out = []
    for d in entry.get(key, []):
        out.append(normalise(d if isinstance(d, str) else next(iter(d))))
    return out


def covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d + "/") for d in deps)


def missing_deps(dvc: dict) -> list[str]:
    g, mods = graph(), modules()
    problems = []
    for stage, module in STAGES.items():
        entry = stage_entry(dvc, stage)
        deps, outs = declared(entry, "deps"), declared(entry, "outs")
        mods_needed = closure(module, g)
        for f in sorted(mods[m] for m in mods_needed if m in mods):
            rel = str(f.relative_to(ROOT))
            empty_init = f.name == "__init__.py" and f.stat().st_size == 0
            if not covered(rel, deps) and not empty_init:
                problems.append(f"{stage}: imports {rel} but dvc.yaml does not list it")
        if "pipeline.domain.hardware" in mods_needed and not covered("pipeline/data/vllm_hardware.yaml", deps):
            problems.append(f"{stage}: reads pipeline/data/vllm_hardware.yaml but dvc.yaml does not list it")
        used = attributes_used(mods[module])
        for fn, targets in PATH_FUNCTIONS.items():
            problems += [f"{stage}: opens paths.{fn} ({t}) but dvc.yaml neither depends on nor outputs it"
                         for t in targets if f"paths.{fn}" in used and not covered(t, deps) and not covered(t, outs)]
        for call, targets in DATA_CALLS.items():
            problems += [f"{stage}: {call} reads {t} but dvc.yaml does not list it"
                         for t in targets if call in used and not covered(t, deps) and not covered(t, outs)]
        if stage != "check" and not _downstream_of_check(dvc, stage):
            problems.append(f"{stage}: does not run after the check stage")
    return problems


def _downstream_of_check(dvc: dict, stage: str, depth: int = 0) -> bool:
    deps = declared(stage_entry(dvc, stage), "deps")
    if "artifacts/params.checked" in deps:
        return True
    producers = {s for s in dvc["stages"] if s != stage and any(
        covered(d, declared(stage_entry(dvc, s), "outs")) or any(covered(o, [d]) for o in declared(stage_entry(dvc, s), "outs"))
        for d in deps)}
    return depth < 6 and any(_downstream_of_check(dvc, s, depth + 1) for s in producers)


def load_dvc() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())


def test_dvc_yaml_declares_every_import_and_read():
    problems = missing_deps(load_dvc())
    assert not problems, "\n".join(problems)


def test_a_removed_dep_is_caught():
    for stage, dep in (("evaluate", "pipeline/backends"), ("decide", "results/quantize"),
                       ("decide", "results/kvscales"), ("evaluate", "artifacts/${item.model}/kvscales/${item.tier}/${item.kv}"),
                       ("quantize", "pipeline/quant"), ("prepare", "artifacts/eval_data")):
        dvc = load_dvc()
        entry = stage_entry(dvc, stage)
        entry["deps"] = [d for d in entry["deps"] if d != dep]
        assert any(p.startswith(f"{stage}:") for p in missing_deps(dvc)), f"removing {dep} from {stage} went unseen"
