"""dvc.yaml's deps are exact: every stage depends on what its code runs and reads, and nothing else.

Code deps are generated (`python -m scripts.dvc_deps --write`); data deps and params are written by
hand and checked against the code's reads (scripts/dvc_reads.py, scripts/dvc_params.py). Fast: ast
and yaml only, nothing of the pipeline is imported.
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pipeline.schema.yaml_io import safe_load
from scripts import dvc_deps, dvc_params
from scripts.depgraph import ROOT, closure, fingerprint
from scripts.dvc_params import declared_params, param_problems, stale_by_name, stage_keys
from scripts.dvc_params import under as key_under
from scripts.dvc_reads import (data_problems, listed, read_templates, resolve, stage_entry, stage_modules,
                               stage_vars, unclassified_readers, under)

HOW = "regenerate the code deps with `python -m scripts.dvc_deps --write`; fix the others by hand"


def load_dvc() -> dict:
    return safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))


PARAMS = safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def edited(stage: str, key: str, remove: str | None = None, add: str | None = None) -> dict:
    dvc = copy.deepcopy(load_dvc())
    entry = stage_entry(dvc, stage)
    entry[key] = [d for d in entry.get(key, []) if (d if isinstance(d, str) else next(iter(d))) != remove]
    if add is not None:
        entry[key].append(add)
    return dvc


def stage_problems(dvc: dict, stage: str) -> list[str]:
    module = stage_modules(dvc)[stage]
    entry = stage_entry(dvc, stage)
    return ([p for p in dvc_deps.code_problems(dvc) if p.startswith(f"{stage}:")]
            + data_problems(dvc, stage, module, PARAMS) + param_problems(stage, entry, module))


def test_dvc_yaml_deps_are_exact():
    problems = dvc_deps.all_problems(load_dvc())
    assert not problems, "\n".join(problems + [HOW])


def test_dvc_ignores_the_bytecode_in_the_code_folders_it_hashes():
    """A folder dep hashes every file DVC does not ignore: a stage's own __pycache__ would re-run it."""
    ignored = (ROOT / ".dvcignore").read_text(encoding="utf-8").split()
    assert "__pycache__/" in ignored and "*.pyc" in ignored


def test_dvc_reads_dvc_lock_with_ruamel_s_c_parser():
    """Pure Python is 5x slower on dvc.lock (benchmarks/dvc_lock.py): the install must bring the C one."""
    from ruamel.yaml import YAML

    assert YAML(typ="safe").Parser.__module__.startswith("ruamel.yaml.clib") or \
        YAML(typ="safe").Parser.__module__ == "_ruamel_yaml"


def test_dvc_yaml_is_as_the_generator_writes_it():
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    assert dvc_deps.rewrite(text, dvc_deps.code_deps(load_dvc())) == text, HOW


