"""The shipped params.yaml parses; adding a tier is data. Each rejected edit (unknown key, wrong type,
bad tolerance, ...) is a case of tests/test_bad_inputs.py, which runs the check stage itself."""
import copy
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import config, schema
from pipeline.schema.yaml_io import safe_dump, safe_load


# model tier: check reads the embedded model's GGUF header (seconds)
@pytest.mark.model
def test_shipped_params_parse(params_dict, root):
    p = schema.parse(params_dict)
    config.check(p, root)
    raw = params_dict
    assert list(p.models) == list(raw["models"]) and list(p.tiers) == list(raw["tiers"])
    # one variant per model x tier x KV mode of the file, in its order
    assert p.variants() == [(m, t, k) for m in raw["models"] for t in raw["tiers"] for k in raw["kv_modes"]]
    assert p.tiers["int4-awq"].group_size == "auto"


def test_dvc_exp_run_set_rewrites_the_shipped_params_into_yaml_that_still_parses(tmp_path, root):
    """`dvc exp run -S key=value` (the docs' way to try a change) rewrites params.yaml through DVC's own
    round-trip dumper; an unquoted "retrieval:1024" inside {...} once made every such experiment fail
    with "YAML file structure is corrupted". The rewrite must load back to the same params but the one
    set."""
    from dvc.utils.hydra import apply_overrides
    from dvc.utils.serialize import load_yaml      # DVC's reader: stricter than PyYAML on flow mappings
    shutil.copy(root / "params.yaml", tmp_path / "params.yaml")
    apply_overrides(str(tmp_path / "params.yaml"), ["serving.backend=vllm"])
    before = load_yaml(str(root / "params.yaml"))
    after = load_yaml(str(tmp_path / "params.yaml"))
    assert after["serving"].pop("backend") == "vllm" and before["serving"].pop("backend") == "reference"
    assert after == before


