"""A published checkpoint as a tier, through the real pipeline: a checkpoint made with llm-compressor
inside the test (its FP8_DYNAMIC preset, not the project's recipe) scores exactly as the pipeline's own
fp8 tier, and a published checkpoint of another architecture stops `dvc repro` at its quantize stage
with one line (e2e: DVC on a tiny random model, about two minutes)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests import tiny_model
from tests.test_pipeline_e2e import init_project, run, small_params

pytestmark = pytest.mark.e2e


def fp8_dynamic(src: Path, out: Path) -> None:
    """As a user would publish it: llm-compressor's preset scheme, cast to the serving dtype, compressed."""
    import torch
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=["lm_head"]))
    model.to(torch.float16).save_pretrained(out, save_compressed=True)
    AutoTokenizer.from_pretrained(src).save_pretrained(out)


@pytest.fixture(scope="module")
def project(tmp_path_factory, request) -> Path:
    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp("pub")
    tiny_model.build(proj / "tiny-model", root)
    fp8_dynamic(proj / "tiny-model", proj / "published-fp8")
    p = small_params(root, {"tiny": {"source": "local:tiny-model", "dtype": "float16"}})
    # pub-fp8 before fp8: the two tie on memory and quality, and a tie goes to the first in params order,
    # so the recommended serve line is the published tier's
    p["tiers"] = {"fp16": p["tiers"]["fp16"],
                  "pub-fp8": {"method": "published", "checkpoint": "local:published-fp8", "label": "FP8 (published)",
                              "hardware": "fp8-w8a8"},
                  "fp8": p["tiers"]["fp8"]}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
    # every tolerance met: both fp8 tiers pass whatever the tiny model scores, so one is recommended
    p["decision"]["tolerances"] = {m: {"abs": 100.0} for m in p["decision"]["tolerances"]}
    p["decision"]["min_baseline"] = {m: 0.0 for m in p["decision"]["min_baseline"]}
    return init_project(proj, root, p)


def test_a_published_checkpoint_scores_as_the_pipelines_own(project):
    r = run(["dvc", "repro"], project)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    record = json.loads((project / "results/quantize/tiny-pub-fp8.json").read_text())
    assert record["status"] == "ok" and record["serve_path"] == "published-fp8"
    assert record["scheme"] == "W8 float channel, A8 float token dynamic"
    own = json.loads((project / "results/quantize/tiny-fp8.json").read_text())
    assert record["weight_bytes"] == own["weight_bytes"] and record["geometry"] == own["geometry"]
    ev = {t: project / f"results/evals/tiny/{t}-auto" for t in ("fp8", "pub-fp8")}
    a, b = (json.loads((ev[t] / "result.json").read_text()) for t in ("fp8", "pub-fp8"))
    assert a["status"] == b["status"] == "ok" and a["metrics"] == b["metrics"]
    for task in ("translation", "summarization", "classification"):
        rows = [[{k: v for k, v in json.loads(x).items()} for x in (ev[t] / "samples" / f"{task}.jsonl").read_text().splitlines()]
                for t in ("fp8", "pub-fp8")]
        assert rows[0] == rows[1], task
    decision = json.loads((project / "results/decision.json").read_text())
    pub = next(x for x in decision["rows"] if x["tier"] == "pub-fp8")
    # decision.json's scores are the estimates beside each delta; what evaluate read is read_means
    assert pub["status"] == "ok" and pub["read_means"] == a["metrics"]
    own_row = next(x for x in decision["rows"] if x["tier"] == "fp8" and x["kv"] == "auto")
    assert pub["metrics"] == own_row["metrics"] and pub["deltas"] == own_row["deltas"]
    assert "vllm serve published-fp8 " in (project / "results/decision.md").read_text()


def test_a_checkpoint_of_another_architecture_stops_at_its_quantize_stage(project, request):
    tiny_model.build(project / "wide-model", Path(request.config.rootpath), hidden=128)
    p = yaml.safe_load((project / "params.yaml").read_text())
    p["tiers"]["pub-wide"] = {"method": "published", "checkpoint": "local:wide-model", "hardware": "fp8-w8a8"}
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    r = run(["dvc", "repro", "quantize@tiny-pub-wide"], project)
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("qtier:")]
    assert errors == ["qtier: tiers.pub-wide.checkpoint: not this model's architecture: hidden_size 64 vs 128; "
                      "intermediate_size 128 vs 256"], r.stderr[-2000:]
    assert not (project / "results/quantize/tiny-pub-wide.json").exists()
