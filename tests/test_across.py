"""The decision across models (decision.baseline.model; docs/across-models.md): decide on synthetic
results of two models of different architectures and prompt formats, and the pure pieces below it."""
import json
import random
import shutil

import pytest

from pipeline import io, paths
from pipeline.domain.hardware import machine
from pipeline.report import across_plot, plots
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import decide
from tests import result_files

# two architectures: the big model has twice the layers and KV heads of the small one
GEOMETRY = {"big": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
                    "hidden_size": 64},
            "small": {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                      "hidden_size": 64}}
SIZES = {("big", "fp16"): 8000, ("big", "int8"): 4000, ("big", "int4-gptq"): 2000,
         ("small", "fp16"): 3000, ("small", "int8"): 1500, ("small", "int4-gptq"): 750}
# classification: which items each row gets right. The reference (big fp16) misses every 10th item;
# the small model at fp16 gets all right (better than the reference), int4 misses every 4th (fails).
RIGHT = {("big", "fp16"): lambda i: i % 10 != 0, ("big", "int8"): lambda i: i % 10 != 0,
         ("big", "int4-gptq"): lambda i: i % 4 != 0 and i % 10 != 0,
         ("small", "fp16"): lambda i: True, ("small", "int8"): lambda i: True,
         ("small", "int4-gptq"): lambda i: i % 4 != 0}
PROMPTS = {"big": {"chat_template": False, "add_bos_token": True},      # a base model: plain prompts, BOS
           "small": {"chat_template": True, "add_bos_token": False}}    # an instruct model: its chat template
N = 200
REAL_ACROSS_PLOT = across_plot.quality_vs_memory


