"""The decision across models end to end (docs/across-models.md): `dvc repro` on two tiny random models
of different architectures and tokenizers, one with a chat template and one without, judged against
one named reference; then a change of the reference leaves every stage but decide up to date."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests import tiny_model
from tests.test_pipeline_e2e import init_project, run, small_params

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def project(tmp_path_factory, request) -> Path:
    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp("across")
    tiny_model.build(proj / "llama", root)                                   # instruct: its chat template
    tiny_model.build_family(proj / "qwen", root, "qwen3", vocab_size=384, chat_template=None)   # base
    p = small_params(root, {"llama": {"source": "local:llama", "dtype": "float16"},
                            # a smaller vocabulary than the check expects of a real tokenizer: its override
                            "qwen": {"source": "local:qwen", "dtype": "float16", "check_tokenizer": False}})
    p["tiers"] = {k: p["tiers"][k] for k in ("fp16", "int4-gptq")}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
    p["decision"]["baseline"]["model"] = "llama"
    return init_project(proj, root, p)


def test_two_models_are_judged_against_one_reference_and_picked_per_gpu_across_both(project):
    r = run(["dvc", "repro"], project)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((project / "results/decision.json").read_text())
    across = data["across"]
    assert across["reference"] == {"model": "llama", "tier": "fp16", "kv": "auto"}
    judged = {(v["model"], v["tier"]) for v in across["verdicts"]}
    assert {("qwen", "fp16"), ("qwen", "int4-gptq"), ("llama", "int4-gptq")} <= judged
    # each model's prompts in its own format, on the same items (doc ids) as the reference's
    assert across["prompt_formats"]["llama"].startswith("chat template")
    assert across["prompt_formats"]["qwen"].startswith("plain")
    for gpu, pick in across["per_gpu"].items():
        assert "sequence" in pick and "why" in pick, gpu
    md = (project / "results/decision.md").read_text()
    assert "Across models" in md
    # the per-model decisions are still there
    assert set(data["recommended"]) == {"llama", "qwen"}


def test_changing_the_reference_reruns_decide_alone(project):
    text = (project / "params.yaml").read_text()
    p = yaml.safe_load(text)
    p["decision"]["baseline"]["model"] = "qwen"
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    try:
        r = run(["dvc", "status", "--json"], project)
        assert r.returncode == 0, r.stderr
        stale = set(json.loads(r.stdout))
        # check re-validates an edited params.yaml (seconds, and it changes nothing downstream)
        assert "decide" in stale and stale <= {"decide", "check"}, stale
    finally:
        (project / "params.yaml").write_text(text)