@pytest.mark.e2e
def test_a_tier_differing_only_in_group_size_gets_its_own_stages(tmp_path, root):
    """Adding a tier is data: dvc.yaml's matrix gives it quantize/evaluate stages, no code change."""
    for f in ("dvc.yaml", "params.yaml"):
        shutil.copy(root / f, tmp_path / f)
    p = safe_load((tmp_path / "params.yaml").read_text())
    p["tiers"]["int4-gptq-g32"] = dict(p["tiers"]["int4-gptq"], group_size=32)
    (tmp_path / "params.yaml").write_text(safe_dump(p, sort_keys=False))
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    assert config.load(tmp_path / "params.yaml").tiers["int4-gptq-g32"].group_size == 32
    dvc = str(Path(sys.executable).parent / "dvc")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([dvc, "init", "-q"], cwd=tmp_path, check=True)
    out = subprocess.run([dvc, "stage", "list", "--name-only"], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.split()
    assert "quantize@smollm2-135m-int4-gptq-g32" in out
    assert {"evaluate@smollm2-135m-int4-gptq-g32-auto", "evaluate@smollm2-135m-int4-gptq-g32-fp8"} <= set(out)
    assert "quantize@smollm2-135m-int4-gptq" in out


@pytest.fixture
def project(tmp_path, root):
    """A copy of the shipped params and the files they name, with no results yet."""
    import shutil

    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    shutil.copy(root / "params.yaml", tmp_path / "params.yaml")
    return tmp_path


def last_run(project, rows):
    from pipeline import io

    io.atomic_write_json(project / "results" / "decision.json", {
        "generated": "2030-01-02 03:04 UTC", "baseline": {"tier": "fp16", "kv": "auto"}, "rows": rows})


def test_planned_power_without_a_previous_run(project, params_dict):
    lines = config.planned_power(schema.parse(params_dict), project)
    assert lines[0] == "planned power (80%, one-sided alpha 0.025; no previous run: SD unknown):"
    assert "  translation: limit 24, 24 samples" in lines
    n = params_dict["eval"]["tasks"]["classification"]["limit"]      # the shipped cap
    assert f"    acc: tolerance 3.00, SD unknown (MDD at n={n} = {2.8016 / math.sqrt(n):.2f} x SD)" in lines
    assert not any("macro_f1" in x or "rouge1" in x for x in lines)      # not gated
    # the default retrieval suite has no tolerance: said so, and no power line
    at = lines.index("  retrieval_1024: limit None, 3 samples; report only (no tolerance): every variant that can "
                     "still pass runs them all (eval.sequential.probes)")          # the shipped default: passable
    assert not lines[at + 1].startswith("    ")
    params_dict["eval"]["sequential"]["probes"] = "all"
    assert ("  retrieval_1024: limit None, 3 samples; report only (no tolerance): every variant "
            "runs them all (eval.sequential.probes)") in config.planned_power(schema.parse(params_dict), project)


def test_planned_power_from_the_last_run(project, params_dict):
    last_run(project, [
        {"tier": "fp16", "kv": "auto", "status": "ok", "metrics": {"classification/acc": 80.0}, "power": {}},
        {"tier": "int8", "kv": "auto", "status": "ok", "metrics": {"classification/acc": 79.0},
         "power": {"classification/acc": {"sd": 10.0, "n": 160, "mdd": 2.2, "n_for_80pct_power": 88}}},
        {"tier": "int4", "kv": "auto", "status": "ok", "metrics": {"classification/acc": 70.0},
         "power": {"classification/acc": {"sd": 4.0, "n": 160, "mdd": 0.9, "n_for_80pct_power": 15}}}])
    lines = config.planned_power(schema.parse(params_dict), project)
    assert "from last run (2030-01-02 03:04 UTC)" in lines[0]
    cap = params_dict["eval"]["tasks"]["classification"]["limit"]
    # the median variant plans: SD (10 + 4) / 2 = 7, MDD 2.8016 * 7 / sqrt(cap),
    # n80 = ceil((2.8016 * 7 / 3)^2) = 43
    assert f"    acc: tolerance 3.00, SD 7.0 -> MDD {2.8016 * 7 / math.sqrt(cap):.1f} at n={cap}; n for 80% power: 43" \
        in lines
    n = params_dict["eval"]["tasks"]["summarization"]["limit"]      # the shipped cap (96: MDD 0.29 x SD)
    assert f"    rougeL: tolerance 3.00, SD unknown (MDD at n={n} = {2.8016 / math.sqrt(n):.2f} x SD)" in lines
    # in looks (params.yaml's eval.sequential): SD 7 makes an unchanged tier clear the 3-point margin early
    sizes = "/".join(str(cap * k // 4) for k in (1, 2, 3, 4))
    looked = next(x for x in lines if x.startswith(f"      in looks {sizes}: expected samples"))
    expected = int(looked.split("expected samples ")[1].split()[0])
    assert expected < cap and looked.endswith(f"at most {cap}"), looked


def test_planned_power_reads_a_stratified_task_in_its_strata(project, params_dict):
    """The last run read classification in strata (its looks record's pool): the plan shows the items
    those looks read (all of stratum 0, half of stratum 1: 162 + 79 at look 1), not the cap's quarters."""
    cap = params_dict["eval"]["tasks"]["classification"]["limit"]
    below = params_dict["eval"]["sequential"]["strata"]["below"]
    pool = [cap // 2 + 8, cap // 2 - 8]                                   # 648 / 632 at the shipped 1280
    looks = {"classification": {"strata": {"below": below, "share": 0.5, "pool": pool}}}
    power_of = {"classification/acc": {"sd": 30.0, "n": 964, "mdd": 2.7, "n_for_80pct_power": 800}}
    last_run(project, [{"tier": "int8", "kv": "auto", "status": "ok", "metrics": {}, "power": power_of,
                        "looks": looks}])
    firsts = [math.ceil(t * pool[0]) + math.ceil(t * math.ceil(pool[1] / 2)) for t in (0.25, 0.5, 0.75, 1.0)]
    lines = config.planned_power(schema.parse(params_dict), project)
    looked = next(x for x in lines if x.startswith("      in looks "))
    assert looked.startswith(f"      in looks {'/'.join(map(str, firsts))} (in strata of the last run's baseline "
                             f"margins, pool {pool[0]}/{pool[1]}): expected samples"), looked
    assert looked.endswith(f"at most {firsts[-1]}") and f"MDD {2.8016 * 30 / math.sqrt(firsts[-1]):.1f} at n={firsts[-1]}" \
        in "\n".join(lines)
    # a pool drawn at another margin is not this design's: the looks are planned unstratified
    looks["classification"]["strata"]["below"] = below + 0.25
    last_run(project, [{"tier": "int8", "kv": "auto", "status": "ok", "metrics": {}, "power": power_of,
                        "looks": looks}])
    plain = "/".join(str(cap * k // 4) for k in (1, 2, 3, 4))
    assert any(x.startswith(f"      in looks {plain}: expected samples") for x in
               config.planned_power(schema.parse(params_dict), project))


def test_planned_power_relative_tolerance_uses_the_last_baseline(project, params_dict):
    d = copy.deepcopy(params_dict)
    d["decision"]["tolerances"]["acc"] = {"rel": 0.05}
    p = schema.parse(d)
    assert "    acc: tolerance 0.05 x baseline, baseline score unknown" in config.planned_power(p, project)
    last_run(project, [{"tier": "fp16", "kv": "auto", "status": "ok", "metrics": {"classification/acc": 60.0}},
                       {"tier": "int8", "kv": "auto", "status": "ok", "metrics": {"classification/acc": 59.0},
                        "power": {"classification/acc": {"sd": 10.0, "n": 160, "mdd": 2.2, "n_for_80pct_power": 88}}}])
    cap = d["eval"]["tasks"]["classification"]["limit"]
    assert f"    acc: tolerance 3.00, SD 10.0 -> MDD {2.8016 * 10 / math.sqrt(cap):.1f} at n={cap}; n for 80% power: 88" \
        in config.planned_power(p, project)


# model tier: check reads the embedded model's GGUF header (seconds)
@pytest.mark.model
def test_main_prints_variants_then_planned_power(project, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["pipeline.config", str(project / "params.yaml")])
    monkeypatch.chdir(project)
    config.main()
    out = capsys.readouterr().out
    assert out.index("smollm2-135m-fp16-auto") < out.index("planned power") < out.index("classification: limit 1280")


def test_config_imports_no_torch(root):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pipeline.config"], cwd=root,
                         capture_output=True, text=True, check=True)
    assert "torch" not in run.stderr


@pytest.mark.parametrize("block, message", [
    ({"data": "eval_sets/summarization.jsonl", "fields": ["document"], "top_k": 50}, "eval.fidelity.top_k: vLLM serves at most 20"),
    ({"data": "eval_sets/summarization.jsonl", "fields": ["document"], "limit": 0}, "eval.fidelity.limit: must be >= 1"),
    ({"data": "eval_sets/summarization.jsonl", "fields": ["nope"]}, "missing field 'nope'"),
    ({"data": "eval_sets/missing.jsonl"}, "eval_sets/missing.jsonl: file not found"),
])
def test_fidelity_block_errors_name_the_key_or_file(root, tmp_path, block, message):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    p = safe_load((root / "params.yaml").read_text())
    p["eval"]["fidelity"] = block
    (tmp_path / "params.yaml").write_text(safe_dump(p))
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(")):
        config.load(tmp_path / "params.yaml")


def test_a_probe_set_longer_than_a_local_model_s_context_is_refused_at_check(project):
    """Each model's probe sets are written in its own tokens (stage probes): check refuses a length the
    model's context cannot hold, read from its own config.json, naming the model and the task."""
    import json

    model = project / "short-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 2048, "hidden_size": 64,
                                                   "num_attention_heads": 4, "intermediate_size": 128}))
    p = safe_load((project / "params.yaml").read_text())
    p["models"] = {"short": {"source": "local:short-model"}}
    p["tiers"] = {"fp16": p["tiers"]["fp16"]}
    (project / "params.yaml").write_text(safe_dump(p))
    with pytest.raises(config.ConfigError, match=r"^models\.short: eval\.tasks\.retrieval_2048\.data: retrieval:2048 "
                       r"needs 2,\d{3} tokens .* the model's context \(max_position_embeddings\) is 2,048"):
        config.check(schema.parse(p), project)
    p["eval"]["tasks"] = {k: t for k, t in p["eval"]["tasks"].items() if k not in ("retrieval_2048", "retrieval_4096")}
    config.check_probe_sets(schema.parse(p), project)          # 1,024 fits