def classification(right, ids):
    return [{"id": f"c{i}", "doc_id": i, "input": {"text": f"text {i}"}, "target": 0, "choices": ["a", "b"],
             "gold": 0, "logliks": [-1.0, -2.0] if right(i) else [-2.0, -1.0], "pred": 0 if right(i) else 1,
             "prompt_chars": 100 + i, "scores": {"acc": 100.0 if right(i) else 0.0}} for i in ids]


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    p = safe_load((root / "params.yaml").read_text())
    p["models"] = {"big": {"source": "embedded:smollm2-135m-instruct", "dtype": "float16"},
                   "small": {"source": "embedded:smollm2-135m-instruct", "dtype": "float16"}}
    p["tiers"] = {k: p["tiers"][k] for k in ("fp16", "int8", "int4-gptq")}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
    p["eval"]["tasks"] = {"classification": p["eval"]["tasks"]["classification"]}
    p["report"]["fidelity_bootstrap"]["resamples"] = 100
    p["decision"]["baseline"]["model"] = "big"
    (tmp_path / "params.yaml").write_text(safe_dump(p))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(machine, "accelerator_available", lambda: False)
    monkeypatch.setattr(plots, "quality_vs_memory", lambda *a, **k: None)
    monkeypatch.setattr(across_plot, "quality_vs_memory", lambda *a, **k: None)
    for (model, tier), size in SIZES.items():
        io.atomic_write_json(paths.quantize_record(model, tier), {
            "status": "ok", "serve_path": str(paths.tier_dir(model, tier)), "load_quantization": None,
            "weight_bytes": size, "storage_dtype": "float16", "geometry": GEOMETRY[model]})
        ids = list(range(N))
        looks = {}
        if (model, tier) == ("small", "int8"):      # stopped at look 2 of 4: half the items, in its own order
            ids = ids[:N // 2]
            looks = {"classification": {"cap": N, "sizes": [50, 100, 150, 200], "looks": 2, "of": 4, "n": N // 2,
                                        "confidence": 0.9938, "settled": {}}}
        rows = classification(RIGHT[(model, tier)], ids)
        random.Random(len(model)).shuffle(rows)     # each model's log in its own order: pairing is by doc_id
        out = paths.eval_dir(model, tier, "auto")
        io.atomic_write_jsonl(out / "samples" / "classification.jsonl", rows)
        acc = sum(r["scores"]["acc"] for r in rows) / len(rows)
        io.atomic_write_json(out / "result.json", result_files.variant(
            model=model, tier=tier, kv="auto", num_samples={"classification": len(ids)}, looks=looks,
            metrics={"classification/acc": acc}, higher_is_better={"classification/acc": True},
            **PROMPTS[model]))
    return tmp_path


def run(project):
    decide.main()
    return json.loads((project / "results/decision.json").read_text())


def test_every_variant_of_every_model_is_judged_against_the_named_reference(project):
    data = run(project)
    across = data["across"]
    assert across["reference"] == {"model": "big", "tier": "fp16", "kv": "auto"}
    verdicts = {(v["model"], v["tier"]): v for v in across["verdicts"]}
    assert verdicts[("big", "fp16")]["overall"] == "baseline"
    assert verdicts[("big", "int8")]["overall"] == "pass"
    assert verdicts[("small", "fp16")]["overall"] == "pass"
    assert verdicts[("small", "int4-gptq")]["overall"] == "fail"
    assert verdicts[("big", "int4-gptq")]["overall"] == "fail"
    # the small model is better than the reference by 10 points: 20 items it gets right that big misses
    iv = verdicts[("small", "fp16")]["intervals"]["classification/acc"]
    assert (iv["delta"], iv["n"], iv["discordant"]) == (10.0, N, [0, 20])
    # per model, as before: each model against its own baseline
    rows = {(r["model"], r["tier"]): r for r in data["rows"]}
    assert rows[("small", "int8")]["intervals"]["classification/acc"]["delta"] == 0.0     # small fp16's
    assert rows[("small", "fp16")]["verdicts"] == {}                                      # its own baseline
    assert data["baseline"] == {"tier": "fp16", "kv": "auto", "model": "big"}


def test_a_row_stopped_at_a_look_is_read_over_the_items_both_read_at_that_look_s_confidence(project):
    v = {(x["model"], x["tier"]): x for x in run(project)["across"]["verdicts"]}[("small", "int8")]
    assert v["intervals"]["classification/acc"]["n"] == N // 2
    assert v["intervals"]["classification/acc"]["discordant"] == [0, 10]
    assert v["verdicts"]["classification/acc"]["confidence"] == 0.9938
    assert "read at look 2 of 4" in v["verdicts"]["classification/acc"]["why"]


def test_the_pick_per_gpu_is_one_fixed_sequence_across_models_with_its_runner_up(project):
    gpu = run(project)["across"]["per_gpu"]["A100-80G"]
    # decreasing memory: big int8 (4000 B, pass), small fp16 (3000, pass), big int4 (2000, fail): the run
    # stops there, so small int8 (1500, pass) beyond it cannot be claimed
    assert gpu["sequence"][:3] == ["big/int8-auto", "small/fp16-auto", "big/int4-gptq-auto"]
    assert gpu["run"] == ["big/int8-auto", "small/fp16-auto"]
    assert gpu["pick"] == {"model": "small", "tier": "fp16", "kv": "auto"}
    assert gpu["runner_up"] == {"model": "big", "tier": "int8", "kv": "auto"}
    assert "sequence stops at `big/int4-gptq-auto` (fail)" in gpu["why"]
    assert gpu["command"].startswith("vllm serve ")
    # the pick against the runner-up, paired: +10 points, its interval above 0 (the smaller is better)
    (d,) = gpu["differences"]
    assert (d["larger"], d["smaller"]) == ("big/int8-auto", "small/fp16-auto")
    iv = d["intervals"]["classification/acc"]
    assert iv["delta"] == 10.0 and iv["lo"] > 0 and iv["finding"] == "smaller better"


def test_a_chat_template_model_is_compared_on_the_same_items_as_a_plain_one(project):
    data = run(project)
    assert data["across"]["prompt_formats"] == {"big": "plain, BOS", "small": "chat template, no BOS"}
    md = (project / "results/decision.md").read_text()
    assert "`small` chat template, no BOS" in md and "## Across models" in md
    # the same doc ids, paired one by one although each log is in its own order
    big = {r["doc_id"] for r in io.read_jsonl(paths.eval_dir("big", "fp16", "auto") / "samples/classification.jsonl")}
    small = {r["doc_id"] for r in io.read_jsonl(paths.eval_dir("small", "fp16", "auto") / "samples/classification.jsonl")}
    assert big == small
    v = {(x["model"], x["tier"]): x for x in data["across"]["verdicts"]}[("small", "fp16")]
    assert v["intervals"]["classification/acc"]["n"] == len(big)


def test_without_a_reference_across_models_decision_json_has_no_across_entry(project):
    p = safe_load((project / "params.yaml").read_text())
    del p["decision"]["baseline"]["model"]
    (project / "params.yaml").write_text(safe_dump(p))
    data = run(project)
    assert "across" not in data and data["baseline"] == {"tier": "fp16", "kv": "auto"}
    assert "## Across models" not in (project / "results/decision.md").read_text()


def test_the_plot_is_drawn_with_its_front_and_zoom(project, monkeypatch):
    monkeypatch.setattr(across_plot, "quality_vs_memory", REAL_ACROSS_PLOT)
    run(project)
    assert (project / "results" / paths.ACROSS_PLOT).stat().st_size > 10_000
    assert "![quality against memory, every model](plots/across-models-quality_vs_memory.png)" in \
        (project / "results/decision.md").read_text()


def test_the_pareto_front_keeps_what_no_smaller_variant_beats():
    pts = [(4.0, 0.0), (3.0, 10.0), (2.0, -25.0), (1.5, 0.5), (1.0, -40.0)]
    assert across_plot.pareto(pts) == [4, 3, 1]
    assert across_plot.pareto([(1.0, 0.0), (2.0, 0.0)]) == [0]


def test_the_y_range_is_zoomed_to_the_margin_not_the_failures():
    bottom, top = across_plot.y_range([(0.0, -2.0, 2.0), (-30.0, -35.0, -25.0)], 3.0)
    assert -10.0 < bottom < -3.0 and top > 2.0      # the -30-point failure is drawn at the edge, not the scale