def test_every_file_read_outside_paths_py_is_classified():
    problems = unclassified_readers()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("stage", "dep", "expected"), [
    # a subpackage is one dep, its folder (scripts/dvc_deps.py GROUPED); the stage's own modules one by one
    ("evaluate", "pipeline/engines", "evaluate: runs pipeline/engines but dvc.yaml does not list it"),
    ("evaluate", "pipeline/stages/evaluate.py", "evaluate: runs pipeline/stages/evaluate.py"),
    # the hardware table is data, read through paths.HARDWARE_TABLE by the stages that load it
    ("check", "pipeline/data/vllm_hardware.yaml",
     "check: reads pipeline/data/vllm_hardware.yaml but dvc.yaml neither depends on nor outputs it"),
    ("decide", "pipeline/data/vllm_hardware.yaml", "decide: reads pipeline/data/vllm_hardware.yaml"),
    ("decide", "pipeline/report", "decide: runs pipeline/report"),
    ("fidelity_base", "pipeline/engines", "fidelity_base: runs pipeline/engines"),
    # read by engines/base.py (the baseline beside the variant), not by the stage's own file
    ("evaluate", "results/quantize/${item.model}-${decision.baseline.tier}.json",
     "evaluate: reads results/quantize/{model}-fp16.json but dvc.yaml neither depends on nor outputs it"),
    ("evaluate", "artifacts/${item.model}/kvscales/${item.tier}/${item.kv}", "evaluate: reads artifacts/{model}/kvscales/{tier}/{kv}"),
    ("decide", "results/kvscales", "decide: reads results/kvscales"),
    ("quantize", "${calibration.path}", "quantize: reads calibration/calibration.jsonl"),
])
def test_a_removed_dep_is_caught(stage, dep, expected):
    problems = stage_problems(edited(stage, "deps", remove=dep), stage)
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize(("stage", "dep", "expected"), [
    ("prepare", "pipeline/config.py", "prepare: dvc.yaml lists pipeline/config.py, which the stage never imports"),
    ("decide", "pipeline/quant/recipes.py", "decide: dvc.yaml lists pipeline/quant/recipes.py"),
    ("decide", "pipeline/quant", "decide: dvc.yaml lists pipeline/quant, which the stage never imports"),
    ("evaluate", "recipes", "evaluate: dvc.yaml lists recipes, which the stage never reads"),
    ("quantize", "calibration", "quantize: dvc.yaml lists calibration, a folder of which the stage reads only "
                                "calibration/calibration.jsonl"),
    ("decide", "results/fidelity", "decide: dvc.yaml lists results/fidelity, which the stage never reads"),
    ("evaluate", "pipeline/data/vllm_hardware.yaml",
     "evaluate: dvc.yaml lists pipeline/data/vllm_hardware.yaml, which the stage never reads"),
    ("decide", "pipeline/backend_diff.py", "decide: dvc.yaml lists pipeline/backend_diff.py"),
    # stage logs (logs/<stage>.log) are no DVC dep or output by design
    ("decide", "logs", "decide: dvc.yaml lists logs, which the stage never reads"),
])
def test_a_needless_dep_is_caught(stage, dep, expected):
    problems = stage_problems(edited(stage, "deps", add=dep), stage)
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize(("stage", "remove", "add", "expected"), [
    ("fidelity_base", "eval", None, "fidelity_base: reads params eval.batch_size but dvc.yaml's params do not cover it"),
    ("decide", "memory", None, "decide: reads params memory"),
    ("evaluate", None, "memory", "evaluate: dvc.yaml lists params memory, which the stage never reads"),
    ("quantize", None, "kv_modes", "quantize: dvc.yaml lists params kv_modes"),
    # read through runner.Stage.params (`self.params: schema.Params`): every KV mode's scale
    ("kvscales", "kv_modes", None, "kvscales: reads params kv_modes.*.scale but dvc.yaml's params do not cover it"),
    ("prepare", "models.${key}", None, "prepare: reads params models.*.source"),
    ("evaluate", "models.${item.model}", None, "evaluate: reads params models.*"),
    # a key with a default may be absent from params.yaml: DVC would stop with "missing params"
    ("evaluate", "eval", "eval.batch_size", "evaluate: params eval.batch_size: eval.batch_size has a default"),
    ("fidelity_base", "eval", "eval.fidelity", "fidelity_base: params eval.fidelity: eval.fidelity has a default"),
])
def test_params_are_what_the_stage_reads(stage, remove, add, expected):
    problems = stage_problems(edited(stage, "params", remove=remove, add=add), stage)
    assert any(p.startswith(expected) for p in problems), problems


# what evaluate's looks judge at each look (eval.sequential: pipeline/evaluation/looks_runner.py)
LOOKS_RULE = ("decision.baseline", "decision.tolerances", "decision.min_baseline", "decision.bootstrap")


def test_a_rule_decide_applies_is_no_param_of_another_stage():
    """decision.* holds the rules decide applies: changing one re-runs no evaluation. Other stages read
    only which variant is the baseline, in code and in dvc.yaml; evaluate also what its looks judge
    (tolerances, floors, bootstrap), noise which tasks have no tolerance, never a rule decide alone
    applies (min_speed_vs_baseline, ...)."""
    dvc = load_dvc()
    for stage, module in stage_modules(dvc).items():
        if stage in ("decide", "check"):
            continue
        # noise reads which tasks are report-only (no tolerance): it skips them
        allowed = {"evaluate": LOOKS_RULE, "noise": ("decision.baseline", "decision.tolerances")}.get(
            stage, ("decision.baseline",))
        read = [k for k in stage_keys(module) if k.startswith("decision")]
        assert all(any(key_under(k, a) for a in allowed) for k in read), (stage, read)
        listed_ = [k for k in declared_params(stage_entry(dvc, stage)) if k.startswith("decision")]
        assert all(any(key_under(k, a) for a in allowed) for k in listed_) or listed_ == ["decision"] == [
            k for k in listed_ if stage == "evaluate"], (stage, listed_)


def _paths(dvc: dict, stage: str, key: str) -> list[str]:
    return [resolve(p, stage_vars(dvc, stage), PARAMS) for p in listed(stage_entry(dvc, stage), key)]


def _downstream_of_check(dvc: dict, stage: str, depth: int = 0) -> bool:
    deps = _paths(dvc, stage, "deps")
    if "artifacts/params.checked" in deps:
        return True
    producers = {s for s in dvc["stages"] if s != stage and any(
        under(d, o) or under(o, d) for d in deps for o in _paths(dvc, s, "outs"))}
    return depth < 6 and any(_downstream_of_check(dvc, s, depth + 1) for s in producers)


def test_every_stage_runs_after_check():
    dvc = load_dvc()
    assert [s for s in dvc["stages"] if s != "check" and not _downstream_of_check(dvc, s)] == []
    assert not _downstream_of_check(edited("prepare", "deps", remove="artifacts/eval_data"), "prepare")


