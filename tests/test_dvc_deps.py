"""dvc.yaml's deps are exact (scripts/dvc_deps.py): each stage on its own code digest, and the
trace check that holds data deps and params against what a stage read (run on the real pipeline by
tests/test_pipeline_e2e.py). ast and yaml only, nothing of the pipeline is run.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from pipeline import config
from pipeline.schema.yaml_io import safe_load
from scripts import dvc_deps
from scripts.dvc_deps import ROOT, closure, trace_problems



def load_dvc() -> dict:
    return safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))


def test_every_stage_depends_on_its_own_code_digest():
    assert dvc_deps.code_problems(load_dvc()) == []


@pytest.mark.parametrize(("stage", "remove", "add", "expected"), [
    ("decide", "artifacts/code/decide.json", None, "decide: dvc.yaml does not list its code digest"),
    ("evaluate", None, "artifacts/code/decide.json", "evaluate: dvc.yaml lists artifacts/code/decide.json, which is not"),
    ("prepare", None, "pipeline/config.py", "prepare: dvc.yaml lists pipeline/config.py, which is not its own"),
    ("code", "pipeline", None, "code: dvc.yaml must list the folder pipeline"),
])
def test_a_missing_and_a_needless_code_dep_are_caught(stage, remove, add, expected):
    dvc = copy.deepcopy(load_dvc())
    entry = dvc["stages"][stage].get("do", dvc["stages"][stage])
    entry["deps"] = [d for d in entry["deps"] if d != remove] + ([add] if add else [])
    assert any(p.startswith(expected) for p in dvc_deps.code_problems(dvc)), dvc_deps.code_problems(dvc)


def test_dvc_ignores_the_bytecode_in_the_code_folders_it_hashes():
    """A folder dep hashes every file DVC does not ignore: a stage's own __pycache__ would re-run it."""
    ignored = (ROOT / ".dvcignore").read_text(encoding="utf-8").split()
    assert "__pycache__/" in ignored and "*.pyc" in ignored


def test_dvc_reads_dvc_lock_with_ruamel_s_c_parser():
    """Pure Python is 5x slower on dvc.lock (benchmarks/dvc_lock.py): the install must bring the C one."""
    from ruamel.yaml import YAML

    assert YAML(typ="safe").Parser.__module__.startswith("ruamel.yaml.clib") or \
        YAML(typ="safe").Parser.__module__ == "_ruamel_yaml"


def _prefixes(entry: dict, key: str) -> list[str]:
    """A stage's deps or outs up to their first `${...}` (a reachability check needs no values)."""
    items = [d if isinstance(d, str) else next(iter(d)) for d in entry.get(key, [])]
    return [re.split(r"\$\{", d)[0] for d in items]


def _downstream_of_check(dvc: dict, stage: str, depth: int = 0) -> bool:
    deps = _prefixes(dvc["stages"][stage].get("do", dvc["stages"][stage]), "deps")
    if "artifacts/params.checked" in deps:
        return True
    producers = {s for s, e in dvc["stages"].items() if s != stage and any(
        d.startswith(o) or o.startswith(d) for d in deps for o in _prefixes(e.get("do", e), "outs") if d and o)}
    return depth < 6 and any(_downstream_of_check(dvc, s, depth + 1) for s in producers)


def test_every_stage_runs_after_check():
    dvc = load_dvc()
    # code writes the digests and reads no params: it runs first
    assert [s for s in dvc["stages"] if s not in ("code", "check") and not _downstream_of_check(dvc, s)] == []
    dvc["stages"]["evalsets"]["deps"].remove("artifacts/params.checked")
    assert not _downstream_of_check(dvc, "prepare")