# The generator on a package laid out as other helpers are splitting it: modules into packages.
def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_closure_follows_packages_relative_imports_and_own_data(tmp_path):
    write_tree(tmp_path, {
        "pipeline/__init__.py": "",
        "pipeline/schema/__init__.py": "from .params import Params\nfrom . import limits\n",
        "pipeline/schema/params.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipeline import report\n",
        "pipeline/schema/limits.py": "",
        "pipeline/schema/unused.py": "",
        "pipeline/report/__init__.py": "",
        "pipeline/domain/__init__.py": "",
        "pipeline/domain/hw.py": "from pathlib import Path\nDATA = Path(__file__).resolve().parents[1] / 'data' / 'hw.yaml'\n",
        "pipeline/data/hw.yaml": "a: 1\n",
        "pipeline/stages/__init__.py": "",
        "pipeline/stages/run.py": "from pipeline import schema\n\ndef main():\n    from pipeline.domain.hw import DATA\n",
    })
    found = {str(p.relative_to(tmp_path)) for p in closure("pipeline.stages.run", tmp_path)}
    assert found == {"pipeline/__init__.py", "pipeline/schema/__init__.py", "pipeline/schema/params.py",
                     "pipeline/schema/limits.py", "pipeline/domain/__init__.py", "pipeline/domain/hw.py",
                     "pipeline/data/hw.yaml", "pipeline/stages/__init__.py", "pipeline/stages/run.py"}


def test_rewrite_replaces_only_the_generated_lines():
    text = ("stages:\n  a:\n    deps:\n      - data\n      " + dvc_deps.MARKER + "\n      - pipeline/old.py\n"
            "    outs:\n      - out\n")
    new = dvc_deps.rewrite(text, {"a": ["pipeline/x.py", "pipeline/y.py"]})
    assert new == text.replace("      - pipeline/old.py\n", "      - pipeline/x.py\n      - pipeline/y.py\n")
    with pytest.raises(SystemExit, match="stage.*b.*have no line"):
        dvc_deps.rewrite(text, {"a": [], "b": []})


def test_a_new_file_read_must_be_classified(tmp_path):
    write_tree(tmp_path, {
        "pipeline/__init__.py": "",
        "pipeline/paths.py": "from pathlib import Path\nRESULTS = Path('results')\n",
        "pipeline/stages/__init__.py": "",
        "pipeline/stages/run.py": "from pipeline import paths\n\ndef mine():\n    return open(paths.RESULTS / 'x')\n\n"
                                  "def theirs(p):\n    return open(p.recipe).read()\n",
    })
    assert unclassified_readers(tmp_path) == [
        "pipeline/stages/run.py: theirs opens a file that no pipeline/paths.py location names: say what it reads "
        "in READERS (scripts/dvc_readers.py)"]


def test_paths_names_are_no_reads_and_paths_data_is_no_code(tmp_path):
    """A str constant or `-> str` function of paths.py is a file name inside a location, not a read of
    its own; a stage log is no dep; a data file paths.py names by its own location is a read of the
    stages that use it, not code of every stage that imports paths.py."""
    write_tree(tmp_path, {
        "pipeline/__init__.py": "",
        "pipeline/data/t.yaml": "a: 1\n",
        "pipeline/paths.py": (
            "from pathlib import Path\n"
            "TABLE = Path(__file__).resolve().parent / 'data' / 't.yaml'\n"
            "RESULTS = Path('results')\nLOGS = Path('logs')\nRESULT_FILE = 'result.json'\n\n"
            "def run_dir(name: str) -> Path:\n    return RESULTS / 'runs' / name\n\n"
            "def link(name: str) -> str:\n    return f'runs/{name}/{RESULT_FILE}'\n\n"
            "def stage_log(stage: str) -> Path:\n    return LOGS / f'{stage}.log'\n"),
        "pipeline/stages/__init__.py": "",
        "pipeline/stages/run.py": (
            "from pipeline import paths\n\ndef main():\n"
            "    open(paths.stage_log('run'), 'w').write(open(paths.run_dir('a') / paths.RESULT_FILE).read())\n"
            "    return paths.link('a')\n\nif __name__ == '__main__':\n    main()\n"),
        "pipeline/stages/table.py": (
            "from pipeline.paths import TABLE as T\n\ndef main():\n    return open(T).read()\n\n"
            "if __name__ == '__main__':\n    main()\n"),
    })
    for stage in ("run", "table"):
        assert not any(p.suffix == ".yaml" for p in closure(f"pipeline.stages.{stage}", tmp_path)), stage
    assert read_templates("pipeline.stages.run", tmp_path, fingerprint("pipeline.stages.run", tmp_path)) == {
        "results/runs/a"}
    assert read_templates("pipeline.stages.table", tmp_path, fingerprint("pipeline.stages.table", tmp_path)) == {
        "pipeline/data/t.yaml"}


def test_a_by_name_reader_that_moved_is_reported():
    assert stale_by_name() == []
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(dvc_params.BY_NAME, "pipeline.stages.runner:gone", "moved")
        assert stale_by_name() == ["scripts/dvc_params.py: BY_NAME names pipeline.stages.runner:gone, "
                                   "which does not exist"]