def test_closure_follows_packages_and_relative_imports(tmp_path):
    files = {
        "pipeline/__init__.py": "",
        "pipeline/schema/__init__.py": "from .params import Params\nfrom . import limits\n",
        "pipeline/schema/params.py": "",
        "pipeline/schema/limits.py": "",
        "pipeline/schema/unused.py": "",
        "pipeline/report/__init__.py": "",
        "pipeline/domain/__init__.py": "",
        "pipeline/domain/hw.py": "",
        "pipeline/stages/__init__.py": "",
        "pipeline/stages/run.py": "from pipeline import schema\n\ndef main():\n    from pipeline.domain.hw import X\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {str(p.relative_to(tmp_path)) for p in closure("pipeline.stages.run", tmp_path)}
    assert found == {"pipeline/__init__.py", "pipeline/schema/__init__.py", "pipeline/schema/params.py",
                     "pipeline/schema/limits.py", "pipeline/domain/__init__.py", "pipeline/domain/hw.py",
                     "pipeline/stages/__init__.py", "pipeline/stages/run.py"}


def test_a_stage_s_digest_changes_with_a_module_it_runs_and_no_other(tmp_path):
    files = {"pipeline/__init__.py": "", "pipeline/a.py": "from pipeline import b\n", "pipeline/b.py": "",
             "pipeline/c.py": "", "dvc.yaml": "stages:\n  a:\n    cmd: python -m pipeline.a\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    def digest() -> str:
        dvc_deps.digest(tmp_path / "code", tmp_path)
        return (tmp_path / "code" / "a.json").read_text()
    first = digest()
    assert sorted(json.loads(first)["files"]) == ["pipeline/__init__.py", "pipeline/a.py", "pipeline/b.py"]
    (tmp_path / "pipeline/c.py").write_text("x = 1\n")
    assert digest() == first
    (tmp_path / "pipeline/b.py").write_text("x = 1\n")
    assert digest() != first


# --- the trace check, on a lock entry and a trace as the pipeline writes them --------------------------
LOCK = {"stages": {"evaluate@m-int8-auto": {
    "deps": [{"path": "artifacts/m/tiers/int8"}, {"path": "results/noise/m"}, {"path": "pipeline/stages/evaluate.py"}],
    "params": {"params.yaml": {"tiers.int8": {}, "tiers.fp16": {}, "eval": {}, "decision": {}}},
    "outs": [{"path": "results/evals/m/int8-auto"}]}}}
TRACE = {"stage": "evaluate@m-int8-auto",
         "params": ["tiers.int8", "tiers.int8.method", "eval.tasks", "decision.baseline.tier"],
         "reads": ["artifacts/m/tiers/int8/config.json", "results/noise/m/result.json", "results",
                   "results/evals/m/int8-auto/samples/a.jsonl", "dvc.lock", "pipeline/stages/evaluate.py"]}


def edited_trace(**changes) -> dict:
    return {**TRACE, **changes}


def test_an_exact_stage_has_no_trace_problem():
    assert trace_problems(LOCK, TRACE) == []


@pytest.mark.parametrize(("trace", "expected"), [
    (edited_trace(reads=TRACE["reads"] + ["results/fidelity/m.npz"]),
     "evaluate@m-int8-auto: reads results/fidelity/m.npz, which no dep or output of it covers"),
    (edited_trace(params=TRACE["params"] + ["memory.block_size"]),
     "evaluate@m-int8-auto: reads params memory.block_size, which dvc.yaml does not declare"),
    (edited_trace(params=TRACE["params"] + ["tiers"]),
     "evaluate@m-int8-auto: reads params tiers, which dvc.yaml does not declare"),
    (edited_trace(params=TRACE["params"] + ["?Vllm.num_concurrent"]),
     "evaluate@m-int8-auto: read ?Vllm.num_concurrent through a copy no label follows"),
    (edited_trace(stage="evaluate@m-int4-auto"), "evaluate@m-int4-auto: traced, but dvc.lock has no such stage"),
])
def test_a_read_no_dep_output_or_param_covers_is_caught(trace, expected):
    problems = trace_problems(LOCK, trace)
    assert any(p.startswith(expected) for p in problems), problems


def test_the_trace_command_fails_without_traces_and_on_a_problem(tmp_path, monkeypatch, capsys):

    from pipeline.schema.yaml_io import safe_dump

    monkeypatch.chdir(tmp_path)
    for name, data in (("dvc.lock", LOCK), ("dvc.yaml", DVC), ("params.yaml", PARAMS)):
        (tmp_path / name).write_text(safe_dump(data))
    (tmp_path / "trace").mkdir()
    assert dvc_deps.main(["--trace", "trace"]) == 1                    # nothing traced proves nothing
    (tmp_path / "trace" / "a.json").write_text(json.dumps(edited_trace(params=TRACE["params"] + ["tiers.fp16"])))
    assert dvc_deps.main(["--trace", "trace"]) == 0
    (tmp_path / "trace" / "a.json").write_text(json.dumps(edited_trace(params=TRACE["params"] + ["memory"])))
    assert dvc_deps.main(["--trace", "trace"]) == 1
    assert "reads params memory, which dvc.yaml does not declare" in capsys.readouterr().out

DVC = {"stages": {"evaluate": {"matrix": {}, "cmd": "python -m pipeline.stages.evaluate ${item.model}",
                               "deps": ["artifacts/${item.model}/tiers/${item.tier}", "results/noise/${item.model}",
                                        "artifacts/eval_data", "pipeline/stages/evaluate.py"],
                               "params": ["tiers.${item.tier}", "tiers.${decision.baseline.tier}", "eval"]}}}
PARAMS = {"decision": {"baseline": {"tier": "fp16"}}}


@pytest.mark.parametrize(("trace", "expected"), [
    (TRACE, ["evaluate: dvc.yaml declares params tiers.${decision.baseline.tier}, which no run of the stage read"]),
    (edited_trace(reads=[r for r in TRACE["reads"] if not r.startswith("results/noise")], params=TRACE["params"] +
                  ["tiers.fp16.method"]),
     ["evaluate: dvc.yaml lists results/noise/${item.model}, which no run of the stage read"]),
    # a whole read of tiers covers every entry of it
    (edited_trace(params=TRACE["params"] + ["tiers"]), []),
])
def test_a_dep_or_param_no_run_of_the_stage_read_is_needless(trace, expected):
    # artifacts/eval_data: explained in UNSEEN (read by native code); code deps are --check's
    assert dvc_deps.needless_problems(DVC, PARAMS, [trace]) == expected
    assert "evaluate: dvc.yaml lists artifacts/eval_data, which no run of the stage read" in \
        dvc_deps.needless_problems(DVC, PARAMS, [trace], unseen={})


def stages_reading(dvc: dict, key: str) -> set[str]:
    """The stages whose declared params cover `key` (the key itself or a section above it)."""
    return {name for name, entry in dvc["stages"].items()
            for k in (entry.get("do", entry).get("params") or [])
            if isinstance(k, str) and (key == k or key.startswith(k + "."))}


def test_changing_the_reference_across_models_re_runs_decide_only():
    """decision.baseline.model (docs/across-models.md) is decide's alone: no evaluation, baseline, noise or
    fidelity stage declares it, the whole decision.baseline, or the whole decision section."""
    dvc = load_dvc()
    assert stages_reading(dvc, "decision.baseline.model") == {"decide"}
    assert stages_reading(dvc, "decision.baseline.tier") >= {"evaluate", "baseline", "noise", "fidelity_base"}
    # the test can fail: the section declared whole, as evaluate did before
    dvc["stages"]["evaluate"]["params"].append("decision")
    assert stages_reading(dvc, "decision.baseline.model") == {"decide", "evaluate"}


def test_every_decision_key_a_stage_names_is_one_params_yaml_must_write_out():
    """A declared key with a schema default must be in config.DVC_TRACKED (check asks for it), or DVC
    stops with "missing params" on a params.yaml that leaves it to the default."""
    required = {"decision.baseline.tier", "decision.tolerances"}       # no default in pipeline/schema/decision.py
    named = {k for entry in load_dvc()["stages"].values() for k in (entry.get("do", entry).get("params") or [])
             if isinstance(k, str) and k.startswith("decision.")}
    assert named - required <= set(config.DVC_TRACKED), named - required - set(config.DVC_TRACKED)
